import Foundation

/// The decoder of a storage's stored bytes: a `Decoder` straight over the bytes, leaner than `JSONDecoder` for the
/// small values a storage keeps, with `JSONDecoder` behind it for everything it is not sure of.
///
/// It never decides anything on its own. It is stricter than `JSONDecoder` as ``JSONCoders/decoder`` is configured:
/// where it is not certain it makes exactly the value `JSONDecoder` would make, it throws
/// ``StoredJSONDecoder/Fallback``, and ``JSONCoders/decodeStored(_:from:)`` then decodes with `JSONDecoder`, as if
/// this decoder did not exist. So every error a storage reports, every reshaping and every judgement that bytes are
/// another version's comes from `JSONDecoder`; this decoder only ever makes the value `JSONDecoder` makes, sooner.
///
/// It throws, rather than imitate, for:
/// - a text ``StoredJSONScanner`` does not read (not JSON, not UTF-8, a byte order mark, keys that are not plain
///   ASCII, a key twice in one object, numbers out of range, very deep nesting);
/// - the types `JSONDecoder` decodes its own way, at any depth: `Date`, `Data`, `URL`, `Decimal`, and the 128-bit
///   integers;
/// - a number that is not plain for the type asked: an integer written with a fraction or an exponent (`1.0`,
///   `1e2`), out of the type's range, or `-0`; a float out of its type's range;
/// - anything missing or of another kind than asked (`JSONDecoder` throws there too, with its own error, which the
///   caller must see), and a key asked for that is not plain ASCII;
/// - a type's own decoding that reads more than one key through `allKeys`, whose order `JSONDecoder` does not fix
///   (its keys come from a `Dictionary`), unless the type is a `Dictionary` keyed by `String`, or by `Int` with each
///   key written as `Int` writes it: no two keys of such a dictionary are the same, so its value does not depend on
///   that order (`"7"` and `"007"` are both the `Int` 7, and which of their values is kept would).
///
/// Once it has thrown anything, the decode as a whole throws ``Fallback`` in the end, even if the type's own
/// `init(from:)` caught the error and went on: that code would have seen `JSONDecoder`'s error, or none. A type's
/// `init(from:)` therefore runs twice for bytes that fall back.
enum StoredJSONDecoder {
    /// Thrown for bytes left to `JSONDecoder`. It says nothing about the bytes: `JSONDecoder` says what is wrong, if
    /// anything.
    struct Fallback: Error {}

    /// The value of `type` in `data`, exactly as `JSONDecoder` decodes it; or throws ``Fallback``.
    static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        let bytes = [UInt8](data)
        guard let tokens = StoredJSONScanner.tokens(of: bytes) else { throw Fallback() }
        let document = StoredJSONDocument(bytes: bytes, tokens: tokens)
        let decoder = StoredValueDecoder(document: document, token: 0, path: nil)
        let value: T
        do {
            value = try decoder.value(T.self, at: 0, path: nil)
        } catch {
            throw Fallback()
        }
        guard !document.abandoned else { throw Fallback() }
        return value
    }
}

/// Whether the value a type makes from an object can depend on the order in which `allKeys` gives the keys.
enum StoredJSONKeyOrder {
    /// It can: more than one key through `allKeys` leaves the text to `JSONDecoder`.
    case matters
    /// A `Dictionary` keyed by `String`: every key of the text is a key of its own.
    case stringDictionary
    /// A `Dictionary` keyed by `Int`: every key of the text written as `Int` writes it is a key of its own.
    case intDictionary
}

/// The dictionaries, which say how their keys are read.
protocol StoredJSONDictionary {
    static var storedJSONKeyOrder: StoredJSONKeyOrder { get }
}

extension Dictionary: StoredJSONDictionary {
    static var storedJSONKeyOrder: StoredJSONKeyOrder {
        if Key.self == String.self { return .stringDictionary }
        if Key.self == Int.self { return .intDictionary }
        return .matters
    }
}

/// A place in the value, as the list of keys that lead to it: the `codingPath` of a decoder or container, built
/// only when asked for.
final class StoredCodingPath {
    let parent: StoredCodingPath?
    let key: any CodingKey

    init(_ parent: StoredCodingPath?, _ key: any CodingKey) {
        self.parent = parent
        self.key = key
    }

    static func keys(of path: StoredCodingPath?) -> [any CodingKey] {
        var keys: [any CodingKey] = []
        var node = path
        while let current = node {
            keys.append(current.key)
            node = current.parent
        }
        return keys.reversed()
    }
}

/// The keys a decoder adds to a coding path itself, as `JSONDecoder` names them: an array's element by its index
/// (`Index 3`), and a super decoder's value (`super`).
enum StoredCodingKey: CodingKey {
    case index(Int)
    case `super`

