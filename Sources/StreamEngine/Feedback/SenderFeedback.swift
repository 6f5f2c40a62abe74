import MediaFormats
import UringIO

/// The sender's side of RTCP for one flow: sender reports out; receiver reports, RFC 8888
/// feedback and PLIs in. Confirms packets in the flow's log, measures RTT (RFC 3550 LSR/DLSR),
/// counts CE marks, and notices a receiver that stopped reporting.
///
/// Feedback is believed only as far as it names packets this flow sent: confirmations of
/// anything else are rejected and counted.
final class SenderFeedback {
    let ssrc: UInt32
    // `@exclusivity(unchecked)` on `rttWhileSending`, `reportedLost` and `rejected`, which each
    // publication of the stats reads: the engine thread alone touches them, and the runtime's dynamic check (`swift_beginAccess`, ~60
    // instructions) was most of a read's cost (results/profile.md section 41).
    /// Round-trip time, milliseconds.
    private(set) var rttLast: Double?
    private(set) var rttMin: Double?
    private(set) var rttSmoothed: Double?
    /// When the report that gave `rttLast` arrived (CLOCK_REALTIME nanoseconds, kernel timestamp).
    private(set) var rttLastAt: Int64?
    /// The sender report (its LSR) behind `rttLast`: each one's round trip is one sample.
    private var rttLastSR: UInt32?
    /// The samples that measured the path while media flowed (their sender report left
    /// while the flow was sending media): the run's median and 95th percentile. Samples
    /// after the stream stopped (the final feedback wait) see an empty queue and are left out.
    @exclusivity(unchecked) private(set) var rttWhileSending = RTTDistribution()
    /// The last sender reports sent (their LSR, as receivers echo it) and whether media
    /// was flowing when each left; a few suffice, reports are answered within an RTT or two.
    private var recentReports: [(lastSR: UInt32, mediaFlowing: Bool)] = []
    /// Monotonic time of the last accepted feedback.
    private(set) var lastFeedback: Int64 = 0
    private(set) var feedbackSeen = false
    /// The receiver sends per-packet (RFC 8888) feedback; otherwise receiver reports confirm.
    private(set) var perPacketFeedback = false
    /// The receiver stopped reporting.
    private(set) var receiverGone = false
    private(set) var receiverGoneEvents = 0
    /// Set when reports return after silence (taken by the sender, which then forces a keyframe).
    var receiverBack = false
    private(set) var ceReported = 0
    /// What the path does to the flow's ECN codepoint, from the codepoints reported per packet
    /// (the flow sets the codepoint it sends).
    var ecnCheck = ECNPathCheck(sent: .notECT)
    /// What a receiver that sends only receiver reports says it lost (cumulative, up to its
    /// highest sequence number): `confirmThrough` confirmed those packets with the rest.
    @exclusivity(unchecked) private(set) var reportedLost = 0
    private(set) var reportsAccepted = 0
    private(set) var keyframeRequests = 0
    @exclusivity(unchecked) private(set) var rejected: [FeedbackRejection: Int] = [:]
    /// Generic NACKs about this flow's SSRC received and not yet taken (at most 256).
    private(set) var nacks: [RTCPGenericNACK] = []
    /// Generic NACKs about another SSRC.
    private(set) var foreignNACKs = 0

    /// The SSRC of this flow's RFC 4588 retransmissions (their per-packet feedback is taken).
    /// Set, the sender reports' SDES describes it too, with the media's CNAME (RFC 4588 8.3:
    /// one CNAME binds the two streams), so a receiver knows before the first retransmission
    /// that a late packet on the media SSRC is an original, not one resent there.
    var rtxSSRC: UInt32? {
        didSet {
            var chunks = [RTCPSourceDescription.Chunk(ssrc: ssrc, cname: RTCPText(cname))]
            if let rtxSSRC { chunks.append(.init(ssrc: rtxSSRC, cname: RTCPText(cname))) }
            sourceDescription = .sourceDescription(RTCPSourceDescription(chunks: chunks))
        }
    }
    /// RTX sequence numbers per-packet feedback said arrived, not yet taken (at most 4096).
    private(set) var retransmissionsReceived: [UInt16] = []

    /// The retransmissions reported received since the last call.
    func takeRetransmissionsReceived() -> [UInt16] {
        defer { retransmissionsReceived.removeAll() }
        return retransmissionsReceived
    }

