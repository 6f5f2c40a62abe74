/// A path-MTU probe (RFC 8899 packetization-layer probing) as an RTP packet: the stream's
/// SSRC, payload type 127, the probe id's low 16 bits as the sequence number, then a
/// 12-byte body ("PMTU", the 32-bit probe id, the probe's UDP payload size) and zero
/// padding up to that size. Receivers that do not know it drop it as an unknown payload
/// type; this engine's receiver keeps it away from media accounting and confirms it in an
/// RTCP APP "PMTU" packet.
public struct PathMTUProbe: Sendable, Hashable {
    /// The payload type of probes (dynamic range, never negotiated for media here).
    public static let payloadType: UInt8 = 127
    /// The magic word at the start of the body: "PMTU".
    public static let magic: UInt32 = 0x504D_5455
    /// The smallest probe: RTP header and body.
    public static let minimumSize = RTPHeader.fixedSize + 12

    /// The probe's id.
    public var probeID: UInt32
    /// Its UDP payload size (RTP header included).
    public var size: Int
    /// The SSRC of the stream it probes for.
    public var ssrc: UInt32

    /// Makes a probe description.
    public init(probeID: UInt32, size: Int, ssrc: UInt32) {
        self.probeID = probeID
        self.size = size
        self.ssrc = ssrc
    }

    /// Writes the whole probe (header, body, zero padding) into the first `size` bytes of `buffer`.
    /// - Precondition: `size >= minimumSize` and `buffer.count >= size`.
    public func write(into buffer: UnsafeMutableRawBufferPointer, timestamp: UInt32) {
        precondition(size >= Self.minimumSize && buffer.count >= size, "probe of \(size) bytes into \(buffer.count)")
        RTPHeader(marker: false, payloadType: Self.payloadType, sequenceNumber: UInt16(truncatingIfNeeded: probeID),
                  timestamp: timestamp, ssrc: ssrc)
            .write(to: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<RTPHeader.fixedSize]))
        var offset = RTPHeader.fixedSize
        for word in [Self.magic, probeID, UInt32(size)] {
            for shift in stride(from: 24, through: 0, by: -8) {
                buffer[offset] = UInt8(truncatingIfNeeded: word >> UInt32(shift))
                offset += 1
            }
        }
        UnsafeMutableRawBufferPointer(rebasing: buffer[offset..<size]).initializeMemory(as: UInt8.self, repeating: 0)
    }

    /// The probe as bytes.
    public var bytes: [UInt8] {
        [UInt8](unsafeUninitializedCapacity: size) { storage, initialized in
            write(into: UnsafeMutableRawBufferPointer(storage), timestamp: 0)
            initialized = size
        }
    }

    /// Reads a probe from an RTP payload (what follows the header of a PT 127 packet) that
    /// arrived as a datagram of `datagramSize` bytes. Nil when the body is not a probe's, or
    /// when the size it claims is not the size that arrived (a truncated or padded copy).
    public init?(header: RTPHeader, payload: UnsafeRawBufferPointer, datagramSize: Int) {
        guard header.payloadType == Self.payloadType, payload.count >= 12 else { return nil }
        func word(_ at: Int) -> UInt32 {
            UInt32(payload[at]) << 24 | UInt32(payload[at + 1]) << 16 | UInt32(payload[at + 2]) << 8 | UInt32(payload[at + 3])
        }
        guard word(0) == Self.magic, Int(word(8)) == datagramSize else { return nil }
        self.init(probeID: word(4), size: datagramSize, ssrc: header.ssrc)
    }
}
