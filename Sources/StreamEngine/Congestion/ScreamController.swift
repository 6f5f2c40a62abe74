import UringIO

/// The settings of a `ScreamController`.
public struct ScreamConfiguration: Sendable, Equatable {
    /// The lowest target bitrate, bits per second; the window never shrinks below what carries it.
    public var minBitrate: Int
    /// The highest target bitrate, bits per second; the window stops growing past what carries it.
    public var maxBitrate: Int
    /// The target bitrate before any feedback, bits per second.
    public var startBitrate: Int
    /// The flow sends ECT(1): CE marks come from an L4S queue and are answered in proportion
    /// to their fraction (DCTCP / Prague). Otherwise a CE mark is a classic signal (×`ecnBeta`).
    public var l4s: Bool
    /// The queue delay the controller aims below: delay-based virtual marking starts at half
    /// of it and marks every packet at it.
    public var queueDelayTarget: Duration
    /// The pacing rate over the target bitrate: room for a frame's burst to leave faster than
    /// the mean rate.
    public var pacingHeadroom: Double
    /// The bytes allowed in flight over the reference window: room for a frame's burst.
    public var windowHeadroom: Double
    /// The largest packet, bytes: the unit of window growth and of the floor (two of them).
    public var maxPacketSize: Int
    /// How long a minimum one-way delay is remembered: the base delay can rise (a route
    /// change) after at most this long.
    public var baseDelayWindow: Duration
    /// The RTT assumed until one is measured.
    public var initialRTT: Duration
    /// The window after a loss, as a fraction of the window before it (at most once per RTT).
    public var lossBeta: Double
    /// The window after a classic CE mark, as a fraction (at most once per RTT).
    public var ecnBeta: Double
    /// Meet a flow that keeps a queue standing (a loss-based TCP in a deep drop-tail buffer) on
    /// its own terms: when the flow has given way down to its floor and the queue still stands,
    /// stop answering queue delay and answer loss and CE only, until a probe finds the queue
    /// gone with the flow at its floor (`ScreamController`, competitive mode).
    public var competesWithQueueBuildingFlows: Bool
    /// How often a flow in competitive mode checks whether the queue is still another's.
    public var competitiveProbeInterval: Duration

    /// Defaults for a live video flow; the bitrates in bits per second.
    public init(minBitrate: Int = 150_000, maxBitrate: Int = 50_000_000, startBitrate: Int = 1_000_000,
                l4s: Bool = false, queueDelayTarget: Duration = .milliseconds(20),
                pacingHeadroom: Double = 1.05, windowHeadroom: Double = 1.5, maxPacketSize: Int = 1200,
                baseDelayWindow: Duration = .seconds(10), initialRTT: Duration = .milliseconds(100),
                lossBeta: Double = 0.7, ecnBeta: Double = 0.8, competesWithQueueBuildingFlows: Bool = true,
                competitiveProbeInterval: Duration = .seconds(10)) {
        self.minBitrate = minBitrate
        self.maxBitrate = maxBitrate
        self.startBitrate = startBitrate
        self.l4s = l4s
        self.queueDelayTarget = queueDelayTarget
        self.pacingHeadroom = pacingHeadroom
        self.windowHeadroom = windowHeadroom
        self.maxPacketSize = maxPacketSize
        self.baseDelayWindow = baseDelayWindow
        self.initialRTT = initialRTT
        self.lossBeta = lossBeta
        self.ecnBeta = ecnBeta
        self.competesWithQueueBuildingFlows = competesWithQueueBuildingFlows
        self.competitiveProbeInterval = competitiveProbeInterval
    }
}