    /// The NACKs since the last call.
    func takeNACKs() -> [RTCPGenericNACK] {
        defer { nacks.removeAll() }
        return nacks
    }

    /// Path-MTU probe confirmations received and not yet taken.
    private(set) var probeConfirmations: [RTCPPathMTUConfirmation.Entry] = []
    /// The last RFC 8888 report timestamp (compact NTP) and its value unwrapped (in the same
    /// 1/65536 s units): the compact form wraps every 18 hours, the controller's times must not.
    private var reportClock: (compact: UInt32, unwrapped: Int64)?

    /// The probe confirmations since the last call.
    func takeProbeConfirmations() -> [RTCPPathMTUConfirmation.Entry] {
        defer { probeConfirmations.removeAll() }
        return probeConfirmations
    }

    /// The SDES with the CNAME every sender report carries (RFC 3550 6.1: a compound packet
    /// has one), built once.
    private var sourceDescription: RTCPPacket
    private let cname: String

    init(ssrc: UInt32, cname: String) {
        self.ssrc = ssrc
        self.cname = cname
        sourceDescription = .sourceDescription(RTCPSourceDescription(ssrc: ssrc, cname: cname))
    }

    /// The smoothed time between accepted feedback datagrams (nanoseconds; nil until two came).
    /// Ours report every 20 ms; ffmpeg sends a receiver report per 280,000 bytes it receives,
    /// which at a few Mbit/s is one every 0.5-1 s.
    private(set) var reportInterval: Int64?

    /// RFC 3550's nominal minimum between a receiver's reports (6.2): what a receiver that sends
    /// only receiver reports is assumed to keep until its interval is measured (GStreamer's
    /// rtpbin keeps it; ffmpeg reports per 280,000 bytes, often faster).
    static let nominalReportInterval: Int64 = 5_000_000_000

    /// Feedback came, and none of it per packet: a third-party receiver confirming through the
    /// highest sequence number of its receiver reports.
    var receiverReportsOnly: Bool { feedbackSeen && !perPacketFeedback }

    /// The receiver's report interval as far as known: measured, else nominal for one that sends
    /// only receiver reports (nil for ours, or before any feedback).
    var expectedReportInterval: Int64? {
        reportInterval ?? (receiverReportsOnly ? Self.nominalReportInterval : nil)
    }

    /// How long a packet may stay unconfirmed before it counts as lost: a few RTTs, and never
    /// less than a few report intervals (a receiver that reports seldom confirms late).
    var lossTimeout: Int64 {
        // Until the receiver's rhythm is known, a second (RFC 3550's nominal 5 s interval for
        // one that sends only receiver reports).
        guard let interval = expectedReportInterval else { return 1_000_000_000 }
        let reports = interval * 5 / 2
        guard let rtt = rttSmoothed else { return max(1_000_000_000, reports) }
        return max(Int64(rtt * 3e6), 200_000_000, reports)
    }

    /// How long without feedback before the receiver counts as gone: ten RTTs, at least a
    /// second, and at least four of its report intervals.
    var silenceLimit: Int64 {
        let reports = (expectedReportInterval ?? 0) * 4
        guard let rtt = rttSmoothed else { return max(1_000_000_000, reports) }
        return max(Int64(rtt * 10e6), 1_000_000_000, reports)
    }

    /// Silence is counted from here at the earliest: the path came back after an outage
    /// during which nothing was sent, so nothing could be answered.
    private var silenceCountedFrom: Int64 = 0

    /// The path is viable again after an outage (`MediaFlow.pathViable`): the receiver's
    /// silence meanwhile says nothing about it.
    func pathResumed(now: Int64) { silenceCountedFrom = now }

    /// The flow now takes another path: the RTT estimates (smoothed, minimum) start over from
    /// its first sample. The run's distribution keeps every sample.
    func restartPathEstimates() {
        rttSmoothed = nil
        rttMin = nil
    }

    /// Marks the receiver gone when it has been silent too long. Returns true on the change.
    func checkLiveness(now: Int64, sending: Bool) -> Bool {
        guard feedbackSeen, !receiverGone, sending, now - max(lastFeedback, silenceCountedFrom) > silenceLimit else { return false }
        receiverGone = true
        receiverGoneEvents += 1
        return true
    }

