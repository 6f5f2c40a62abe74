/// RTCP packet type numbers (RFC 3550 section 12.1, RFC 4585 section 6.1).
public enum RTCPPacketType {
    /// Sender report, SR.
    public static let senderReport: UInt8 = 200
    /// Receiver report, RR.
    public static let receiverReport: UInt8 = 201
    /// Source description, SDES.
    public static let sourceDescription: UInt8 = 202
    /// Goodbye, BYE.
    public static let goodbye: UInt8 = 203
    /// Application-defined, APP.
    public static let application: UInt8 = 204
    /// Transport-layer feedback, RTPFB (generic NACK, RFC 8888 feedback).
    public static let transportFeedback: UInt8 = 205
    /// Payload-specific feedback, PSFB (PLI).
    public static let payloadFeedback: UInt8 = 206
}

/// One reception report block of an SR or RR (RFC 3550 section 6.4.1): what a
/// receiver saw of one source.
public struct RTCPReportBlock: Sendable, Hashable {
    /// Wire size of a report block.
    public static let byteCount = 24
    /// Largest cumulative loss the signed 24-bit field holds.
    public static let maxCumulativeLost: Int32 = 0x7F_FFFF
    /// Smallest cumulative loss the signed 24-bit field holds (negative after duplicates).
    public static let minCumulativeLost: Int32 = -0x80_0000

    /// The source this block reports on.
    public var ssrc: UInt32
    /// Fraction of packets lost since the previous report, as a fixed-point number with
    /// the binary point at the left edge (lost * 256 / expected).
    public var fractionLost: UInt8
    /// Packets lost since reception began (expected - received); 24-bit signed on the
    /// wire, clamped to `minCumulativeLost...maxCumulativeLost` when written.
    public var cumulativeLost: Int32
    /// Highest sequence number received, with the count of wraps in the upper 16 bits.
    public var extendedHighestSequence: UInt32
    /// Interarrival jitter in RTP timestamp units.
    public var jitter: UInt32
    /// The middle 32 bits of the NTP timestamp of the last SR received from the source (0 if none).
    public var lastSR: UInt32
    /// Time between receiving that SR and sending this block, in units of 1/65536 s (0 if no SR).
    public var delaySinceLastSR: UInt32

    /// Makes a report block from its fields.
    public init(
        ssrc: UInt32, fractionLost: UInt8, cumulativeLost: Int32, extendedHighestSequence: UInt32,
        jitter: UInt32, lastSR: UInt32, delaySinceLastSR: UInt32
    ) {
        self.ssrc = ssrc
        self.fractionLost = fractionLost
        self.cumulativeLost = cumulativeLost
        self.extendedHighestSequence = extendedHighestSequence
        self.jitter = jitter
        self.lastSR = lastSR
        self.delaySinceLastSR = delaySinceLastSR
    }

    /// Appends the 24-byte block.
    public func serialize(into bytes: inout [UInt8]) {
        RTCPWire.appendUInt32(ssrc, to: &bytes)
        let clamped = min(max(cumulativeLost, Self.minCumulativeLost), Self.maxCumulativeLost)
        let lost24 = UInt32(bitPattern: clamped) & 0xFF_FFFF
        RTCPWire.appendUInt32(UInt32(fractionLost) << 24 | lost24, to: &bytes)
        RTCPWire.appendUInt32(extendedHighestSequence, to: &bytes)
        RTCPWire.appendUInt32(jitter, to: &bytes)
        RTCPWire.appendUInt32(lastSR, to: &bytes)
        RTCPWire.appendUInt32(delaySinceLastSR, to: &bytes)
    }

    /// Reads a block; nil when fewer than 24 bytes remain.
    static func read(from reader: inout RTCPByteReader) -> RTCPReportBlock? {
        guard reader.remaining >= byteCount,
            let ssrc = reader.readUInt32(), let lossWord = reader.readUInt32(),
            let highest = reader.readUInt32(), let jitter = reader.readUInt32(),
            let lastSR = reader.readUInt32(), let delay = reader.readUInt32()
        else { return nil }
        let raw = lossWord & 0xFF_FFFF
        let cumulative = raw & 0x80_0000 != 0 ? Int32(raw) - 0x100_0000 : Int32(raw)
        return RTCPReportBlock(
            ssrc: ssrc, fractionLost: UInt8(truncatingIfNeeded: lossWord >> 24), cumulativeLost: cumulative,
            extendedHighestSequence: highest, jitter: jitter, lastSR: lastSR, delaySinceLastSR: delay)
    }