/// A congestion controller after SCReAM v2 (draft-ietf-ccwg-rfc8298bis-screamv2): a reference
/// window cut at most once per RTT (loss ×0.7, classic CE ×0.8, L4S CE by the EWMA of the
/// marked fraction as in DCTCP / Prague), delay-based virtual marking from the queue delay
/// (one-way delay over its minimum in `baseDelayWindow`), target bitrate = window / feedback
/// delay, pacing at the target with headroom.
///
/// When feedback stops for `feedbackTimeout` while packets are in flight (counted from the first
/// packet sent after the last report: silence after the last send, at a stream's end or while
/// the source pauses, is not a stop), the window drops to two packets and the target to the
/// minimum, and what was in flight leaves it (as after a retransmission timeout), so a probe's
/// worth goes out at once. When feedback returns, slow start climbs back to the window held before.
///
/// Where it departs from SCReAM v2, and why:
/// - Pacing headroom 1.05, not 1.5. A frame sent at h × the bottleneck rate leaves
///   (1 − 1/h) of it queued; at 1.5 a third of every frame queues, crosses a 1 ms L4S step
///   threshold and draws marks the sender caused itself, which SCReAM's authors give as the
///   cause of its ~75 % utilisation. The sender's pacer absorbs the frame burst instead.
///   In the simulated 20 Mbit/s, 25 ms, 1 ms-step L4S link of
///   `Tests/StreamEngineTests/CongestionControllerTests.swift` (30 fps frames) the link was
///   67 % used at 1.5, 81 % at 1.25, 91 % at 1.1, 94 % at 1.05 and 89 % at 1.0 (frames then
///   wait in the sender and the sawtooth's troughs go unused).
/// - The L4S reaction uses the marked *byte* fraction of an RTT's acknowledgements, real CE
///   and virtual marks together (the larger per packet), so one EWMA drives both.
/// - Growth is additive and speeds up with the rounds n since the last cut (1 + n/16 packets
///   per round, CUBIC's convex probe), where SCReAM v2 grows by a fraction of the window
///   (2 %) slowed near the window of the last congestion event: a per-round increase that
///   does not scale with the window keeps the DCTCP sawtooth small at high rates (an L4S
///   cut must only undo one round's growth), so the rate stays close to the capacity;
///   in the simulated L4S link of `Tests/StreamEngineTests/CongestionControllerTests.swift`
///   a ramp four times as fast (n/4) gave 3-4 points less utilisation.
/// - Window and rate convert through the feedback delay (the mean time from sending a
///   packet to the report that confirms it), not the RTT alone: bytes stay in flight that
///   long, and with reports every 20 ms on a 25 ms path the RTT alone made the window, not
///   the path, cap the rate.
/// - A loss or classic CE cuts only when the packet was sent after the last cut (RFC 9002's
///   congestion period), not merely an RTT after it: marks on packets already queued when
///   the window was cut repeat the signal the cut answered, however late they are reported
///   (a queue grown past an RTT delays them more than that).
/// - Loss is declared only for packets the receiver reports missing with three later
///   packets received (RFC 9002's packet threshold) and, once the path was seen to reorder,
///   only when a reorder window has passed beyond the round trip of the newest packet
///   delivered (RACK, RFC 8985): a packet declared lost that the receiver then reports
///   received widens the window to a quarter more than its delay over the least one-way
///   delay (at least a quarter of the least RTT, at most the smoothed RTT), and when every
///   packet a loss event declared lost arrives, its cuts are taken back. Without it a path
///   that reorders (several links, a radio that retries frames) read as loss at every
///   reordering and held the rate at a fifth of the link (tools/cc-eval case h, results/cc/
///   reordering.md). Packets no report ever covers (their feedback was lost) leave the
///   flight after a timeout without a reaction, so lost feedback does not read as congestion.
/// - Tail loss (RACK-TLP, RFC 8985): when the window is full and no report has confirmed or
///   declared anything for a probe timeout (`tailProbeTimeout`), the window lets two packets
///   more out (the flow wakes for it: `nextTimeout`); a packet with fewer than the threshold's
///   three sent after it is declared lost by time instead, once a packet sent after it was
///   delivered and its round trip passed.
///   Without it, on a LAN at 10 % random loss, where loss cuts keep the window at a few
///   packets, a window full of lost packets stalled the flow: nothing more went out, so
///   nothing showed the loss and the receiver had nothing to report; after 100 ms the silence
///   read as feedback gone (window two packets, target the minimum) and the packets left the
///   flight only when they expired (300 ms), while frames waited in the sender.
///   `Tests/StreamEngineTests/CongestionControllerTests.swift`
///   (`aFullWindowOfLostPacketsIsProbedAndDeclaredLost`) shows both.
/// - It measures the rate at which the bottleneck delivers the flow's packets while a queue
///   stands before them (`bottleneckRate`: runs of marked packets, each right behind the one
///   before, timed by the receiver), and the flow paces a backlog, a keyframe, at no more than
///   0.9 of it (or the target if that is more). SCReAM v2 paces at 1.5 x the target; here a
///   backlog went at up to twice the target to drain within a quarter of `maxFrameWait`, and
///   at an L4S bottleneck every keyframe then overran the link, drew a burst of marks and a cut
///   (tools/cc-eval case a: 86.5 % of the link; results/cc/bottleneck-rate.md).
/// - Competitive mode, where RFC 8298 raises its delay target with the delay it sees (and
///   SCReAM v2 leaves the case to the delay target's setting): a loss-based flow in a deep
///   drop-tail buffer keeps a queue standing whatever this flow does, and answering that queue
///   held the flow at its minimum bitrate (tools/cc-eval case e: 10 % of the link against one
///   TCP flow). When the standing queue stays over twice the target for `competitiveEntryTime`
///   and four rounds with the window at its floor, the queue is not this flow's: the window
///   goes back to half what it was when the queue rose, and only loss and CE cut it from then
///   on. Every `competitiveProbeInterval` a probe halves the window for two feedback delays
///   (after BBR's ProbeRTT, which drains a queue of its own to see the path's delay) and then
///   puts it back at the rate it had. When the packets it sent in the second found the queue
///   (over the base delay the mode began with) at half or less of what stood before it, and a
///   second probe a second later finds the same, the queue was this flow's and the mode ends;
///   another flow's stays, as a loss-based flow grows into what this one left. With little
///   queue before a probe, or a loss during it (which the other flow took too, and cut for),
///   it tells nothing and the next comes a second later. A base delay that rose while in the mode
///   (a route change) reads as queue that stays: the flow then stays loss-based on that path.
public struct ScreamController: CongestionController {
    /// Its settings.
    public private(set) var configuration: ScreamConfiguration

    // Durations and times in nanoseconds, bitrates in bits per second, windows in bytes.
    private let queueDelayTarget: Int64

    /// The reference window (bytes).
    private(set) var referenceWindow: Double
    /// Still in slow start (no congestion signal yet, or recovering after feedback stopped).
    private(set) var slowStart = true
    /// Slow start ends here (after feedback stopped: the window before).
    private var slowStartThreshold = Double.infinity
    /// Smoothed RTT (nil until measured).
    private(set) var smoothedRTT: Int64?
    /// Smoothed time from sending a packet to the feedback that confirms it (nil until measured):
    /// the RTT plus the receiver's wait before reporting. Bytes stay in flight this long, so
    /// window and rate convert through it, and a cut shows in feedback after it.
    private(set) var smoothedFeedbackDelay: Int64?
    /// The last queue delay estimate (mean over the last report's packets).
    private(set) var queueDelay: Int64 = 0
    /// The EWMA of the marked fraction (real L4S CE and virtual marks), 0...1.
    private(set) var markedFraction: Double = 1
    /// Window reductions so far.
    private(set) var reductions = 0
    /// Losses declared.
    private(set) var lossesDeclared = 0
    /// Packets that left the flight without ever being reported.
    private(set) var expired = 0
    /// Feedback has stopped: the window is at its floor until it returns.
    private(set) var feedbackStopped = false
    /// How often feedback was taken for stopped (`CongestionLossCounts.feedbackStops`).
    private var feedbackStops = 0
    /// The bytes sent and neither confirmed, declared lost, nor expired.
    public private(set) var bytesInFlight = 0
    /// The flow's RFC 4588 retransmissions in flight (they share the window): a window full
    /// of them and of lost packets is full, and gets tail probes like one full of lost packets.
    public var otherBytesInFlight = 0

