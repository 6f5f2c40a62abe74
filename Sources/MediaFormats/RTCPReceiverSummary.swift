/// RTCP Receiver Summary Information, RSI (RFC 5760 section 7.1): PT=209, sent by the
/// distribution source of a single-source multicast session to its receivers, who cannot hear
/// each other's reports (they go unicast to the source). It carries the source's SSRC, the
/// SSRC summarized, an NTP timestamp, and sub-report blocks; the one decoded here is the
/// Group and Average Packet Size sub-report (SRBT 12), from which receivers size their RTCP
/// report interval (RFC 3550 6.3) as if they heard the whole group.
public struct RTCPReceiverSummary: Sendable, Hashable {
    /// One sub-report block: a 4-byte header (SRBT, length in 32-bit words counting the
    /// header, 16 bits of type-specific data) and its body.
    public enum SubReport: Sendable, Hashable {
        /// SRBT 12, length 2: the average RTCP packet size in octets (16 bits, in the header)
        /// and the group size (32 bits).
        case groupAndAveragePacketSize(groupSize: UInt32, averagePacketSize: UInt16)
        /// Any other sub-report, kept as read: its type, the header's 16 type-specific bits,
        /// and its body (a multiple of 4 bytes).
        case other(type: UInt8, headerField: UInt16, body: [UInt8])
    }

    /// The packet type of RSI.
    public static let packetType: UInt8 = 209
    /// The sub-report block type of Group and Average Packet Size.
    public static let groupAndAveragePacketSizeType: UInt8 = 12

    /// SSRC of the distribution source sending the summary.
    public var ssrc: UInt32
    /// SSRC of the media source whose receivers are summarized.
    public var summarizedSSRC: UInt32
    /// When the summary was made (64-bit NTP format).
    public var ntpTimestamp: UInt64
    /// The sub-report blocks, in wire order.
    public var subReports: [SubReport]

    /// Makes a summary.
    public init(ssrc: UInt32, summarizedSSRC: UInt32, ntpTimestamp: UInt64, subReports: [SubReport]) {
        self.ssrc = ssrc
        self.summarizedSSRC = summarizedSSRC
        self.ntpTimestamp = ntpTimestamp
        self.subReports = subReports
    }

    /// The group size and average RTCP packet size of the first Group and Average Packet Size
    /// sub-report, if there is one.
    public var groupAndAveragePacketSize: (groupSize: UInt32, averagePacketSize: UInt16)? {
        for case let .groupAndAveragePacketSize(groupSize, averagePacketSize) in subReports {
            return (groupSize, averagePacketSize)
        }
        return nil
    }

    /// Appends the packet (20 bytes plus its sub-reports). A sub-report too long for its 8-bit
    /// length field is left out.
    public func serialize(into bytes: inout [UInt8]) {
        let start = RTCPWire.beginPacket(countOrFormat: 0, packetType: Self.packetType, into: &bytes)
        RTCPWire.appendUInt32(ssrc, to: &bytes)
        RTCPWire.appendUInt32(summarizedSSRC, to: &bytes)
        RTCPWire.appendUInt32(UInt32(truncatingIfNeeded: ntpTimestamp >> 32), to: &bytes)
        RTCPWire.appendUInt32(UInt32(truncatingIfNeeded: ntpTimestamp), to: &bytes)
        for subReport in subReports {
            switch subReport {
            case .groupAndAveragePacketSize(let groupSize, let averagePacketSize):
                bytes += [Self.groupAndAveragePacketSizeType, 2]
                RTCPWire.appendUInt16(averagePacketSize, to: &bytes)
                RTCPWire.appendUInt32(groupSize, to: &bytes)
            case .other(let type, let headerField, let body):
                let words = 1 + (body.count + 3) / 4
                guard words <= 255 else { continue }
                bytes += [type, UInt8(words)]
                RTCPWire.appendUInt16(headerField, to: &bytes)
                bytes += body
                bytes += [UInt8](repeating: 0, count: (words - 1) * 4 - body.count)
            }
        }
        RTCPWire.endPacket(startingAt: start, in: &bytes)
    }

    static func parse(body: UnsafeRawBufferPointer) throws(RTCPBodyError) -> RTCPReceiverSummary {
        var reader = RTCPByteReader(body)
        guard let ssrc = reader.readUInt32(), let summarized = reader.readUInt32(),
              let ntpHigh = reader.readUInt32(), let ntpLow = reader.readUInt32() else {
            throw RTCPBodyError(kind: .tooShort, detail: "RSI needs 16 bytes (SSRCs, NTP timestamp), body has \(body.count)")
        }
        var subReports: [SubReport] = []
        while reader.remaining > 0 {
            let at = reader.offset
            guard let type = reader.readUInt8(), let words = reader.readUInt8(), let field = reader.readUInt16() else {
                throw RTCPBodyError(kind: .badLength, detail: "RSI sub-report at byte \(at) has \(body.count - at) bytes, a header needs 4")
            }
            guard words > 0, let rest = reader.readBytes(Int(words) * 4 - 4) else {
                throw RTCPBodyError(kind: .badLength, detail: "RSI sub-report at byte \(at): length \(words) words, \(body.count - at) bytes left")
            }
            if type == Self.groupAndAveragePacketSizeType && words == 2 {
                let size = UInt32(rest[0]) << 24 | UInt32(rest[1]) << 16 | UInt32(rest[2]) << 8 | UInt32(rest[3])
                subReports.append(.groupAndAveragePacketSize(groupSize: size, averagePacketSize: field))
            } else {
                subReports.append(.other(type: type, headerField: field, body: rest))
            }
        }
        return RTCPReceiverSummary(ssrc: ssrc, summarizedSSRC: summarized,
                                   ntpTimestamp: UInt64(ntpHigh) << 32 | UInt64(ntpLow), subReports: subReports)
    }
}
