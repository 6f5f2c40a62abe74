import Glibc
import MediaFormats
import SecureRTP
import Synchronization
import UringIO

/// How the sender sizes its datagrams.
public enum MTUSetting: Sendable, Equatable {
    /// From what the engine knows of the path now (the kernel's path MTU toward the peer,
    /// at most 1500 until larger sizes are confirmed).
    case auto
    /// A fixed MTU (IP packet size) the user configured.
    case fixed(Int)
}

/// Configuration of a media sender.
public struct MediaSenderConfig: Sendable {
    /// Where the RTP stream goes.
    public var destination: SocketAddress
    /// The service class (DSCP) of every datagram.
    public var serviceClass: ServiceClass = .video
    /// The ECN codepoint of every datagram.
    public var ecn: ECNCodepoint = .ect0
    /// How datagrams are sized.
    public var mtu: MTUSetting = .auto
    /// Pacing rate in bits per second (nil: unpaced).
    public var paceBitsPerSecond: Double?
    /// With `paceBitsPerSecond`: the pace also follows the stream's own rate, at least this
    /// multiple of it (the bytes of the access units handed over in the last second of their
    /// due times, over that time) and fast enough that a backlog (a keyframe) drains within a
    /// quarter of `maxFrameWait`; `paceBitsPerSecond` is then the least pace. For sources whose
    /// rate is their own, not an encoder's target (a recorded file: `streamer send --source
    /// F.hevc`), so that every frame goes at its time whatever the file's rate. While a congestion
    /// controller is obeyed, its pace rules. With the default unconfirmed bound, the bound
    /// follows too (a second at the pace). nil: `paceBitsPerSecond` alone.
    public var paceStreamMultiple: Double?
    /// Largest burst in bytes (nil: 2 ms of the pace).
    public var burstQuantum: Int?
    /// RTP payload type.
    public var payloadType: UInt8 = RTPHeader.defaultHEVCPayloadType
    /// Access units that may wait for the wire before new ones are dropped (counted).
    public var maxQueuedFrames: Int = 120
    /// Expect RTCP feedback from the receiver (RR, RFC 8888, PLI) and bound what is
    /// unconfirmed. Off for receivers that send none (multicast, plain RTP players).
    public var feedback = true
    /// Bound on sent-but-unconfirmed bytes (nil: about one second at the pace, at least 256 KB).
    public var maxUnconfirmedBytes: Int?
    /// Local RTP port (RTCP on the next one unless muxed); nil: any free even/odd pair.
    public var localPort: UInt16?
    /// `localPort` and the next are held by reservation sockets (the RTSP server's, named to the
    /// client at SETUP) that let them be shared: the sender binds them while those still hold
    /// them, then shares them with no one, so no other socket can take them in between.
    var takesOverReservedPorts = false
    /// With a multicast destination: the hop limit (IPv4 TTL, IPv6 hops), default 1 (this link).
    public var multicastTTL = 1
    /// With a multicast destination: the interface index it leaves by; nil: the route's.
    public var multicastInterface: UInt32?
    /// With a multicast destination: receivers on this host hear the stream too (`IP_MULTICAST_LOOP`).
    public var multicastLoop = true
    /// With a multicast destination: receivers whose reports are kept (the least recently heard
    /// is dropped for a new one).
    public var maxMulticastReceivers = 1024
    /// Feedback on the RTP ports themselves instead of RTP port + 1.
    public var rtcpMux = false
    /// After the last packet, how long to wait for the final feedback.
    public var finalFeedbackWait: Duration = .seconds(2)
    /// Forced keyframes (PLI, bound, receiver back) at most this often.
    public var minKeyframeInterval: Duration = .milliseconds(500)
    /// While the receiver is gone, how often a keyframe goes out to find it again.
    public var goneProbeInterval: Duration = .seconds(1)
    /// How often a sender report goes out; each one gives an RTT sample.
    public var senderReportInterval: Duration = .milliseconds(100)
    /// When no feedback at all arrives this long after the first packet, the receiver is
    /// taken for one that sends none (ffmpeg 5.1's RTP input cannot): the bound is lifted
    /// until feedback appears.
    public var noFeedbackTimeout: Duration = .seconds(3)
    /// With `mtu` auto: how long after a path-MTU search ends the next one starts, to find a
    /// larger path again.
    public var pathMTUReprobeInterval: Duration = .seconds(15)
    /// With `mtu` auto: the smallest MTU assumed to work on an IPv4 path (IPv6: 1280).
    public var pathMTUBaseIPv4 = 1200
    /// How often the engine publishes its counters for `stats(flow:)` while running
    /// (the shortest of all flows' applies). What `stats` returns is at most
    /// this old.
    public var statsInterval: Duration = .milliseconds(50)
    /// Watch the path (a NETLINK_ROUTE monitor read through the engine's ring): no route stops
    /// the flow's media until one is back, another interface or next hop searches the path MTU
    /// again, a smaller interface MTU clamps the next packet. Off: the path is learned only from
    /// sends and feedback. On for any flow, the engine watches every flow's path.
    public var watchesPath = true
    /// Answer the receiver's generic NACKs (RFC 4585) with retransmissions from a history of
    /// the packets sent, through the pacer ahead of new media (needs `feedback`): RFC 4588 RTX
    /// on an SSRC of its own with `rtxPayloadType`, or with `rtxSameSSRC` the original packet
    /// unchanged. RTX packets are 2 bytes longer: media packets leave room for them.
    public var retransmission = false
    /// The payload type of RFC 4588 retransmissions.
    public var rtxPayloadType: UInt8 = 97
    /// How long a sent packet may be retransmitted (`rtx-time`, RFC 4588).
    public var rtxTime: Duration = .milliseconds(500)
    /// Retransmit the original packet unchanged on the media SSRC (for receivers that take one
    /// payload type only, such as ffmpeg) instead of RFC 4588 RTX.
    public var rtxSameSSRC = false
    /// The congestion controller the flow obeys (nil: none; the flow paces at
    /// `paceBitsPerSecond`, as it always has). Needs `feedback`. Its window limits the bytes in
    /// flight (the unconfirmed bound stays the ceiling), its pacing rate paces the flow, and its
    /// target bitrate goes to the application (`SenderEvent.targetBitrate`, `SenderStats.congestion`).
    /// Until the receiver's first per-packet (RFC 8888) report, and while it is gone, the flow
    /// runs as without one (`CongestionStats.active`): a receiver that sends no such feedback
    /// (ffmpeg, GStreamer) is served as before, its target `targetBitrateWithoutFeedback`.
    public var congestionControl: CongestionControlSetting?
    /// With `congestionControl`: a frame that has waited this long in the flow's queue (the path
    /// carries less than the source gives, e.g. a file) is dropped whole, and so is every frame
    /// after it until a keyframe, which is requested (counted in `CongestionStats.framesDropped`).
    public var maxFrameWait: Duration = .milliseconds(500)
    /// With `congestionControl`: the target bitrate announced once the receiver is known to send
    /// no per-packet reports (its first RTCP is a receiver report without them, as ffmpeg's and
    /// GStreamer's are, or nothing came for `noFeedbackTimeout`), as the controller is never
    /// obeyed then. Until that is known the target is the controller's start (a receiver of this
    /// engine reports within a report interval, and the controller takes over from its start).
    /// nil: the controller's start throughout.
    public var targetBitrateWithoutFeedback: Int?
    /// With `congestionControl`: the target bitrate is announced again once it has moved by this
    /// fraction of the last one announced (an encoder need not be told of every small step)...
    public var targetBitrateStep = 0.05
    /// ...and `targetBitrateInterval` has passed since that one, unless it fell by four steps or
    /// more (a cut the encoder must follow at once).
    public var targetBitrateInterval: Duration = .milliseconds(500)
    /// SRTP and SRTCP (RFC 3711) with this master key: every RTP packet (media and path-MTU
    /// probes) and sender report is protected, and feedback that does not authenticate is
    /// dropped (counted in `SenderStats.srtp`) before the feedback logic sees it. nil: plain RTP.
    public var srtp: SRTPMasterKey?

