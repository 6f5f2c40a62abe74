import UringIO

/// A congestion controller for one flow, sans I/O: it owns no clock and no socket. The flow
/// tells it what it sent and what the feedback said, with the times it read from its own
/// clock, and asks it how many bytes may be in flight, how fast to pace and what bitrate
/// the media source should aim at. Conform to plug another controller into a flow.
///
/// Times are readings of one monotonic clock of the caller's choice (a `Duration` since
/// any fixed origin), except `CongestionFeedback.PacketReport.arrival` and
/// `CongestionFeedback.reportTime`, which come from the receiver's clock: only their
/// differences count.
public protocol CongestionController: Sendable {
    /// Records a packet put on the wire.
    mutating func packetSent(_ packet: SentPacketRecord)
    /// Takes one feedback report (RFC 8888 or equivalent) that arrived at `feedback.receivedAt`.
    mutating func feedbackReceived(_ feedback: CongestionFeedback)
    /// Lets time pass without feedback: call it when sending and on a timer (every few
    /// milliseconds to an RTT) so a path whose feedback stopped is noticed.
    mutating func advance(to now: Duration)
    /// When time alone will next change what the controller decides (a tail loss probe due,
    /// feedback to be taken for stopped), on the clock of `advance(to:)`; nil when nothing
    /// waits for time. The flow calls `advance(to:)` by then, so such a timer fires when it
    /// is due and not at the flow's next wake-up for other work (a frame a frame interval on).
    var nextTimeout: Duration? { get }
    /// The bytes that may be in flight (sent, neither confirmed nor lost).
    var window: Int { get }
    /// The bytes in flight as the controller counts them.
    var bytesInFlight: Int { get }
    /// Bytes the flow holds in flight against `window` that were never handed to
    /// `packetSent` (RFC 4588 retransmissions, on sequence numbers of their own): with them
    /// the window may be full while the controller's own bytes leave room. The flow sets it
    /// whenever it changes; a controller that does not need it ignores it.
    var otherBytesInFlight: Int { get set }
    /// The rate at which to pace packets onto the wire, bits per second.
    var pacingRate: Int { get }
    /// The bitrate the media source should produce, bits per second.
    var targetBitrate: Int { get }
    /// The controller's estimate of the queue delay on the path (nil when it keeps none, or
    /// before it has measured one): shown in `CongestionStats.queueDelayMs`.
    var queueDelayEstimate: Duration? { get }
    /// What the controller counted of losses (nil when it keeps no count): shown in
    /// `CongestionStats.losses`.
    var lossCounts: CongestionLossCounts? { get }
    /// Whether the controller competes with a queue-building flow now, and how often it began,
    /// probed and ended doing so (nil when it has no such mode): `CongestionStats.competition`.
    var competition: CongestionCompetition? { get }
    /// The rate, bits per second, at which the path's bottleneck delivered this flow's packets
    /// while a queue stood before them: its capacity, or this flow's share of it beside other
    /// flows (nil when the controller measures none, or has not lately). A backlog (a keyframe)
    /// is paced no faster: `CongestionStats.bottleneckRate`.
    var bottleneckRate: Int? { get }
    /// The flow sends `codepoint` from now on (its path remarked the one it sent: ECT(1)
    /// delivered as ECT(0) asks for a classic response to CE).
    mutating func ecnChanged(to codepoint: ECNCodepoint)
}

extension CongestionController {
    /// No timer: a controller that decides only when told of packets and feedback needs none.
    public var nextTimeout: Duration? { nil }
    /// No estimate: a controller that does not measure queue delay needs not say so.
    public var queueDelayEstimate: Duration? { nil }
    /// No count: a controller that keeps none needs not say so.
    public var lossCounts: CongestionLossCounts? { nil }
    /// No such mode: a controller that always answers delay alike needs not say so.
    public var competition: CongestionCompetition? { nil }
    /// No measurement: a controller that keeps none needs not say so.
    public var bottleneckRate: Int? { nil }
    /// Nothing to change: a controller that treats every codepoint alike needs not hear of it.
    public mutating func ecnChanged(to codepoint: ECNCodepoint) {}
    /// Not kept: a controller that never looks at the flow's other bytes needs not store them.
    public var otherBytesInFlight: Int {
        get { 0 }
        set {}
    }
}

/// What a congestion controller counted of the losses the feedback showed it.
public struct CongestionLossCounts: Sendable, Equatable {
    /// Packets the controller declared lost.
    public var declared = 0
    /// Of those, packets the receiver later reported received: the path reordered them.
    public var spurious = 0
    /// Window cuts for loss taken back because every packet they declared lost arrived.
    public var cutsUndone = 0
    /// How long past the newest delivered packet's round trip a missing packet waits before it
    /// counts as lost (0 on a path not seen to reorder).
    public var reorderWindow = Duration.zero
    /// Tail loss probes: a packet let out beyond the window because nothing was confirmed or
    /// declared lost for a probe timeout while the window was full (its last packets may all
    /// have been lost, and nothing sent after them would show it).
    public var tailProbes = 0
    /// Times feedback was taken for stopped (no report for the feedback timeout after a packet
    /// was sent, with packets in flight): the window fell to its floor, the target to the minimum,
    /// and what was in flight was written off. A receiver (or its host) that stalls past the
    /// timeout reads the same; silence after the last send (a stream's end) does not.
    public var feedbackStops = 0