    init?(stringValue: String) { nil }
    init?(intValue: Int) { nil }

    var stringValue: String {
        switch self {
        case .index(let index): "Index \(index)"
        case .super: "super"
        }
    }

    var intValue: Int? {
        switch self {
        case .index(let index): index
        case .super: nil
        }
    }
}

/// The `Decoder`, and the single-value container, of one value of the text. One instance serves a value and the
/// values inside it in turn, as `JSONDecoder`'s does: it points at each while the type of that value decodes.
final class StoredValueDecoder: Decoder, SingleValueDecodingContainer {
    let document: StoredJSONDocument
    private var token: Int
    private var path: StoredCodingPath?
    /// The type decoding the value pointed at; containers it asks for allow `allKeys` in any order only for some
    /// dictionaries (see ``StoredJSONKeyOrder``).
    private var type: Any.Type = Void.self

    init(document: StoredJSONDocument, token: Int, path: StoredCodingPath?) {
        self.document = document
        self.token = token
        self.path = path
    }

    var codingPath: [any CodingKey] { StoredCodingPath.keys(of: path) }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    /// The value of `type` at `token`, whose coding path is `path`. The types `JSONDecoder` decodes its own way are
    /// left to it.
    func value<T: Decodable>(_ type: T.Type, at token: Int, path: StoredCodingPath?) throws -> T {
        if T.self == Date.self || T.self == Data.self || T.self == URL.self || T.self == Decimal.self {
            throw document.fallback()
        }
        let saved = (self.token, self.path, self.type)
        (self.token, self.path, self.type) = (token, path, T.self)
        defer { (self.token, self.path, self.type) = saved }
        return try T(from: self)
    }

    func container<Key: CodingKey>(keyedBy _: Key.Type) throws -> KeyedDecodingContainer<Key> {
        try document.requireKind(.object, at: token)
        return KeyedDecodingContainer(
            StoredKeyedContainer<Key>(decoder: self, object: token, path: path, reader: type))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try document.requireKind(.array, at: token)
        return StoredUnkeyedContainer(decoder: self, array: token, path: path)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    // MARK: Single value

    func decodeNil() -> Bool { document.isNull(at: token) }
    func decode(_: Bool.Type) throws -> Bool { try document.bool(at: token) }
    func decode(_: String.Type) throws -> String { try document.string(at: token) }
    func decode(_: Double.Type) throws -> Double { try document.double(at: token) }
    func decode(_: Float.Type) throws -> Float { try document.float(at: token) }
    func decode(_: Int.Type) throws -> Int { try document.integer(Int.self, at: token) }
    func decode(_: Int8.Type) throws -> Int8 { try document.integer(Int8.self, at: token) }
    func decode(_: Int16.Type) throws -> Int16 { try document.integer(Int16.self, at: token) }
    func decode(_: Int32.Type) throws -> Int32 { try document.integer(Int32.self, at: token) }
    func decode(_: Int64.Type) throws -> Int64 { try document.integer(Int64.self, at: token) }
    func decode(_: Int128.Type) throws -> Int128 { throw document.fallback() }
    func decode(_: UInt.Type) throws -> UInt { try document.integer(UInt.self, at: token) }
    func decode(_: UInt8.Type) throws -> UInt8 { try document.integer(UInt8.self, at: token) }
    func decode(_: UInt16.Type) throws -> UInt16 { try document.integer(UInt16.self, at: token) }
    func decode(_: UInt32.Type) throws -> UInt32 { try document.integer(UInt32.self, at: token) }
    func decode(_: UInt64.Type) throws -> UInt64 { try document.integer(UInt64.self, at: token) }
    func decode(_: UInt128.Type) throws -> UInt128 { throw document.fallback() }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try value(T.self, at: token, path: path) }
}