    /// Makes a configuration for `destination` with the defaults.
    public init(destination: SocketAddress) { self.destination = destination }
}

/// Sends HEVC access units as RTP streams (RFC 7798) through the io_uring engine:
/// packetized to the path MTU, marked with a service class and ECN codepoint, paced,
/// many datagrams per submission.
///
/// One sender carries one flow or several (`init(flows:)`): each flow has its own
/// destination, SSRC, service class, path MTU, feedback, bound and counters; all of them
/// share one ring, one pacer (at the sum of their paces) and the same submissions, and each
/// flow is also held to its own pace (`paceBitsPerSecond`) while the others are idle.
///
/// Any thread may hand it access units (`send`); `run` drives the ring on the thread
/// that calls it until `finish` or `stop`.
public final class MediaSender: Sendable {
    /// The configuration of the first flow (the only one of a single-flow sender).
    public var config: MediaSenderConfig { flows[0].config }
    /// Every flow's configuration, by index.
    public var flowConfigs: [MediaSenderConfig] { flows.map(\.config) }
    private let flows: [FlowHandle]
    private let stopRequested = Atomic<Bool>(false)
    private let wakeEvent: WakeEvent
    private let eventHub = SenderEventHub()
    /// When the engine's current wait ends (monotonic nanoseconds). An access unit handed over
    /// due no earlier needs no wake-up: the engine looks at its inboxes when the wait ends.
    /// `Int64.min` while it is awake, and while it waits for completions of sends in flight
    /// (a full completion window or no free send slot: nothing handed over could go before
    /// one of them ends the wait), so no access unit wakes it then.
    private let engineWaitsUntil = Atomic<Int64>(.min)
    /// Set with every access unit handed over, cleared by the engine before it reads its inboxes
    /// and taken just before it waits (what came in after it read them is read then, not waited over).
    private let aheadInputArrived = Atomic<Bool>(false)
    /// Wakes a thread in `waitForFramesFinished(_:timeout:)`.
    private let finishedSignal = FinishedFramesSignal()

