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

    /// The values that the stored member `name` of `key` may hold, kept by writes of versions that do not know it:
    /// those of the sets started before `operation` by versions that write it, and the defaults' where one may have
    /// been saved (or where `withDefault`: a reader fills what is missing from its default).
    func keptValues(_ key: String, storedName name: String, before operation: Int, withDefault: Bool) -> Set<String> {
        let field = FleetVersion.field(ofStoredName: name)
        let writers = FleetVersion.writers(ofStoredName: name)
        var values = Set<String>()
        for (stamp, record) in sets[key] ?? [:] where record.start <= operation && writers.contains(record.version) {
            if let value = record.version.made(by: stamp)[field] { values.insert(value) }
        }
        if withDefault || defaultPossible.contains(key) {
            for writer in writers { if let value = writer.made(by: 0)[field] { values.insert(value) } }
        }
        return values
    }

    /// Whether a set of `key` started before now makes a value that `version` cannot read.
    func someSetUnreadable(by version: FleetVersion, _ key: String) -> Bool {
        (sets[key] ?? [:]).contains { stamp, record in
            record.start <= operation && version.cannotRead(setOf: record.version, stamp: stamp)
        }
    }

    /// Checks the value a program says its storage of `key` holds.
    func checkHeld(_ index: Int, _ key: String, json: String, error: String) throws {
        let version = programs[index].version
        let held = "P\(index) \(version)'s \(key) holds \(json)"
        guard let instance = programs[index].storages[key] else { return }
        guard let fields = version.value(Data(json.utf8)), let stamp = fields["stamp"].flatMap({ Int($0) }) else {
            throw fail("\(held): not its type")
        }
        if error == "storedByAnotherVersion" { count("held a value reporting storedByAnotherVersion") }
        if stamp == 0 {
            guard fields == version.made(by: 0) else { throw fail("\(held): stamp 0, yet not its default") }
            guard instance.sets.isEmpty else { throw fail("\(held): the default, after its own set") }
            if let first = covered[key]?.first, first.by < instance.opened {
                // No version serves its default while a value it can map is stored. It says so, unless what is stored
                // could not be read since (a server restarting): the last error is then that read's.
                guard error == "storedByAnotherVersion" || error == "readFailed" else {
                    throw fail(
                        "\(held): the default, opened after the set \(first.stamp) was flushed, and reports \(error),"
                            + " not storedByAnotherVersion")
                }
                guard someSetUnreadable(by: version, key) else {
                    throw fail(
                        "\(held): the default, opened after the set \(first.stamp) was flushed, though every set of"
                            + " \(key) so far makes a value it can map")
                }
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
        if record.program != index { count("held another program's set") }
        if record.version != version { count("held another version's set") }
        // The fields both versions know, under any name, are the set's.
        if let disagreement = version.disagreement(fields, with: record.version.made(by: stamp), of: record.version) {
            throw fail(
                "\(held): not what it reads from the set \(stamp) of a \(record.version) program: \(disagreement)")
        }
        // The others are its default's, or kept from a set stored before.
        for field in version.fields where !record.version.fields.contains(field) {
            let name = version.storedName(field)
            guard let value = fields[field],
                keptValues(key, storedName: name, before: operation, withDefault: true).contains(value)
            else {
                throw fail(
                    "\(held): its \(field), which the \(record.version) set \(stamp) does not have, is neither its"
                        + " default's nor that of a set stored before")
            }
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
            if stamp == 0 {
                if let last = covers.last {
                    throw fail("\(key) holds the default \(text), though the set \(last.stamp) was flushed")
                }
                guard FleetVersion.allCases.contains(where: { $0.value(data) == $0.made(by: 0) }) else {
                    throw fail("\(key) holds \(text)")
                }
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
            let writer = record.version
            guard writer.holdsFieldsOfItsSet(object, writer.made(by: stamp)),
                let mode = object["mode"].flatMap(FleetVersion.text(ofMember:)),
                keptValues(key, storedName: "mode", before: operation, withDefault: true).contains(mode)
            else {
                throw fail("\(key) holds \(text), not the set \(stamp) of \(writer)")
            }
            // The members the writer does not know are absent, or kept from a set stored before: never a default's
            // unless one may have been saved.
            let known = Set(writer.fields.map(writer.storedName)).union(writer == .v3 ? ["theme"] : [])
            for (name, member) in object where !known.contains(name) {
                guard writer.unknownNames.contains(name), let value = FleetVersion.text(ofMember: member),
                    keptValues(key, storedName: name, before: record.end ?? operation, withDefault: false)
                        .contains(value)
                else {
                    throw fail(
                        "\(key) holds \(text): its \(name), which \(writer) does not know, is not a set's stored before"
                    )
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
