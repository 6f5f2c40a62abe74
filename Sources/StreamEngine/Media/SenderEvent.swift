import Synchronization
import UringIO

/// Where a flow's path MTU comes from.
public enum MTUSource: String, Sendable, Equatable {
    /// Not confirmed by a probe: the base, or the kernel's view (ICMP, `IP_MTU`).
    case kernel
    /// Confirmed by a probe that the receiver acknowledged.
    case probe
    /// The user pinned it (`MTUSetting.fixed`).
    case configured
}

/// Something that happened to one flow of a `MediaSender`, as it happened (within one stats
/// publishing interval, `MediaSenderConfig.statsInterval`). Subscribe with
/// `MediaSender.events()`; the counters behind each event stay in `SenderStats`.
public enum SenderEvent: Sendable, Equatable {
    /// The receiver stopped sending feedback; the flow holds at its bound and probes with one
    /// keyframe a second.
    case receiverGone(flow: Int, unconfirmedBytes: Int)
    /// Feedback arrives again after `receiverGone`; the flow resumes with a keyframe.
    case receiverBack(flow: Int)
    /// Feedback was expected but none has arrived since the start (a receiver that sends
    /// none): the flow runs without its unconfirmed bound.
    case feedbackAbsent(flow: Int)
    /// Frames started being dropped because the unconfirmed bound was reached (once per
    /// episode: again only after an interval without such drops).
    case boundReached(flow: Int, unconfirmedBytes: Int, maxUnconfirmedBytes: Int)
    /// The MTU the flow's datagrams are sized for changed.
    case pathMTUChanged(flow: Int, mtu: Int, source: MTUSource)
    /// The flow now sends to another address (`MediaSender.redirect`).
    case flowRedirected(flow: Int, destination: String)
    /// Datagrams of the flow started failing with a kind of error not seen before on it
    /// (once per kind; the running count is in `SenderStats.errors`).
    case sendsFailing(flow: Int, failure: SendFailure, datagrams: Int)
    /// The kernel has no usable route to the receiver any more (or its interface went down):
    /// the flow stops sending media (frames are dropped and counted), keeping its sockets,
    /// state and counters.
    case pathUnviable(flow: Int)
    /// A route is back after `pathUnviable`, which lasted `unviableMilliseconds` (the flow's
    /// total so far); the flow resumes with a keyframe.
    case pathViable(flow: Int, unviableMilliseconds: Int)
    /// The route now leaves by another interface or next hop: a new path, whose MTU is
    /// searched for at once.
    case pathChanged(flow: Int, interface: String?, gateway: String?, source: String?)
    /// The kernel picks another source address toward the receiver (the old one removed, or a
    /// new one preferred): the flow's sockets now send from `source`, on the same ports.
    case sourceAddressChanged(flow: Int, source: String?)
    /// The flow's congestion controller asks the source for another bitrate (bits per second;
    /// the media's target, `CongestionStats.targetBitrate`): feed it to the encoder. Announced when the target moved by
    /// `MediaSenderConfig.targetBitrateStep` or more (at most every `targetBitrateInterval`, but
    /// for a large cut); also in `SenderStats.congestion`.
    case targetBitrate(flow: Int, bitsPerSecond: Int)

    /// The flow the event concerns.
    public var flow: Int {
        switch self {
        case .receiverGone(let flow, _), .receiverBack(let flow), .feedbackAbsent(let flow),
             .boundReached(let flow, _, _), .pathMTUChanged(let flow, _, _), .flowRedirected(let flow, _),
             .sendsFailing(let flow, _, _), .pathUnviable(let flow), .pathViable(let flow, _),
             .pathChanged(let flow, _, _, _), .sourceAddressChanged(let flow, _), .targetBitrate(let flow, _):
            return flow
        }
    }
}

/// Turns a flow's published counters into events: each snapshot against the one before.
/// Pure (no clock of its own): the engine thread feeds it every time it publishes, so the
/// events follow the counters exactly and cannot disagree with them.
struct SenderEventDetector {
    /// A new `boundReached` needs this long without drops for the bound since the last one
    /// (nanoseconds): one event per episode, not one per dropped frame.
    static let boundEpisodeGap: Int64 = 1_000_000_000
    private var last: SenderStats
    private var lastBoundDrop: Int64?