    /// A sender report for now; `mediaFlowing`: the flow is sending media (its RTT sample
    /// then counts in `rttWhileSending`).
    func senderReport(flow: MediaFlow, realtime: Int64, packets: Int, octets: Int, mediaFlowing: Bool) -> [UInt8] {
        let ntp = NTPTime(unixSeconds: realtime / 1_000_000_000, nanoseconds: UInt32(realtime % 1_000_000_000))
        if recentReports.count >= 16 { recentReports.removeFirst() }
        recentReports.append((ntp.compact, mediaFlowing))
        let report = RTCPSenderReport(ssrc: ssrc, ntpTimestamp: ntp.rawValue, rtpTimestamp: flow.lastRTPTimestamp,
                                      packetCount: UInt32(truncatingIfNeeded: packets),
                                      octetCount: UInt32(truncatingIfNeeded: octets))
        return RTCPCompoundBuilder.build([.senderReport(report), sourceDescription])
    }

    /// Handles one RTCP datagram from the receiver. Returns true when it asks for a keyframe
    /// (a PLI); reports returning after silence set `receiverBack`.
    func handle(_ datagram: UnsafeRawBufferPointer, flow: MediaFlow, now: Int64, realtime: Int64) -> Bool {
        let parsed = RTCPPacket.parseCompound(datagram)
        for error in parsed.errors { rejected[.rtcp(error.kind), default: 0] += 1 }
        var wantsKeyframe = false
        var accepted = false
        let rttSRBefore = rttLastSR
        var congestionReports: [CongestionFeedback.PacketReport] = []
        var congestionReportTime: Duration?
        // Read once: each test of the optional existential copies it (a retain and a release),
        // ~130 instructions a packet reported (results/profile.md section 45).
        let controlled = flow.congestion != nil
        // The ECN check counts every packet reported: in a local copy, written back once, since
        // each mutation of the class's property is a dynamic exclusivity access (~90
        // instructions a packet reported, results/profile.md section 58).
        var ecnCheck = self.ecnCheck
        defer { self.ecnCheck = ecnCheck }
        // Per-packet feedback anywhere in the compound decides how its RR is read: the RR
        // comes first, and must not confirm (without their ECN marks) what the CCFB reports.
        for packet in parsed.packets {
            if case .congestionControlFeedback(let feedback) = packet, feedback.reports.contains(where: { $0.mediaSSRC == ssrc }) {
                perPacketFeedback = true
            }
        }
        for packet in parsed.packets {
            switch packet {
            case .receiverReport(let report):
                for block in report.reportBlocks where block.ssrc == ssrc {
                    accepted = true
                    noteRTT(block, realtime: realtime)
                    if !perPacketFeedback, let highest = flow.log.extend(UInt16(truncatingIfNeeded: block.extendedHighestSequence)) {
                        flow.log.confirmThrough(highest)
                        reportedLost = max(0, Int(block.cumulativeLost))
                    }
                }
            case .senderReport(let report):
                for block in report.reportBlocks where block.ssrc == ssrc {
                    accepted = true
                    noteRTT(block, realtime: realtime)
                }
            case .congestionControlFeedback(let feedback):
                for stream in feedback.reports where rtxSSRC != nil && stream.mediaSSRC == rtxSSRC {
                    for (offset, metric) in stream.metrics.enumerated() where metric.received && retransmissionsReceived.count < 4096 {
                        retransmissionsReceived.append(stream.beginSequence &+ UInt16(truncatingIfNeeded: offset))
                    }
                }
                for stream in feedback.reports where stream.mediaSSRC == ssrc {
                    accepted = true
                    perPacketFeedback = true
                    let reportTime = controlled ? unwrapReportTime(feedback.reportTimestamp) : 0
                    congestionReportTime = .nanoseconds(reportTime)
                    for (offset, metric) in stream.metrics.enumerated() {
                        let sequence = stream.beginSequence &+ UInt16(truncatingIfNeeded: offset)
                        guard metric.received else {
                            if controlled, let extended = flow.log.extend(sequence) {
                                congestionReports.append(.init(sequence: extended, arrival: nil))
                            }
                            continue
                        }
                        guard let extended = flow.log.extend(sequence) else {
                            rejected[.confirmsUnsentPacket, default: 0] += 1
                            continue
                        }
                        let arrivedECN = ECNCodepoint(rawValue: metric.ecn & 3) ?? .notECT
                        if controlled {
                            // Arrival: the report's time less the offset (1/1024 s units).
                            let offset = Int64(min(metric.arrivalTimeOffset, RTCPCongestionControlFeedback.maxArrivalTimeOffset))
                            congestionReports.append(.init(sequence: extended, arrival: .nanoseconds(reportTime - offset * 1_000_000_000 / 1024),
                                                           ecn: arrivedECN))
                        }
                        switch flow.log.confirm(extended) {
                        case .confirmed:
                            if arrivedECN == .ce { ceReported += 1 }
                            ecnCheck.reported(arrivedECN)
                        case .repeated: break
                        case .rejected: rejected[.confirmsUnsentPacket, default: 0] += 1
                        }
                    }
                }
            case .application(let app):
                if let confirmation = RTCPPathMTUConfirmation(app), probeConfirmations.count < 256 {
                    accepted = true
                    probeConfirmations += confirmation.entries
                }
            case .genericNACK(let nack):
                // Not a report: a NACK alone (AVPF early feedback, e.g. GStreamer's) must not make
                // the receiver's report interval, and so the loss timeout, look short.
                guard nack.mediaSSRC == ssrc, nacks.count < 256 else { foreignNACKs += 1; continue }
                nacks.append(nack)
            case .pictureLossIndication(let pli) where pli.mediaSSRC == ssrc:
                accepted = true
                keyframeRequests += 1
                wantsKeyframe = true
            default:
                break
            }
        }
        if !congestionReports.isEmpty {
            let rttSample = rttLastSR != rttSRBefore ? rttLast.map { Duration.nanoseconds(Int64($0 * 1e6)) } : nil
            flow.congestion?.feedbackReceived(CongestionFeedback(receivedAt: .nanoseconds(now), reportTime: congestionReportTime,
                                                                 rttSample: rttSample, packets: congestionReports))
        }
        if accepted {
            reportsAccepted += 1
            if feedbackSeen && !receiverGone {
                // A gap over 5 s is an outage, not the receiver's rhythm.
                let gap = min(now - lastFeedback, 5_000_000_000)
                reportInterval = reportInterval.map { ($0 * 7 + gap) / 8 } ?? gap
            }
            lastFeedback = now
            feedbackSeen = true
            if receiverGone {
                receiverGone = false
                receiverBack = true
            }
        }
        return wantsKeyframe
    }