    private var lastReductionAt = Int64.min / 2
    /// Growth waits an RTT after a loss or classic CE cut (the cut's effect is not yet in the
    /// feedback); an L4S cut does not stop growth, which is what balances it (Prague).
    private var growthHeldUntil = Int64.min
    /// Packets reported missing and not yet declared lost (too few later packets received).
    private var pendingMissing: Set<Int64> = []
    /// The last time a report confirmed a packet or declared one lost, or a packet went into
    /// an empty flight: a tail probe is due a probe timeout after it (`tailProbeTimeout`).
    private var lastProgressAt = Int64.min / 2
    private var lastTailProbeAt = Int64.min / 2
    /// Bytes the window lets out beyond itself: a tail probe's packet (at most two), until
    /// the next report that confirms or declares anything.
    private var probeCredit = 0.0
    /// Tail probes sent so far, and since the last progress (each doubles the next timeout).
    private(set) var tailProbes = 0
    private var tailProbesWithoutProgress = 0
    /// The smoothed time between feedback reports, and the last one's arrival.
    private var smoothedReportGap: Int64?
    private var lastReportAt: Int64?
    private var roundsSinceReduction = 0
    /// Silence is counted from here: the first packet sent after the last feedback, or into an
    /// empty flight (nil until one is: a sender that sends nothing is owed nothing).
    private var silenceSince: Int64?
    /// The RTT round counted for the marked-fraction EWMA and the growth rounds.
    private var roundStart: Int64?
    private var roundAckedBytes = 0.0
    private var roundMarkedBytes = 0.0
    private var roundHadMark = false
    /// The most bytes in flight in this and the last round: growth needs the window in use.
    private var inFlightPeakThisRound = 0
    private var inFlightPeakLastRound = 0

    private var baseDelay: MinimumOverWindow
    /// The base delay of each packet-size class (`sizeClass(of:)`). A packet's one-way delay
    /// includes its own transmission at the bottleneck: 16 ms for 1200 bytes at 600 kbit/s, 1.3 ms
    /// for 100. Against one minimum (set by the smallest packets) every full-size packet would read
    /// as that difference of queue, which at low rates is most of the delay target and holds the
    /// rate at half the link (measured in the lab, tools/cc-eval case b at 0.6 Mbit/s). Each
    /// packet is compared with packets of its own size, so what is left is queue.
    private var baseDelayBySize: [MinimumOverWindow]
    static let sizeClasses = 8

    private struct Entry {
        var sequence: Int64 = -1
        var sentAt: Int64 = 0
        var bytes: Int32 = 0
        var outstanding = false
        /// Declared lost: a later report of its arrival shows the path reorders.
        var declaredLost = false
    }
    private var entries: [Entry]
    private let mask: Int64
    private var oldest: Int64 = -1
    private var newestSent: Int64 = -1
    private var highestReceived: Int64 = -1

    /// Packets reported missing with this many later packets received count as lost.
    static let reorderingThreshold: Int64 = 3
    /// Packets declared lost that were then reported received (the path reordered them).
    private(set) var spuriousLosses = 0
    /// How long past the newest delivered packet's round trip a missing packet is given
    /// before it counts as lost (nanoseconds; RACK's `reo_wnd`): 0 until a loss turned out to
    /// be reordering, then a quarter more than the most a packet declared lost was delayed
    /// over the path's least one-way delay, at least a quarter of the least RTT, at most the
    /// smoothed RTT.
    private(set) var reorderWindow: Int64 = 0
    /// Loss events since the reorder window last widened: after 16 it halves (RACK resets it
    /// after 16 recoveries), so a path that stopped reordering is not slow to see loss forever.
    private var lossEventsSinceReorderRaise = 0
    /// The least RTT sample in `baseDelayWindow`.
    private var leastRTT: MinimumOverWindow
    /// The send time of the newest-sent packet confirmed, and its time from sending to the
    /// report that confirmed it (RACK's `xmit_ts` and `rtt`).
    private var newestDeliveredSentAt = Int64.min
    private var newestDeliveredRTT: Int64 = 0
    /// The window before the loss cuts of the current congestion event, the packets those
    /// cuts declared lost that have not been reported received, and when the event began:
    /// when every one of them turns out to have been reordered, the cuts are undone.
    private var lossUndo: (window: Double, pending: Int, since: Int64)?
    /// Loss cuts undone because every packet they declared lost arrived.
    private(set) var lossCutsUndone = 0
    /// The classic DCTCP gain of the marked-fraction EWMA.
    static let markedFractionGain = 1.0 / 16

    /// In competitive mode: a queue-building flow holds the bottleneck's queue, and this flow
    /// answers loss and CE only (see the type's notes).
    private(set) var competing = false
    /// Times competitive mode began, probes made in it, and times a probe ended it.
    private(set) var competitiveEntries = 0
    private(set) var competitiveProbes = 0
    private(set) var competitiveExits = 0
    /// How long the window must sit at its floor with the queue standing before the mode begins.
    static let competitiveEntryTime: Int64 = 2_000_000_000
    /// The reference window at the end of the last round whose standing queue was under the
    /// target (what the path carried before a standing queue rose), the rounds ended with the
    /// window at its floor while the queue stood, and since when it has been there.
    private var windowBeforeQueue: Double = 0
    private var floorRounds = 0
    private var atFloorSince: Int64?
    /// The least one-way delay when the mode began: the standing queue raises the base delay's
    /// minimum over its window, so a probe measures against this one.
    private var competingBase: Int64 = 0
    private var nextProbeAt: Int64 = 0
    /// In the mode: the least queue delay over `competingBase` of the packets confirmed in this
    /// round, and in the last round ended (`.max`: none).
    private var roundLeastOverCompetingBase = Int64.max
    private var lastRoundLeastOverCompetingBase = Int64.max
    /// A probe under way: the window it halved, when it began, the feedback delay then, the
    /// queue that stood before it (the last round's least over `competingBase`), and the least
    /// queue delay over `competingBase` of the packets sent from one feedback delay after it
    /// began (what this flow's half could drain by then has drained) and how many there were.
    private var probe: (savedWindow: Double, startedAt: Int64, feedbackDelay: Int64, before: Int64, least: Int64,
                        count: Int, lossesBefore: Int)?
    /// The last probe found the queue this flow's: the next one, a second later, decides.
    private var probeFoundOwnQueue = false

    /// Runs of packets that found a queue before them (marked: CE, or virtual), each right
    /// behind the one before it in sequence: a queue stood, so the bottleneck sent them back to
    /// back, and the receiver's time from the arrival of the packet before a run to the arrival
    /// of its last is what the bottleneck took to send the run. The run under way: the arrival
    /// before it, its last packet's sequence and arrival, its bytes and packets.
    private var run: (before: Int64, lastSequence: Int64, lastArrival: Int64, bytes: Double, packets: Int)?
    /// The bytes and the time of the runs ended since the last sample.
    private var queuedBytes = 0.0
    private var queuedTime: Int64 = 0
    /// The newest packet reported received and its arrival (receiver's clock).
    private var lastArrival: (sequence: Int64, arrival: Int64)?
    /// The rate at which the bottleneck delivered this flow's packets while a queue stood
    /// before them (bits per second; nil: none measured in `baseDelayWindow`), and when it was
    /// last measured.
    private(set) var queuedDeliveryRate: Double?
    private var queuedDeliveryRateAt: Int64 = 0
    /// A run counts from this many packets. Only a run's ends carry the noise of what the path
    /// does after the bottleneck (delay variation, reordering; the receiver's timestamps come
    /// in 1/1024 s): short runs would be all noise, and a packet's gap to the one before it,
    /// taken alone, is longer on average than the bottleneck's (tools/cc-eval case g, 10 ms of
    /// delay variation: 12 Mbit/s read on a 20 Mbit/s link).
    static let queuedRunMinimumPackets = 8
    /// The runs' times must add up to this much to be a sample.
    static let queuedDeliveryMinimumSpan: Int64 = 50_000_000