/// The keyed container of an object of the text.
struct StoredKeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: StoredValueDecoder
    let object: Int
    let path: StoredCodingPath?
    /// The type reading the object, which says whether the value it makes can depend on the order of `allKeys`
    /// (see ``StoredJSONKeyOrder``); `Void` for a nested container, which a type's own decoding asks for.
    let reader: Any.Type

    private var document: StoredJSONDocument { decoder.document }

    var codingPath: [any CodingKey] { StoredCodingPath.keys(of: path) }

    /// The keys in the order of the text. `JSONDecoder` gives them in the order of a `Dictionary` of its own, which
    /// nothing fixes: a type that reads more than one of them is left to it, unless the order cannot matter.
    var allKeys: [Key] {
        var keys: [Key] = []
        for name in document.keys(ofObjectAt: object) {
            if let key = Key(stringValue: name) { keys.append(key) }
        }
        guard keys.count > 1 else { return keys }
        // Looked up here, not with the container: most types never ask for `allKeys`.
        switch (reader as? any StoredJSONDictionary.Type)?.storedJSONKeyOrder ?? .matters {
        case .stringDictionary:
            break
        case .intDictionary:
            // Keys that are the same `Int` written two ways would make the value depend on the order.
            for key in keys where key.intValue.map({ String($0) != key.stringValue }) ?? false {
                _ = document.fallback()
            }
        case .matters:
            _ = document.fallback()
        }
        return keys
    }

    func contains(_ key: Key) -> Bool {
        document.member(key.stringValue, inObjectAt: object) != nil
    }

    /// The token of the value of `key`; throws when there is none.
    private func member(_ key: Key) throws(StoredJSONDecoder.Fallback) -> Int {
        guard let member = document.member(key.stringValue, inObjectAt: object) else { throw document.fallback() }
        return member
    }

    private func path(_ key: Key) -> StoredCodingPath { StoredCodingPath(path, key) }

    func decodeNil(forKey key: Key) throws -> Bool { document.isNull(at: try member(key)) }
    func decode(_: Bool.Type, forKey key: Key) throws -> Bool { try document.bool(at: try member(key)) }
    func decode(_: String.Type, forKey key: Key) throws -> String { try document.string(at: try member(key)) }
    func decode(_: Double.Type, forKey key: Key) throws -> Double { try document.double(at: try member(key)) }
    func decode(_: Float.Type, forKey key: Key) throws -> Float { try document.float(at: try member(key)) }
    func decode(_: Int.Type, forKey key: Key) throws -> Int { try document.integer(Int.self, at: try member(key)) }
    func decode(_: Int8.Type, forKey key: Key) throws -> Int8 { try document.integer(Int8.self, at: try member(key)) }
    func decode(_: Int16.Type, forKey key: Key) throws -> Int16 {
        try document.integer(Int16.self, at: try member(key))
    }
    func decode(_: Int32.Type, forKey key: Key) throws -> Int32 {
        try document.integer(Int32.self, at: try member(key))
    }
    func decode(_: Int64.Type, forKey key: Key) throws -> Int64 {
        try document.integer(Int64.self, at: try member(key))
    }
    func decode(_: Int128.Type, forKey key: Key) throws -> Int128 { throw document.fallback() }
    func decode(_: UInt.Type, forKey key: Key) throws -> UInt { try document.integer(UInt.self, at: try member(key)) }
    func decode(_: UInt8.Type, forKey key: Key) throws -> UInt8 {
        try document.integer(UInt8.self, at: try member(key))
    }
    func decode(_: UInt16.Type, forKey key: Key) throws -> UInt16 {
        try document.integer(UInt16.self, at: try member(key))
    }
    func decode(_: UInt32.Type, forKey key: Key) throws -> UInt32 {
        try document.integer(UInt32.self, at: try member(key))
    }
    func decode(_: UInt64.Type, forKey key: Key) throws -> UInt64 {
        try document.integer(UInt64.self, at: try member(key))
    }
    func decode(_: UInt128.Type, forKey key: Key) throws -> UInt128 { throw document.fallback() }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try decoder.value(T.self, at: try member(key), path: path(key))
    }

    // The common optional fields look their key up once; the others take the protocol's own, which asks
    // `contains`, `decodeNil` and `decode` in turn. Both give `nil` for a key that is missing or `null`, as
    // `JSONDecoder` does.

    /// The token of the value of `key`; `nil` when it is missing or `null`.
    private func presentMember(_ key: Key) -> Int? {
        guard let member = document.member(key.stringValue, inObjectAt: object), !document.isNull(at: member) else {
            return nil
        }
        return member
    }

    func decodeIfPresent(_: Bool.Type, forKey key: Key) throws -> Bool? {
        guard let member = presentMember(key) else { return nil }
        return try document.bool(at: member)
    }

    func decodeIfPresent(_: String.Type, forKey key: Key) throws -> String? {
        guard let member = presentMember(key) else { return nil }
        return try document.string(at: member)
    }

    func decodeIfPresent(_: Double.Type, forKey key: Key) throws -> Double? {
        guard let member = presentMember(key) else { return nil }
        return try document.double(at: member)
    }

    func decodeIfPresent(_: Int.Type, forKey key: Key) throws -> Int? {
        guard let member = presentMember(key) else { return nil }
        return try document.integer(Int.self, at: member)
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let member = presentMember(key) else { return nil }
        return try decoder.value(T.self, at: member, path: path(key))
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy _: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        let member = try member(key)
        try document.requireKind(.object, at: member)
        return KeyedDecodingContainer(
            StoredKeyedContainer<NestedKey>(decoder: decoder, object: member, path: path(key), reader: Void.self))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        let member = try member(key)
        try document.requireKind(.array, at: member)
        return StoredUnkeyedContainer(decoder: decoder, array: member, path: path(key))
    }

    /// The decoder of the value of `super`. `JSONDecoder` gives a decoder of `null` when there is none: left to it.
    func superDecoder() throws -> any Decoder {
        guard let member = document.member("super", inObjectAt: object) else { throw document.fallback() }
        return StoredValueDecoder(
            document: document, token: member, path: StoredCodingPath(path, StoredCodingKey.super))
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        StoredValueDecoder(document: document, token: try member(key), path: path(key))
    }
}