    /// An RFC 8888 report timestamp (compact NTP, 1/65536 s) as nanoseconds on the receiver's
    /// clock, unwrapped against the last one.
    private func unwrapReportTime(_ compact: UInt32) -> Int64 {
        let unwrapped = reportClock.map { $0.unwrapped + Int64(Int32(bitPattern: compact &- $0.compact)) } ?? Int64(compact)
        reportClock = (compact, unwrapped)
        return unwrapped / 65_536 * 1_000_000_000 + unwrapped % 65_536 * 1_000_000_000 / 65_536
    }

    /// Takes the round trip of the sender report a block answers (RFC 3550 6.4.1), once per
    /// sender report: a receiver that reports more often than sender reports arrive (or
    /// after one was lost) repeats the same LSR with a longer DLSR, which is the same round
    /// trip again, and counting it again would weight the reports that got through a loaded
    /// queue over the ones it dropped.
    private func noteRTT(_ block: RTCPReportBlock, realtime: Int64) {
        guard block.lastSR != rttLastSR else { return }
        let ntp = NTPTime(unixSeconds: realtime / 1_000_000_000, nanoseconds: UInt32(realtime % 1_000_000_000))
        guard let compact = NTPTime.roundTripTime(arrivalCompact: ntp.compact, lastSR: block.lastSR,
                                                  delaySinceLastSR: block.delaySinceLastSR) else { return }
        let milliseconds = Double(NTPTime.microseconds(compact: compact)) / 1000
        rttLastSR = block.lastSR
        rttLast = milliseconds
        rttLastAt = realtime
        rttMin = min(rttMin ?? milliseconds, milliseconds)
        if recentReports.last(where: { $0.lastSR == block.lastSR })?.mediaFlowing == true {
            rttWhileSending.record(milliseconds)
        }
        rttSmoothed = rttSmoothed.map { $0 * 7 / 8 + milliseconds / 8 } ?? milliseconds
    }
}