    /// Starts from the flow's counters before anything happened.
    init(initial: SenderStats) { last = initial }

    /// The events between the last snapshot and `new`, published at `now`.
    mutating func update(_ new: SenderStats, now: Int64) -> [SenderEvent] {
        let old = last
        last = new
        let flow = new.flowIndex
        var events: [SenderEvent] = []
        // Episodes, not only the state: an outage shorter than a publishing interval still shows.
        let newOutages = new.pathUnviableEpisodes > old.pathUnviableEpisodes
        if newOutages { events.append(.pathUnviable(flow: flow)) }
        if new.pathViable && (newOutages || !old.pathViable) {
            events.append(.pathViable(flow: flow, unviableMilliseconds: Int(new.pathUnviableMs)))
        }
        if new.pathChanges > old.pathChanges {
            events.append(.pathChanged(flow: flow, interface: new.pathInterface, gateway: new.pathGateway,
                                       source: new.pathSource))
        }
        if new.pathRebinds > old.pathRebinds { events.append(.sourceAddressChanged(flow: flow, source: new.pathSource)) }
        if new.redirects > old.redirects { events.append(.flowRedirected(flow: flow, destination: new.destination)) }
        if new.pathMTU != old.pathMTU || new.mtuSource != old.mtuSource {
            events.append(.pathMTUChanged(flow: flow, mtu: new.pathMTU, source: new.mtuSource))
        }
        if new.feedbackAbsent && !old.feedbackAbsent { events.append(.feedbackAbsent(flow: flow)) }
        if new.receiverGone != old.receiverGone {
            events.append(new.receiverGone ? .receiverGone(flow: flow, unconfirmedBytes: new.bytesUnconfirmed)
                                           : .receiverBack(flow: flow))
        }
        if new.framesDroppedUnconfirmed > old.framesDroppedUnconfirmed {
            if lastBoundDrop.map({ now - $0 > Self.boundEpisodeGap }) ?? true {
                events.append(.boundReached(flow: flow, unconfirmedBytes: new.bytesUnconfirmed,
                                            maxUnconfirmedBytes: new.maxUnconfirmedBytes))
            }
            lastBoundDrop = now
        }
        if let congestion = new.congestion, congestion.rateChanges != old.congestion?.rateChanges {
            events.append(.targetBitrate(flow: flow, bitsPerSecond: congestion.targetBitrate))
        }
        for (failure, count) in new.errors.sorted(by: { "\($0.key)" < "\($1.key)" }) where old.errors[failure] == nil {
            events.append(.sendsFailing(flow: flow, failure: failure, datagrams: count))
        }
        return events
    }
}

/// The subscribers of a sender's events: each `MediaSender.events()` call gets its own stream.
final class SenderEventHub: Sendable {
    private struct State {
        var subscribers: [Int: AsyncStream<SenderEvent>.Continuation] = [:]
        var nextID = 0
        var finished = false
    }
    private let state = Mutex(State())
    /// Events kept for a subscriber that has not read them yet; past that the oldest go.
    static let buffered = 1024

    func subscribe() -> AsyncStream<SenderEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: SenderEvent.self,
                                                            bufferingPolicy: .bufferingNewest(Self.buffered))
        let id: Int? = state.withLock { state in
            guard !state.finished else { return nil }
            defer { state.nextID += 1 }
            state.subscribers[state.nextID] = continuation
            return state.nextID
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    func emit(_ events: [SenderEvent]) {
        guard !events.isEmpty else { return }
        let subscribers = state.withLock { Array($0.subscribers.values) }
        for continuation in subscribers {
            for event in events { continuation.yield(event) }
        }
    }

    /// The sender's run ended: every stream ends after its last event.
    func finish() {
        let subscribers = state.withLock { state -> [AsyncStream<SenderEvent>.Continuation] in
            state.finished = true
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        for continuation in subscribers { continuation.finish() }
    }
}
