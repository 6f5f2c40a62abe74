/// Picture Loss Indication, PLI (RFC 4585 section 6.3.1): PSFB, PT=206, FMT=1, no FCI.
public struct RTCPPictureLossIndication: Sendable, Hashable {
    /// The feedback message type (FMT) of a PLI.
    public static let format: UInt8 = 1

    /// SSRC of the receiver asking for a new picture.
    public var senderSSRC: UInt32
    /// SSRC of the media stream that lost a picture.
    public var mediaSSRC: UInt32

    /// Makes a PLI.
    public init(senderSSRC: UInt32, mediaSSRC: UInt32) {
        self.senderSSRC = senderSSRC
        self.mediaSSRC = mediaSSRC
    }

    /// Appends the 12-byte packet.
    public func serialize(into bytes: inout [UInt8]) {
        let start = RTCPWire.beginPacket(
            countOrFormat: Self.format, packetType: RTCPPacketType.payloadFeedback, into: &bytes)
        RTCPWire.appendUInt32(senderSSRC, to: &bytes)
        RTCPWire.appendUInt32(mediaSSRC, to: &bytes)
        RTCPWire.endPacket(startingAt: start, in: &bytes)
    }

    static func parse(body: UnsafeRawBufferPointer) throws(RTCPBodyError) -> RTCPPictureLossIndication {
        var reader = RTCPByteReader(body)
        guard let sender = reader.readUInt32(), let media = reader.readUInt32() else {
            throw RTCPBodyError(kind: .tooShort, detail: "PLI needs 8 bytes, body has \(body.count)")
        }
        // RFC 4585: "the length field MUST be 2", i.e. no FCI.
        guard reader.remaining == 0 else {
            throw RTCPBodyError(kind: .badFCI, detail: "PLI carries \(reader.remaining) bytes of FCI, expected none")
        }
        return RTCPPictureLossIndication(senderSSRC: sender, mediaSSRC: media)
    }
}

/// Generic NACK (RFC 4585 section 6.2.1): RTPFB, PT=205, FMT=1. Each entry names one
/// lost packet (PID) and, in BLP, which of the 16 following packets are lost too.
public struct RTCPGenericNACK: Sendable, Hashable {
    /// The feedback message type (FMT) of a generic NACK.
    public static let format: UInt8 = 1

    /// One FCI entry: a lost packet and a bitmask of lost followers.
    public struct Entry: Sendable, Hashable {
        /// Sequence number of a lost packet.
        public var packetID: UInt16
        /// Bit i (least significant first) set means packet `packetID + i + 1` is lost too.
        public var lostBitmask: UInt16

        /// Makes an entry.
        public init(packetID: UInt16, lostBitmask: UInt16) {
            self.packetID = packetID
            self.lostBitmask = lostBitmask
        }

        /// The sequence numbers this entry names, PID first, then BLP bits in ascending order.
        public var sequenceNumbers: [UInt16] {
            var result = [packetID]
            for bit in 0..<16 where lostBitmask & (1 << bit) != 0 {
                result.append(packetID &+ UInt16(bit + 1))
            }
            return result
        }
    }

    /// SSRC of the receiver sending the NACK.
    public var senderSSRC: UInt32
    /// SSRC of the media stream the NACK is about.
    public var mediaSSRC: UInt32
    /// The FCI entries. RFC 4585 requires at least one: receivers reject an empty NACK.
    public var entries: [Entry]

    /// Makes a NACK from entries.
    public init(senderSSRC: UInt32, mediaSSRC: UInt32, entries: [Entry]) {
        self.senderSSRC = senderSSRC
        self.mediaSSRC = mediaSSRC
        self.entries = entries
    }