    /// Makes a sender with one flow. Nothing is opened until `run`. Throws a `SystemError`
    /// when its wake-up eventfd cannot be made.
    public convenience init(config: MediaSenderConfig) throws {
        try self.init(flows: [config])
    }

    /// Makes a sender carrying several flows (1 to 255) in one engine. Nothing is opened until `run`.
    /// Throws a `ConfigurationError` for a count of flows out of range, a `SystemError` when
    /// its wake-up eventfd cannot be made.
    public init(flows configs: [MediaSenderConfig]) throws {
        guard (1...FlowScheduler.maxFlows).contains(configs.count) else {
            throw ConfigurationError("flows", "\(configs.count) flows (1 to \(FlowScheduler.maxFlows))")
        }
        if configs.contains(where: { $0.congestionControl != nil && !$0.feedback }) {
            throw ConfigurationError("congestionControl", "a congestion controller needs feedback")
        }
        let wakeEvent = try WakeEvent()
        self.wakeEvent = wakeEvent
        let cname = RTCPSourceDescription.randomCNAME()
        let eventHub = self.eventHub
        flows = configs.map { FlowHandle(config: $0, wakeEvent: wakeEvent, cname: cname, events: eventHub) }
    }

    /// The number of flows.
    public var flowCount: Int { flows.count }

    /// Wake-ups other threads wrote to the engine so far (eventfd writes: access units handed
    /// over while it waited for a time, `finish`, `stop`, `redirect`), each one system call.
    public var wakeSignals: Int { wakeEvent.signalCount }

    /// Hands an access unit to every flow, to go at once. The engine is woken (one eventfd
    /// write for all the flows) only when it waits for a time (the pacer's, an idle poll):
    /// while it is awake, or waits for completions of its own sends, it reads its inboxes
    /// before it waits again. Returns false when a flow had `maxQueuedFrames` waiting already
    /// (that flow counts a dropped frame; the others took it).
    @discardableResult
    public func send(_ accessUnit: AccessUnit) -> Bool { handOver(accessUnit, due: nil) }

