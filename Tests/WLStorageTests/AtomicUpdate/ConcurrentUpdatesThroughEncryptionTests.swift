// Updates of one key from many threads of two programs, through an encrypted store laid over a store in memory that
// writes on condition, while each program also checks, flushes and sets other keys: no increment is lost.
import Dispatch
import Foundation
import Testing

@testable import WLStorage

@Suite(.capturingOutput) struct ConcurrentUpdatesThroughEncryptionTests {
    @Test(arguments: EncryptedLayering.allCases)
    func incrementsFromManyThreadsOfTwoProgramsAddUp(_ layering: EncryptedLayering) throws {
        let key = try WLStorageEncryptionKey.random()
        let base = InterceptedStore()
        // Two programs: handles of their own on the same values, each with its own cell of the key. The store in memory
        // does not report its writes: a thread of the test tells both programs that anything may have changed, over
        // and over, so that their checks run among the updates.
        let programs = [base, InterceptedStore(base.base)].map { layering.store(over: $0, key: key) }
        let counters = programs.map { WLStorage(key: "counter", defaultValue: 0, flushInterval: 0, store: $0) }
        let others = programs.map { WLStorage(key: "other", defaultValue: 0, flushInterval: 0, store: $0) }
        let threadsPerProgram = 3
        let increments = 40
        let running = Lock(true)
        let reporter = startThread {
            while running.withLock({ $0 }) {
                base.base.report(.everything)
                usleep(200)
            }
        }
        DispatchQueue.concurrentPerform(iterations: programs.count * threadsPerProgram) { thread in
            let program = thread % programs.count
            for round in 0..<increments {
                counters[program].update { $0 += 1 }
                switch round % 4 {
                case 0: others[program].wrappedValue = round
                case 1: counters[program].flush()
                case 2: _ = counters[program].wrappedValue
                default: others[program].flush()
                }
            }
        }
        counters.forEach { $0.flush() }
        running.withLock { $0 = false }
        reporter.wait()
        base.base.report(.everything)
        let total = programs.count * threadsPerProgram * increments
        let stored = try programs[0].read(key: "counter").flatMap { try JSONDecoder().decode(Int.self, from: $0) }
        #expect(stored == total)
        for counter in counters {
            #expect(eventually(timeout: 30) { counter.wrappedValue == total }, "holds \(counter.wrappedValue)")
            #expect(counter.lastError == nil)
        }
    }
}
