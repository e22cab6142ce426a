// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "WLStorage",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "WLStorage", targets: ["WLStorage"]),
        .executable(name: "wlstorage", targets: ["wlstorage"]),
        .executable(name: "WLStorageDemo", targets: ["WLStorageDemo"]),
        .executable(name: "WLStorageBenchmarks", targets: ["WLStorageBenchmarks"]),
    ],
    targets: [
        .systemLibrary(
            name: "CWLStorageOpenSSL",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        .target(name: "WLStorage", dependencies: ["CWLStorageOpenSSL"]),
        .executableTarget(name: "wlstorage", dependencies: ["WLStorage"]),
        .executableTarget(name: "WLStorageDemo", dependencies: ["WLStorage"]),
        .executableTarget(name: "WLStorageTestChild", dependencies: ["WLStorage"]),
        .executableTarget(
            name: "WLStorageBenchmarks",
            dependencies: ["WLStorage"],
            path: "Benchmarks/WLStorageBenchmarks"
        ),
        .testTarget(
            name: "WLStorageTests",
            dependencies: ["WLStorage", "WLStorageTestChild", "wlstorage", "WLStorageDemo"]
        ),
    ]
)