    /// Counts of the given sizes.
    public init(declared: Int = 0, spurious: Int = 0, cutsUndone: Int = 0, reorderWindow: Duration = .zero,
                tailProbes: Int = 0, feedbackStops: Int = 0) {
        self.declared = declared
        self.spurious = spurious
        self.cutsUndone = cutsUndone
        self.reorderWindow = reorderWindow
        self.tailProbes = tailProbes
        self.feedbackStops = feedbackStops
    }
}

/// A controller's competitive mode (`ScreamController`): a flow that keeps the bottleneck's
/// queue standing shares it, and the controller answers loss and CE only.
public struct CongestionCompetition: Sendable, Equatable {
    /// In the mode now.
    public var competing = false
    /// Times the mode began.
    public var entries = 0
    /// Probes made in the mode (each holds the window at its floor to see whose queue it is).
    public var probes = 0
    /// Times a probe found the queue gone and ended the mode.
    public var exits = 0

    /// Counts of the given sizes.
    public init(competing: Bool = false, entries: Int = 0, probes: Int = 0, exits: Int = 0) {
        self.competing = competing
        self.entries = entries
        self.probes = probes
        self.exits = exits
    }
}

/// Which congestion controller a flow of a `MediaSender` obeys (`MediaSenderConfig.congestionControl`).
public enum CongestionControlSetting: Sendable {
    /// A `ScreamController` with this configuration; the flow sets its `l4s` (from the flow's
    /// ECN codepoint: ECT(1)) and its `maxPacketSize` (from the flow's datagram size).
    case scream(ScreamConfiguration)
    /// A controller of the application's own: called once per flow when `MediaSender.run` starts.
    case custom(@Sendable () -> any CongestionController)

    /// The controller for a flow that sends `ecn` in datagrams of at most `maxPacketSize` bytes.
    func makeController(ecn: ECNCodepoint, maxPacketSize: Int) -> any CongestionController {
        switch self {
        case .scream(var configuration):
            configuration.l4s = ecn == .ect1
            configuration.maxPacketSize = maxPacketSize
            return ScreamController(configuration: configuration)
        case .custom(let make):
            return make()
        }
    }

    /// The name in the stats: `scream` or `custom`.
    var name: String {
        if case .scream = self { return "scream" }
        return "custom"
    }
}

/// A packet handed to `CongestionController.packetSent`.
public struct SentPacketRecord: Sendable, Equatable {
    /// The flow's extended (never wrapping) sequence number of the packet.
    public var sequence: Int64
    /// The packet's size on the wire as the controller should count it (bytes).
    public var bytes: Int
    /// When it was sent (the caller's monotonic clock).
    public var sentAt: Duration

    /// A sent packet: its extended sequence number, size in bytes and send time.
    public init(sequence: Int64, bytes: Int, sentAt: Duration) {
        self.sequence = sequence
        self.bytes = bytes
        self.sentAt = sentAt
    }
}

/// One feedback report: what the receiver says of each packet it covers.
public struct CongestionFeedback: Sendable, Equatable {
    /// What the report says of one packet.
    public struct PacketReport: Sendable, Equatable {
        /// The packet's extended sequence number.
        public var sequence: Int64
        /// When it arrived on the receiver's clock, or nil when reported not received.
        public var arrival: Duration?
        /// The ECN codepoint it arrived with.
        public var ecn: ECNCodepoint

        /// A packet received at `arrival` (receiver's clock) with `ecn`, or (`arrival`
        /// nil) reported missing.
        public init(sequence: Int64, arrival: Duration?, ecn: ECNCodepoint = .notECT) {
            self.sequence = sequence
            self.arrival = arrival
            self.ecn = ecn
        }
    }

    /// When the report reached the sender (the caller's monotonic clock).
    public var receivedAt: Duration
    /// When the receiver wrote the report, on its clock (RFC 8888's report timestamp), if known:
    /// the time each packet waited at the receiver is then taken out of the RTT sample.
    public var reportTime: Duration?
    /// An RTT measured otherwise (RFC 3550 LSR/DLSR), if any; preferred over the estimate
    /// from send and report times.
    public var rttSample: Duration?
    /// The packets the report covers, in any order.
    public var packets: [PacketReport]

    /// A report that arrived at `receivedAt`, covering `packets`.
    public init(receivedAt: Duration, reportTime: Duration? = nil, rttSample: Duration? = nil,
                packets: [PacketReport]) {
        self.receivedAt = receivedAt
        self.reportTime = reportTime
        self.rttSample = rttSample
        self.packets = packets
    }
}