    /// Hands an access unit to every flow, to start on the wire no earlier than `dueTime`
    /// (monotonic nanoseconds, `CLOCK_MONOTONIC`, as `UringIO.monotonicNanoseconds()`; a time
    /// past: at once). A source reading ahead hands frames over before their time this way,
    /// and the engine's own wait ends at each one's time: no thread needs to wake per frame
    /// but the engine's. The engine is woken only for an access unit due before its current
    /// wait ends (while it is awake, it reads its inboxes before it waits again).
    /// A frame's `maxFrameWait` counts from its due time. Returns false as `send(_:)` does.
    @discardableResult
    public func send(_ accessUnit: AccessUnit, at dueTime: Int64) -> Bool { handOver(accessUnit, due: dueTime) }

    /// Queues `accessUnit` in every flow (due `due`, nil: at once), then wakes the engine if it
    /// must (one wake-up for all the flows). False when a flow's inbox was full.
    private func handOver(_ accessUnit: AccessUnit, due: Int64?) -> Bool {
        var accepted = true
        for flow in flows {
            accepted = flow.queue(accessUnit, due: due) && accepted
        }
        wakeEngine(due: due ?? .min)
        return accepted
    }

    /// Wakes the engine for input due at `dueTime` (`Int64.min`: at once) when its current wait
    /// ends later. Sequentially consistent, as the engine's side in `run`: either the engine sees
    /// the input before it waits, or this sees the wait's end (and wakes it when due before).
    /// Whoever wakes it also marks it awake (`.min`): input handed over before it runs again (a
    /// source on the same core handing frames back to back) writes no eventfd of its own; the
    /// engine reads it all when it wakes, and publishes its next wait before it waits.
    private func wakeEngine(due dueTime: Int64) {
        aheadInputArrived.store(true, ordering: .sequentiallyConsistent)
        var waitsUntil = engineWaitsUntil.load(ordering: .sequentiallyConsistent)
        while dueTime < waitsUntil {
            let (exchanged, original) = engineWaitsUntil.compareExchange(
                expected: waitsUntil, desired: .min, ordering: .sequentiallyConsistent)
            if exchanged { wakeEvent.signal(); break }
            waitsUntil = original
        }
    }

    /// Access units every flow is done with (written to the wire, or dropped: unviable,
    /// unconfirmed, or for a full queue): the least over the flows. The engine keeps it as it goes,
    /// not at the stats interval, so a source that bounds the frames it has handed over and not
    /// seen finished (`send --fast`) reads it fresh.
    public var framesFinished: Int {
        flows.lazy.map { $0.framesFinished.load(ordering: .sequentiallyConsistent) }.min() ?? 0
    }

    /// Waits until `framesFinished` is at least `count`, or `timeout` passed, and returns it. The
    /// engine wakes the waiter once the count is reached (an eventfd it writes only then): a
    /// source that has handed over as many frames as it may sleeps until there is room, with no
    /// polling. One waiting thread at a time.
    public func waitForFramesFinished(_ count: Int, timeout: Duration) -> Int {
        finishedSignal.wait(until: count, timeout: timeout) { framesFinished }
    }

    /// True: `send(_:at:)` holds access units back until their due time.
    public var holdsUntilDue: Bool { true }

    /// Hands an access unit to one flow. Returns false (and counts a dropped frame) when
    /// `maxQueuedFrames` are already waiting there.
    @discardableResult
    public func send(_ accessUnit: AccessUnit, flow: Int) -> Bool {
        let accepted = flows[flow].queue(accessUnit, due: nil)
        wakeEngine(due: .min)
        return accepted
    }

    /// No more access units for any flow: `run` returns once everything queued is on the wire.
    public func finish() { for flow in flows { flow.finish() } }

    /// No more access units for one flow (`run` returns when every flow is finished).
    public func finish(flow: Int) { flows[flow].finish() }

