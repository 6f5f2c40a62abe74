/// One RTCP packet of a compound packet.
public enum RTCPPacket: Sendable, Hashable {
    /// SR, PT=200.
    case senderReport(RTCPSenderReport)
    /// RR, PT=201.
    case receiverReport(RTCPReceiverReport)
    /// SDES, PT=202 (CNAME items only).
    case sourceDescription(RTCPSourceDescription)
    /// BYE, PT=203.
    case goodbye(RTCPGoodbye)
    /// PLI, PT=206 FMT=1.
    case pictureLossIndication(RTCPPictureLossIndication)
    /// Generic NACK, PT=205 FMT=1.
    case genericNACK(RTCPGenericNACK)
    /// RFC 8888 congestion control feedback, PT=205 FMT=11.
    case congestionControlFeedback(RTCPCongestionControlFeedback)
    /// Application-defined, APP, PT=204 (e.g. "PMTU" probe confirmations).
    case application(RTCPApplicationDefined)
    /// Receiver Summary Information, RSI, PT=209 (RFC 5760): a multicast source's summary of its receivers.
    case receiverSummary(RTCPReceiverSummary)
    /// A well-framed packet of a type (or feedback format) this module does not decode,
    /// such as XR or transport-wide CC. It was skipped, not rejected.
    case unknown(packetType: UInt8)

    /// Appends the packet's wire form. `.unknown` has no body to write and appends nothing.
    public func serialize(into bytes: inout [UInt8]) {
        switch self {
        case .senderReport(let packet): packet.serialize(into: &bytes)
        case .receiverReport(let packet): packet.serialize(into: &bytes)
        case .sourceDescription(let packet): packet.serialize(into: &bytes)
        case .goodbye(let packet): packet.serialize(into: &bytes)
        case .pictureLossIndication(let packet): packet.serialize(into: &bytes)
        case .genericNACK(let packet): packet.serialize(into: &bytes)
        case .congestionControlFeedback(let packet): packet.serialize(into: &bytes)
        case .application(let packet): packet.serialize(into: &bytes)
        case .receiverSummary(let packet): packet.serialize(into: &bytes)
        case .unknown: break
        }
    }

    /// Walks a compound RTCP packet, checking every length field against the bytes
    /// present, and returns the packets it could decode plus a reason for each
    /// rejection. Never traps.
    ///
    /// A broken header (version, length) makes the rest of the datagram unframeable,
    /// so the walk stops there. A broken body (report count, FCI, SDES items,
    /// padding count) rejects that packet only; the walk continues with the next one
    /// because its length field was sound. RFC 5506 reduced-size RTCP is accepted: the
    /// first packet need not be an SR or RR.
    public static func parseCompound(_ bytes: UnsafeRawBufferPointer) -> RTCPParseResult {
        var result = RTCPParseResult()
        // A compound is a few packets (a report, an SDES, feedback): room for them at once,
        // not an array grown twice per datagram.
        result.packets.reserveCapacity(4)
        guard bytes.count > 0 else {
            result.errors.append(RTCPParseError(kind: .tooShort, offset: 0, packetType: nil, detail: "empty datagram"))
            return result
        }
        var offset = 0
        while offset < bytes.count {
            let remaining = bytes.count - offset
            guard remaining >= 4 else {
                result.errors.append(
                    RTCPParseError(
                        kind: .tooShort, offset: offset, packetType: nil,
                        detail: "\(remaining) trailing bytes, a header needs 4"))
                break
            }
            let first = bytes[offset]
            let packetType = bytes[offset + 1]
            guard first >> 6 == 2 else {
                result.errors.append(
                    RTCPParseError(
                        kind: .badVersion, offset: offset, packetType: packetType, detail: "version \(first >> 6), expected 2"))
                break
            }
            let lengthWords = Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
            let packetBytes = (lengthWords + 1) * 4
            guard packetBytes <= remaining else {
                result.errors.append(
                    RTCPParseError(
                        kind: .badLength, offset: offset, packetType: packetType,
                        detail: "length \(lengthWords) words (\(packetBytes) bytes) exceeds the \(remaining) bytes left"))
                break
            }
            defer { offset += packetBytes }
            var bodyEnd = offset + packetBytes
            if first & 0x20 != 0 {
                let paddingBytes = Int(bytes[bodyEnd - 1])
                guard paddingBytes > 0, paddingBytes <= packetBytes - 4 else {
                    result.errors.append(
                        RTCPParseError(
                            kind: .badPadding, offset: offset, packetType: packetType,
                            detail: "padding count \(paddingBytes) in a packet of \(packetBytes) bytes"))
                    continue
                }
                bodyEnd -= paddingBytes
            }
            let body = UnsafeRawBufferPointer(rebasing: bytes[(offset + 4)..<bodyEnd])
            do {
                result.packets.append(try parseOne(packetType: packetType, countOrFormat: Int(first & 0x1F), body: body))
            } catch {
                result.errors.append(
                    RTCPParseError(kind: error.kind, offset: offset, packetType: packetType, detail: error.detail))
            }
        }
        return result
    }

