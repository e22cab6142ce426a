import Dispatch
import Foundation
import Testing

@testable import WLStorage

extension WLStorageScope {
    /// Bound by each test of ``ScopeTaskBindingTests`` for its own tasks only, never process-wide.
    fileprivate static let taskBound = WLStorageScope("scope-task-binding-tests")
}

extension WLStorageKeys {
    /// A key declared once, as programs declare theirs, in a scope that tests bind side by side.
    fileprivate static let taskBoundCount = WLStorageKey<Int>(
        "count", default: 0, flushInterval: nil, scope: .taskBound)
}

/// A scope bound for a closure (`withBinding(to:_:)`): tests that run side by side in one process each bind it to a
/// directory of their own, whatever the process-wide binding is.
@Suite(.capturingOutput)
struct ScopeTaskBindingTests {
    /// Swift Testing runs the cases of a parameterized test side by side, as it runs a suite's tests.
    @Test(arguments: 0..<4)
    func testsBindingOneScopeToTheirOwnDirectoriesSeeOnlyTheirOwnValues(index: Int) async throws {
        try await withTemporaryDirectory { directory in
            await WLStorageScope.taskBound.withBinding(to: .directory(directory)) {
                await countInTurns(as: index, storedIn: directory)
            }
        }
    }

    @Test func tasksOfATaskGroupBindingOneScopeToDifferentDirectoriesSeeOnlyTheirOwnValues() async throws {
        try await withTemporaryDirectory { directory in
            await withTaskGroup(of: Void.self) { group in
                for index in 0..<4 {
                    let place = directory.appendingPathComponent("task-\(index)")
                    group.addTask {
                        await WLStorageScope.taskBound.withBinding(to: .directory(place)) {
                            await countInTurns(as: index, storedIn: place)
                        }
                    }
                }
            }
        }
    }

    @Test func threadsBindingOneScopeToDifferentDirectoriesSeeOnlyTheirOwnValues() throws {
        try withTemporaryDirectory { directory in
            let places = (0..<4).map { directory.appendingPathComponent("thread-\($0)") }
            DispatchQueue.concurrentPerform(iterations: places.count) { index in
                WLStorageScope.taskBound.withBinding(to: .directory(places[index])) {
                    for round in 1...50 {
                        WLStorageKeys[.taskBoundCount] = index * 1000 + round
                        #expect(WLStorage(.taskBoundCount).wrappedValue == index * 1000 + round)
                    }
                    WLStorageKeys.storage(.taskBoundCount).flush()
                }
            }
            for (index, place) in places.enumerated() {
                #expect(stored(Int.self, key: "count", in: place) == index * 1000 + 50)
            }
        }
    }

