import SecureRTP
/// A receiver's counters, as in the stats JSON.
public struct ReceiverStats: Sendable, Equatable {
    /// Packets of the stream received (distinct).
    public var received = 0
    /// Packets missing at the end (gaps not filled).
    public var lost: Int64 = 0
    /// Packets the sender's reports count before the first one received here (with loss
    /// recovery; nil before a sender report): the stream's first packets lost on the way, which
    /// no gap shows (RFC 3550's base sequence is the first received, so `lost` cannot hold
    /// them), or sent before this receiver listened. The least difference of any sender
    /// report's packet count over the packets expected here, so it settles once a report goes
    /// out with nothing in flight.
    public var sentBeforeFirst: Int64?
    /// Packets that arrived after their frame was given up, or outside the window.
    public var late = 0
    /// Packets received twice.
    public var duplicate = 0
    /// Packets that filled a gap (arrived after a higher sequence number).
    public var reordered = 0
    /// Datagrams per ECN codepoint: Not-ECT, ECT(1), ECT(0), CE (index = the two bits).
    public var ecn: [Int] = [0, 0, 0, 0]
    /// Datagrams per DSCP value seen (index 0...63).
    public var dscp: [Int] = Array(repeating: 0, count: 64)
    /// Frames whose every packet arrived.
    public var framesComplete = 0
    /// Frames emitted with packets missing.
    public var framesIncomplete = 0
    /// Complete keyframes (a decoder can start at each).
    public var keyframes = 0
    /// Payload bytes of the stream received.
    public var bytesReceived = 0
    /// Datagrams rejected, by reason (bad RTP header, foreign source, bad payload...).
    public var rejected: [ReceiveRejection: Int] = [:]
    /// Datagrams the kernel dropped for lack of receive-buffer space.
    public var kernelDrops = 0
    /// `io_uring_enter` calls of the receive loop (`MediaReceiver`: set at each publication):
    /// its waits, one per wake-up.
    public var enterCalls = 0
    /// The stream's SSRC, once locked.
    public var ssrc: UInt32?
    /// The sender's address, once locked.
    public var source: String?
    /// Frames that never arrived at all (gaps in the RTP timestamps of a constant frame rate).
    public var framesMissing = 0
    /// Frames not decodable on their own line of references: incomplete, or after an
    /// incomplete or missing frame until the next complete keyframe (and before the first).
    public var framesUndecodable = 0
    /// RTCP datagrams sent to the sender.
    public var feedbackSent = 0
    /// Keyframe requests (PLI) sent.
    public var keyframeRequests = 0
    /// RTCP datagrams from the sender (sender reports) accepted.
    public var senderReports = 0
    /// RTCP BYE packets from the sender naming the stream's SSRC (each released every frame held).
    public var byeReceived = 0
    /// Feedback sends that failed (the sender gone, no route): counted, not fatal.
    public var feedbackErrors = 0
    /// Path-MTU probes from the sender received (and confirmed): not media, not in `received`.
    public var probesReceived = 0
    /// Datagrams larger than this receiver's buffers (its own size, whatever the sender
    /// thinks the MTU is): the kernel cut them, so they are counted here and dropped.
    public var truncated = 0
    /// Times the stream's RTP clock moved on by more than 10 s and two packets in sequence on
    /// the new clock made the receiver follow it (a sender that stamps by wall clock and paused).
    public var timestampRestarts = 0
    /// Times the stream moved to another source address (the sender's address changed:
    /// same SSRC, the sequence and timestamps continuing) and was followed there.
    public var sourceMoves = 0
    /// Times another stream took the place of the one received, after that one ended (its
    /// sender's BYE) or fell silent for `ReceiveSession.streamTimeout`: a sender restarted with
    /// a new SSRC, sequence and clock, from the same address or another. The counts add up
    /// over the streams; `ssrc`, `source`, the playout latency and the RTT are the latest's.
    public var streamChanges = 0
    /// SRTP counters, both directions (nil without SRTP). Packets that fail here never reach
    /// the counters above.
    public var srtp: SRTPStats?
    /// A multicast receiver's RTCP report interval last drawn (RFC 3550 6.3), in seconds;
    /// nil for a unicast receiver (it reports per `reportInterval`) or before the first draw.
    public var rtcpIntervalSeconds: Double?
    /// The session's members as a multicast receiver counts them for its report interval
    /// (the sender's RSI group size plus the sender, or what it heard, at least 2); nil for unicast.
    public var rtcpMembers: Int?

