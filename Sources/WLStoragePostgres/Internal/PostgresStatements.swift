import Foundation

extension WLStoragePostgresStore {
    /// The SQL of the store's statements, with its table's name quoted.
    struct Statements: Sendable {
        let channel: String
        /// The table's name, quoted: `"name"` or `"schema"."name"`.
        let quotedName: String
        let tableState: String
        let createTable: String
        let readVersioned: String
        let readMany: String
        let replaceIfVersion: String
        let trace: String
        let keys: String
        let list: String
        let upsert: String
        let upsertMany: String
        let writeManyIfHold: String
        let create: String
        let remove: String
        let removeIfHolds: String
        let replaceIfHolds: String
        let createWrites: String
        let recordedReplaceIfHolds: String
        let recordedCreate: String
        let claimTag: String
        let pruneTags: String

        /// The payload of a write's notification: `prefix` (``WLStoragePostgresStore/payload(namespace:key:)``), the
        /// row's new `version`, `.` and the table's OID (a same-named table of another schema shares the channel), and
        /// `:` with `value` in Base64 when the whole fits in ``WLStoragePostgresStore/payloadLimit`` (34 bytes kept).
        static func carried(prefix: String, version: String, value: String, name: String) -> String {
            """
            \(prefix) || \(version)::text || '.' || '\(name)'::regclass::oid::text || CASE WHEN octet_length(\(prefix)) \
            + 34 + 4 * ((octet_length(\(value)) + 2) / 3) <= \(WLStoragePostgresStore.payloadLimit) \
            THEN ':' || translate(encode(\(value), 'base64'), chr(10), '') ELSE '' END
            """
        }