    @Test func aTaskBindingHoldsForAScopeUsedProcessWideAndLeavesThatBindingAsItWas() throws {
        try withTemporaryDirectory { directory in
            let scope = WLStorageScope("scope-task-binding-tests.used.\(UUID().uuidString)")
            let key = WLStorageKey<String>("name", default: "none", flushInterval: nil, scope: scope)
            let processWide = directory.appendingPathComponent("process")
            let forTheTask = directory.appendingPathComponent("task")
            try scope.bind(to: .directory(processWide))
            let outside = WLStorage(key)
            outside.wrappedValue = "process"

            scope.withBinding(to: .directory(forTheTask)) {
                #expect(scope.store?.identity == WLStorageDirectoryStore.directory(forTheTask).identity)
                #expect(key.store?.identity == WLStorageDirectoryStore.directory(forTheTask).identity)
                let inside = WLStorage(key)
                #expect(inside.lastError == nil)
                #expect(inside.wrappedValue == "none")
                inside.wrappedValue = "task"
                inside.flush()
                #expect(outside.wrappedValue == "process")
                // `bind(to:)` inside is the process's binding, still refused after the scope's use.
                #expect(throws: WLStorageError.self) {
                    try scope.bind(to: .directory(directory.appendingPathComponent("other")))
                }
            }

            #expect(scope.store?.identity == WLStorageDirectoryStore.directory(processWide).identity)
            #expect(WLStorage(key).wrappedValue == "process")
            outside.flush()
            #expect(stored(String.self, key: "name", in: processWide) == "process")
            #expect(stored(String.self, key: "name", in: forTheTask) == "task")
        }
    }

    @Test func aTaskBindingIsNoUseOfTheScopeWhichCanStillBeBoundAndBoundAgain() throws {
        try withTemporaryDirectory { directory in
            let scope = WLStorageScope("scope-task-binding-tests.unused.\(UUID().uuidString)")
            let key = WLStorageKey<Int>("retries", default: 3, flushInterval: nil, scope: scope)
            scope.withBinding(to: .directory(directory)) {
                let storage = WLStorage(key)
                #expect(storage.lastError == nil)
                storage.wrappedValue = 4
                storage.flush()
            }
            #expect(stored(Int.self, key: "retries", in: directory) == 4)
            #expect(scope.store == nil)
            try scope.bind(to: .directory(directory.appendingPathComponent("first")))
            try scope.bind(to: .directory(directory.appendingPathComponent("second")))
        }
    }

    @Test func aTaskBindingHoldsForAScopeUsedWhileUnbound() throws {
        try withTemporaryDirectory { directory in
            let scope = WLStorageScope("scope-task-binding-tests.used-unbound.\(UUID().uuidString)")
            let key = WLStorageKey<Int>("retries", default: 3, flushInterval: nil, scope: scope)
            let unbound = WLStorage(key)
            #expect(unbound.lastError?.code == .invalidConfiguration)
            scope.withBinding(to: .directory(directory)) {
                let storage = WLStorage(key)
                #expect(storage.lastError == nil)
                storage.wrappedValue = 5
                storage.flush()
            }
            #expect(stored(Int.self, key: "retries", in: directory) == 5)
            #expect(unbound.wrappedValue == 3)
        }
    }

    @Test func oneShotAccessInsideATaskBindingGoesToItsStoreAndIsFlushedWhenItEnds() throws {
        try withTemporaryDirectory { directory in
            let scope = WLStorageScope("scope-task-binding-tests.one-shot.\(UUID().uuidString)")
            let key = WLStorageKey<Int>("count", default: 0, flushInterval: nil, scope: scope)
            let processWide = directory.appendingPathComponent("process")
            let forTheTask = directory.appendingPathComponent("task")
            try scope.bind(to: .directory(processWide))
            // The key's one-shot storage of the process is made first, and kept.
            WLStorageKeys[key] = 1
            // A value stored in the task's directory: its storage has no default to save, and writes only when flushed.
            try FileManager.default.createDirectory(at: forTheTask, withIntermediateDirectories: true)
            try Data("2".utf8).write(to: forTheTask.appendingPathComponent("count"))

            scope.withBinding(to: .directory(forTheTask)) {
                #expect(WLStorageKeys[key] == 2)
                WLStorageKeys[key] = 7
                WLStorageKeys.update(key) { $0 += 1 }
                #expect(WLStorageKeys[key] == 8)
                #expect(WLStorageKeys.storage(key) === WLStorageKeys.storage(key))
                // Not written yet: the one-shot storage of the binding is released, and flushed, when it ends.
                #expect(stored(Int.self, key: "count", in: forTheTask) == 2)
            }

            #expect(stored(Int.self, key: "count", in: forTheTask) == 8)
            #expect(WLStorageKeys[key] == 1)
            WLStorageKeys.storage(key).flush()
            #expect(stored(Int.self, key: "count", in: processWide) == 1)
        }
    }

    @Test func nestedBindingsOfTwoScopesBothHoldAndTheInnerOneOfAScopeWins() throws {
        try withTemporaryDirectory { directory in
            let first = WLStorageScope("scope-task-binding-tests.first.\(UUID().uuidString)")
            let second = WLStorageScope("scope-task-binding-tests.second.\(UUID().uuidString)")
            let a = directory.appendingPathComponent("a")
            let b = directory.appendingPathComponent("b")
            let c = directory.appendingPathComponent("c")
            first.withBinding(to: .directory(a)) {
                second.withBinding(to: .directory(b)) {
                    #expect(first.store?.identity == WLStorageDirectoryStore.directory(a).identity)
                    #expect(second.store?.identity == WLStorageDirectoryStore.directory(b).identity)
                    first.withBinding(to: .directory(c)) {
                        #expect(first.store?.identity == WLStorageDirectoryStore.directory(c).identity)
                    }
                    #expect(first.store?.identity == WLStorageDirectoryStore.directory(a).identity)
                }
                #expect(second.store == nil)
            }
            #expect(first.store == nil)
        }
    }
}

/// Sets the scope's key to values of its own, `index`, many times, yielding to the other tests between a set and the
/// reads that check it; then flushes it and checks the file in `directory`.
private func countInTurns(as index: Int, storedIn directory: URL) async {
    let storage = WLStorage(.taskBoundCount)
    for round in 1...50 {
        let value = index * 1000 + round
        WLStorageKeys[.taskBoundCount] = value
        await Task.yield()
        #expect(WLStorageKeys[.taskBoundCount] == value)
        #expect(storage.wrappedValue == value)
    }
    await flushOffThePool(storage)
    #expect(stored(Int.self, key: "count", in: directory) == index * 1000 + 50)
}