    /// Walks a compound RTCP packet held in an array; see `parseCompound(_:)` for the rules.
    public static func parseCompound(_ bytes: [UInt8]) -> RTCPParseResult {
        bytes.withUnsafeBytes { parseCompound($0) }
    }

    private static func parseOne(
        packetType: UInt8, countOrFormat: Int, body: UnsafeRawBufferPointer
    ) throws(RTCPBodyError) -> RTCPPacket {
        switch (packetType, countOrFormat) {
        case (RTCPPacketType.senderReport, _):
            return .senderReport(try RTCPSenderReport.parse(body: body, count: countOrFormat))
        case (RTCPPacketType.receiverReport, _):
            return .receiverReport(try RTCPReceiverReport.parse(body: body, count: countOrFormat))
        case (RTCPPacketType.sourceDescription, _):
            return .sourceDescription(try RTCPSourceDescription.parse(body: body, count: countOrFormat))
        case (RTCPPacketType.goodbye, _):
            return .goodbye(try RTCPGoodbye.parse(body: body, count: countOrFormat))
        case (RTCPPacketType.application, _):
            return .application(try RTCPApplicationDefined.parse(body: body, subtype: countOrFormat))
        case (RTCPReceiverSummary.packetType, _):
            return .receiverSummary(try RTCPReceiverSummary.parse(body: body))
        case (RTCPPacketType.payloadFeedback, Int(RTCPPictureLossIndication.format)):
            return .pictureLossIndication(try RTCPPictureLossIndication.parse(body: body))
        case (RTCPPacketType.transportFeedback, Int(RTCPGenericNACK.format)):
            return .genericNACK(try RTCPGenericNACK.parse(body: body))
        case (RTCPPacketType.transportFeedback, Int(RTCPCongestionControlFeedback.format)):
            return .congestionControlFeedback(try RTCPCongestionControlFeedback.parse(body: body))
        default:
            return .unknown(packetType: packetType)
        }
    }
}

/// Why one packet of a compound packet was rejected.
public struct RTCPParseError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of defect. The raw value is the stable camelCase `reason` used in counters.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// Fewer bytes than a header, or than the fixed part of the packet type.
        case tooShort
        /// Version field not 2.
        case badVersion
        /// Length field runs past the end of the datagram.
        case badLength
        /// Padding bit set with a padding count of 0 or larger than the packet body.
        case badPadding
        /// The report (or SSRC) count does not fit the packet length.
        case badReportCount
        /// Feedback control information does not fit, or is not allowed, per the header.
        case badFCI
        /// SDES chunks or items run past the packet.
        case badSDES
        /// BYE reason runs past the packet.
        case badBye
    }

    /// The kind of defect.
    public var kind: Kind
    /// Byte offset of the offending packet within the compound packet.
    public var offset: Int
    /// The packet type byte, when a header was there to read.
    public var packetType: UInt8?
    /// What exactly was wrong, for logs.
    public var detail: String

    /// Makes a parse error.
    public init(kind: Kind, offset: Int, packetType: UInt8?, detail: String) {
        self.kind = kind
        self.offset = offset
        self.packetType = packetType
        self.detail = detail
    }

    /// Stable camelCase name of the defect (`tooShort`, `badVersion`, ...), fit for a counter label.
    public var reason: String { kind.rawValue }

    /// One line for logs: `rtcp: badLength at offset 8 (PT 201): ...`.
    public var description: String {
        let type = packetType.map { " (PT \($0))" } ?? ""
        return "rtcp: \(reason) at offset \(offset)\(type): \(detail)"
    }
}