    /// A controller with `configuration`.
    public init(configuration: ScreamConfiguration = ScreamConfiguration()) {
        precondition(configuration.minBitrate > 0 && configuration.minBitrate <= configuration.maxBitrate)
        self.configuration = configuration
        queueDelayTarget = configuration.queueDelayTarget.nanoseconds
        baseDelay = MinimumOverWindow(window: configuration.baseDelayWindow.nanoseconds)
        leastRTT = MinimumOverWindow(window: configuration.baseDelayWindow.nanoseconds)
        baseDelayBySize = Array(repeating: MinimumOverWindow(window: configuration.baseDelayWindow.nanoseconds),
                                count: Self.sizeClasses)
        let start = Double(min(max(configuration.startBitrate, configuration.minBitrate), configuration.maxBitrate))
        referenceWindow = start / 8 * Double(configuration.initialRTT.nanoseconds) / 1e9
        entries = Array(repeating: Entry(), count: 1 << 14)
        mask = (1 << 14) - 1
        referenceWindow = max(referenceWindow, floorWindow)
    }

    /// The time a window's bytes take to be confirmed: the feedback delay (RTT plus the
    /// receiver's report interval), before any the assumed initial RTT. SCReAM divides the
    /// window by the RTT alone; with feedback every 20 ms on a 25 ms path the bytes in flight
    /// are then nearly twice the window and the window, not the path, caps the rate.
    @inline(__always)  // read for every packet sent, as `feedbackStopDue` below
    private var rtt: Int64 { smoothedFeedbackDelay ?? smoothedRTT ?? configuration.initialRTT.nanoseconds }
    private var rttSeconds: Double { Double(max(rtt, 1_000_000)) / 1e9 }

    /// The smallest reference window: two packets, and at least the minimum bitrate's worth.
    private var floorWindow: Double {
        max(2 * Double(configuration.maxPacketSize), Double(configuration.minBitrate) / 8 * rttSeconds)
    }

    /// The largest useful reference window: the maximum bitrate's worth (and a packet).
    private var ceilingWindow: Double {
        Double(configuration.maxBitrate) / 8 * rttSeconds + Double(configuration.maxPacketSize)
    }

    /// The bytes that may be in flight: the reference window with `windowHeadroom`, two
    /// packets while feedback has stopped; either with the tail probes' credit (two packets a
    /// probe, at most four, until the next progress).
    @inline(__always)  // read for every packet sent, as `feedbackStopDue` below
    public var window: Int {
        if feedbackStopped { return Int(2 * Double(configuration.maxPacketSize) + probeCredit) }
        return Int(referenceWindow * configuration.windowHeadroom + probeCredit)
    }

    /// How long without a packet confirmed or declared lost, with the window full, before a
    /// tail probe: twice the feedback delay and twice the time between reports (the
    /// receiver's report interval is its largest ack delay: RFC 9002's PTO has it), at least
    /// 10 ms, and under half the `feedbackTimeout` (a probe's report keeps a receiver that is
    /// there from reading as gone); doubled for each probe since the last progress (RFC 9002's
    /// backoff), so a path that is gone gets one packet ever more seldom.
    @inline(__always)  // read for every packet sent, as `feedbackStopDue` below
    var tailProbeTimeout: Int64 {
        let base = min(max(2 * rtt, 2 * (smoothedReportGap ?? 0), 10_000_000), feedbackTimeout / 2)
        return base << min(tailProbesWithoutProgress, 6)
    }

    /// The reference window over the feedback delay, within the configured bounds; the
    /// minimum while feedback has stopped.
    public var targetBitrate: Int {
        if feedbackStopped { return configuration.minBitrate }
        let rate = referenceWindow * 8 / rttSeconds
        return Int(min(max(rate, Double(configuration.minBitrate)), Double(configuration.maxBitrate)))
    }

    /// The target bitrate with `pacingHeadroom`.
    public var pacingRate: Int { Int(Double(targetBitrate) * configuration.pacingHeadroom) }

    /// The queue delay of the last report's packets (one-way delay over its minimum), once a
    /// report has confirmed a packet.
    public var queueDelayEstimate: Duration? { smoothedFeedbackDelay == nil ? nil : .nanoseconds(queueDelay) }

    /// How long without feedback, while packets are in flight, before the window collapses:
    /// four RTTs, and never under 100 ms (a receiver reporting every 20-50 ms skips a few).
    @inline(__always)  // read for every packet sent, as `feedbackStopDue` below
    var feedbackTimeout: Int64 { max(4 * rtt, 100_000_000) }

    /// Losses declared, those that turned out to be reordering, cuts undone, the reorder
    /// window, tail probes.
    public var lossCounts: CongestionLossCounts? {
        CongestionLossCounts(declared: lossesDeclared, spurious: spuriousLosses, cutsUndone: lossCutsUndone,
                             reorderWindow: .nanoseconds(reorderWindow), tailProbes: tailProbes,
                             feedbackStops: feedbackStops)
    }

    /// The rate at which the bottleneck delivered this flow's packets while a queue stood
    /// before them (runs of at least `queuedRunMinimumPackets` marked packets, each right behind
    /// the one before, timed by the receiver; smoothed, a quarter per sample of 50 ms of runs),
    /// nil when none was measured in `baseDelayWindow`.
    public var bottleneckRate: Int? { queuedDeliveryRate.map { Int($0) } }

    /// Whether it competes with a queue-building flow now, and how often it began, probed, ended.
    public var competition: CongestionCompetition? {
        CongestionCompetition(competing: competing, entries: competitiveEntries, probes: competitiveProbes,
                              exits: competitiveExits)
    }