    /// With retransmission: lost originals (counted in `lost`) whose retransmission arrived
    /// before their frame's deadline and went into the frame.
    public var recovered = 0
    /// With retransmission: frames that waited for a missing packet until their playout
    /// deadline and went out incomplete (counted in `framesIncomplete` too).
    public var framesLate = 0
    /// Retransmissions received (RFC 4588 RTX, or originals resent on the media SSRC for a
    /// packet asked for).
    public var rtxReceived = 0
    /// Bytes of RFC 4588 RTX datagrams received (not in `bytesReceived`).
    public var rtxBytes = 0
    /// Retransmissions that came after their frame's deadline: dropped.
    public var rtxLate = 0
    /// Retransmissions of a packet already here (or never missing): dropped.
    public var rtxDuplicate = 0
    /// NACK packets (RFC 4585 generic NACK) sent, each in a feedback datagram.
    public var nackSent = 0
    /// Sequence numbers asked for, each ask counted (a re-ask counts again).
    public var nackRequested = 0
    /// Bytes of NACK packets (header and FCI) sent: bounded by a share of the media bytes.
    public var nackBytes = 0
    /// Missing packets no longer asked for: no answer could arrive before their deadline.
    public var nackAbandoned = 0
    /// Times due asks waited for the NACK byte budget.
    public var nackBudgetLimited = 0
    /// Packets asked for whose original then arrived: the path reordered them past the reorder
    /// allowance, which grows to cover such delays (see `NACKGenerator`).
    public var nackSpurious = 0
    /// The playout latency in use (milliseconds), nil without retransmission.
    public var playoutLatencyMs: Double?
    /// The playout latency the one in use is moving toward (milliseconds; the configured one,
    /// or 3 x RTT + jitter, at least 50 ms, or room for `playoutRepairAsks` asks per loss),
    /// nil without retransmission. A derived latency
    /// follows it by at most 100 ms per second.
    public var playoutLatencyTargetMs: Double?
    /// Whether the playout latency is derived from the RTT and jitter (not configured).
    public var playoutLatencyDerived = false
    /// The asks per loss a derived target latency holds room for, where two (3 x RTT) would
    /// leave more than 1 % of the losses unrepaired at the rate asks fail on this path; nil
    /// otherwise (and with a configured latency, or without retransmission).
    public var playoutRepairAsks: Int?
    /// With retransmission: the delay each frame was given, from the kernel receive time of
    /// its first packet to its release (the playout latency, or more for a frame that waited
    /// for a retransmission or took longer to arrive); nil before a frame went out.
    public var playoutAddedLatencyMs: PercentilesMs?
    /// The RTT measured from NACK to retransmission (milliseconds), nil before one came.
    public var retransmissionRTTMs: Double?

    /// Zeroed counters.
    public init() {}

    /// Adds the counts of the streams received before this one (`earlier`, their stats when the
    /// last of them ended): counters add up; what the socket counts (`kernelDrops`, `truncated`,
    /// `enterCalls`) is a running total, so the larger is kept; what describes a stream
    /// (`ssrc`, `source`, the playout latency and RTT, the multicast interval) is this one's
    /// where it has one.
    mutating func addEarlierStreams(_ earlier: ReceiverStats) {
        received += earlier.received
        lost += earlier.lost
        if let before = earlier.sentBeforeFirst { sentBeforeFirst = (sentBeforeFirst ?? 0) + before }
        late += earlier.late
        duplicate += earlier.duplicate
        reordered += earlier.reordered
        for index in ecn.indices { ecn[index] += earlier.ecn[index] }
        for index in dscp.indices { dscp[index] += earlier.dscp[index] }
        framesComplete += earlier.framesComplete
        framesIncomplete += earlier.framesIncomplete
        keyframes += earlier.keyframes
        bytesReceived += earlier.bytesReceived
        rejected.merge(earlier.rejected, uniquingKeysWith: +)
        kernelDrops = max(kernelDrops, earlier.kernelDrops)
        enterCalls = max(enterCalls, earlier.enterCalls)
        ssrc = ssrc ?? earlier.ssrc
        source = source ?? earlier.source
        framesMissing += earlier.framesMissing
        framesUndecodable += earlier.framesUndecodable
        feedbackSent += earlier.feedbackSent
        keyframeRequests += earlier.keyframeRequests
        senderReports += earlier.senderReports
        byeReceived += earlier.byeReceived
        feedbackErrors += earlier.feedbackErrors
        probesReceived += earlier.probesReceived
        truncated = max(truncated, earlier.truncated)
        timestampRestarts += earlier.timestampRestarts
        sourceMoves += earlier.sourceMoves
        streamChanges += earlier.streamChanges
        srtp = srtp ?? earlier.srtp
        rtcpIntervalSeconds = rtcpIntervalSeconds ?? earlier.rtcpIntervalSeconds
        rtcpMembers = rtcpMembers ?? earlier.rtcpMembers
        recovered += earlier.recovered
        framesLate += earlier.framesLate
        rtxReceived += earlier.rtxReceived
        rtxBytes += earlier.rtxBytes
        rtxLate += earlier.rtxLate
        rtxDuplicate += earlier.rtxDuplicate
        nackSent += earlier.nackSent
        nackRequested += earlier.nackRequested
        nackBytes += earlier.nackBytes
        nackAbandoned += earlier.nackAbandoned
        nackBudgetLimited += earlier.nackBudgetLimited
        nackSpurious += earlier.nackSpurious
        playoutLatencyMs = playoutLatencyMs ?? earlier.playoutLatencyMs
        playoutLatencyTargetMs = playoutLatencyTargetMs ?? earlier.playoutLatencyTargetMs
        playoutLatencyDerived = playoutLatencyDerived || earlier.playoutLatencyDerived
        playoutRepairAsks = playoutRepairAsks ?? earlier.playoutRepairAsks
        // The session carries the frames' delays over to the next stream (`FramePlayout`).
        playoutAddedLatencyMs = playoutAddedLatencyMs ?? earlier.playoutAddedLatencyMs
        retransmissionRTTMs = retransmissionRTTMs ?? earlier.retransmissionRTTMs
    }

    /// The median, 95th percentile and largest of a run's samples (milliseconds), and how many.
    public struct PercentilesMs: Sendable, Equatable {
        /// The median.
        public var p50: Double
        /// The 95th percentile.
        public var p95: Double
        /// The largest sample.
        public var max: Double
        /// Samples taken.
        public var frames: Int
    }
}