    /// Reads `count` blocks, or fails with `badReportCount` when they do not fit.
    static func readBlocks(count: Int, from reader: inout RTCPByteReader) throws(RTCPBodyError) -> [RTCPReportBlock] {
        guard count * byteCount <= reader.remaining else {
            throw RTCPBodyError(
                kind: .badReportCount,
                detail: "\(count) report blocks need \(count * byteCount) bytes, \(reader.remaining) left")
        }
        var blocks = [RTCPReportBlock]()
        blocks.reserveCapacity(count)
        for _ in 0..<count {
            guard let block = read(from: &reader) else {
                throw RTCPBodyError(kind: .badReportCount, detail: "report block truncated")
            }
            blocks.append(block)
        }
        return blocks
    }
}

/// Sender report, SR (RFC 3550 section 6.4.1): PT=200.
public struct RTCPSenderReport: Sendable, Hashable {
    /// At most this many report blocks fit the 5-bit count; `serialize` writes only the first 31.
    public static let maxReportBlocks = 31

    /// SSRC of the sender.
    public var ssrc: UInt32
    /// Wallclock time of the report as a 64-bit NTP timestamp (see `NTPTime`).
    public var ntpTimestamp: UInt64
    /// The same instant on the RTP media clock.
    public var rtpTimestamp: UInt32
    /// RTP data packets sent since the start of transmission.
    public var packetCount: UInt32
    /// RTP payload octets sent since the start of transmission.
    public var octetCount: UInt32
    /// Reception reports for sources this sender hears (at most 31 are written).
    public var reportBlocks: [RTCPReportBlock]

    /// Makes a sender report from its fields.
    public init(
        ssrc: UInt32, ntpTimestamp: UInt64, rtpTimestamp: UInt32, packetCount: UInt32, octetCount: UInt32,
        reportBlocks: [RTCPReportBlock] = []
    ) {
        self.ssrc = ssrc
        self.ntpTimestamp = ntpTimestamp
        self.rtpTimestamp = rtpTimestamp
        self.packetCount = packetCount
        self.octetCount = octetCount
        self.reportBlocks = reportBlocks
    }

    /// Appends the packet (header included). Only the first 31 report blocks are written.
    public func serialize(into bytes: inout [UInt8]) {
        let blocks = reportBlocks.prefix(Self.maxReportBlocks)
        let start = RTCPWire.beginPacket(
            countOrFormat: UInt8(blocks.count), packetType: RTCPPacketType.senderReport, into: &bytes)
        RTCPWire.appendUInt32(ssrc, to: &bytes)
        RTCPWire.appendUInt32(UInt32(truncatingIfNeeded: ntpTimestamp >> 32), to: &bytes)
        RTCPWire.appendUInt32(UInt32(truncatingIfNeeded: ntpTimestamp), to: &bytes)
        RTCPWire.appendUInt32(rtpTimestamp, to: &bytes)
        RTCPWire.appendUInt32(packetCount, to: &bytes)
        RTCPWire.appendUInt32(octetCount, to: &bytes)
        for block in blocks { block.serialize(into: &bytes) }
        RTCPWire.endPacket(startingAt: start, in: &bytes)
    }

    /// Parses the body after the common header (padding removed). Profile-specific
    /// extensions after the report blocks are ignored.
    static func parse(body: UnsafeRawBufferPointer, count: Int) throws(RTCPBodyError) -> RTCPSenderReport {
        var reader = RTCPByteReader(body)
        guard body.count >= 24, let ssrc = reader.readUInt32(), let ntpHigh = reader.readUInt32(),
            let ntpLow = reader.readUInt32(), let rtp = reader.readUInt32(),
            let packets = reader.readUInt32(), let octets = reader.readUInt32()
        else {
            throw RTCPBodyError(kind: .tooShort, detail: "sender info needs 24 bytes, body has \(body.count)")
        }
        let blocks = try RTCPReportBlock.readBlocks(count: count, from: &reader)
        return RTCPSenderReport(
            ssrc: ssrc, ntpTimestamp: UInt64(ntpHigh) << 32 | UInt64(ntpLow), rtpTimestamp: rtp,
            packetCount: packets, octetCount: octets, reportBlocks: blocks)
    }
}