    /// ECT(1) answers CE in proportion to the marks (L4S); any other codepoint, from the next
    /// report on, as a classic flow: a cut once per round trip with CE, as for loss.
    public mutating func ecnChanged(to codepoint: ECNCodepoint) { configuration.l4s = codepoint == .ect1 }

    /// Records a packet put on the wire (and lets time pass to its send time).
    public mutating func packetSent(_ packet: SentPacketRecord) {
        let now = packet.sentAt.nanoseconds
        advanceInternal(to: now)
        let index = Int(packet.sequence & mask)
        if entries[index].outstanding { bytesInFlight -= Int(entries[index].bytes); expired += 1 }
        let bytes = min(max(packet.bytes, 0), 1 << 20)
        if bytesInFlight == 0 || silenceSince == nil { silenceSince = now }
        if bytesInFlight == 0 { lastProgressAt = now }
        entries[index] = Entry(sequence: packet.sequence, sentAt: now, bytes: Int32(bytes), outstanding: true)
        if oldest < 0 { oldest = packet.sequence }
        oldest = max(oldest, packet.sequence - Int64(entries.count) + 1)
        newestSent = max(newestSent, packet.sequence)
        bytesInFlight += bytes
        inFlightPeakThisRound = max(inFlightPeakThisRound, bytesInFlight)
    }

    /// Lets time pass: notices feedback that stopped and writes off packets no report covered.
    public mutating func advance(to now: Duration) { advanceInternal(to: now.nanoseconds) }

    /// When the next tail probe or the feedback stop falls due, whichever is first.
    public var nextTimeout: Duration? {
        guard let stop = feedbackStopDue else { return tailProbeDue.map { .nanoseconds($0) } }
        return .nanoseconds(min(tailProbeDue ?? stop, stop))
    }

    /// When silence becomes a feedback stop: the feedback timeout after it began (the first
    /// packet sent after the last report), while packets are in flight; nil once stopped.
    // Read for every packet sent (`advanceInternal`): inlined, since a call out of line (of this
    // or of the getters it reads) copied the whole controller, 952 bytes, to the stack first,
    // twice a packet with `tailProbeDue` (results/profile.md section 58).
    @inline(__always)
    private var feedbackStopDue: Int64? {
        guard !feedbackStopped, let since = silenceSince, bytesInFlight > 0 else { return nil }
        return since + feedbackTimeout + 1
    }

    /// When a tail probe is due: the window full (no packet more fits) and a probe timeout
    /// after the last progress or probe; nil while the window has room or nothing is in flight.
    @inline(__always)
    private var tailProbeDue: Int64? {
        let held = bytesInFlight + max(otherBytesInFlight, 0)
        guard held > 0, held + configuration.maxPacketSize > window else { return nil }
        return max(lastProgressAt, lastTailProbeAt) + tailProbeTimeout
    }

    private mutating func advanceInternal(to now: Int64) {
        // Without feedback nothing else would let a probe out once the window collapsed.
        expireUnreported(now: now)
        if let probeDue = tailProbeDue, now >= probeDue {
            // Nothing confirmed or lost for a probe timeout with the window full: the last packets
            // sent may all be lost, and with the window full of them nothing more goes out that
            // would show it (RACK-TLP's tail loss probe, RFC 8985 section 7). Two packets more are
            // let out (RFC 9002 6.2.4 allows two a probe): their report shows the others missing,
            // and the time threshold declares them lost. With one, at 20 % random loss, one probe
            // in five was lost too, and the silence it left became a feedback stop.
            lastTailProbeAt = now
            let packet = Double(configuration.maxPacketSize)
            probeCredit = min(probeCredit + 2 * packet, 4 * packet)
            tailProbes += 1
            tailProbesWithoutProgress += 1
        }
        // Silence means the feedback stopped only when something was sent into it, and counts from
        // that send: after the last report a receiver that gets nothing new has nothing to say. At
        // a stream's end (or while the source pauses) with its last packets lost, no report covers
        // them and none will: taken for a stop, it cut a finished stream's target to the minimum,
        // and a source that sent again after a pause longer than the timeout was cut at once.
        guard let stopDue = feedbackStopDue, now >= stopDue else { return }
        // The path or its feedback is gone: send no more than a probe's worth until it answers,
        // and come back in slow start towards the window we had. What is in flight leaves it
        // (as a retransmission timeout writes the flight off, RFC 8985 6.3): held against the
        // collapsed window, packets that no report will cover (all lost, or their feedback)
        // kept even the probes from going until they expired.
        feedbackStopped = true
        feedbackStops += 1
        slowStartThreshold = referenceWindow
        referenceWindow = floorWindow
        reductions += 1
        writeOffFlight(sentBefore: .max)
    }

    private func lookup(_ sequence: Int64) -> Int? {
        let index = Int(sequence & mask)
        return entries[index].sequence == sequence ? index : nil
    }

