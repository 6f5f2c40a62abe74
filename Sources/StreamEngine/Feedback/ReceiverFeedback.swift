import MediaFormats

/// What a receiver tells its sender: a receiver report (loss, jitter, LSR/DLSR for the
/// sender's RTT), RFC 8888 per-packet feedback (arrival and ECN codepoint of each packet
/// since the last report), and a PLI when a frame could not be rebuilt.
///
/// Pure: times are passed in (nanoseconds since the Unix epoch, the clock of kernel
/// receive timestamps). Memory is bounded by `maxPending` packets between reports.
struct ReceiverFeedback: Sendable {
    private struct Arrival {
        var sequence: Int64
        var time: Int64
        var ecn: UInt8
    }

    /// This receiver's own SSRC (reports are sent from it).
    let ssrc: UInt32
    /// Most packets remembered between two reports; past that a report is due at once.
    let maxPending: Int
    private var pending: [Arrival] = []
    /// Arrivals already reported, the latest `maxRecent` of them: reported again after the
    /// sender moved (`reportAgain`), since the reports that went to its old address are lost.
    private var recent: [Arrival] = []
    /// At most this many reported arrivals are kept for a report again.
    static let maxRecent = 2048
    private var highest: Int64 = -1
    /// The highest sequence number a report covered (-1 before the first): the next report
    /// covers from the one after it, so packets lost between two reports' arrivals are reported
    /// missing too (RFC 8888's begin_seq). Reports that began at their first arrival left a loss
    /// at a report's edge, most of a burst the queue dropped at a frame's end, unseen by the
    /// sender's congestion controller (tools/cc-eval case c: 1.4 % lost, none declared).
    private var reportedThrough: Int64 = -1
    /// RFC 4588 retransmissions that arrived since the last report (their RTX sequence
    /// numbers), reported per packet under the RTX SSRC: the sender learns which got through.
    private var retransmissionsPending: [Arrival] = []
    private var retransmissionHighest: Int64 = -1
    private var lastSRCompact: UInt32 = 0
    private var lastSRArrival: Int64 = 0
    /// A sender report arrived that no report has answered yet.
    private(set) var senderReportUnanswered = false
    /// A PLI waits for the next report.
    private(set) var pictureLossPending = false
    /// A packet with the marker bit (a frame's last) arrived since the last report.
    private var frameEndPending = false
    /// Per-packet feedback (RFC 8888) in the reports; off, reports carry the receiver report
    /// (and PLI, NACK, probe confirmations) only: a multicast group's sender has no use for it.
    var perPacket = true
    /// Generic NACK entries for the next report (RFC 4585 6.2.1).
    private var retransmissionRequests: [RTCPGenericNACK.Entry] = []
    private var probesToConfirm: [RTCPPathMTUConfirmation.Entry] = []
    /// Reports built.
    private(set) var reportsBuilt = 0
    /// PLIs built.
    private(set) var pictureLossIndications = 0

    /// The CNAME every report carries after its receiver report (RFC 3550 6.1).
    let cname: String
    /// Its SDES packet, serialized once.
    private let sourceDescription: [UInt8]

    /// Makes the feedback state of a receiver with SSRC `ssrc` (and CNAME `cname`: by default
    /// a random one, RFC 7022).
    init(ssrc: UInt32, cname: String = RTCPSourceDescription.randomCNAME(), maxPending: Int = 8192) {
        self.ssrc = ssrc
        self.cname = cname
        sourceDescription = RTCPCompoundBuilder.build([.sourceDescription(RTCPSourceDescription(ssrc: ssrc, cname: cname))])
        self.maxPending = maxPending
    }

    /// True when packets or a sender report arrived since the last report (a sender report
    /// is answered at the next report time even when no media arrives, so the sender's RTT
    /// sample is fresh and each sender report is answered before the next one replaces it).
    var hasNews: Bool {
        !pending.isEmpty || pictureLossPending || !probesToConfirm.isEmpty || senderReportUnanswered
            || !retransmissionRequests.isEmpty || !retransmissionsPending.isEmpty
    }