/// What `RTCPPacket.parseCompound` found: decoded packets and rejections, in wire order.
public struct RTCPParseResult: Sendable, Hashable {
    /// Packets decoded (including `.unknown` ones that were well framed).
    public var packets: [RTCPPacket] = []
    /// One entry per rejected packet or unframeable tail.
    public var errors: [RTCPParseError] = []

    /// Makes an empty result.
    public init() {}

    /// True when nothing was rejected.
    public var isClean: Bool { errors.isEmpty }
}

/// Running totals over many parsed compound packets, for stats output.
public struct RTCPParseCounters: Sendable, Hashable {
    /// Packets decoded, `.unknown` included.
    public private(set) var packets = 0
    /// Packets of types this module does not decode.
    public private(set) var unknownPackets = 0
    /// Rejections by reason.
    public private(set) var rejections: [RTCPParseError.Kind: Int] = [:]

    /// Makes zeroed counters.
    public init() {}

    /// Total rejections of any kind.
    public var rejected: Int { rejections.values.reduce(0, +) }

    /// Adds one parse result to the totals.
    public mutating func record(_ result: RTCPParseResult) {
        packets += result.packets.count
        for packet in result.packets {
            if case .unknown = packet { unknownPackets += 1 }
        }
        for error in result.errors { rejections[error.kind, default: 0] += 1 }
    }
}

/// Builds a compound RTCP packet by appending packets in order.
public struct RTCPCompoundBuilder: Sendable {
    /// The compound packet so far.
    public private(set) var bytes: [UInt8] = []

    /// Makes an empty builder.
    public init() {}

    /// Makes an empty builder with room for `capacity` bytes: a compound packet of about that
    /// size is built without growing its bytes again and again.
    public init(reservingCapacity capacity: Int) {
        bytes.reserveCapacity(capacity)
    }

    /// Appends one packet (`.unknown` appends nothing).
    public mutating func append(_ packet: RTCPPacket) {
        packet.serialize(into: &bytes)
    }

    /// Appends packets serialized before (the bytes of a compound packet this builder or
    /// `build` made): one that goes unchanged into every report, such as its SDES, is
    /// serialized once.
    public mutating func append(serialized compound: [UInt8]) {
        bytes.append(contentsOf: compound)
    }

    /// Appends an RFC 8888 feedback packet from `senderSSRC` written in place: `streamReports`
    /// appends its stream reports to the bytes it is given
    /// (`RTCPCongestionControlFeedback.appendStreamReport`), with no lists of reports or metrics.
    public mutating func appendCongestionControlFeedback(senderSSRC: UInt32, reportTimestamp: UInt32,
                                                         streamReports: (inout [UInt8]) -> Void) {
        let start = RTCPCongestionControlFeedback.beginPacket(senderSSRC: senderSSRC, into: &bytes)
        streamReports(&bytes)
        RTCPCongestionControlFeedback.endPacket(startingAt: start, reportTimestamp: reportTimestamp, in: &bytes)
    }

    /// Serializes `packets` back to back into one compound packet.
    public static func build(_ packets: [RTCPPacket]) -> [UInt8] {
        // A receiver's compound report is about 1 KB at most (`ReceiverFeedback`): grown once,
        // not at every doubling of its bytes appended one by one.
        var builder = RTCPCompoundBuilder(reservingCapacity: 1280)
        for packet in packets { builder.append(packet) }
        return builder.bytes
    }
}