    /// Takes a feedback report: confirms, marks and loses packets, measures the feedback
    /// delay and the queue delay, and cuts or grows the reference window.
    public mutating func feedbackReceived(_ feedback: CongestionFeedback) {
        let now = feedback.receivedAt.nanoseconds
        silenceSince = nil
        if let last = lastReportAt, now > last {
            let gap = min(now - last, 1_000_000_000)
            smoothedReportGap = smoothedReportGap.map { ($0 * 7 + gap) / 8 } ?? gap
        }
        lastReportAt = now
        if feedbackStopped {
            feedbackStopped = false
            slowStart = true
        }
        var ackedBytes = 0.0
        var ackedByteTime = 0.0
        var markedBytes = 0.0
        var ceSeen = false
        // The newest send time of a packet marked CE or lost in this report: a signal about a
        // packet sent before the last cut is the congestion that cut answered (RFC 9002 7.3.2).
        var newestSignalSentAt = Int64.min
        var queueDelaySum = 0.0
        var queueDelayCount = 0
        var newestAcked: (sequence: Int64, sentAt: Int64, arrival: Int64)?
        let inFlightBefore = bytesInFlight
        for report in feedback.packets {
            guard let index = lookup(report.sequence) else { continue }
            guard let arrivalDuration = report.arrival else {
                if entries[index].outstanding, pendingMissing.count < 4096 { pendingMissing.insert(report.sequence) }
                continue
            }
            let wasOutstanding = entries[index].outstanding
            highestReceived = max(highestReceived, report.sequence)
            let arrival = arrivalDuration.nanoseconds
            let previousArrival = lastArrival
            lastArrival = (report.sequence, arrival)
            let entry = entries[index]
            // Arrival times are the receiver's word: absurd ones must not trap.
            let (oneWay, overflow) = arrival.subtractingReportingOverflow(entry.sentAt)
            guard !overflow else { continue }
            if entry.declaredLost {
                entries[index].declaredLost = false
                noteReordering(delayed: oneWay - (baseDelay.minimum ?? oneWay))
            }
            if competing {
                let overBase = oneWay - competingBase
                roundLeastOverCompetingBase = min(roundLeastOverCompetingBase, overBase)
                if probe != nil, entry.sentAt >= probe!.startedAt + probe!.feedbackDelay {
                    probe!.least = min(probe!.least, overBase)
                    probe!.count += 1
                }
            }
            baseDelay.record(oneWay, at: now)
            let sizeClass = sizeClass(of: Int(entries[index].bytes))
            baseDelayBySize[sizeClass].record(oneWay, at: now)
            guard wasOutstanding else { continue }
            entries[index].outstanding = false
            bytesInFlight -= Int(entry.bytes)
            let bytes = Double(entry.bytes)
            ackedBytes += bytes
            ackedByteTime += bytes * Double(now - entry.sentAt)
            let delay = max(0, oneWay - (baseDelayBySize[sizeClass].minimum ?? baseDelay.minimum ?? oneWay))
            queueDelaySum += Double(delay)
            queueDelayCount += 1
            roundLeastQueueDelay = min(roundLeastQueueDelay, delay)
            // Virtual marking: none under half the target, every packet at the target.
            let half = Double(queueDelayTarget) / 2
            let virtual = competing ? 0 : min(max((Double(delay) - half) / half, 0), 1)
            let ce = report.ecn == .ce
            if ce {
                ceSeen = true
                newestSignalSentAt = max(newestSignalSentAt, entry.sentAt)
            }
            markedBytes += bytes * max(ce && configuration.l4s ? 1 : 0, virtual)
            if virtual > 0 { roundHadMark = true }
            if ce || virtual > 0, let previous = previousArrival, previous.sequence == report.sequence - 1 {
                // Queued behind the packet before it: the bottleneck sent it right after that one.
                if var current = run, current.lastSequence == previous.sequence {
                    current.lastSequence = report.sequence
                    current.lastArrival = arrival
                    current.bytes += bytes
                    current.packets += 1
                    run = current
                    if current.packets >= Self.queuedRunMinimumPackets,
                       arrival - current.before >= Self.queuedDeliveryMinimumSpan {
                        // A queue that stands long is sampled as it stands, not once when it ends.
                        endQueuedRun()
                        run = (arrival, report.sequence, arrival, 0, 0)
                    }
                } else {
                    endQueuedRun()
                    run = (previous.arrival, report.sequence, arrival, bytes, 1)
                }
            } else {
                endQueuedRun()
            }
            if newestAcked == nil || report.sequence > newestAcked!.sequence {
                newestAcked = (report.sequence, entry.sentAt, arrival)
            }
            if entry.sentAt > newestDeliveredSentAt {
                newestDeliveredSentAt = entry.sentAt
                newestDeliveredRTT = now - entry.sentAt
            }
        }
        if queueDelayCount > 0 { queueDelay = Int64(queueDelaySum / Double(queueDelayCount)) }
        if queuedTime >= Self.queuedDeliveryMinimumSpan {
            let sample = queuedBytes * 8e9 / Double(queuedTime)
            queuedDeliveryRate = queuedDeliveryRate.map { $0 + (sample - $0) / 4 } ?? sample
            queuedDeliveryRateAt = now
            queuedBytes = 0
            queuedTime = 0
        } else if queuedDeliveryRate != nil, now - queuedDeliveryRateAt > configuration.baseDelayWindow.nanoseconds {
            forgetBottleneckRate()  // the path may carry more now; unmeasured for too long
        }

        // RTT: the caller's sample, else the newest packet's round trip less its wait at the receiver.
        if let sample = feedback.rttSample?.nanoseconds ?? newestAcked.map({ acked in
            let held = feedback.reportTime.map { max(0, $0.nanoseconds &- acked.arrival) } ?? 0
            return now &- acked.sentAt &- held
        }), sample > 0 {
            smoothedRTT = smoothedRTT.map { ($0 * 7 + sample) / 8 } ?? sample
            leastRTT.record(sample, at: now)
        }
        if ackedBytes > 0, ackedByteTime > 0 {
            // The byte-weighted mean time in flight of what this report confirms.
            let sample = Int64(ackedByteTime / ackedBytes)
            let first = smoothedFeedbackDelay == nil
            smoothedFeedbackDelay = smoothedFeedbackDelay.map { ($0 * 7 + sample) / 8 } ?? sample
            if first && slowStart && reductions == 0 {
                // The start window assumed `initialRTT`: carry the start bitrate over the real one.
                let start = Double(min(max(configuration.startBitrate, configuration.minBitrate), configuration.maxBitrate))
                referenceWindow = max(start / 8 * rttSeconds, floorWindow)
            }
        }

        // Losses: reported missing with enough later packets received and, on a path seen to
        // reorder, the reorder window passed beyond the newest delivered packet's round trip.
        var lost = 0
        var stillMissing: Set<Int64> = []
        let window = reorderWindow
        for sequence in pendingMissing {
            guard let index = lookup(sequence), entries[index].outstanding else { continue }
            let sentAt = entries[index].sentAt
            // Time instead of count for a packet with fewer than the threshold sent after it
            // (the window held the rest back): reported missing while a packet sent after it
            // was delivered, and past that one's round trip by the reorder window (at least a
            // quarter of the least RTT: RACK's reo_wnd), it is lost (RFC 8985).
            let tail = newestSent - sequence < Self.reorderingThreshold
            let overdue = sentAt < newestDeliveredSentAt
                && now - sentAt >= newestDeliveredRTT + max(window, (leastRTT.minimum ?? rtt) / 4)
            guard tail ? overdue : sequence + Self.reorderingThreshold <= highestReceived
                    && (window == 0 || (sentAt <= newestDeliveredSentAt && now - sentAt >= newestDeliveredRTT + window))
            else { stillMissing.insert(sequence); continue }
            entries[index].outstanding = false
            entries[index].declaredLost = true
            bytesInFlight -= Int(entries[index].bytes)
            lost += 1
            newestSignalSentAt = max(newestSignalSentAt, sentAt)
        }
        pendingMissing = stillMissing
        lossesDeclared += lost
        if ackedBytes > 0 || lost > 0 {
            lastProgressAt = now
            probeCredit = 0
            tailProbesWithoutProgress = 0
        }
        expireUnreported(now: now)

        roundAckedBytes += ackedBytes
        roundMarkedBytes += markedBytes
        if ceSeen && configuration.l4s { roundHadMark = true }
        let roundEnded = endRoundIfDue(now: now)
        if roundEnded && configuration.competesWithQueueBuildingFlows { updateCompetition(now: now) }

        let mayReduce = now - lastReductionAt >= rtt
        let newCongestion = newestSignalSentAt > lastReductionAt
        if let undo = lossUndo, now - undo.since > 4 * rtt { lossUndo = nil }  // real loss, or feedback lost
        if lost > 0 && newCongestion {
            // The window before this event's first cut, kept while its losses may still be reordering.
            lossUndo = (lossUndo?.window ?? referenceWindow, (lossUndo?.pending ?? 0) + lost, lossUndo?.since ?? now)
            reduce(by: configuration.lossBeta, now: now, lossCut: true)
            growthHeldUntil = now + rtt
            lossEventsSinceReorderRaise += 1
            if lossEventsSinceReorderRaise >= 16 {
                reorderWindow /= 2
                lossEventsSinceReorderRaise = 0
            }
        } else if ceSeen && !configuration.l4s && newCongestion {
            reduce(by: configuration.ecnBeta, now: now)
            growthHeldUntil = now + rtt
        } else {
            if lost > 0, var undo = lossUndo {  // more of the same event: undone only if these arrive too
                undo.pending += lost
                lossUndo = undo
            }
            if ackedBytes > 0 && now >= growthHeldUntil {
                grow(ackedBytes: ackedBytes, inFlightBefore: inFlightBefore)
            }
            let standing = min(standingQueueDelay, lastStandingQueueDelay)
            if competing {
                // Queue delay is another flow's doing: loss and CE only (above).
            } else if roundEnded && mayReduce && standing > 2 * queueDelayTarget {
                // A standing queue far over the target for two rounds (the capacity fell under
                // the rate): the marked fraction's EWMA (gain 1/16 a round) would take many
                // rounds to cut deep enough while every round adds queue. Cut at once toward the
                // rate that drains it, target over queue delay, at most by half. The least delay
                // of each round is what stands: a keyframe's burst raises the mean, not the
                // least, of a round that also holds the packets before it.
                reduce(by: max(0.5, Double(queueDelayTarget) / Double(standing)), now: now)
            } else if roundEnded && roundHadMarkAtEnd && mayReduce {
                // L4S and virtual marks: once per round, by half the smoothed marked fraction.
                reduce(by: 1 - markedFraction / 2, now: now)
            }
        }
        finishProbeIfDue(now: now)
        if let probe { referenceWindow = min(referenceWindow, probe.savedWindow / 2) }
        referenceWindow = min(max(referenceWindow, floorWindow), ceilingWindow)
    }