    /// Notes a path-MTU probe that arrived: the next report confirms it (RTCP APP "PMTU").
    mutating func confirmProbe(id: UInt32, size: Int) {
        if probesToConfirm.count < 64 { probesToConfirm.append(.init(probeID: id, size: UInt32(clamping: size))) }
    }

    /// True when so many packets wait that a report should go now.
    var isFull: Bool { pending.count >= maxPending }

    /// Notes a received media packet (its 16-bit sequence number, arrival, ECN bits, and whether
    /// it carries the marker bit: the last packet of a frame); nothing without per-packet
    /// feedback (the sequence numbers are extended only for it).
    mutating func record(sequence: UInt16, arrival: Int64, ecn: UInt8, marker: Bool) {
        guard perPacket else { return }
        let extended = Self.extend(sequence, highest: &highest)
        if pending.count < maxPending { pending.append(Arrival(sequence: extended, time: arrival, ecn: ecn)) }
        if marker { frameEndPending = true }
    }

    /// When the next report is due, `interval` the least time between two (nanoseconds), the
    /// last one sent at `lastReport`: about once per frame (draft-ietf-rmcat-gcc's "once per
    /// received video frame"), at the arrival of the frame's last packet once `interval` has
    /// passed. While only packets of a frame not yet ended (and retransmissions, and a sender
    /// report to answer) are new, the report waits for the frame's end: at most until
    /// `interval` after the first packet, three intervals after the sender report (a frame at
    /// 30 fps and the pacing of its bursts). A frame paced out in several bursts
    /// (`Pacer.fixedPaceQuantum`) had its first burst reported at its arrival and its tail
    /// `interval` after that, and a sender report was answered `interval` after the last
    /// report, both mostly between frames: a wake-up of the receiver and one of the sender for
    /// a report of a datagram or two (results/profile.md section 44). An answer's delay is in
    /// its DLSR, so the sender's RTT does not change, and a sender report still unanswered
    /// when the next one comes is answered then (`ReceiveSession`). A PLI, NACKs and probe
    /// confirmations are due at `lastReport + interval`, as is everything when arrivals carry
    /// no kernel timestamp.
    // Read at every wake-up: inlined, since out of line the session's whole feedback state was
    // copied to the stack for each call (results/profile.md section 58).
    @inline(__always)
    func reportDue(lastReport: Int64, interval: Int64) -> Int64 {
        let regular = lastReport + interval
        guard !frameEndPending, !pictureLossPending, retransmissionRequests.isEmpty, probesToConfirm.isEmpty else {
            return regular
        }
        var due = Int64.max
        if let first = pending.first?.time {
            guard first > lastReport else { return regular }
            due = first + interval
        }
        if let first = retransmissionsPending.first?.time {
            guard first > lastReport else { return regular }
            due = min(due, first + interval)
        }
        if senderReportUnanswered { due = min(due, lastSRArrival + 3 * interval) }
        return due == Int64.max ? regular : due
    }

    /// Notes a received RFC 4588 retransmission (its RTX sequence number, arrival, ECN bits).
    mutating func recordRetransmission(sequence: UInt16, arrival: Int64, ecn: UInt8) {
        let extended = Self.extend(sequence, highest: &retransmissionHighest)
        if retransmissionsPending.count < Self.metricsPerDatagram {
            retransmissionsPending.append(Arrival(sequence: extended, time: arrival, ecn: ecn))
        }
    }

    /// `sequence` extended near `highest` (which follows it up).
    private static func extend(_ sequence: UInt16, highest: inout Int64) -> Int64 {
        let extended: Int64
        if highest < 0 {
            extended = Int64(sequence) + (1 << 16)  // room below for reordered early packets
        } else {
            extended = highest + Int64(Int16(bitPattern: sequence &- UInt16(truncatingIfNeeded: highest)))
        }
        highest = max(highest, extended)
        return extended
    }