/// The unkeyed container of an array of the text.
struct StoredUnkeyedContainer: UnkeyedDecodingContainer {
    let decoder: StoredValueDecoder
    let path: StoredCodingPath?
    let count: Int?
    private(set) var currentIndex = 0
    /// The token of the element at `currentIndex`.
    private var next: Int

    private var document: StoredJSONDocument { decoder.document }

    init(decoder: StoredValueDecoder, array: Int, path: StoredCodingPath?) {
        self.decoder = decoder
        self.path = path
        self.count = Int(decoder.document.tokens[array].count)
        self.next = array + 1
    }

    var codingPath: [any CodingKey] { StoredCodingPath.keys(of: path) }
    var isAtEnd: Bool { currentIndex >= count! }

    /// The token of the element at `currentIndex`; throws at the end.
    private func element() throws(StoredJSONDecoder.Fallback) -> Int {
        guard !isAtEnd else { throw document.fallback() }
        return next
    }

    private mutating func advance() {
        next = StoredJSONScanner.next(after: next, in: document.tokens)
        currentIndex += 1
    }

    /// Decodes the element at `currentIndex` with `read`, then moves past it.
    private mutating func take<T>(_ read: (StoredJSONDocument, Int) throws -> T) throws -> T {
        let value = try read(document, try element())
        advance()
        return value
    }

    private var elementPath: StoredCodingPath { StoredCodingPath(path, StoredCodingKey.index(currentIndex)) }

    mutating func decodeNil() throws -> Bool {
        guard document.isNull(at: try element()) else { return false }
        advance()
        return true
    }

    mutating func decode(_: Bool.Type) throws -> Bool { try take { try $0.bool(at: $1) } }
    mutating func decode(_: String.Type) throws -> String { try take { try $0.string(at: $1) } }
    mutating func decode(_: Double.Type) throws -> Double { try take { try $0.double(at: $1) } }
    mutating func decode(_: Float.Type) throws -> Float { try take { try $0.float(at: $1) } }
    mutating func decode(_: Int.Type) throws -> Int { try take { try $0.integer(Int.self, at: $1) } }
    mutating func decode(_: Int8.Type) throws -> Int8 { try take { try $0.integer(Int8.self, at: $1) } }
    mutating func decode(_: Int16.Type) throws -> Int16 { try take { try $0.integer(Int16.self, at: $1) } }
    mutating func decode(_: Int32.Type) throws -> Int32 { try take { try $0.integer(Int32.self, at: $1) } }
    mutating func decode(_: Int64.Type) throws -> Int64 { try take { try $0.integer(Int64.self, at: $1) } }
    mutating func decode(_: Int128.Type) throws -> Int128 { throw document.fallback() }
    mutating func decode(_: UInt.Type) throws -> UInt { try take { try $0.integer(UInt.self, at: $1) } }
    mutating func decode(_: UInt8.Type) throws -> UInt8 { try take { try $0.integer(UInt8.self, at: $1) } }
    mutating func decode(_: UInt16.Type) throws -> UInt16 { try take { try $0.integer(UInt16.self, at: $1) } }
    mutating func decode(_: UInt32.Type) throws -> UInt32 { try take { try $0.integer(UInt32.self, at: $1) } }
    mutating func decode(_: UInt64.Type) throws -> UInt64 { try take { try $0.integer(UInt64.self, at: $1) } }
    mutating func decode(_: UInt128.Type) throws -> UInt128 { throw document.fallback() }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let (decoder, path) = (decoder, elementPath)
        return try take { try decoder.value(T.self, at: $1, path: path) }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy _: NestedKey.Type
    ) throws -> KeyedDecodingContainer<NestedKey> {
        let (decoder, path) = (decoder, elementPath)
        return try take { document, member in
            try document.requireKind(.object, at: member)
            return KeyedDecodingContainer(
                StoredKeyedContainer<NestedKey>(decoder: decoder, object: member, path: path, reader: Void.self))
        }
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let (decoder, path) = (decoder, elementPath)
        return try take { document, member in
            try document.requireKind(.array, at: member)
            return StoredUnkeyedContainer(decoder: decoder, array: member, path: path)
        }
    }

    mutating func superDecoder() throws -> any Decoder {
        let path = elementPath
        return try take { StoredValueDecoder(document: $0, token: $1, path: path) }
    }
}