    /// At each round's end: outside competitive mode, whether the flow has given way to its
    /// floor while the queue stood (then the mode begins); in it, whether a probe is due.
    private mutating func updateCompetition(now: Int64) {
        if competing {
            lastRoundLeastOverCompetingBase = roundLeastOverCompetingBase
            roundLeastOverCompetingBase = .max
            guard probe == nil, now >= nextProbeAt, lastRoundLeastOverCompetingBase != .max else { return }
            probe = (referenceWindow, now, rtt, lastRoundLeastOverCompetingBase, .max, 0, lossesDeclared)
            competitiveProbes += 1
            return
        }
        if standingQueueDelay <= queueDelayTarget { windowBeforeQueue = referenceWindow }
        guard min(standingQueueDelay, lastStandingQueueDelay) > 2 * queueDelayTarget,
              referenceWindow <= 1.5 * floorWindow else {
            floorRounds = 0
            atFloorSince = nil
            return
        }
        floorRounds += 1
        let since = atFloorSince ?? now
        atFloorSince = since
        guard floorRounds >= 4, now - since >= Self.competitiveEntryTime else { return }
        competing = true
        competitiveEntries += 1
        competingBase = baseDelay.minimum ?? 0
        referenceWindow = max(referenceWindow, windowBeforeQueue / 2)
        roundLeastOverCompetingBase = .max
        probeFoundOwnQueue = false
        floorRounds = 0
        atFloorSince = nil
        slowStart = false
        growthHeldUntil = now
        // What the bottleneck gave this flow while it yielded to the queue is no measure of
        // what it can have now.
        forgetBottleneckRate()
        nextProbeAt = now + configuration.competitiveProbeInterval.nanoseconds
    }

    /// Ends a probe two feedback delays after it began (once a packet it sent late enough was
    /// confirmed, or after four when none was). With this flow's window halved, a queue of its
    /// own falls by half its share of the round trip or more; another flow's stays (a
    /// loss-based flow grows into what this one left). The window comes back at the rate it
    /// had (scaled by the feedback delay's change, so a queue that fell is not refilled in a
    /// burst), less any cut made during the probe.
    private mutating func finishProbeIfDue(now: Int64) {
        guard let probe else { return }
        let elapsed = now - probe.startedAt
        guard elapsed >= max(2 * probe.feedbackDelay, 300_000_000),
              probe.count > 0 || elapsed >= 4 * probe.feedbackDelay else { return }
        self.probe = nil
        nextProbeAt = now + configuration.competitiveProbeInterval.nanoseconds
        let cutsDuringProbe = min(1, referenceWindow / max(probe.savedWindow / 2, 1))
        let rateKept = min(1, Double(rtt) / Double(max(probe.feedbackDelay, 1)))
        referenceWindow = max(referenceWindow, probe.savedWindow * rateKept * cutsDuringProbe)
        guard probe.before >= 4 * queueDelayTarget, lossesDeclared == probe.lossesBefore else {
            // Too little queue stood to tell whose it is, or a loss during the probe (which
            // the other flow took too, and cut for): soon again.
            nextProbeAt = now + max(4 * probe.feedbackDelay, 1_000_000_000)
            return
        }
        let ownQueue = probe.count > 0 && probe.least <= probe.before / 2
        guard ownQueue && probeFoundOwnQueue else {
            // A loss-based flow can be the smaller one in the queue for a while after its cuts:
            // one more probe, a second later, before the mode ends.
            probeFoundOwnQueue = ownQueue
            if ownQueue { nextProbeAt = now + max(4 * probe.feedbackDelay, 1_000_000_000) }
            return
        }
        // The queue was this flow's: answer delay again (its drain cut takes what is left).
        competing = false
        competitiveExits += 1
    }