/// Receiver report, RR (RFC 3550 section 6.4.2): PT=201.
public struct RTCPReceiverReport: Sendable, Hashable {
    /// At most this many report blocks fit the 5-bit count; `serialize` writes only the first 31.
    public static let maxReportBlocks = 31

    /// SSRC of the packet's sender (the receiver making the report).
    public var ssrc: UInt32
    /// Reception reports, one per source heard (at most 31 are written).
    public var reportBlocks: [RTCPReportBlock]

    /// Makes a receiver report from its fields.
    public init(ssrc: UInt32, reportBlocks: [RTCPReportBlock] = []) {
        self.ssrc = ssrc
        self.reportBlocks = reportBlocks
    }

    /// Appends the packet (header included). Only the first 31 report blocks are written.
    public func serialize(into bytes: inout [UInt8]) {
        let blocks = reportBlocks.prefix(Self.maxReportBlocks)
        let start = RTCPWire.beginPacket(
            countOrFormat: UInt8(blocks.count), packetType: RTCPPacketType.receiverReport, into: &bytes)
        RTCPWire.appendUInt32(ssrc, to: &bytes)
        for block in blocks { block.serialize(into: &bytes) }
        RTCPWire.endPacket(startingAt: start, in: &bytes)
    }

    static func parse(body: UnsafeRawBufferPointer, count: Int) throws(RTCPBodyError) -> RTCPReceiverReport {
        var reader = RTCPByteReader(body)
        guard let ssrc = reader.readUInt32() else {
            throw RTCPBodyError(kind: .tooShort, detail: "receiver report needs 4 bytes of SSRC, body has \(body.count)")
        }
        let blocks = try RTCPReportBlock.readBlocks(count: count, from: &reader)
        return RTCPReceiverReport(ssrc: ssrc, reportBlocks: blocks)
    }
}

/// Source description, SDES (RFC 3550 section 6.5): PT=202, carrying CNAME items only.
/// Parsing keeps CNAME and skips other item types.
public struct RTCPSourceDescription: Sendable, Hashable {
    /// One SDES chunk: a source and its canonical name.
    public struct Chunk: Sendable, Hashable {
        /// The source described.
        public var ssrc: UInt32
        /// Its CNAME, byte for byte as on the wire; nil when the chunk has none.
        public var cname: RTCPText?

        /// Makes a chunk.
        public init(ssrc: UInt32, cname: RTCPText?) {
            self.ssrc = ssrc
            self.cname = cname
        }
    }

    /// The chunks (at most 31 are written).
    public var chunks: [Chunk]

    /// Makes an SDES packet from chunks.
    public init(chunks: [Chunk]) { self.chunks = chunks }

    /// Makes an SDES packet with one CNAME chunk (its UTF-8, cut to 255 bytes on a scalar boundary).
    public init(ssrc: UInt32, cname: String) { self.chunks = [Chunk(ssrc: ssrc, cname: RTCPText(cname))] }

