// Shared by every fuzz oracle (Fuzz/Oracles). tools/fuzz compiles it into each target
// together with Sources/MediaFormats (one module), so it sees MediaFormats' internals
// without an import; the FuzzCorpusTests target (Package.swift) compiles it too.

/// Reads structured values from the fuzzer's bytes; past the end every read is 0 / empty.
struct FuzzInput {
    let bytes: UnsafeRawBufferPointer
    var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    var remaining: Int { bytes.count - offset }
    var isEmpty: Bool { remaining <= 0 }

    mutating func byte() -> UInt8 {
        guard offset < bytes.count else { return 0 }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func uint16() -> UInt16 { UInt16(byte()) << 8 | UInt16(byte()) }

    mutating func uint32() -> UInt32 { UInt32(uint16()) << 16 | UInt32(uint16()) }

    /// Up to `count` bytes (fewer at the end), as a view into the input.
    mutating func take(_ count: Int) -> UnsafeRawBufferPointer {
        let n = max(0, min(count, remaining))
        defer { offset += n }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + n)])
    }

    /// The rest of the input.
    mutating func rest() -> UnsafeRawBufferPointer { take(remaining) }
}