    /// The sender moved to another address: the arrivals reported since `time` (at most
    /// `maxRecent`) go into the next report again. Its reports to the old address may never have
    /// arrived, and a packet nobody confirms would count as lost at the sender; one confirmed
    /// twice counts once.
    mutating func reportAgain(since time: Int64) {
        let again = recent.filter { $0.time >= time }
        recent.removeAll(keepingCapacity: true)
        pending = Array((again + pending).suffix(maxPending))
    }

    /// Notes a sender report (its NTP timestamp), for LSR/DLSR.
    mutating func noteSenderReport(ntpTimestamp: UInt64, arrival: Int64) {
        lastSRCompact = UInt32(truncatingIfNeeded: ntpTimestamp >> 16)
        lastSRArrival = arrival
        senderReportUnanswered = true
    }

    /// Asks for a keyframe in the next report.
    mutating func requestKeyframe() { pictureLossPending = true }

    /// Asks for retransmissions in the next report: one generic NACK with these entries.
    mutating func requestRetransmission(_ entries: [RTCPGenericNACK.Entry]) { retransmissionRequests += entries }

    /// Sequence numbers one datagram's CCFB covers at most (keeps reports near 1 KB, under any MTU).
    static let metricsPerDatagram = 480

    /// Builds the RTCP datagrams for now and starts a new interval: the first is a compound
    /// RR (with the tracker's report block) + CCFB + PLI if asked; when more packets arrived
    /// than one datagram's CCFB covers, further datagrams carry the rest (RR + CCFB each).
    /// Retransmissions that arrived are reported in the first datagram, under `rtxSSRC`.
    mutating func makeReports(now: Int64, mediaSSRC: UInt32, rtxSSRC: UInt32? = nil,
                              tracker: inout RTPSequenceTracker) -> [[UInt8]] {
        Self.sortBySequence(&pending)
        senderReportUnanswered = false
        var datagrams: [[UInt8]] = []
        var more = false
        repeat {
            // What one datagram's CCFB covers stays in `pending` (which `makeReport` reports and
            // empties); only what lies past it, if anything, is copied aside for the next one.
            var rest: [Arrival] = []
            if let first = pending.first, pending[pending.count - 1].sequence - first.sequence >= Int64(Self.metricsPerDatagram),
               let cut = pending.firstIndex(where: { $0.sequence - first.sequence >= Int64(Self.metricsPerDatagram) }) {
                rest = Array(pending[cut...])
                pending.removeSubrange(cut...)
            }
            datagrams.append(makeReport(now: now, mediaSSRC: mediaSSRC, rtxSSRC: datagrams.isEmpty ? rtxSSRC : nil,
                                        tracker: &tracker))
            more = !rest.isEmpty
            if more { pending = rest }
        } while more
        return datagrams
    }

