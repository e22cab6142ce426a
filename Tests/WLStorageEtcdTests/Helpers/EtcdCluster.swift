import Foundation
import Testing
import WLStorage

#if canImport(Glibc)
    import Glibc
#endif

/// A throwaway etcd cluster of three members on loopback ports found free: each member an ``EtcdServer`` of its own
/// (its directory, its client and peer ports, its process group under a shell that kills it once the test process is
/// gone), started together with `--initial-cluster` and `--initial-cluster-state new`.
///
/// ``stop(_:)`` kills one member (`SIGKILL`: a crash) and ``restart(_:)`` starts it again on its directory and ports;
/// ``remove()`` kills them all and removes their directories, as the exit of the test process does for any left.
final class EtcdCluster: Sendable {
    let members: [EtcdServer]

    /// A cluster of `size` members, started. Ports found free can be taken before the members bind them: a cluster
    /// one of whose members cannot bind its ports is made again on others, three times at most.
    static func started(size: Int = 3) throws -> EtcdCluster {
        for attempt in 1... {
            let cluster = try EtcdCluster(size: size)
            do {
                try cluster.start()
                return cluster
            } catch {
                let taken = cluster.members.contains { $0.log.contains("address already in use") }
                cluster.remove()
                if !taken || attempt == 3 { throw error }
            }
        }
        fatalError("unreachable")
    }

    /// Makes the members' directories and picks their ports; nothing is started.
    init(size: Int) throws {
        members = try (0..<size).map { try EtcdServer(name: "member\($0)") }
        let list = members.map { "\($0.name)=\($0.peerURL)" }.joined(separator: ",")
        let token = "wlstorage-\(UUID().uuidString)"
        for member in members { member.cluster.withLock { $0 = (list, token) } }
    }

    /// Starts every member, and waits until each answers a read (60 s of patience each).
    func start() throws {
        let started = try members.map { try $0.launch() }
        for (member, group) in zip(members, started) { try member.waitUntilAnswering(group) }
    }

    /// The members' client URLs.
    var endpoints: [String] { members.map(\.endpoint) }

    /// The same URLs written otherwise (`localhost`): a store made with them is another program's to this process.
    var otherSpellings: [String] { members.map(\.otherSpelling) }

    /// Kills member `index` and waits until it is gone.
    func stop(_ index: Int) {
        members[index].stop()
    }

    /// Starts member `index` again, and waits until it answers a read.
    func restart(_ index: Int) throws {
        try members[index].start()
    }

    /// Kills every member and removes their directories.
    func remove() {
        for member in members { member.remove() }
    }

    /// The index of the member that leads, as the running members tell (`/v3/maintenance/status`: a member that says
    /// it leads), polled for up to `timeout` seconds; `nil` when none does. `except` is a member known not to lead
    /// any more (one just killed).
    func leader(except: Int? = nil, timeout: Double = 60) -> Int? {
        var found: Int?
        _ = eventually(timeout: timeout) {
            for (index, member) in members.enumerated() where index != except && member.isRunning {
                guard let status = try? member.status(), status.member == status.leader, status.leader != "0"
                else { continue }
                found = index
                return true
            }
            return false
        }
        return found
    }

    /// What the members' logs say, for a failing test.
    var logs: String {
        members.map { "\($0.name):\n\($0.log.suffix(3000))" }.joined(separator: "\n")
    }
}

extension EtcdServer {
    /// What the member says of itself (`/v3/maintenance/status`): its ID and the ID of the leader it knows of (`"0"`
    /// when it knows of none), as decimal text.
    func status() throws -> (member: String, leader: String) {
        let answer = try post(endpoint, "v3/maintenance/status", [:], timeout: 5)
        guard let header = answer["header"] as? [String: Any], let member = header["member_id"] as? String else {
            throw Failure(description: "a status without the member's ID: \(answer)")
        }
        return (member, answer["leader"] as? String ?? "0")
    }
}
