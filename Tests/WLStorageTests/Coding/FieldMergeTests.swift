// The three-way merge of JSON that a storage's write makes onto another program's change (see `FieldMerge`).
import Foundation
import Testing
import WLStorageJSON
import WLStorageTestSupport

@testable import WLStorage

@Suite(.onTestThreads) struct FieldMergeTests {
    func merge(base: String, value: String, stored: String) -> String? {
        FieldMerge.merge(base: Data(base.utf8), value: Data(value.utf8), stored: Data(stored.utf8))
            .map { String(decoding: $0, as: UTF8.self) }
    }

    @Test func theMembersTheValueChangedGoOntoWhatIsStoredAndTheOthersKeepIt() {
        #expect(
            merge(base: #"{"a":1,"b":1,"c":1}"#, value: #"{"a":2,"b":1,"c":1}"#, stored: #"{"a":1,"b":3,"c":1,"d":4}"#)
                == #"{"a":2,"b":3,"c":1,"d":4}"#)
    }

    @Test func aMemberTheValueRemovedGoesAndOneItAddedComes() {
        #expect(
            merge(base: #"{"a":1,"b":1}"#, value: #"{"a":1,"n":true}"#, stored: #"{"a":5,"b":1}"#)
                == #"{"a":5,"n":true}"#)
    }

    @Test func nestedObjectsAreMergedAndArraysAndScalarsTakenWhole() {
        #expect(
            merge(
                base: #"{"o":{"x":1,"y":1},"list":[1,2]}"#, value: #"{"o":{"x":2,"y":1},"list":[1,2,3]}"#,
                stored: #"{"o":{"x":1,"y":9},"list":[7]}"#)
                == #"{"list":[1,2,3],"o":{"x":2,"y":9}}"#)
        // An object that the other program replaced by something else is the value's whole, where the value changed it.
        #expect(
            merge(base: #"{"o":{"x":1}}"#, value: #"{"o":{"x":2}}"#, stored: #"{"o":"gone"}"#) == #"{"o":{"x":2}}"#)
        // Both changed one member: the value's.
        #expect(merge(base: #"{"a":1}"#, value: #"{"a":2}"#, stored: #"{"a":3}"#) == #"{"a":2}"#)
    }

    @Test func aValueThatChangedNothingGivesWhatIsStored() {
        #expect(merge(base: #"{"a":1}"#, value: #"{"a":1}"#, stored: #"{"a":3,"z":[1]}"#) == #"{"a":3,"z":[1]}"#)
    }

    @Test func numbersKeepTheirValue() {
        #expect(
            merge(
                base: #"{"a":1,"big":9007199254740993,"u":18446744073709551615,"d":0.1}"#,
                value: #"{"a":2,"big":9007199254740993,"u":18446744073709551615,"d":0.1}"#,
                stored: #"{"a":1,"big":9007199254740993,"u":18446744073709551615,"d":0.1,"e":-2.5e-300}"#)
                == #"{"a":2,"big":9007199254740993,"d":0.1,"e":-2.5e-300,"u":18446744073709551615}"#)
    }

    /// A number with more digits than a `Double` holds (a `Decimal`'s, as Foundation's encoder writes it) keeps them:
    /// neither another program's, in a member the value left as it was, nor the value's own is rounded.
    @Test func aNumberWithMoreDigitsThanADoubleHoldsKeepsThem() {
        #expect(
            merge(
                base: #"{"a":1,"m":1.5}"#, value: #"{"a":2,"m":1.5}"#, stored: #"{"a":1,"m":12345678901234567.89}"#)
                == #"{"a":2,"m":12345678901234567.89}"#)
        #expect(
            merge(base: #"{"a":1,"m":1.5}"#, value: #"{"a":1,"m":0.1234567890123456789}"#, stored: #"{"a":3,"m":1.5}"#)
                == #"{"a":3,"m":0.1234567890123456789}"#)
        // Equal digits written otherwise are no change.
        #expect(
            merge(
                base: #"{"a":1,"m":12345678901234567.890}"#, value: #"{"a":1,"m":12345678901234567.89}"#,
                stored: #"{"a":3,"m":12345678901234567.89}"#) == #"{"a":3,"m":12345678901234567.89}"#)
    }

    /// A number changed past a `Double`'s digits (a `Decimal`'s), or to another `Double`, or an integer past 2^53 changed
    /// to the one the `Double` of the other reads as (an `Int64`'s change), is a change.
    @Test func numbersChangedPastADoublesDigitsAreChanges() {
        #expect(
            merge(base: #"{"x":0.1}"#, value: #"{"x":0.1000000000000000000001}"#, stored: #"{"x":0.5}"#)
                == #"{"x":0.1000000000000000000001}"#)
        #expect(merge(base: #"{"x":0.1}"#, value: #"{"x":0.2}"#, stored: #"{"x":0.5}"#) == #"{"x":0.2}"#)
        #expect(
            merge(base: #"{"x":9007199254740993}"#, value: #"{"x":9007199254740992}"#, stored: #"{"x":5}"#)
                == #"{"x":9007199254740992}"#)
    }

    /// Members the value left as they were keep another program's bytes as it wrote them: a number that a `Double`
    /// reads as 0, a negative zero, a number's spelling, a string's escapes, an object's spacing.
    @Test func theMembersTheValueLeftKeepTheirBytes() {
        let stored =
            #"{"a":1,"e":"caf\u00e9","f":1.0,"n":1e-500,"o":{ "x" : 1 },"z":-0}"#
        #expect(
            merge(base: #"{"a":1}"#, value: #"{"a":2}"#, stored: stored)
                == #"{"a":2,"e":"caf\u00e9","f":1.0,"n":1e-500,"o":{ "x" : 1 },"z":-0}"#)
        // And when the value changed nothing, what is stored is written as it is.
        #expect(merge(base: #"{"a":1}"#, value: #"{"a":1}"#, stored: stored) == stored)
    }

    @Test func bytesThatAreNotJSONMergeNothing() {
        #expect(merge(base: #"{"a":1}"#, value: #"{"a":2}"#, stored: "not json") == nil)
        #expect(merge(base: "{", value: #"{"a":2}"#, stored: #"{"a":1}"#) == nil)
    }
}