    /// Stop as soon as possible (what is in flight completes, the rest is not sent).
    public func stop() {
        stopRequested.store(true, ordering: .relaxed)
        wakeEvent.signal()
    }

    /// Points a flow at a new receiver address of the same family (a receiver that moved, a
    /// name resolved again): its sockets are connected there, and it resumes with a keyframe.
    public func redirect(to destination: SocketAddress, flow: Int = 0) { flows[flow].redirect(to: destination) }

    /// A stream of what happens to the flows (receiver gone or back, bound reached, path MTU
    /// changed, flow redirected, sends failing, path unviable, viable or changed), as it happens. Each call makes a new
    /// subscription that sees the events from then on; it ends when `run` returns (at once
    /// if `run` has returned already). Subscribe before `run` to see everything.
    public func events() -> AsyncStream<SenderEvent> { eventHub.subscribe() }

    /// The first flow's counters so far.
    public var stats: SenderStats { stats(flow: 0) }

    /// One flow's counters so far.
    public func stats(flow: Int) -> SenderStats { flows[flow].statsBox.withLock { $0 } }

    /// What an SDP for flow `flow` offers for loss recovery (`MediaSenderConfig.sdpRetransmission`),
    /// with RFC 4588 RTX the SSRCs the flow sends from (`a=ssrc-group:FID <media> <rtx>`) and
    /// the sender's CNAME. nil without retransmission.
    public func sdpRetransmission(flow: Int) -> SDPSessionDescription.Retransmission? {
        let handle = flows[flow]
        guard var offer = handle.config.sdpRetransmission else { return nil }
        if offer.payloadType != nil {
            (offer.mediaSSRC, offer.rtxSSRC, offer.cname) = (handle.ssrc, handle.rtxSSRC, handle.cname)
        }
        return offer
    }

    /// Every flow's counters so far, by index.
    public var allStats: [SenderStats] { flows.indices.map { stats(flow: $0) } }

    /// True (once) when any flow's receiver or bound asked for a keyframe since the last call:
    /// a source feeding every flow forces its next picture to IDR.
    public func takeKeyframeRequest() -> Bool {
        flows.indices.reduce(false) { takeKeyframeRequest(flow: $1) || $0 }
    }

    /// True (once) when this flow's receiver or bound asked for a keyframe since the last call.
    public func takeKeyframeRequest(flow: Int) -> Bool {
        flows[flow].keyframeRequested.exchange(false, ordering: .relaxed)
    }

    /// With several flows, how often the engine runs every flow's periodic work (nanoseconds;
    /// a flow with new feedback also at the next wake-up): its timers are tens of milliseconds
    /// and longer. A single flow's runs at every wake-up.
    static let tickInterval: Int64 = 5_000_000

    /// The longest the engine waits while idle before it looks at its timers again (nanoseconds).
    static let maxIdlePoll: Int64 = 50_000_000

    /// How long an idle wait lasts (nanoseconds): the poll (the stats interval, at most
    /// ``maxIdlePoll``), cut short by the earliest of the congestion controllers' timers
    /// (`timersDue`) and the route monitor's settle lookups (`routeLookupDue`), absolute
    /// monotonic times; at least 1 ms, so a timer already due (its flow ticks before the wait)
    /// does not spin the loop.
    static func idleWait(poll: Int64, timersDue: Int64?, routeLookupDue: Int64?, now: Int64) -> Int64 {
        var due = timersDue
        if let lookup = routeLookupDue { due = min(due ?? lookup, lookup) }
        guard let due else { return poll }
        return min(poll, max(due - now, 1_000_000))
    }

    /// The largest UDP payload for this path and configuration, and where the MTU came from.
    static func datagramBudget(socket: UDPSocket, setting: MTUSetting) -> (mtu: Int, source: MTUSource) {
        switch setting {
        case .fixed(let mtu): return (mtu, .configured)
        case .auto:
            let kernel = socket.kernelPathMTU() ?? 1500
            return (min(kernel, 1500), .kernel)
        }
    }

