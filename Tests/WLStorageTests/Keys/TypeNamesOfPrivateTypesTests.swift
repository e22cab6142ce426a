import Foundation
import Testing

@testable import WLStorage

private struct PrivateSettings: Codable {}

private enum PrivateOuter {
    struct Inner<Element>: Codable {}
}

/// The type names in messages name a private or local type by its module and name, as a program writes it, without
/// the `(unknown context at $…)` of its reflected name.
@Suite(.capturingOutput)
struct TypeNamesOfPrivateTypesTests {
    @Test func privateTypesAreNamedByTheirModuleAndName() {
        #expect(TypeName.of(PrivateSettings.self) == "WLStorageTests.PrivateSettings")
        #expect(TypeName.of([PrivateSettings]?.self) == "[WLStorageTests.PrivateSettings]?")
        #expect(
            TypeName.of(PrivateOuter.Inner<[String: PrivateSettings]>.self)
                == "WLStorageTests.PrivateOuter.Inner<[String: WLStorageTests.PrivateSettings]>")
        #expect(TypeName.of(PrivateSettings??.self) == "WLStorageTests.PrivateSettings??")
    }

    @Test func aLocalTypeIsNamedByItsModuleAndName() {
        struct LocalSettings: Codable {}
        // A type local to a method is named as if nested in the method's type.
        #expect(TypeName.of(LocalSettings.self) == "WLStorageTests.TypeNamesOfPrivateTypesTests.LocalSettings")
        #expect(
            TypeName.of([LocalSettings]?.self) == "[WLStorageTests.TypeNamesOfPrivateTypesTests.LocalSettings]?")
    }

    @Test func aTypeMismatchOfAPrivateTypeNamesItAsWritten() throws {
        try withTemporaryDirectory { directory in
            let first = WLStorage(key: "k", defaultValue: 0, flushInterval: nil, store: .directory(directory))
            let second = WLStorage(
                key: "k", defaultValue: [PrivateSettings](), flushInterval: nil, store: .directory(directory))
            let message = try #require(second.lastError?.message)
            #expect(message.contains("[WLStorageTests.PrivateSettings]"))
            #expect(!message.contains("unknown context"))
            _ = first
        }
    }
}