    /// Makes a NACK naming `sequenceNumbers`, packed into as few entries as a greedy pass
    /// allows. Duplicates are dropped; numbers are ordered by their wrap-aware distance
    /// from the first one given, so a list spanning the 65535 -> 0 wrap packs correctly.
    public init(senderSSRC: UInt32, mediaSSRC: UInt32, sequenceNumbers: [UInt16]) {
        self.senderSSRC = senderSSRC
        self.mediaSSRC = mediaSSRC
        self.entries = []
        guard let reference = sequenceNumbers.first else { return }
        let ordered = Set(sequenceNumbers).sorted { ($0 &- reference) < ($1 &- reference) }
        for sequence in ordered {
            if let last = entries.last {
                let distance = sequence &- last.packetID
                if distance >= 1 && distance <= 16 {
                    entries[entries.count - 1].lostBitmask |= 1 << (distance - 1)
                    continue
                }
            }
            entries.append(Entry(packetID: sequence, lostBitmask: 0))
        }
    }

    /// Every sequence number the entries name, in entry order (may repeat if entries overlap).
    public var sequenceNumbers: [UInt16] { entries.flatMap(\.sequenceNumbers) }

    /// Appends the packet (header included).
    public func serialize(into bytes: inout [UInt8]) {
        let start = RTCPWire.beginPacket(
            countOrFormat: Self.format, packetType: RTCPPacketType.transportFeedback, into: &bytes)
        RTCPWire.appendUInt32(senderSSRC, to: &bytes)
        RTCPWire.appendUInt32(mediaSSRC, to: &bytes)
        for entry in entries {
            RTCPWire.appendUInt16(entry.packetID, to: &bytes)
            RTCPWire.appendUInt16(entry.lostBitmask, to: &bytes)
        }
        RTCPWire.endPacket(startingAt: start, in: &bytes)
    }

    static func parse(body: UnsafeRawBufferPointer) throws(RTCPBodyError) -> RTCPGenericNACK {
        var reader = RTCPByteReader(body)
        guard let sender = reader.readUInt32(), let media = reader.readUInt32() else {
            throw RTCPBodyError(kind: .tooShort, detail: "NACK needs 8 bytes before its FCI, body has \(body.count)")
        }
        guard reader.remaining >= 4, reader.remaining % 4 == 0 else {
            throw RTCPBodyError(
                kind: .badFCI, detail: "NACK FCI of \(reader.remaining) bytes is not a positive multiple of 4")
        }
        var entries = [Entry]()
        entries.reserveCapacity(reader.remaining / 4)
        while let pid = reader.readUInt16(), let blp = reader.readUInt16() {
            entries.append(Entry(packetID: pid, lostBitmask: blp))
        }
        return RTCPGenericNACK(senderSSRC: sender, mediaSSRC: media, entries: entries)
    }
}

/// RTP Congestion Control Feedback (RFC 8888 section 3.1): RTPFB, PT=205, FMT=11.
///
/// Unlike other RTPFB messages there is no "SSRC of media source" word after the
/// sender SSRC: the report blocks follow directly, each `SSRC, begin_seq, num_reports`
/// and `num_reports` 16-bit metric blocks, zero-padded to 32 bits. The report
/// timestamp (compact NTP) is the last word of the packet.
public struct RTCPCongestionControlFeedback: Sendable, Hashable {
    /// The feedback message type (FMT) of RFC 8888 feedback.
    public static let format: UInt8 = 11
    /// The largest arrival time offset that is a measurement; 0x1FFE also means "this or more",
    /// and 0x1FFF is reserved for "unavailable" (RFC 8888 section 3.1).
    public static let maxArrivalTimeOffset: UInt16 = 0x1FFE

    /// One 16-bit metric block: R | ECN(2) | ATO(13).
    public struct Metric: Sendable, Hashable {
        /// R: the packet arrived.
        public var received: Bool
        /// The ECN codepoint the packet arrived with (0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE); 2 bits.
        public var ecn: UInt8
        /// Arrival time before the report timestamp, in units of 1/1024 s; 13 bits.
        public var arrivalTimeOffset: UInt16

        /// Makes a metric; `ecn` and `arrivalTimeOffset` are masked to their widths when written.
        @inlinable
        public init(received: Bool, ecn: UInt8, arrivalTimeOffset: UInt16) {
            self.received = received
            self.ecn = ecn
            self.arrivalTimeOffset = arrivalTimeOffset
        }

        /// The metric for a packet that did not arrive (all bits zero).
        public static let notReceived = Metric(received: false, ecn: 0, arrivalTimeOffset: 0)