    private var roundHadMarkAtEnd = false
    /// The least queue delay of the packets confirmed in this round (`.max`: none yet), and of
    /// the last two rounds ended: the queue that stands.
    private var roundLeastQueueDelay = Int64.max
    private var standingQueueDelay: Int64 = 0
    private var lastStandingQueueDelay: Int64 = 0

    /// Drops the bottleneck rate and what was gathered toward the next sample.
    private mutating func forgetBottleneckRate() {
        queuedDeliveryRate = nil
        run = nil
        queuedBytes = 0
        queuedTime = 0
    }

    /// Ends the run of queued packets under way: one long enough adds to the next sample.
    private mutating func endQueuedRun() {
        guard let ended = run else { return }
        run = nil
        let time = ended.lastArrival - ended.before
        guard ended.packets >= Self.queuedRunMinimumPackets, time > 0, time < 10_000_000_000 else { return }
        queuedBytes += ended.bytes
        queuedTime += time
    }

    /// Closes the RTT round when one has passed: folds its marked fraction into the EWMA.
    private mutating func endRoundIfDue(now: Int64) -> Bool {
        guard let start = roundStart else { roundStart = now; return false }
        guard now - start >= rtt else { return false }
        if roundAckedBytes > 0 {
            let fraction = roundMarkedBytes / roundAckedBytes
            markedFraction += Self.markedFractionGain * (fraction - markedFraction)
        }
        roundHadMarkAtEnd = roundHadMark
        lastStandingQueueDelay = standingQueueDelay
        standingQueueDelay = roundLeastQueueDelay == .max ? 0 : roundLeastQueueDelay
        roundLeastQueueDelay = .max
        roundStart = now
        roundAckedBytes = 0
        roundMarkedBytes = 0
        roundHadMark = false
        inFlightPeakLastRound = inFlightPeakThisRound
        inFlightPeakThisRound = bytesInFlight
        roundsSinceReduction += 1
        return true
    }

    /// A packet declared lost was reported received, `delayed` over the least one-way delay:
    /// the path reorders. The reorder window widens to cover it, and when every packet the
    /// current event's loss cuts declared lost has arrived, the cuts are undone.
    private mutating func noteReordering(delayed: Int64) {
        spuriousLosses += 1
        let quarterRTT = (leastRTT.minimum ?? rtt) / 4
        let wanted = min(max(delayed + delayed / 4, quarterRTT, 1_000_000), smoothedRTT ?? rtt)
        if wanted > reorderWindow {
            reorderWindow = wanted
            lossEventsSinceReorderRaise = 0
        }
        guard var undo = lossUndo else { return }
        undo.pending -= 1
        lossUndo = undo
        guard undo.pending <= 0 else { return }
        referenceWindow = max(referenceWindow, undo.window)
        lossUndo = nil
        lossCutsUndone += 1
    }

    /// Cuts the reference window by `factor`. A cut for another signal than loss cuts the
    /// window a loss undo would restore as well: the undo takes back only what reordering cost.
    private mutating func reduce(by factor: Double, now: Int64, lossCut: Bool = false) {
        if !lossCut, var undo = lossUndo {
            undo.window *= factor
            lossUndo = undo
        }
        referenceWindow *= factor
        lastReductionAt = now
        roundsSinceReduction = 0
        slowStart = false
        reductions += 1
    }

    private mutating func grow(ackedBytes: Double, inFlightBefore: Int) {
        // Application-limited: a window the source does not fill says nothing of the path.
        let used = Double(max(inFlightPeakThisRound, inFlightPeakLastRound, inFlightBefore))
        guard used * configuration.windowHeadroom >= referenceWindow else { return }
        if slowStart {
            // Leave slow start at the first queue build-up: a quarter of the delay target.
            if queueDelay * 4 > queueDelayTarget || referenceWindow >= slowStartThreshold {
                slowStart = false
                roundsSinceReduction = 0
            } else {
                referenceWindow += ackedBytes
                return
            }
        }
        let packet = Double(configuration.maxPacketSize)
        let perRound = min(packet * (1 + Double(roundsSinceReduction) / 16), referenceWindow / 2)
        referenceWindow += perRound * ackedBytes / referenceWindow
    }

    /// The size class of a packet of `bytes` (`baseDelayBySize`): eighths of the largest packet.
    private func sizeClass(of bytes: Int) -> Int {
        min(Self.sizeClasses - 1, max(0, (bytes - 1) * Self.sizeClasses / max(1, configuration.maxPacketSize)))
    }

    /// Packets sent long before anything reported and never covered by a report leave the flight.
    private mutating func expireUnreported(now: Int64) {
        writeOffFlight(sentBefore: now - max(3 * rtt, 300_000_000))
    }

    /// Outstanding packets sent before `cutoff` leave the flight unreported (counted in
    /// `expired`; a later report of them is taken as for any packet no longer in flight).
    private mutating func writeOffFlight(sentBefore cutoff: Int64) {
        guard oldest >= 0 else { return }
        while oldest <= newestSent {
            guard let index = lookup(oldest) else { oldest += 1; continue }
            let entry = entries[index]
            if entry.outstanding {
                guard entry.sentAt < cutoff else { break }
                entries[index].outstanding = false
                bytesInFlight -= Int(entry.bytes)
                expired += 1
            }
            oldest += 1
        }
    }
}

/// The minimum of samples over a sliding window, kept as the minima of ten sub-windows so it
/// can rise once the low samples are older than the window (LEDBAT's base delay history).
struct MinimumOverWindow: Sendable {
    private let slot: Int64
    private var minima: [Int64] = []
    private var currentStart: Int64?

    init(window: Int64) { slot = max(window / 10, 1) }

    var minimum: Int64? { minima.min() }

    mutating func record(_ value: Int64, at now: Int64) {
        if let start = currentStart, now - start < slot, !minima.isEmpty {
            minima[minima.count - 1] = min(minima[minima.count - 1], value)
            return
        }
        currentStart = now
        minima.append(value)
        if minima.count > 10 { minima.removeFirst() }
    }
}