    /// A CNAME as RFC 7022 section 4.2 recommends for an endpoint that keeps none: 96 random
    /// bits in base64 (16 characters), new for each run, so it identifies the endpoint's
    /// streams together without naming the host or the user.
    public static func randomCNAME<Generator: RandomNumberGenerator>(using generator: inout Generator) -> String {
        Base64.encode((0..<12).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// `randomCNAME(using:)` with the system's random generator.
    public static func randomCNAME() -> String {
        var generator = SystemRandomNumberGenerator()
        return randomCNAME(using: &generator)
    }

    /// Appends the packet (header included): each chunk is its SSRC, a CNAME item, and
    /// one to four null octets ending the item list on a 32-bit boundary.
    public func serialize(into bytes: inout [UInt8]) {
        let written = chunks.prefix(31)
        let start = RTCPWire.beginPacket(
            countOrFormat: UInt8(written.count), packetType: RTCPPacketType.sourceDescription, into: &bytes)
        for chunk in written {
            RTCPWire.appendUInt32(chunk.ssrc, to: &bytes)
            if let cname = chunk.cname {
                bytes.append(1)
                bytes.append(UInt8(cname.bytes.count))
                bytes.append(contentsOf: cname.bytes)
            }
            bytes.append(0)  // the terminating null item
            while (bytes.count - start) % 4 != 0 { bytes.append(0) }
        }
        RTCPWire.endPacket(startingAt: start, in: &bytes)
    }

    static func parse(body: UnsafeRawBufferPointer, count: Int) throws(RTCPBodyError) -> RTCPSourceDescription {
        var reader = RTCPByteReader(body)
        var chunks = [Chunk]()
        for index in 0..<count {
            guard let ssrc = reader.readUInt32() else {
                throw RTCPBodyError(kind: .badSDES, detail: "chunk \(index) of \(count) missing")
            }
            var cname: RTCPText?
            while true {
                guard let itemType = reader.readUInt8() else {
                    throw RTCPBodyError(kind: .badSDES, detail: "chunk \(index) item list not terminated")
                }
                if itemType == 0 {
                    // The body starts on a 32-bit boundary, so chunk alignment is relative to it.
                    let aligned = (reader.offset + 3) & ~3
                    guard reader.skip(aligned - reader.offset) else {
                        throw RTCPBodyError(kind: .badSDES, detail: "chunk \(index) padding runs past the packet")
                    }
                    break
                }
                guard let length = reader.readUInt8(), let text = reader.readBytes(Int(length)) else {
                    throw RTCPBodyError(kind: .badSDES, detail: "chunk \(index) item type \(itemType) runs past the packet")
                }
                if itemType == 1 { cname = RTCPText(bytes: text) }
            }
            chunks.append(Chunk(ssrc: ssrc, cname: cname))
        }
        return RTCPSourceDescription(chunks: chunks)
    }
}

/// Goodbye, BYE (RFC 3550 section 6.6): PT=203.
public struct RTCPGoodbye: Sendable, Hashable {
    /// Sources leaving (at most 31 are written).
    public var ssrcs: [UInt32]
    /// Optional reason for leaving, byte for byte as on the wire (an empty one is not written).
    public var reason: RTCPText?

    /// Makes a BYE packet.
    public init(ssrcs: [UInt32], reason: RTCPText? = nil) {
        self.ssrcs = ssrcs
        self.reason = reason
    }

    /// Appends the packet (header included).
    public func serialize(into bytes: inout [UInt8]) {
        let written = ssrcs.prefix(31)
        let start = RTCPWire.beginPacket(
            countOrFormat: UInt8(written.count), packetType: RTCPPacketType.goodbye, into: &bytes)
        for ssrc in written { RTCPWire.appendUInt32(ssrc, to: &bytes) }
        if let reason, !reason.bytes.isEmpty {
            bytes.append(UInt8(reason.bytes.count))
            bytes.append(contentsOf: reason.bytes)
        }
        RTCPWire.endPacket(startingAt: start, in: &bytes)
    }

    static func parse(body: UnsafeRawBufferPointer, count: Int) throws(RTCPBodyError) -> RTCPGoodbye {
        var reader = RTCPByteReader(body)
        guard count * 4 <= body.count else {
            throw RTCPBodyError(kind: .badReportCount, detail: "\(count) SSRCs need \(count * 4) bytes, body has \(body.count)")
        }
        var ssrcs = [UInt32]()
        for _ in 0..<count {
            guard let ssrc = reader.readUInt32() else { break }
            ssrcs.append(ssrc)
        }
        var reason: RTCPText?
        if let length = reader.readUInt8(), length > 0 {
            guard let text = reader.readBytes(Int(length)) else {
                throw RTCPBodyError(kind: .badBye, detail: "reason of \(length) bytes runs past the packet")
            }
            reason = RTCPText(bytes: text)
        }
        return RTCPGoodbye(ssrcs: ssrcs, reason: reason)
    }
}
