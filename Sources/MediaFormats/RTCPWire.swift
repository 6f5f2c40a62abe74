// Byte-level helpers shared by the RTCP parsers and serializers. Internal, and
// prefixed so they cannot collide with helpers elsewhere in the module.

/// A bounds-checked big-endian reader over a borrowed buffer. Every read
/// returns nil instead of reading past the end.
struct RTCPByteReader {
    let buffer: UnsafeRawBufferPointer
    private(set) var offset: Int

    init(_ buffer: UnsafeRawBufferPointer, offset: Int = 0) {
        self.buffer = buffer
        self.offset = offset
    }

    var remaining: Int { buffer.count - offset }

    mutating func readUInt8() -> UInt8? {
        guard remaining >= 1 else { return nil }
        defer { offset += 1 }
        return buffer[offset]
    }

    mutating func readUInt16() -> UInt16? {
        guard remaining >= 2 else { return nil }
        defer { offset += 2 }
        return UInt16(buffer[offset]) << 8 | UInt16(buffer[offset + 1])
    }

    mutating func readUInt32() -> UInt32? {
        guard remaining >= 4 else { return nil }
        defer { offset += 4 }
        return UInt32(buffer[offset]) << 24 | UInt32(buffer[offset + 1]) << 16
            | UInt32(buffer[offset + 2]) << 8 | UInt32(buffer[offset + 3])
    }

    mutating func readBytes(_ count: Int) -> [UInt8]? {
        guard count >= 0, remaining >= count else { return nil }
        defer { offset += count }
        return Array(UnsafeRawBufferPointer(rebasing: buffer[offset..<(offset + count)]))
    }

    mutating func skip(_ count: Int) -> Bool {
        guard count >= 0, remaining >= count else { return false }
        offset += count
        return true
    }
}

/// Writers for the RTCP common header and big-endian fields.
enum RTCPWire {
    /// Largest RTCP packet the 16-bit length field can describe: (65535 + 1) words.
    static let maxPacketBytes = 65_536 * 4

    static func appendUInt16(_ value: UInt16, to bytes: inout [UInt8]) {
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
        bytes.append(UInt8(truncatingIfNeeded: value))
    }

    static func appendUInt32(_ value: UInt32, to bytes: inout [UInt8]) {
        bytes.append(UInt8(truncatingIfNeeded: value >> 24))
        bytes.append(UInt8(truncatingIfNeeded: value >> 16))
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
        bytes.append(UInt8(truncatingIfNeeded: value))
    }

    /// Appends a header with a zero length field; returns where the packet starts.
    static func beginPacket(countOrFormat: UInt8, packetType: UInt8, into bytes: inout [UInt8]) -> Int {
        let start = bytes.count
        bytes.append(0x80 | (countOrFormat & 0x1F))
        bytes.append(packetType)
        bytes.append(0)
        bytes.append(0)
        return start
    }

    /// Zero-pads the packet to a 32-bit boundary and fills in its length field.
    /// A packet too large for the length field is removed rather than written
    /// with a wrong length.
    static func endPacket(startingAt start: Int, in bytes: inout [UInt8]) {
        while (bytes.count - start) % 4 != 0 { bytes.append(0) }
        let packetBytes = bytes.count - start
        guard packetBytes <= maxPacketBytes else {
            bytes.removeSubrange(start...)
            return
        }
        let words = UInt16(packetBytes / 4 - 1)
        bytes[start + 2] = UInt8(truncatingIfNeeded: words >> 8)
        bytes[start + 3] = UInt8(truncatingIfNeeded: words)
    }

    /// UTF-8 bytes of `text`, cut to at most `limit` bytes without splitting a character.
    static func utf8Prefix(_ text: String, limit: Int) -> [UInt8] {
        var out = [UInt8]()
        for scalar in text.unicodeScalars {
            let encoded = Array(String(scalar).utf8)
            if out.count + encoded.count > limit { break }
            out.append(contentsOf: encoded)
        }
        return out
    }
}

/// Why a packet body was rejected; becomes an `RTCPParseError` with the packet's offset.
struct RTCPBodyError: Error {
    var kind: RTCPParseError.Kind
    var detail: String
}