    private mutating func makeReport(now: Int64, mediaSSRC: UInt32, rtxSSRC: UInt32?,
                                     tracker: inout RTPSequenceTracker) -> [UInt8] {
        reportsBuilt += 1
        let nowNTP = NTPTime(unixSeconds: now / 1_000_000_000, nanoseconds: UInt32(now % 1_000_000_000))
        // Serialized packet by packet into one buffer (a list of the packets grew, copied and
        // released them at every report: results/profile.md section 40).
        var compound = RTCPCompoundBuilder(reservingCapacity: 1280)
        let delay = lastSRCompact == 0 ? 0 : UInt32(clamping: (now - lastSRArrival) * 65_536 / 1_000_000_000)
        let block = tracker.makeReportBlock(ssrc: mediaSSRC, lastSR: lastSRCompact, delaySinceLastSR: delay)
        compound.append(.receiverReport(RTCPReceiverReport(ssrc: ssrc, reportBlocks: block.map { [$0] } ?? [])))
        compound.append(serialized: sourceDescription)
        // Retransmissions are reported under the RTX SSRC when there is one and some arrived.
        let rtxReport = retransmissionsPending.isEmpty ? nil : rtxSSRC
        if !pending.isEmpty || rtxReport != nil {
            if rtxReport != nil { Self.sortBySequence(&retransmissionsPending) }
            let coverFrom = reportedThrough + 1
            if let last = pending.last { reportedThrough = max(reportedThrough, last.sequence) }
            compound.appendCongestionControlFeedback(senderSSRC: ssrc, reportTimestamp: nowNTP.compact) { bytes in
                Self.appendStreamReports(pending, ssrc: mediaSSRC, now: now, coverFrom: coverFrom, into: &bytes)
                if let rtxReport { Self.appendStreamReports(retransmissionsPending, ssrc: rtxReport, now: now, into: &bytes) }
            }
            if rtxReport != nil { retransmissionsPending.removeAll(keepingCapacity: true) }
            recent += pending
            if recent.count > 2 * Self.maxRecent { recent.removeFirst(recent.count - Self.maxRecent) }
            pending.removeAll(keepingCapacity: true)
        }
        frameEndPending = false
        if pictureLossPending {
            compound.append(.pictureLossIndication(RTCPPictureLossIndication(senderSSRC: ssrc, mediaSSRC: mediaSSRC)))
            pictureLossPending = false
            pictureLossIndications += 1
        }
        if !retransmissionRequests.isEmpty {
            compound.append(.genericNACK(RTCPGenericNACK(senderSSRC: ssrc, mediaSSRC: mediaSSRC, entries: retransmissionRequests)))
            retransmissionRequests.removeAll()
        }
        if !probesToConfirm.isEmpty {
            compound.append(.application(RTCPPathMTUConfirmation(senderSSRC: ssrc, entries: probesToConfirm).applicationPacket))
            probesToConfirm.removeAll()
        }
        return compound.bytes
    }

    /// Sorts `arrivals` by sequence number. In a stream that arrives in order they already are:
    /// one pass finds that, where the sort cost ~100 – 200 instructions a report (a report per
    /// frame at 30 fps: results/profile.md section 42). Equal numbers keep their order either way.
    private static func sortBySequence(_ arrivals: inout [Arrival]) {
        var index = 1
        while index < arrivals.count && arrivals[index - 1].sequence <= arrivals[index].sequence { index += 1 }
        if index < arrivals.count { arrivals.sort { $0.sequence < $1.sequence } }
    }

    /// Appends the RFC 8888 stream reports of `arrivals` (sorted by sequence number) for `ssrc`,
    /// written in place: one per contiguous run of at most `metricsPerDatagram` sequence numbers,
    /// from its first arrival to its last (a duplicate reported as its first arrival); the first
    /// run from `coverFrom` when that is before its first arrival and within a quarter of the span
    /// (the numbers in between not received).
    private static func appendStreamReports(_ arrivals: [Arrival], ssrc: UInt32, now: Int64, coverFrom: Int64? = nil,
                                            into bytes: inout [UInt8]) {
        var index = 0
        while index < arrivals.count {
            var begin = arrivals[index].sequence
            if index == 0, let coverFrom, coverFrom < begin, begin - coverFrom < Int64(metricsPerDatagram / 4) {
                begin = coverFrom
            }
            var end = index + 1
            while end < arrivals.count && arrivals[end].sequence - begin < Int64(metricsPerDatagram) { end += 1 }
            let count = Int(arrivals[end - 1].sequence - begin) + 1
            RTCPCongestionControlFeedback.appendStreamReport(mediaSSRC: ssrc, beginSequence: UInt16(truncatingIfNeeded: begin),
                                                             count: count, into: &bytes) { metrics in
                for position in index..<end {
                    let arrival = arrivals[position]
                    if position > index && arrivals[position - 1].sequence == arrival.sequence { continue }  // duplicate
                    let delayCompact = UInt32(clamping: max(0, now - arrival.time) * 65_536 / 1_000_000_000)
                    metrics.write(.init(received: true, ecn: arrival.ecn,
                                        arrivalTimeOffset: RTCPCongestionControlFeedback.arrivalTimeOffset(compactNTPDelay: delayCompact)),
                                  at: Int(arrival.sequence - begin))
                }
            }
            index = end
        }
    }
}