    /// Opens the sockets and the ring and sends until `finish` (and everything is sent and
    /// the final feedback is in, for every flow) or `stop`. Throws a `SystemError` when a
    /// system call fails, a `ConfigurationError` when a flow's MTU is too small to packetize.
    public func run() throws {
        defer { eventHub.finish() }
        // Made, driven and released on this thread: its descriptor registered with it.
        let ring = try Ring(entries: 256, threadBound: true)
        // The loop's own state (each flow's pace among it), read at every wake-up by the closures
        // below: in a class, unchecked, not in captured `var`s (each access to one is a dynamic
        // exclusivity check, and the first after a wake-up pays a thread-local lookup).
        let loop = EngineLoopState(paces: flowConfigs.map(\.paceBitsPerSecond))
        func sharedRate() -> Double? { loop.paces.contains(nil) ? nil : loop.paces.reduce(0) { $0 + ($1 ?? 0) } }
        var senderConfig = PacedSenderConfig(rateBitsPerSecond: sharedRate(), burstQuantum: flowConfigs[0].burstQuantum)
        senderConfig.completionWindow = 2
        let paced = PacedSender(ring: ring, config: senderConfig)
        let plans = AccessUnitPlans()  // one packetization per access unit and payload budget
        // A `let`: the closures below (one per send slot's report) read it with no exclusivity
        // check, which a captured `var` (a heap box) takes at every read.
        let senderFlows = try flows.enumerated().map { index, handle in
            try SenderFlow(index: index, handle: handle, ring: ring, paced: paced, plans: plans)
        }
        // The shared pacer's burst: the configured one; without controllers the sum of the
        // flows' (each flow's own cap keeps to its share); else the pacer's default.
        func sharedQuantum() -> Int? {
            if let configured = flowConfigs[0].burstQuantum { return configured }
            guard senderFlows.allSatisfy({ $0.flow.congestion == nil }) else { return nil }
            let quanta = senderFlows.compactMap(\.burstQuantum)
            return quanta.count == senderFlows.count ? min(quanta.reduce(0, +), 65_536) : nil
        }
        if let quantum = sharedQuantum() { paced.setRate(sharedRate(), burstQuantum: quantum) }
        // The path monitor: nil where netlink is unavailable (the engine then learns the path
        // from sends and feedback only, as without it).
        let routeMonitor = flowConfigs.contains(where: \.watchesPath) ? try? RouteMonitor(ring: ring) : nil
        let routeQuery = routeMonitor != nil ? try? RouteQuery() : nil
        if let routeMonitor, let routeQuery {
            try routeMonitor.arm()
            for flow in senderFlows {
                flow.pathQuery = routeQuery
                flow.pathMonitor = routeMonitor
                flow.refreshPath(routeQuery)
            }
        }
        // A flow's turn is about one pacing quantum: with several flows busy, a submission
        // carries some of each instead of one flow's whole frame.
        let scheduler = FlowScheduler(senderFlows.map(\.producer), paces: loop.paces,
                                      burstQuanta: senderFlows.map(\.burstQuantum), quantum: paced.pacer.burstQuantum)
        // Access units handed over ahead of their time (`send(_:at:)`): the ring's wait ends
        // when the first of them is due.
        scheduler.nextDueIn = { now in senderFlows.lazy.compactMap { $0.flow.dueIn(now: now) }.min() }
        paced.queue.onReport = { report in
            var report = report
            let index = FlowScheduler.flowIndex(ofTag: report.tag)
            report.tag = FlowScheduler.flowTag(report.tag)
            senderFlows[index].handleSendReport(report)
            scheduler.wake(flow: index)  // a failed send, a probe or retransmission settled
        }
        // A controller's pacing rate moves with every report: the flow's own cap follows it
        // after the flow's tick, and the shared pacer (at the sum of the paces) before the fill.
        func applyPace(of flow: SenderFlow) -> Bool {
            guard flow.pace != loop.paces[flow.index] else { return false }
            loop.paces[flow.index] = flow.pace
            scheduler.setPace(flow.pace, burstQuantum: flow.burstQuantum, flow: flow.index)
            return true
        }
        func publish() {
            for flow in senderFlows {
                flow.publish(paced: paced, flows: senderFlows.count, mixedSubmissions: scheduler.mixedSubmissions)
            }
        }
        // What the flows finished, at once after every fill, for a source waiting for room
        // (`waitForFramesFinished`).
        func storeFramesFinished() {
            finishedSignal.reached(senderFlows.reduce(Int.max) { min($0, $1.storeFramesFinished()) })
        }
        let publishInterval = max(flowConfigs.map(\.statsInterval.nanoseconds).min() ?? 50_000_000, 1_000_000)
        func armSenderReportAlarm(now: Int64) throws(SystemError) {
            let due = senderFlows.lazy.compactMap { $0.senderReportDue(now: now) }.min()
            if let due { try ring.armAlarm(nanoseconds: max(due - now, 1_000)) }
        }
        // Idle (nothing queued or due), the engine still wakes for its timers (loss by age,
        // liveness, path-MTU probes, the end of the stream) and its counters: once per stats
        // interval, at most every 50 ms. A live source handing a frame over at least every
        // 50 ms (20 fps and more) wakes it first, so a live frame costs one wake-up of the
        // engine, not one for the frame and one for a poll between frames (a 20 ms poll did,
        // at 30 fps).
        // The route monitor's settle lookups (20 and 200 ms after a notice: a route is announced
        // gone before it is) end an idle wait when they are due, and so do the congestion
        // controllers' timers: a flow whose window is full of lost packets sends its tail probe
        // a probe timeout after the last report, not at the next frame's wake-up.
        let idlePoll = min(publishInterval, Self.maxIdlePoll)
        func idleWait() -> Int64 {
            Self.idleWait(poll: idlePoll, timersDue: senderFlows.lazy.compactMap(\.congestionTimeout).min(),
                          routeLookupDue: routeQuery != nil ? routeMonitor?.nextPollDue : nil, now: monotonicNanoseconds())
        }
        try paced.run(scheduler, idlePoll: idleWait(), isFinished: {
            let now = monotonicNanoseconds()
            return senderFlows.allSatisfy { $0.isDone(now: now) }
        }, beforePump: { () throws(SystemError) -> Bool in
            // Awake: an access unit handed over from now on needs no wake-up (`send(_:at:)`), it is
            // read before the next wait (`beforeWait`). A source handing frames over back to back
            // (`send --fast`) writes the eventfd only while the engine waits, not once per frame.
            engineWaitsUntil.store(.min, ordering: .relaxed)
            // What is handed over from here on is seen by this fill's look into the inboxes or
            // by the wait's check; what came before it, by the look (so the unit that woke the
            // engine does not cost a second fill before its wait). An exchange, not a store: when
            // it reads a hand-over's flag, that hand-over's inbox is visible to the look after it.
            _ = aheadInputArrived.exchange(false, ordering: .sequentiallyConsistent)
            try ring.armWake(wakeEvent)  // other threads' access units wake the ring
            var now = monotonicNanoseconds()
            // The monitor listens again if it stopped, and asks for lookups after a change settled.
            if let routeMonitor, routeQuery != nil, routeMonitor.poll(now: now) { loop.pathsMayHaveChanged = true }
            if loop.pathsMayHaveChanged, let routeQuery {
                // Every flow asks for its path now, and what changed is published (stats,
                // events) at once, not at the next interval.
                loop.pathsMayHaveChanged = false
                for flow in senderFlows { flow.refreshPath(routeQuery) }
                scheduler.wakeAll()
                loop.lastPublish = 0
                now = monotonicNanoseconds()  // the lookups took their time
            }
            // With several flows, their periodic work (loss by age, liveness, the path MTU and its
            // error queue, controllers, paces) runs once per `tickInterval`, and for a flow whose
            // feedback came in since: not at every wake-up of the shared ring, which with many
            // flows comes every few datagrams (work per flow per wake-up would grow with the
            // square of the flows). A single flow's wake-ups are its own: it ticks at each, as
            // it always has. Each flow's clock moves every time.
            let fullTick = senderFlows.count == 1 || now - loop.lastTick >= Self.tickInterval
            if fullTick { loop.lastTick = now }
            var pacesChanged = false
            for flow in senderFlows {
                // Only a flow whose inbox changed looks into it (and the scheduler at it again);
                // a flow whose next access unit came due is looked at again too.
                flow.flow.now = now
                if flow.takeInput() || flow.flow.dueWaiting { scheduler.wake(flow: flow.index) }
                if fullTick || flow.feedbackSinceTick {
                    flow.tick(now: now)
                    pacesChanged = applyPace(of: flow) || pacesChanged
                } else {
                    flow.flow.now = now
                }
            }
            if pacesChanged { paced.setRate(sharedRate(), burstQuantum: sharedQuantum()) }
            if fullTick {
                scheduler.wakeAll()  // timers may have queued probes, keyframes, drops
                try armSenderReportAlarm(now: now)  // no-op while one is armed
            }
            if now - loop.lastPublish >= publishInterval {
                loop.lastPublish = now
                publish()
            }
            return !stopRequested.load(ordering: .relaxed)
        }, afterPump: {
            scheduler.endPump()
            storeFramesFinished()
        }, beforeWait: { timeout in
            // Published before the inboxes are looked at once more (see `wakeEngine(due:)`). A
            // wait without a timeout is for completions of sends in flight (the completion window
            // is full, or no send slot is free): they end it whatever is handed over meanwhile,
            // and nothing handed over could go before them, so it stays marked awake (`.min`). A
            // saturated sender (a file sent as fast as the window allows) then takes its access
            // units with no eventfd write and no wake-up of its own per unit.
            engineWaitsUntil.store(timeout.map { monotonicNanoseconds() + $0 } ?? .min, ordering: .sequentiallyConsistent)
            return !aheadInputArrived.exchange(false, ordering: .sequentiallyConsistent)
        }, other: { completion in
            if completion.tag.kind == CompletionTag.timerKind && completion.tag.payload == Ring.alarmSlot {
                // Sender reports leave at the alarm's (random) time, not at a pacer wake-up.
                let now = monotonicNanoseconds()
                for flow in senderFlows { flow.sendSenderReportIfDue(now: now) }
                try? armSenderReportAlarm(now: now)
                return
            }
            if completion.tag.kind == CompletionTag.routeKind, let routeMonitor {
                // A link, address or route changed: the flows ask for their paths before the
                // next fill (once however many notifications this wait brought).
                if routeMonitor.handle(completion) { loop.pathsMayHaveChanged = true }
                return
            }
            if completion.tag.kind == CompletionTag.errorWatchKind {
                // The flow's socket has an error queued: its next tick reads it.
                if senderFlows.indices.contains(Int(completion.tag.payload)) {
                    senderFlows[Int(completion.tag.payload)].pathMTU.errorQueueSignalled()
                }
                return
            }
            guard completion.tag.kind == CompletionTag.receiveKind else { return }
            let index = Int(completion.tag.payload) - Int(SenderFlow.firstFeedbackGroup)
            guard senderFlows.indices.contains(index) else { return }
            senderFlows[index].handleFeedback(completion)
            scheduler.wake(flow: index)  // NACKs, a window that opened, confirmed probes
        })
        for flow in senderFlows { flow.sendGoodbye() }
        publish()
        storeFramesFinished()
    }
}

/// `MediaSender.run`'s loop state, the engine thread's alone.
private final class EngineLoopState {
    /// Each flow's pace: the configured one, and its congestion controller's pacing rate once it obeys one.
    @exclusivity(unchecked) var paces: [Double?]
    /// When the counters were last published, and the flows' periodic work last ran (monotonic).
    @exclusivity(unchecked) var lastPublish: Int64 = 0
    @exclusivity(unchecked) var lastTick: Int64 = 0
    /// The route monitor saw a change: the flows look up their paths before the next fill.
    @exclusivity(unchecked) var pathsMayHaveChanged = false

    init(paces: [Double?]) { self.paces = paces }
}
