import Foundation

// The checks of a fleet run: what a program may hold, and what the store must hold at the end.
extension FleetRun {
    func stamp(of json: String) -> Int? {
        (try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])?["stamp"] as? Int
    }

    /// Whether the set `stamp` of `key` may have been written after the operation `operation` started: its window
    /// ends after it.
    func writable(_ key: String, _ stamp: Int, after operation: Int) -> Bool {
        guard let record = sets[key]?[stamp] else { return false }
        return record.end.map { $0 > operation } ?? true
    }

    /// The fields of the newer shape that the older version does not know, as one value.
    struct NewerFields: Equatable {
        var theme: String
        var zoom: Int
        var note: String?
        var depth: Int

        init(_ value: FleetValueV2) {
            theme = value.theme
            zoom = value.zoom
            note = value.note
            depth = value.window.depth
        }
    }

    /// The newer-shape fields that values stored under `key` by sets started before `operation` carry: a newer
    /// version's sets, the migrations of an older version's sets, and the newer default where it may have been saved.
    func newerFields(_ key: String, before operation: Int) -> [NewerFields] {
        var fields: [NewerFields] = []
        for (stamp, record) in sets[key] ?? [:] where record.start <= operation {
            switch record.version {
            case .v2: fields.append(NewerFields(.made(by: stamp)))
            case .v1:
                if let migrated = try? FleetValueV2.migrated(.made(by: stamp)) { fields.append(NewerFields(migrated)) }
            }
        }
        if newerDefaultPossible.contains(key) {
            fields.append(NewerFields(.defaultValue))
            if let migrated = try? FleetValueV2.migrated(.defaultValue) { fields.append(NewerFields(migrated)) }
        }
        return fields
    }

    /// Whether a value is a default as it may be stored: a version's default, or the migration of the older one's (a
    /// program of the newer version read the older default where it was saved, and wrote it back in its shape).
    static func isDefault(_ v1: FleetValueV1?, _ v2: FleetValueV2?) -> Bool {
        v1 == .defaultValue || v2 == .defaultValue || (v2 != nil && v2 == (try? FleetValueV2.migrated(.defaultValue)))
    }

    /// Checks the value a program says its storage of `key` holds.
    func checkHeld(_ index: Int, _ key: String, json: String, error: String) throws {
        let version = programs[index].version
        let held = "P\(index) \(version)'s \(key) holds \(json)"
        guard let instance = programs[index].storages[key] else { return }
        let data = Data(json.utf8)
        let v1 = try? JSONDecoder().decode(FleetValueV1.self, from: data)
        let v2 = try? JSONDecoder().decode(FleetValueV2.self, from: data)
        guard let stamp = version == .v1 ? v1?.stamp : v2?.stamp else { throw fail("\(held): not its type") }
        if error == "storedByAnotherVersion" { count("held, reporting storedByAnotherVersion") }
        if stamp == 0 {
            guard Self.isDefault(version == .v1 ? v1 : nil, version == .v2 ? v2 : nil) else {
                throw fail("\(held): stamp 0, yet not a default")
            }
            guard instance.sets.isEmpty else { throw fail("\(held): the default, after its own set") }
            if let first = covered[key]?.first, first.by < instance.opened, error != "storedByAnotherVersion" {
                throw fail(
                    "\(held): the default, opened after the set \(first.stamp) was flushed, and reports \(error),"
                        + " not storedByAnotherVersion")
            }
            return
        }
        guard let record = sets[key]?[stamp], record.start <= operation else {
            throw fail("\(held): no set of \(key) made the stamp \(stamp)")
        }
        if let own = instance.sets.last, own != stamp, let ownRecord = sets[key]?[own],
            !writable(key, stamp, after: ownRecord.start)
        {
            throw fail("\(held): the set \(stamp) could not be written after its own set \(own), made later")
        }
        if record.program != index { count("held, another program's set") }
        if record.version != version { count("held, another version's set") }
        let matches: Bool
        switch (version, record.version) {
        case (.v1, .v1):
            matches = v1 == .made(by: stamp)
        case (.v2, .v2):
            matches = v2 == .made(by: stamp)
        case (.v2, .v1):
            let older = FleetValueV1.made(by: stamp)
            if let v2, v2 == (try? FleetValueV2.migrated(older)) {
                matches = true
            } else if let v2 {
                // The older value's bytes, with the fields it does not know kept from a value stored before.
                matches =
                    v2.window.width == older.window.width && v2.mode.rawValue == older.mode.rawValue
                    && newerFields(key, before: operation).contains(NewerFields(v2))
            } else {
                matches = false
            }
        case (.v1, .v2):
            // The newer value's bytes, read by the older version; `darkMode` was kept from an older value.
            let newer = FleetValueV2.made(by: stamp)
            matches =
                v1.map { $0.window.width == newer.window.width && $0.mode.rawValue == newer.mode.rawValue } ?? false
        }
        guard matches else {
            throw fail("\(held): not what its version reads from the set \(stamp) of a \(record.version) program")
        }
    }

    /// The end: every program stopped, what each key holds, read from the store.
    func checkFinal() throws {
        note("end")
        for key in Self.keys {
            let data: Data?
            do {
                data = try shared.stored(key: key)
            } catch { throw fail("\(key) cannot be read: \(error)") }
            let covers = covered[key] ?? []
            guard let data else {
                if let last = covers.last {
                    throw fail("\(key) holds nothing, though the set \(last.stamp) was flushed")
                }
                continue
            }
            let text = String(decoding: data, as: UTF8.self)
            guard let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any],
                let stamp = object["stamp"] as? Int
            else { throw fail("\(key) holds \(text): not a stamped object") }
            let v1 = try? JSONDecoder().decode(FleetValueV1.self, from: data)
            let v2 = try? JSONDecoder().decode(FleetValueV2.self, from: data)
            if stamp == 0 {
                if let last = covers.last {
                    throw fail("\(key) holds the default \(text), though the set \(last.stamp) was flushed")
                }
                guard Self.isDefault(v1, v2) else { throw fail("\(key) holds \(text)") }
                continue
            }
            guard let record = sets[key]?[stamp] else { throw fail("\(key) holds \(text): no set made it") }
            count(stamp == covers.last?.stamp ? "ended holding its last covered set" : "ended holding another set")
            for cover in covers where cover.stamp != stamp {
                guard let coveredRecord = sets[key]?[cover.stamp], writable(key, stamp, after: coveredRecord.start)
                else {
                    throw fail(
                        "\(key) holds \(text), whose set could not be written after the set \(cover.stamp), which was"
                            + " flushed at operation \(cover.by)")
                }
            }
            switch record.version {
            case .v2:
                guard v2 == .made(by: stamp) else { throw fail("\(key) holds \(text), not the set \(stamp) of V2") }
            case .v1:
                guard v1 == .made(by: stamp) else { throw fail("\(key) holds \(text), not the set \(stamp) of V1") }
                let window = object["window"] as? [String: Any]
                let newer =
                    ["theme", "zoom", "note"].filter { object[$0] != nil } + (window?["depth"] != nil ? ["depth"] : [])
                guard !newer.isEmpty else { break }
                guard let v2, newerFields(key, before: record.end ?? operation).contains(NewerFields(v2)) else {
                    throw fail(
                        "\(key) holds \(text): the fields V1 does not know are not those of a value stored before")
                }
            }
        }
        let strays: [String]
        do {
            strays = try shared.strays(keys: Self.keys)
        } catch { throw fail("the store cannot be listed: \(error)") }
        if !strays.isEmpty { throw fail("the store holds \(strays)") }
    }
}