        /// Splits a 16-bit metric block into its fields.
        public init(rawValue: UInt16) {
            received = rawValue & 0x8000 != 0
            ecn = UInt8(truncatingIfNeeded: (rawValue >> 13) & 0x3)
            arrivalTimeOffset = rawValue & 0x1FFF
        }

        /// The 16-bit metric block.
        @inlinable
        public var rawValue: UInt16 {
            (received ? 0x8000 : 0) | UInt16(ecn & 0x3) << 13 | (arrivalTimeOffset & 0x1FFF)
        }
    }

    /// The report on one media stream: a run of consecutive sequence numbers.
    public struct StreamReport: Sendable, Hashable {
        /// The media stream reported on.
        public var mediaSSRC: UInt32
        /// Sequence number of the first metric.
        public var beginSequence: UInt16
        /// One metric per sequence number from `beginSequence` on (at most 65535 are written).
        public var metrics: [Metric]

        /// Makes a stream report.
        public init(mediaSSRC: UInt32, beginSequence: UInt16, metrics: [Metric]) {
            self.mediaSSRC = mediaSSRC
            self.beginSequence = beginSequence
            self.metrics = metrics
        }
    }

    /// SSRC of the receiver sending the feedback.
    public var senderSSRC: UInt32
    /// One report per media stream.
    public var reports: [StreamReport]
    /// When the report was made, as compact NTP (middle 32 bits of the NTP timestamp).
    public var reportTimestamp: UInt32

    /// Makes a feedback packet.
    public init(senderSSRC: UInt32, reports: [StreamReport], reportTimestamp: UInt32) {
        self.senderSSRC = senderSSRC
        self.reports = reports
        self.reportTimestamp = reportTimestamp
    }

    /// Converts an arrival-to-report delay in 1/65536 s (compact NTP units) to the ATO
    /// field's 1/1024 s, saturating at `maxArrivalTimeOffset`.
    @inlinable
    public static func arrivalTimeOffset(compactNTPDelay: UInt32) -> UInt16 {
        let ticks = compactNTPDelay >> 6
        return ticks >= UInt32(maxArrivalTimeOffset) ? maxArrivalTimeOffset : UInt16(ticks)
    }

    /// Appends the packet (header included).
    public func serialize(into bytes: inout [UInt8]) {
        let start = Self.beginPacket(senderSSRC: senderSSRC, into: &bytes)
        for report in reports {
            let metrics = report.metrics.prefix(Int(UInt16.max))
            Self.appendStreamReport(mediaSSRC: report.mediaSSRC, beginSequence: report.beginSequence,
                                    count: metrics.count, into: &bytes) { out in
                for (index, metric) in metrics.enumerated() { out.write(metric, at: index) }
            }
        }
        Self.endPacket(startingAt: start, reportTimestamp: reportTimestamp, in: &bytes)
    }

    // The packet written in place, a stream report at a time, with no lists of reports or
    // metrics: what a receiver that reports every frame builds (`serialize(into:)` writes
    // through the same three calls). Begin, append the stream reports, end.

    /// Begins a feedback packet from `senderSSRC` at the end of `bytes` (a compound packet's);
    /// returns where it starts, for `endPacket`.
    public static func beginPacket(senderSSRC: UInt32, into bytes: inout [UInt8]) -> Int {
        let start = RTCPWire.beginPacket(countOrFormat: format, packetType: RTCPPacketType.transportFeedback, into: &bytes)
        RTCPWire.appendUInt32(senderSSRC, to: &bytes)
        return start
    }

