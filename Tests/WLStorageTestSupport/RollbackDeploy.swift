import Foundation
import Testing

@testable import WLStorage

// A fleet deployed V1 → V2 → V3 and rolled back to V2, then forward again, with programs of several versions alive at
// once, each change of theirs written by a flush of every storage (their batches on condition side by side): V1 stores
// `{theme, fontSize}`, V2 adds `lineSpacing`, V3 renames `theme` to `colorScheme` (declared), adds `tabWidth` and
// does not know `lineSpacing`.

private struct RollbackV1: Codable, Equatable, Sendable {
    var theme = "light"
    var fontSize = 13
}

private struct RollbackV2: Codable, Equatable, Sendable {
    var theme = "light"
    var fontSize = 13
    var lineSpacing = 1.0
}

private struct RollbackV3: Codable, Equatable, Sendable {
    var colorScheme = "light"
    var fontSize = 13
    var tabWidth = 4
}

public enum RollbackDeploy {
    /// Runs the deploy over `keys` of `programs`, six handles of one namespace with identities of their own (a program
    /// each: cells of their own), which holds nothing under the keys yet. Every key ends with every version's last
    /// change of each field; no version writes its default over a stored field, nor drops one it does not know.
    public static func everyVersionsFieldsSurviveARollbackAcrossFlushesOfEveryStorage(
        programs handles: [any WLStorageStore], keys: [String]
    ) throws {
        try #require(handles.count == 6 && Set(handles.map(\.identity)).count == 6)
        let outside = handles[5]
        for key in keys { try outside.write(key: key, data: Data(#"{"fontSize":13,"theme":"light"}"#.utf8)) }
        func objects() throws -> [[String: Any]] {
            try keys.map { key in
                let data = try #require(try outside.read(key: key), "\(key)")
                return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any], "\(key)")
            }
        }
        func flush(_ phase: String, _ pending: () -> Bool) {
            flushAllStores(handles)
            // A change another program's write made refused again goes at the next flush.
            let flushed = eventually(timeout: 120) {
                guard pending() else { return true }
                flushAllStores(handles)
                return !pending()
            }
            #expect(flushed, "\(phase): changes stay pending")
        }
        func open<V>(_ value: V, _ handle: any WLStorageStore, _ migrations: [WLStorageMigration<V>] = [])
            -> [WLStorage<V>]
        {
            keys.map {
                WLStorage(key: $0, defaultValue: value, flushInterval: nil, store: handle, migrations: migrations)
            }
        }
        func idle<V>(_ storages: [WLStorage<V>]) -> Bool {
            storages.allSatisfy { $0.cell.state.withLock { !$0.isBusy } }
        }
        func pending<V>(_ storages: [WLStorage<V>]) -> Bool { storages.contains { $0.hasPendingChanges } }
        let renamed: [WLStorageMigration<RollbackV3>] = [.renamed(from: "theme", to: "colorScheme")]

        // V1 runs throughout, an old program never upgraded; V2 deploys beside it.
        let first = open(RollbackV1(), handles[0])
        let second = open(RollbackV2(), handles[1])
        #expect(eventually { idle(first) && idle(second) })
        for storage in first { storage.wrappedValue.fontSize = 14 }
        for storage in second { storage.wrappedValue.lineSpacing = 1.5 }
        flush("V1 and V2") { pending(first) || pending(second) }
        for object in try objects() {
            #expect(object as NSDictionary == ["theme": "light", "fontSize": 14, "lineSpacing": 1.5], "V1 and V2")
        }

        // V3 deploys while V2 and V1 run: it reads the old name, and changes the renamed field and its own.
        var third: [WLStorage<RollbackV3>]? = open(RollbackV3(), handles[2], renamed)
        #expect(
            eventually { third!.allSatisfy { $0.wrappedValue == RollbackV3(colorScheme: "light", fontSize: 14) } },
            "V3 read \(third!.map(\.wrappedValue).prefix(2))")
        #expect(eventually { idle(third!) })
        for storage in third! {
            storage.wrappedValue.colorScheme = "dark"
            storage.wrappedValue.tabWidth = 8
        }
        for storage in second { storage.wrappedValue.fontSize = 15 }
        flush("V3 deployed") { pending(third!) || pending(second) }
        for object in try objects() {
            let expected: NSDictionary = [
                "theme": "dark", "colorScheme": "dark", "fontSize": 15, "lineSpacing": 1.5, "tabWidth": 8,
            ]
            #expect(object as NSDictionary == expected, "V3 deployed")
        }

        // Rolled back: a V2 starts while V3 still runs, and both change a field.
        let fourth = open(RollbackV2(), handles[3])
        #expect(
            eventually {
                fourth.allSatisfy { $0.wrappedValue == RollbackV2(theme: "dark", fontSize: 15, lineSpacing: 1.5) }
            }, "the rolled-back V2 read \(fourth.map(\.wrappedValue).prefix(2))")
        #expect(eventually { idle(fourth) && idle(third!) })
        for storage in fourth { storage.wrappedValue.lineSpacing = 2 }
        for storage in third! { storage.wrappedValue.fontSize = 16 }
        flush("rollback under way") { pending(fourth) || pending(third!) }
        for object in try objects() {
            let expected: NSDictionary = [
                "theme": "dark", "colorScheme": "dark", "fontSize": 16, "lineSpacing": 2, "tabWidth": 8,
            ]
            #expect(object as NSDictionary == expected, "rollback under way")
        }

