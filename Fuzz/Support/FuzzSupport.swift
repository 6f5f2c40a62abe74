// Shared by every fuzz target. Compiled into each target together with
// Sources/MediaFormats (one module), so it sees MediaFormats' internals without an import.

/// Reads structured values from the fuzzer's bytes; past the end every read is 0 / empty.
struct FuzzInput {
    let bytes: UnsafeRawBufferPointer
    var offset = 0

    init(_ data: UnsafePointer<UInt8>, _ size: Int) {
        bytes = UnsafeRawBufferPointer(start: size == 0 ? nil : data, count: size)
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

/// Fails the run with a message libFuzzer reports as a crash (the input is saved).
func fuzzCheck(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
               file: StaticString = #file, line: UInt = #line) {
    if !condition() {
        fatalError("fuzz invariant violated: \(message())", file: file, line: line)
    }
}