        init(table: String) {
            let name = table.split(separator: ".").map { "\"\($0)\"" }.joined(separator: ".")
            let writes = "\(name.dropLast())_writes\""
            let notifyWrite =
                "pg_notify($4, \(Self.carried(prefix: "$5", version: "written.version", value: "$3", name: name)))"
            quotedName = name
            channel = table.replacingOccurrences(of: ".", with: "_") + "_changes"
            // A row when the table exists: whether the role may record tags in `<table>_writes` (each privilege asked
            // alone; a logged table of tags, as a crash empties an unlogged one), and its file node, which emptying it
            // changes.
            let checks =
                ["INSERT", "SELECT", "UPDATE", "DELETE"].map {
                    "has_table_privilege(to_regclass('\(writes)'), '\($0)')"
                }
                + [
                    """
                    (to_regclass('\(writes)') IS NULL OR EXISTS (SELECT FROM pg_attribute, pg_class \
                    WHERE attrelid = to_regclass('\(writes)') AND attname = 'claimed' AND pg_class.oid = attrelid \
                    AND relpersistence = 'p'))
                    """
                ]
            tableState = """
                SELECT (\(checks.joined(separator: " AND ")))::text, pg_relation_filenode(to_regclass('\(writes)'))::text \
                WHERE to_regclass('\(name)') IS NOT NULL
                """
            // The tags of writes on condition, each recorded by its write's statement. After a lost answer the store
            // claims the tag: `written` is `false` when the claim took it (the write was not made), `true` when the
            // write had recorded it, nothing when the file node is no longer `node` (the table emptied since).
            createWrites = """
                CREATE TABLE IF NOT EXISTS \(writes) (tag text PRIMARY KEY, \
                written_at timestamptz NOT NULL DEFAULT now(), claimed boolean NOT NULL DEFAULT false)
                """
            func claiming(_ tag: String, node: String) -> String {
                """
                INSERT INTO \(writes) AS kept (tag, claimed) SELECT \(tag), true WHERE pg_relation_filenode('\(writes)') \
                = \(node)::oid ON CONFLICT (tag) DO UPDATE SET claimed = kept.claimed RETURNING (NOT claimed)::text AS written
                """
            }
            claimTag = claiming("$1", node: "$2")
            // A claimed tag is kept a day (a copy of its write may still wait for a row, its connection gone); at most
            // 10,000 go at once, so that a removal ends well within the timeout.
            pruneTags = """
                DELETE FROM \(writes) WHERE ctid = ANY(ARRAY(SELECT ctid FROM \(writes) WHERE written_at < now() - \
                CASE WHEN claimed THEN interval '1 day' ELSE interval '1 hour' END LIMIT 10000))
                """
            createTable = """
                CREATE TABLE IF NOT EXISTS \(name) (namespace text NOT NULL, key text NOT NULL, value bytea NOT NULL, \
                version bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now(), \
                recent_tags text[] NOT NULL DEFAULT '{}', PRIMARY KEY (namespace, key))
                """
            // The bytes only when they are not too large ($3), their size and their version.
            readVersioned = """
                SELECT CASE WHEN octet_length(value) <= $3::bigint THEN value END, octet_length(value)::text, \
                version::text FROM \(name) WHERE namespace = $1 AND key = $2
                """
            readMany = """
                SELECT key, CASE WHEN octet_length(value) <= $3::bigint THEN value END, octet_length(value)::text \
                FROM \(name) WHERE namespace = $1 AND key = ANY($2::text[])
                """
            keys = "SELECT key FROM \(name) WHERE namespace = $1 ORDER BY key"
            // Each row's key, size, time of its last write (UTC, to the second) and bytes when not too large ($2).
            list = """
                SELECT key, octet_length(value)::text, \
                to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), \
                CASE WHEN octet_length(value) <= $2::bigint THEN value END \
                FROM \(name) WHERE namespace = $1 ORDER BY key
                """
            let insert = "INSERT INTO \(name) AS stored (namespace, key, value, version) VALUES ($1, $2, $3, 1)"
            upsert = """
                WITH written AS (\(insert) ON CONFLICT (namespace, key) DO UPDATE SET value = EXCLUDED.value, \
                version = stored.version + 1, updated_at = now() RETURNING stored.version) SELECT \(notifyWrite), \
                version::text FROM written
                """
            // The rows of a chunk of a batch, written as `upsert` writes one: the same version and notification.
            upsertMany = """
                WITH input AS (SELECT * FROM unnest($2::text[], $3::bytea[], $5::text[]) \
                AS input(key, value, payload)), written AS (INSERT INTO \(name) AS stored (namespace, key, value, version) \
                SELECT $1, input.key, input.value, 1 FROM input ON CONFLICT (namespace, key) DO UPDATE \
                SET value = EXCLUDED.value, version = stored.version + 1, updated_at = now() \
                RETURNING stored.key, stored.version) SELECT pg_notify($4, \
                \(Self.carried(prefix: "input.payload", version: "written.version", value: "input.value", name: name))) \
                FROM written JOIN input ON input.key = written.key
                """
            // The rows of a chunk of a batch written on condition: each updated while it holds the bytes expected ($6),
            // or made where expected absent ($7); the keys written are returned, notified as `upsertMany` notifies.
            writeManyIfHold = """
                WITH input AS (SELECT * FROM unnest($2::text[], $3::bytea[], $5::text[], $6::bytea[], $7::text[]::bool[]) \
                AS input(key, value, payload, expected, absent)), updated AS (UPDATE \(name) AS stored SET \
                value = input.value, version = stored.version + 1, updated_at = now() FROM input WHERE NOT input.absent \
                AND stored.namespace = $1 AND stored.key = input.key AND stored.value = input.expected \
                RETURNING stored.key, stored.version), created AS (INSERT INTO \(name) AS stored (namespace, key, value, \
                version) SELECT $1, input.key, input.value, 1 FROM input WHERE input.absent ON CONFLICT (namespace, key) \
                DO NOTHING RETURNING stored.key, stored.version), written AS (SELECT * FROM updated UNION ALL \
                SELECT * FROM created) SELECT written.key, pg_notify($4, \
                \(Self.carried(prefix: "input.payload", version: "written.version", value: "input.value", name: name))) \
                FROM written JOIN input ON input.key = written.key
                """
            // A write: `write` returns the version the notification carries; `tag` is recorded when it wrote.
            func writing(_ write: String, recording tag: String? = nil) -> String {
                let recorded = tag.map { ", recorded AS (INSERT INTO \(writes) (tag) SELECT \($0) FROM written)" } ?? ""
                return "WITH written AS (\(write))\(recorded) SELECT \(notifyWrite) FROM written"
            }
            let creating = "\(insert) ON CONFLICT (namespace, key) DO NOTHING RETURNING stored.version"
            create = writing(creating)
            remove = """
                WITH removed AS (DELETE FROM \(name) WHERE namespace = $1 AND key = $2 RETURNING 1) \
                SELECT pg_notify($3, $4) FROM removed
                """
            removeIfHolds = """
                WITH removed AS (DELETE FROM \(name) WHERE namespace = $1 AND key = $2 AND value = $3 RETURNING 1) \
                SELECT pg_notify($4, $5) FROM removed
                """
            // An update's write on condition of the version read ($7), its tag ($6) recorded; old `recent_tags` stay.
            replaceIfVersion = writing(
                """
                UPDATE \(name) SET value = $3, version = version + 1, updated_at = now() \
                WHERE namespace = $1 AND key = $2 AND version = $7::bigint RETURNING version
                """, recording: "$6")
            // The row's version, and whether the tag ($3) was recorded by its write, once claimed (file node $4).
            trace = """
                WITH claim AS (\(claiming("$3", node: "$4"))) SELECT version::text, (SELECT written FROM claim) \
                FROM \(name) WHERE namespace = $1 AND key = $2
                """
            // A change's write, on condition of the bytes read ($6); recorded, with its tag ($7, or $6 for a creation).
            let replacing = """
                UPDATE \(name) SET value = $3, version = version + 1, updated_at = now() \
                WHERE namespace = $1 AND key = $2 AND value = $6 RETURNING version
                """
            replaceIfHolds = writing(replacing)
            recordedReplaceIfHolds = writing(replacing, recording: "$7")
            recordedCreate = writing(creating, recording: "$6")
        }
    }

    /// A table name the store accepts: `name` or `schema.name`, each part `[A-Za-z_][A-Za-z0-9_]*`, at most 48 bytes
    /// (so that the channel, `<table>_changes`, stays within PostgreSQL's 63 bytes).
    static func isValidTable(_ table: String) -> Bool {
        let parts = table.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), table.utf8.count <= 48 else { return false }
        return parts.allSatisfy { part in
            guard let first = part.first, !first.isNumber else { return false }
            return part.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
        }
    }
}