        // V3 gone: the V2s and V1 change fields; V3's own field and its name of the renamed one stay.
        third = nil
        #expect(eventually { idle(first) && idle(second) && idle(fourth) })
        for storage in fourth { storage.wrappedValue.theme = "blue" }
        for storage in first { storage.wrappedValue.fontSize = 17 }
        flush("rolled back") { pending(fourth) || pending(first) }
        for object in try objects() {
            #expect(object["theme"] as? String == "blue", "rolled back: \(object)")
            #expect(object["fontSize"] as? Int == 17, "rolled back: \(object)")
            #expect(object["lineSpacing"] as? Double == 2, "rolled back: \(object)")
            #expect(object["tabWidth"] as? Int == 8, "rolled back: V3's field was dropped: \(object)")
            #expect(object["colorScheme"] != nil, "rolled back: V3's name was dropped: \(object)")
        }

        // V3 deployed again: it reads V2's change of the renamed field, and V2's field stays under its writes.
        let fifth = open(RollbackV3(), handles[4], renamed)
        #expect(
            eventually {
                fifth.allSatisfy { $0.wrappedValue == RollbackV3(colorScheme: "blue", fontSize: 17, tabWidth: 8) }
            }, "V3 deployed again read \(fifth.map(\.wrappedValue).prefix(2))")
        #expect(eventually { idle(fifth) && idle(second) })
        for storage in fifth { storage.wrappedValue.tabWidth = 2 }
        for storage in second { storage.wrappedValue.lineSpacing = 3 }
        flush("V3 again") { pending(fifth) || pending(second) }
        for object in try objects() {
            let expected: NSDictionary = [
                "theme": "blue", "colorScheme": "blue", "fontSize": 17, "lineSpacing": 3, "tabWidth": 2,
            ]
            #expect(object as NSDictionary == expected, "V3 again")
        }
        // Every program still running follows the last value, each as far as its version knows it.
        #expect(eventually { first.allSatisfy { $0.wrappedValue == RollbackV1(theme: "blue", fontSize: 17) } })
        let lastV2 = RollbackV2(theme: "blue", fontSize: 17, lineSpacing: 3)
        #expect(eventually { (second + fourth).allSatisfy { $0.wrappedValue == lastV2 } })
        for error in (first.compactMap(\.lastError) + second.compactMap(\.lastError)).prefix(3) {
            Issue.record("\(error)")
        }
        for error in (fourth.compactMap(\.lastError) + fifth.compactMap(\.lastError)).prefix(3) {
            Issue.record("\(error)")
        }
    }
}
