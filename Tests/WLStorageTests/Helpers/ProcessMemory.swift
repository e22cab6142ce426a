import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Facts about this process's memory.
enum ProcessMemory {
    /// The text of `/proc/self/maps`, read to its end: one line per region of the process's memory, by address.
    ///
    /// Read with `read` until it returns 0: Foundation's `String(contentsOfFile:)` stops after its first read, which
    /// the kernel fills with the whole lines that fit in a page, so it returns only the first forty regions or so. A
    /// region that exists from the start of the read to its end is listed, whatever other threads map and unmap.
    static func regionList() throws -> String {
        let descriptor = open("/proc/self/maps", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            if count == 0 { return String(decoding: bytes, as: UTF8.self) }
            bytes += chunk[..<count]
        }
    }

    /// Maps a page of private anonymous memory above every region but the main thread's stack and those above it, so
    /// that it comes last but for those in ``regionList()``; `nil` when the list has no `[stack]` or the page cannot
    /// be mapped there. Unmap it with `munmap`.
    static func mapPageAtTheEndOfTheRegionList() throws -> UnsafeMutableRawBufferPointer? {
        let regions = try regionList().split(separator: "\n").compactMap {
            line -> (start: UInt, end: UInt, name: Substring)? in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            let bounds = fields.first?.split(separator: "-").compactMap { UInt(String($0), radix: 16) } ?? []
            guard bounds.count == 2 else { return nil }
            return (bounds[0], bounds[1], fields.count >= 6 ? fields[5] : "")
        }
        guard let stack = regions.first(where: { $0.name == "[stack]" }),
            let below = regions.filter({ $0.end <= stack.start }).map(\.end).max()
        else { return nil }
        // A megabyte clear of the region below and of the stack's guard gap (the kernel leaves at least 128 MB there).
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let hint = below + (1 << 20)
        guard hint + UInt(page) + (1 << 20) <= stack.start else { return nil }
        let mapped = mmap(
            UnsafeMutableRawPointer(bitPattern: hint), page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let mapped, mapped != MAP_FAILED else { return nil }
        guard UInt(bitPattern: mapped) == hint else {
            munmap(mapped, page)
            return nil
        }
        return UnsafeMutableRawBufferPointer(start: mapped, count: page)
    }
}

/// A secret searched for in this process's memory, held only masked: the bytes kept are the secret's XORed with a
/// random mask, so the search itself never puts a copy of the secret in memory.
final class MaskedSecret {
    private let masked: UnsafeMutableRawBufferPointer
    private let mask: UnsafeMutableRawBufferPointer
    /// The first byte of the secret, unmasked: one byte tells nothing, and lets `memchr` find the candidates.
    private let first: UInt8

    /// Masks `secret` in place: once this returns, `secret` holds no byte of the secret.
    init(maskingInPlace secret: UnsafeMutableRawBufferPointer) {
        precondition(secret.count > 1)
        masked = .allocate(byteCount: secret.count, alignment: 1)
        mask = .allocate(byteCount: secret.count, alignment: 1)
        first = secret[0]
        var random = SystemRandomNumberGenerator()
        for index in 0..<secret.count {
            mask[index] = UInt8.random(in: 1...255, using: &random)
            masked[index] = secret[index] ^ mask[index]
            secret[index] = 0
        }
    }

    deinit {
        masked.deallocate()
        mask.deallocate()
    }

    /// Whether the secret is in `bytes`, starting at `offset`.
    private func matches(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> Bool {
        guard offset + masked.count <= bytes.count else { return false }
        for index in 0..<masked.count where bytes[offset + index] ^ mask[index] != masked[index] { return false }
        return true
    }

    /// The number of copies of the secret in this process's writable memory that is not mapped from a file: the
    /// heap, anonymous mappings (malloc's arenas and large blocks) and the stacks. Read through `/proc/self/mem`, region
    /// by region as ``ProcessMemory/regionList()`` lists them.
    func copiesInProcessMemory() throws -> Int {
        let maps = try ProcessMemory.regionList()
        let memory = open("/proc/self/mem", O_RDONLY | O_CLOEXEC)
        guard memory >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(memory) }
        let chunk = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk + masked.count, alignment: 16)
        defer {
            // A copy found was read into the buffer: it is cleared so as not to count it twice, nor leave it.
            memset(buffer.baseAddress!, 0, buffer.count)
            buffer.deallocate()
        }
        var found = 0
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 5, fields[1].hasPrefix("rw") else { continue }
            if fields.count >= 6, !["[heap]", "[stack]"].contains(fields[5]), !fields[5].hasPrefix("[anon") {
                continue
            }
            let bounds = fields[0].split(separator: "-").compactMap { UInt(String($0), radix: 16) }
            guard bounds.count == 2 else { continue }
            var address = bounds[0]
            while address < bounds[1] {
                let length = Int(min(UInt(chunk + masked.count - 1), bounds[1] - address))
                let count = pread(memory, buffer.baseAddress!, length, off_t(Int64(bitPattern: UInt64(address))))
                guard count > 0 else {
                    // A page that cannot be read (a guard page inside the region, a page unmapped meanwhile): the
                    // search goes on at the next page rather than leave the rest of the region unread.
                    address = (address | 4095) + 1
                    continue
                }
                let read = UnsafeRawBufferPointer(rebasing: buffer[..<count])
                var offset = 0
                // Only starts within the chunk count: the overlap is searched again with the next chunk.
                let starts = min(count, chunk)
                while offset < starts {
                    guard let hit = memchr(read.baseAddress! + offset, Int32(first), starts - offset) else { break }
                    let position = read.baseAddress!.distance(to: UnsafeRawPointer(hit))
                    if matches(read, at: position) {
                        found += 1
                        memset(buffer.baseAddress! + position, 0, masked.count)
                    }
                    offset = position + 1
                }
                // A read cut short at a page that cannot be read goes on from where it stopped.
                address += UInt(starts)
            }
        }
        return found
    }
}
