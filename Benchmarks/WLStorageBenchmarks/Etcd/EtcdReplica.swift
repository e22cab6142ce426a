import Foundation
import Synchronization
import WLStorage
import WLStorageEtcd

/// A replica of the etcd propagation case: this executable run again as a process of its own, in a hidden mode.
///
/// `WLStorageBenchmarks --etcd-replica ENDPOINT NAMESPACE KEY FLOOR_KEY` opens a storage of the `Int` under `KEY` in an
/// etcd store of `NAMESPACE`, and a watch of the etcd key `FLOOR_KEY` read by hand (``RawEtcdWatch``), and prints
/// `ready`; then, for each new value the storage's `onChange` observer receives (on a serial queue of its own), the
/// monotonic time at which it received it and the value, and for each value the floor's watch hears, `F`, the time and
/// the value, one line each, as ``ReplicaMode`` does for PostgreSQL (``ReplicaProcess`` reads them). It ends when its
/// standard input ends.
enum EtcdReplicaMode {
    static let flag = "--etcd-replica"

    /// Runs the replica and exits, when the arguments ask for it; returns otherwise.
    static func runIfAsked() {
        let arguments = CommandLine.arguments
        guard arguments.count > 1, arguments[1] == flag else { return }
        guard arguments.count == 6 else {
            FileHandle.standardError.write(
                Data("usage: WLStorageBenchmarks \(flag) ENDPOINT NAMESPACE KEY FLOOR_KEY\n".utf8))
            exit(2)
        }
        let output = Mutex(())
        let storage: WLStorage<Int>
        let floor: RawEtcdWatch
        do {
            let store = try WLStorageEtcdStore(endpoints: [arguments[2]], namespace: arguments[3])
            storage = WLStorage(key: arguments[4], defaultValue: 0, flushInterval: nil, store: store)
            floor = try RawEtcdWatch(endpoint: arguments[2], key: arguments[5]) { value, received in
                output.withLock { _ in FileHandle.standardOutput.write(Data("F \(received) \(value)\n".utf8)) }
            }
        } catch {
            FileHandle.standardError.write(Data("\(error)\n".utf8))
            exit(1)
        }
        let subscription = storage.onChange(queue: DispatchQueue(label: "replica")) { value in
            let received = monotonicNanoseconds()
            output.withLock { _ in FileHandle.standardOutput.write(Data("\(received) \(value)\n".utf8)) }
        }
        FileHandle.standardOutput.write(Data("ready\n".utf8))
        while readLine() != nil {}
        subscription.cancel()
        withExtendedLifetime((storage, floor)) {}
        exit(0)
    }
}
