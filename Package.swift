// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "WLStorage",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "WLStorage", targets: ["WLStorage"]),
        .library(name: "WLStoragePostgres", targets: ["WLStoragePostgres"]),
        .library(name: "WLStorageEtcd", targets: ["WLStorageEtcd"]),
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
        // JSON as bytes: a tree reader where bytes must be kept as they are, field merges, renames, unknown fields.
        .target(name: "WLStorageJSON"),
        // The cell's state machine, and the error type: values and decisions, no I/O, no process state.
        .target(name: "WLStorageCore"),
        // libcrypto: AES-256-GCM, the sealed box format, SHA-256.
        .target(name: "WLStorageCrypto", dependencies: ["CWLStorageOpenSSL"]),
        // Files: directories, durable writes, names, the inotify monitor that only emits events. Sees no layer above.
        .target(name: "WLStorageFiles", dependencies: ["WLStorageCore", "WLStorageCrypto"]),
        .target(
            name: "WLStorage", dependencies: ["WLStorageCore", "WLStorageJSON", "WLStorageCrypto", "WLStorageFiles"]),
        .systemLibrary(
            name: "CWLStorageLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .target(name: "WLStoragePostgres", dependencies: ["WLStorage", "CWLStorageLibPQ"]),
        // Written against WLStorage's public API only, as a store of a program's own would be.
        .systemLibrary(
            name: "CWLStorageCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .target(name: "WLStorageEtcd", dependencies: ["WLStorage", "CWLStorageCurl"]),
        .executableTarget(
            name: "wlstorage",
            dependencies: [
                "WLStorage", "WLStorageJSON", "WLStorageCrypto", "WLStorageFiles", "WLStoragePostgres", "WLStorageEtcd",
            ]),
        .executableTarget(name: "WLStorageDemo", dependencies: ["WLStorage"]),
        .target(name: "WLStorageFleet", dependencies: ["WLStorage"]),
        .executableTarget(name: "WLStorageTestChild", dependencies: ["WLStorage", "WLStorageFiles", "WLStorageFleet"]),
        .executableTarget(
            name: "WLStoragePostgresTestChild", dependencies: ["WLStorage", "WLStoragePostgres", "WLStorageFleet"]),
        .executableTarget(name: "WLStorageEtcdTestChild", dependencies: ["WLStorage", "WLStorageEtcd"]),
        .executableTarget(name: "WLStorageEtcdExitChild", dependencies: ["WLStorage", "WLStorageEtcd"]),
        .executableTarget(
            name: "WLStorageBenchmarks",
            dependencies: [
                "WLStorage", "WLStorageFiles", "WLStoragePostgres", "CWLStorageLibPQ", "WLStorageEtcd",
                "CWLStorageCurl",
            ],
            path: "Benchmarks/WLStorageBenchmarks"
        ),
        // What both test targets share: temporary directories, polling, child processes and their output.
        .target(name: "WLStorageTestSupport", dependencies: ["WLStorage"], path: "Tests/WLStorageTestSupport"),
        .testTarget(
            name: "WLStoragePostgresTests",
            dependencies: [
                "WLStorage", "WLStoragePostgres", "WLStorageTestSupport", "WLStoragePostgresTestChild", "wlstorage",
                "WLStorageFleet",
            ]
        ),
        .testTarget(
            name: "WLStorageEtcdTests",
            dependencies: [
                "WLStorage", "WLStorageEtcd", "WLStorageFleet", "WLStorageTestSupport", "WLStorageEtcdTestChild",
                "wlstorage", "WLStorageEtcdExitChild",
            ]),
        .testTarget(
            name: "WLStorageTests",
            dependencies: [
                "WLStorage", "WLStorageTestSupport", "WLStorageTestChild", "wlstorage", "WLStorageDemo",
                "WLStorageFleet", "WLStorageJSON", "WLStorageCrypto", "WLStorageFiles",
            ]
        ),
    ]
)