    /// Appends the report on `mediaSSRC`'s `count` sequence numbers from `beginSequence`
    /// (at most 65535): its header, then `count` metrics, each "not received" until `write`
    /// sets it (and a zero one to pad an odd count).
    public static func appendStreamReport(mediaSSRC: UInt32, beginSequence: UInt16, count: Int, into bytes: inout [UInt8],
                                          write: (MetricWriter) -> Void) {
        precondition(count >= 0 && count <= Int(UInt16.max), "a stream report holds 0 to 65535 metrics, not \(count)")
        RTCPWire.appendUInt32(mediaSSRC, to: &bytes)
        RTCPWire.appendUInt16(beginSequence, to: &bytes)
        RTCPWire.appendUInt16(UInt16(count), to: &bytes)
        // Written in place: one metric per packet received, and two appends of a byte cost ~75
        // instructions a metric. Zeroed from a slice of zeros (a copy; `repeatElement`'s generic
        // append cost ~270 instructions a report).
        let start = bytes.count
        var zeros = (count + 1) / 2 * 4
        while zeros > 0 {
            let chunk = min(zeros, Self.zeros.count)
            bytes.append(contentsOf: Self.zeros[0..<chunk])
            zeros -= chunk
        }
        bytes.withUnsafeMutableBytes { out in
            write(MetricWriter(metrics: UnsafeMutableRawBufferPointer(rebasing: out[start..<(start + 2 * count)])))
        }
    }

    /// Zero bytes a stream report's metrics start as (a report of `ReceiverFeedback`'s at most
    /// 480 metrics takes one slice of them).
    private static let zeros = [UInt8](repeating: 0, count: 1024)

    /// Ends the packet begun at `start`: the report timestamp (compact NTP), then its length.
    public static func endPacket(startingAt start: Int, reportTimestamp: UInt32, in bytes: inout [UInt8]) {
        RTCPWire.appendUInt32(reportTimestamp, to: &bytes)
        RTCPWire.endPacket(startingAt: start, in: &bytes)
    }

    /// The metrics of one stream report being written (valid only inside `appendStreamReport`'s call).
    public struct MetricWriter {
        @usableFromInline let metrics: UnsafeMutableRawBufferPointer

        /// The report's number of metrics.
        @inlinable public var count: Int { metrics.count / 2 }

        /// Sets the metric of the report's `index`-th sequence number (from its first).
        /// - Precondition: `index` is in `0..<count`.
        @inlinable
        public func write(_ metric: Metric, at index: Int) {
            precondition(index >= 0 && index < count, "metric \(index) outside the report's \(count)")
            metrics.storeBytes(of: metric.rawValue.bigEndian, toByteOffset: 2 * index, as: UInt16.self)
        }
    }

    static func parse(body: UnsafeRawBufferPointer) throws(RTCPBodyError) -> RTCPCongestionControlFeedback {
        guard body.count >= 8 else {
            throw RTCPBodyError(
                kind: .tooShort, detail: "congestion feedback needs sender SSRC and report timestamp, body has \(body.count)")
        }
        var reader = RTCPByteReader(UnsafeRawBufferPointer(rebasing: body[0..<(body.count - 4)]))
        var tail = RTCPByteReader(UnsafeRawBufferPointer(rebasing: body[(body.count - 4)...]))
        guard let sender = reader.readUInt32(), let timestamp = tail.readUInt32() else {
            throw RTCPBodyError(kind: .tooShort, detail: "congestion feedback header truncated")
        }
        var reports = [StreamReport]()
        while reader.remaining > 0 {
            guard let media = reader.readUInt32(), let begin = reader.readUInt16(), let count = reader.readUInt16() else {
                throw RTCPBodyError(kind: .badFCI, detail: "report block \(reports.count) header truncated")
            }
            let paddedBytes = (Int(count) * 2 + 3) & ~3
            guard paddedBytes <= reader.remaining else {
                throw RTCPBodyError(
                    kind: .badFCI,
                    detail: "report block \(reports.count) claims \(count) metrics (\(paddedBytes) bytes), \(reader.remaining) left")
            }
            var metrics = [Metric]()
            metrics.reserveCapacity(Int(count))
            for _ in 0..<Int(count) {
                guard let raw = reader.readUInt16() else { break }
                metrics.append(Metric(rawValue: raw))
            }
            if count % 2 == 1 { _ = reader.skip(2) }
            reports.append(StreamReport(mediaSSRC: media, beginSequence: begin, metrics: metrics))
        }
        return RTCPCongestionControlFeedback(senderSSRC: sender, reports: reports, reportTimestamp: timestamp)
    }
}
