import SecureRTP
/// A sender's counters, as in the stats JSON.
public struct SenderStats: Sendable, Equatable {
    /// Datagrams the kernel accepted.
    public var packetsSent = 0
    /// Payload bytes the kernel accepted.
    public var bytesSent = 0
    /// Datagrams that failed to send (reported by the kernel).
    public var packetsFailed = 0
    /// Access units handed to the sender.
    public var framesEncoded = 0
    /// Access units whose every packet was put on the wire.
    public var framesSent = 0
    /// Keyframes among them.
    public var keyframes = 0
    /// Access units dropped because the send queue was full.
    public var framesDroppedQueueFull = 0
    /// The path MTU in use.
    public var pathMTU = 0
    /// Where it came from.
    public var mtuSource = MTUSource.kernel
    /// The largest UDP payload put on the wire.
    public var datagramSize = 0
    /// Packets that would have exceeded the path MTU (planned for a larger one, then dropped).
    public var clamped = 0
    /// Frames cut short by such a drop (the rest of the frame was not sent).
    public var framesClamped = 0
    /// Path-MTU probes put on the wire.
    public var probesSent = 0
    /// Path-MTU probes the receiver confirmed.
    public var probesConfirmed = 0
    /// Path-MTU probes given up (no confirmation in time).
    public var probesLost = 0
    /// ICMP "fragmentation needed" / "packet too big" taken into account.
    public var icmpMTUReports = 0
    /// Times the MTU in use stopped getting through (black hole) and fell back to the base.
    public var blackHoles = 0
    /// Path-MTU searches started.
    public var mtuSearches = 0
    /// Milliseconds from the start until the last search found its size (nil while none has).
    public var mtuFoundAfterMs: Double?
    /// A usable route to the receiver exists (the route monitor says; true when not watched).
    public var pathViable = true
    /// Milliseconds without a viable path so far (an outage under way included).
    public var pathUnviableMs = 0.0
    /// Times the path stopped being viable.
    public var pathUnviableEpisodes = 0
    /// Times the route moved to another interface or next hop (a new path).
    public var pathChanges = 0
    /// The outgoing interface's name, the next hop and the source address the kernel picks
    /// (nil until known, or when the path is not watched).
    public var pathInterface: String?
    public var pathGateway: String?
    public var pathSource: String?
    /// Times the flow's sockets were connected again to take a new source address.
    public var pathRebinds = 0
    /// When the path last stopped being viable, and last became viable again (Unix time in
    /// seconds, when the engine acted on the kernel's notice; nil: never): set beside the time
    /// a route was removed or added, the reaction time.
    public var pathUnviableAt: Double?
    public var pathViableAgainAt: Double?
    /// Milliseconds from the path's return to the first packet of the keyframe that resumed
    /// the flow (the last outage's; nil before any).
    public var pathResumeMs: Double?
    /// Frames dropped because the path was not viable (and after it, until a keyframe).
    public var framesDroppedUnviable = 0
    /// Times the route monitor's socket overran (notifications lost; the paths looked up again).
    public var pathMonitorOverruns = 0
    /// Times the route monitor could not listen (a receive failed or could not be queued; it
    /// listens again and the paths are looked up again).
    public var pathMonitorFailures = 0
    /// The TOS byte's DSCP.
    public var dscp: UInt8 = 0
    /// The ECN codepoint sent (ect0 after an ect1 flow's path was seen to remark it).
    public var ecn = "ect0"
    /// What the path does to it, from the codepoints the receiver reports per packet: none (the
    /// flow sends Not-ECT), testing, capable, bleached (arrives Not-ECT) or remarked (arrives
    /// with the other ECT codepoint).
    public var ecnPath = "none"
    /// The reported packets by the codepoint they arrived with.
    public var ecnReported = ECNReportCounts()
    /// The media packets written when the flow went from ECT(1) to ECT(0) (its path remarked
    /// ECT(1)); nil if it never did.
    public var ecnRemarkedAtPacket: Int?
    /// Pacing rate (bits per second, 0 = unpaced).
    public var pacingRate = 0.0
    /// Submissions (io_uring_enter calls that carried sends), engine-wide.
    public var batches = 0
    /// Send SQEs (one per datagram, or per GSO run of several), engine-wide.
    public var sendCalls = 0
    /// Sends that used UDP GSO, engine-wide.
    public var gsoSends = 0
    /// Calls to io_uring_enter, engine-wide.
    public var enterCalls = 0
    /// The SSRC of RFC 4588 retransmissions (nil: none, or retransmitted on the media SSRC).
    public var rtxSSRC: UInt32?
    /// Retransmissions the kernel accepted (not in `packetsSent`), and their bytes.
    public var rtxSent = 0
    public var rtxBytes = 0
    /// Retransmissions that failed to send.
    public var rtxFailed = 0
    /// RFC 4588 retransmissions the receiver's per-packet feedback confirmed, and those it did
    /// not confirm within the loss timeout (lost on the path). Only from receivers that send
    /// RFC 8888 feedback for the RTX SSRC (streamer recv); 0 otherwise.
    public var rtxConfirmed = 0
    public var rtxLost = 0
    /// Originals lost whose retransmission the receiver confirmed (counted in `packetsLost` too).
    public var packetsRecovered = 0
    /// Generic NACKs about this flow received from its receiver.
    public var nackReceived = 0
    /// Sequence numbers they asked for.
    public var nackRequested = 0
    /// Bytes of the original packets retransmitted for them: what the NACKs asked for.
    public var nackRequestedBytes = 0
    /// Requests not answered, by reason (each sequence number counts once per NACK).
    public var nackRejected: [NACKRejection: Int] = [:]
    /// The SSRC of the stream.
    public var ssrc: UInt32 = 0
    /// Failed sends by what failed (datagrams per errno; redirect attempts).
    public var errors: [SendFailure: Int] = [:]
    /// Feedback is expected (false with `--no-feedback`).
    public var feedback = true
    /// Packets feedback confirmed arrived.
    public var packetsConfirmed = 0
    /// Packets reported missing or unconfirmed too long (and not confirmed since).
    public var packetsLost = 0
    /// Packets no receiver will confirm, neither confirmed nor lost: sent to a receiver that has
    /// sent no feedback since the start, or unconfirmed when the flow moved to another receiver
    /// (`redirect`: only the current one is heard). With `feedback` off no packet is tracked:
    /// this, `packetsConfirmed`, `packetsLost` and `packetsUnconfirmed` stay 0.
    public var packetsAbandoned = 0
    /// Packets neither confirmed nor lost yet.
    public var packetsUnconfirmed = 0
    /// Bytes of those.
    public var bytesUnconfirmed = 0
    /// The most unconfirmed bytes at any time.
    public var peakUnconfirmedBytes = 0
    /// The bound on unconfirmed bytes (0 when there is none).
    public var maxUnconfirmedBytes = 0
    /// Frames dropped because the bound was reached (or while waiting for a keyframe after that).
    public var framesDroppedUnconfirmed = 0
    /// The last round-trip time sample in milliseconds (nil until measured).
    public var rttLast: Double?
    /// The smallest round-trip time sample in milliseconds (nil until measured).
    public var rttMin: Double?
    /// The smoothed round-trip time in milliseconds (RFC 6298 weights; nil until measured).
    public var rttSmoothed: Double?
    /// The median and 95th percentile of the RTT samples taken while media flowed
    /// (milliseconds, to 1 %; nil until one was): the run's RTT, which `rttSmoothed` is not
    /// once the stream has stopped (idle samples after it pull the average down).
    public var rttMedian: Double?
    public var rtt95thPercentile: Double?
    /// RTT samples taken while media flowed (those behind `rttMedian`).
    public var rttSamplesWhileSending = 0
    /// When the report that gave `rttLast` arrived: Unix time in seconds (its kernel timestamp),
    /// so an RTT sample can be set beside another tool's (ping -D) taken at the same moment.
    public var rttLastAt: Double?
    /// Packets the receiver reported CE-marked.
    public var ceReported = 0
    /// The receiver stopped sending feedback (and has not come back).
    public var receiverGone = false
    /// Times the receiver went silent.
    public var receiverGoneEvents = 0
    /// Keyframes forced (PLI, bound, receiver back).
    public var keyframeRequests = 0
    /// Keyframe requests ignored: one was forced less than `minKeyframeInterval` ago and a
    /// deferred one already waits.
    public var keyframeRequestsIgnored = 0
    /// Keyframe requests (PLI) that came less than `minKeyframeInterval` after a forced
    /// keyframe, when none waited: forced once the interval has passed.
    public var keyframeRequestsDeferred = 0
    /// RTCP datagrams accepted from the receiver.
    public var feedbackReports = 0
    /// RTCP rejected, by reason (malformed, confirmations of packets never sent).
    public var feedbackRejected: [FeedbackRejection: Int] = [:]
    /// The receiver's smoothed feedback interval in milliseconds (nil until measured).
    public var feedbackIntervalMs: Double?
    /// Sender reports sent.
    public var senderReports = 0
    /// RTCP BYE compounds sent (one per flow at its end).
    public var byeSent = 0
    /// Feedback was expected but none ever arrived: the sender runs without the bound.
    public var feedbackAbsent = false
    /// RTCP datagrams the kernel dropped on the feedback socket (its buffer full: a flood).
    public var feedbackKernelDrops = 0
    /// Where this flow goes.
    public var destination = ""
    /// Times the flow was pointed at a new destination (`MediaSender.redirect`).
    public var redirects = 0
    /// This flow's index in its engine (0 for a single-flow sender).
    public var flowIndex = 0
    /// Flows the engine carries (they share the ring, the pacer and the submissions).
    public var flows = 1
    /// Submissions that carried datagrams of more than one flow (engine-wide).
    public var mixedSubmissions = 0
    /// The congestion controller's state (nil when the flow has none).
    public var congestion: CongestionStats?
    /// SRTP counters of this flow, both directions (nil without SRTP).
    public var srtp: SRTPStats?
    /// With a multicast destination: each receiver's last report, by SSRC (at most
    /// `MediaSenderConfig.maxMulticastReceivers`).
    public var receivers: [MulticastReceiverReport] = []
    /// With a multicast destination: receivers dropped from `receivers` to make room for new
    /// ones (the least recently heard).
    public var receiversEvicted = 0
}

/// The packets a receiver reported per packet (RFC 8888), by the ECN codepoint they arrived with
/// against the one they were sent with.
public struct ECNReportCounts: Sendable, Equatable {
    /// Arrived with the codepoint sent.
    public var asSent = 0
    /// Arrived CE-marked.
    public var ce = 0
    /// Sent ECT, arrived Not-ECT.
    public var bleached = 0
    /// Sent with one ECT codepoint, arrived with the other.
    public var remarked = 0
}
