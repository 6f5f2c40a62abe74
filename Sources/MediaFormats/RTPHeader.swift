/// The fixed part of an RTP header (RFC 3550, section 5.1) as this engine sends it:
/// version 2, no padding, no header extension, no CSRC list.
///
/// `parse` accepts everything a conforming sender may put on the wire (CSRCs,
/// a header extension, padding) and reports where the payload lies.
public struct RTPHeader: Sendable, Equatable {
    /// The marker bit; for HEVC (RFC 7798) it is set on the last packet of an access unit.
    public var marker: Bool
    /// The 7-bit payload type (0...127).
    public var payloadType: UInt8
    /// The 16-bit sequence number; it wraps from 65535 to 0.
    public var sequenceNumber: UInt16
    /// The media timestamp (90 kHz for video).
    public var timestamp: UInt32
    /// The synchronization source identifier.
    public var ssrc: UInt32

    /// Size in bytes of the fixed header written by `write(to:)`.
    public static let fixedSize = 12

    /// The dynamic payload type (RFC 3551: 96...127) H.265 goes on unless told otherwise:
    /// what the sender puts in its packets and the SDP announces.
    public static let defaultHEVCPayloadType: UInt8 = 96

    /// Makes a header from its fields.
    /// - Precondition: `payloadType` < 128.
    public init(marker: Bool, payloadType: UInt8, sequenceNumber: UInt16, timestamp: UInt32, ssrc: UInt32) {
        precondition(payloadType < 128, "RTP payload type \(payloadType) does not fit in 7 bits (use 0...127)")
        self.marker = marker
        self.payloadType = payloadType
        self.sequenceNumber = sequenceNumber
        self.timestamp = timestamp
        self.ssrc = ssrc
    }

    /// Reads the fields of the 12-byte fixed header at `bytes` (marker, payload type, sequence
    /// number, timestamp, SSRC), whatever its first byte says: the caller has checked the version,
    /// padding, extension and CSRC count it needs (`parse` checks them all).
    /// - Precondition: 12 readable bytes at `bytes` (not checked).
    @inlinable
    public init(fixedHeaderAt bytes: UnsafeRawPointer) {
        let second = bytes.load(fromByteOffset: 1, as: UInt8.self)
        marker = second & 0x80 != 0
        payloadType = second & 0x7f
        sequenceNumber = UInt16(bigEndian: bytes.loadUnaligned(fromByteOffset: 2, as: UInt16.self))
        timestamp = UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
        ssrc = UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: 8, as: UInt32.self))
    }

    /// Writes the 12-byte fixed header (V=2, P=0, X=0, CC=0) at the start of `buffer`.
    /// - Precondition: `buffer.count >= RTPHeader.fixedSize`.
    public func write(to buffer: UnsafeMutableRawBufferPointer) {
        precondition(buffer.count >= Self.fixedSize, "RTP header needs \(Self.fixedSize) bytes, buffer has \(buffer.count)")
        buffer[0] = 0x80
        buffer[1] = (marker ? 0x80 : 0) | (payloadType & 0x7f)
        buffer[2] = UInt8(truncatingIfNeeded: sequenceNumber >> 8)
        buffer[3] = UInt8(truncatingIfNeeded: sequenceNumber)
        Self.storeBigEndian(timestamp, into: buffer, at: 4)
        Self.storeBigEndian(ssrc, into: buffer, at: 8)
    }

    /// The 12-byte fixed header as an array (for tests and slow paths).
    public var bytes: [UInt8] {
        [UInt8](unsafeUninitializedCapacity: Self.fixedSize) { storage, initialized in
            write(to: UnsafeMutableRawBufferPointer(storage))
            initialized = Self.fixedSize
        }
    }

    /// Parses and validates an RTP packet: version 2, CSRC list, header extension and padding.
    /// - Returns: the header and the byte range of the payload within `packet`
    ///   (after CSRCs and extension, before padding).
    /// - Throws: `RTPPacketError` saying what is malformed.
    public static func parse(_ packet: UnsafeRawBufferPointer) throws(RTPPacketError) -> RTPParsedPacket {
        guard packet.count >= fixedSize else { throw .tooShort }
        let first = packet[0]
        guard first >> 6 == 2 else { throw .badVersion }
        let hasPadding = first & 0x20 != 0
        let hasExtension = first & 0x10 != 0
        let csrcCount = Int(first & 0x0f)
        var offset = fixedSize + 4 * csrcCount
        guard offset <= packet.count else { throw .badCSRCLength }
        if hasExtension {
            guard offset + 4 <= packet.count else { throw .badExtension }
            let words = Int(packet[offset + 2]) << 8 | Int(packet[offset + 3])
            offset += 4 + 4 * words
            guard offset <= packet.count else { throw .badExtension }
        }
        var end = packet.count
        if hasPadding {
            // The last byte counts the padding bytes, itself included.
            let paddingCount = Int(packet[packet.count - 1])
            guard paddingCount >= 1, paddingCount <= packet.count - offset else { throw .badPadding }
            end -= paddingCount
        }
        let header = RTPHeader(fixedHeaderAt: packet.baseAddress!)
        return RTPParsedPacket(header: header, payloadRange: offset..<end, csrcCount: csrcCount, hasExtension: hasExtension)
    }

    /// Parses and validates an RTP packet held in an array; see `parse(_:)` for an `UnsafeRawBufferPointer`.
    public static func parse(_ packet: [UInt8]) throws(RTPPacketError) -> RTPParsedPacket {
        let result = packet.withUnsafeBytes { bytes in
            Result { () throws(RTPPacketError) -> RTPParsedPacket in try parse(bytes) }
        }
        return try result.get()
    }

    private static func storeBigEndian(_ value: UInt32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) {
        buffer[offset] = UInt8(truncatingIfNeeded: value >> 24)
        buffer[offset + 1] = UInt8(truncatingIfNeeded: value >> 16)
        buffer[offset + 2] = UInt8(truncatingIfNeeded: value >> 8)
        buffer[offset + 3] = UInt8(truncatingIfNeeded: value)
    }
}

/// A validated RTP packet: its header and where its payload lies.
public struct RTPParsedPacket: Sendable, Equatable {
    /// The fixed header fields.
    public var header: RTPHeader
    /// Byte range of the payload within the parsed packet (CSRCs, extension and padding excluded).
    public var payloadRange: Range<Int>
    /// Number of CSRC identifiers that preceded the payload.
    public var csrcCount: Int
    /// True when the packet carried a header extension (skipped, not interpreted).
    public var hasExtension: Bool

    /// Makes a parsed packet description.
    public init(header: RTPHeader, payloadRange: Range<Int>, csrcCount: Int, hasExtension: Bool) {
        self.header = header
        self.payloadRange = payloadRange
        self.csrcCount = csrcCount
        self.hasExtension = hasExtension
    }
}

/// Why an RTP packet was rejected by `RTPHeader.parse`.
public enum RTPPacketError: Error, Sendable, Equatable, CaseIterable {
    /// Fewer than 12 bytes.
    case tooShort
    /// The version field is not 2.
    case badVersion
    /// The CSRC count says more identifiers than the packet holds.
    case badCSRCLength
    /// The header extension's header or its declared length runs past the end of the packet.
    case badExtension
    /// The padding count is zero or larger than what follows the header.
    case badPadding

    /// A stable camelCase name for statistics keys, e.g. `"badPadding"`.
    public var reason: String {
        switch self {
        case .tooShort: "tooShort"
        case .badVersion: "badVersion"
        case .badCSRCLength: "badCSRCLength"
        case .badExtension: "badExtension"
        case .badPadding: "badPadding"
        }
    }
}
