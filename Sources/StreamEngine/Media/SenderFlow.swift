import Glibc
import MediaFormats
import SecureRTP
import Synchronization
import UringIO

/// The thread-safe side of one flow of a `MediaSender`: what other threads hand it
/// (access units, a new destination) and read from it (stats, keyframe requests).
final class FlowHandle: Sendable {
    struct Inbox {
        /// Access units handed over, each with its due time (nil: at once).
        var accessUnits: [(accessUnit: AccessUnit, due: Int64?)] = []
        var finished = false
        var dropped = 0
        var newDestination: SocketAddress?
    }

    let config: MediaSenderConfig
    let inbox = Mutex(Inbox())
    let statsBox = Mutex(SenderStats())
    let keyframeRequested = Atomic<Bool>(false)
    /// Frames the flow is done with (written, or dropped: unviable, unconfirmed, queue full), kept
    /// by the engine as it goes (`SenderFlow.storeFramesFinished()`), not at the stats interval.
    let framesFinished = Atomic<Int>(0)
    /// Set when the inbox changed (or kept what did not fit the flow's queue): the engine
    /// looks into it only then, not on every wake-up of every flow.
    let inboxChanged = Atomic<Bool>(true)
    private let wakeEvent: WakeEvent
    /// Where the flow's events go (the sender's subscribers).
    let events: SenderEventHub
    /// The sender's RTCP CNAME (one for all its flows).
    let cname: String
    /// The flow's media SSRC and the SSRC of its RFC 4588 retransmissions (distinct, not 0):
    /// chosen here, so that an SDP written before the sender runs names them.
    let ssrc: UInt32
    let rtxSSRC: UInt32

    init(config: MediaSenderConfig, wakeEvent: WakeEvent, cname: String, events: SenderEventHub) {
        self.config = config
        self.wakeEvent = wakeEvent
        self.events = events
        self.cname = cname
        ssrc = UInt32.random(in: 1...UInt32.max)
        var rtx = UInt32.random(in: 1...UInt32.max)
        while rtx == ssrc { rtx = UInt32.random(in: 1...UInt32.max) }
        rtxSSRC = rtx
    }

    /// Queues `accessUnit`, not to start before `due` (monotonic nanoseconds; nil: at once).
    /// Returns false (and counts a dropped frame) when `maxQueuedFrames` were waiting in the inbox
    /// already. Waking the engine is the caller's (`MediaSender.wakeEngine(due:)` wakes it only for
    /// a unit due before its wait ends).
    func queue(_ accessUnit: AccessUnit, due: Int64?) -> Bool {
        let accepted = inbox.withLock { box in
            guard box.accessUnits.count < config.maxQueuedFrames else {
                box.dropped += 1
                return false
            }
            box.accessUnits.append((accessUnit, due))
            return true
        }
        inboxChanged.store(true, ordering: .releasing)
        return accepted
    }

    func finish() {
        inbox.withLock { $0.finished = true }
        inboxChanged.store(true, ordering: .releasing)
        wakeEvent.signal()
    }

    func redirect(to destination: SocketAddress) {
        inbox.withLock { $0.newDestination = destination }
        inboxChanged.store(true, ordering: .releasing)
        wakeEvent.signal()
    }
}

/// The engine-thread side of one flow: its sockets, packetizer, path-MTU search, feedback,
/// bound and counters. Everything the flows share (the ring, the pacer, the send slots)
/// belongs to the `MediaSender` running them.
final class SenderFlow {
    /// A sender report leaves "while media flows" when the flow wrote a media datagram this
    /// recently (nanoseconds): several frame intervals, well under the time after the last
    /// frame that the final feedback wait lasts.
    static let mediaFlowingWindow: Int64 = 250_000_000
    /// Feedback receivers use buffer groups `firstFeedbackGroup + index`.
    static let firstFeedbackGroup: UInt16 = 2

    let index: Int
    let handle: FlowHandle
    var config: MediaSenderConfig { handle.config }
    private let ring: Ring
    private let paced: PacedSender
    /// The ECN codepoint the flow's media and retransmissions carry: the configured one, or
    /// ECT(0) once the path was seen to remark ECT(1) (`takeECNVerdict`); its path check holds it.
    var ecn: ECNCodepoint { rtcp.ecnCheck.sent }
    let socket: UDPSocket
    let rtcpSocket: UDPSocket?
    private let feedbackSocket: UDPSocket?
    private let feedbackReceiver: UDPMultishotReceiver?
    let flow: MediaFlow
    let pathMTU: PathMTUController
    let rtcp: SenderFeedback
    /// SRTP (nil: plain RTP).
    let srtp: SRTPEndpoint?
    /// Retransmissions in front of the flow's datagrams (nil: `retransmission` off or no feedback).
    let retransmitter: Retransmitter?
    /// What the scheduler takes this flow's datagrams from: retransmissions first, then the
    /// path-MTU controller (probes, then media), all through SRTP when it is on.
    let producer: DatagramProducer
    /// The counters as the engine keeps them (published to `handle` at the stats interval);
    /// written per send slot's report on the engine thread only: no dynamic exclusivity check.
    @exclusivity(unchecked) var local = SenderStats()
    /// Feedback came in since the last `tick`: the engine ticks this flow at its next wake-up.
    private(set) var feedbackSinceTick = false
    // `@exclusivity(unchecked)` on `pathState`, `eventDetector` and `multicastReceivers`, which
    // `tick` and the publication touch at each wake-up: the engine thread's alone, no access
    // kept open across a call out (results/profile.md section 41).
    /// The flow's path as the route monitor last reported it.
    @exclusivity(unchecked) var pathState = FlowPathState()
    /// The engine's route query (nil when the path is not watched).
    var pathQuery: RouteQuery?
    /// The engine's route monitor, for its counters (nil when the path is not watched).
    var pathMonitor: RouteMonitor?
    /// The events between one publication of `local` and the next.
    @exclusivity(unchecked) private var eventDetector: SenderEventDetector
    private let bound: Int?
    private(set) var destination: SocketAddress
    private var lastForcedKeyframe: Int64 = -1 << 62
    /// A PLI came within `minKeyframeInterval` of the last forced keyframe: the keyframe is
    /// forced once the interval has passed (`tick`), not dropped.
    private var keyframeDeferred = false
    /// With a multicast destination: the receivers that report (nil for unicast).
    @exclusivity(unchecked) private var multicastReceivers: MulticastReceivers?
    private var firstSend: Int64?
    private var lingerDeadline: Int64?
    private var nextSenderReport: Int64 = 0
    private var lastGoneProbe: Int64 = 0
    /// An empty list with room, which changes places with the inbox's (`takeInput`).
    private var spareInbox: [(accessUnit: AccessUnit, due: Int64?)] = []
    /// The source said it has no more and everything it handed over was taken.
    private(set) var inputFinished = false
    /// The controller's target before any feedback: what the application is told while the flow
    /// does not obey it (`CongestionStats.active` false).
    private var startTarget = 0
    /// Confirmed and CE-reported packets at the last publication that confirmed any (`CongestionStats.ceFraction`).
    private var lastConfirmedForCE = 0
    private var lastCEReported = 0
    /// When the target was last announced (monotonic nanoseconds).
    private var lastTargetAnnounced: Int64 = 0
    /// The media's target under the controller's while frames wait in the flow's queue.
    private var mediaRate = MediaRateControl(allowance: 0)
    /// The least media target (the controller's `minBitrate`; 1 for a custom controller).
    private var mediaMinimum = 1
    /// What `storeFramesFinished()` stored last.
    private var storedFramesFinished = 0
    /// With `config.paceStreamMultiple`: the stream's rate, from the access units taken in.
    /// (Unchecked, as the state above: read at every tick, and with feedback a tick follows
    /// each report; results/profile.md section 43.)
    @exclusivity(unchecked) private var streamRate = StreamRateMeter()
    /// With `config.paceStreamMultiple`: the pace the stream asks for (`followStream()`), nil
    /// while it asks for no more than `config.paceBitsPerSecond`.
    @exclusivity(unchecked) private var streamPace: Double?

    /// Opens the flow's sockets on `ring`, its routes in `paced`; its packetizer shares `plans`
    /// with the engine's other flows.
    init(index: Int, handle: FlowHandle, ring: Ring, paced: PacedSender, plans: AccessUnitPlans) throws {
        self.index = index
        self.handle = handle
        self.ring = ring
        self.paced = paced
        let config = handle.config
        destination = config.destination
        srtp = try config.srtp.map { key throws(SystemError) in try SRTPEndpoint(key: key) }
        let trailer = srtp?.outbound.overhead(.rtp) ?? 0  // the packetizer and the probes plan for the tag
        (socket, rtcpSocket) = try Self.openSockets(config)
        if config.destination.isMulticast {
            try socket.setMulticastSend(ttl: config.multicastTTL, interface: config.multicastInterface,
                                        loop: config.multicastLoop)
        }
        try socket.connect(config.destination)
        // DF always. With auto, IP_PMTUDISC_PROBE: the engine's own measured MTU is the clamp,
        // and probes above the kernel's cached path MTU (which lasts 10 minutes) must still go
        // out, or a path that grew again could never be found. A pinned MTU keeps DO.
        try socket.setPathMTUDiscovery(config.mtu == .auto ? .probe : .do)
        try socket.enableReceiveErrors()
        let mark = TrafficMark(config.serviceClass, ecn: config.ecn)
        try socket.setTrafficMark(mark)
        socket.setSendBufferSize(4 << 20)
        feedbackSocket = config.rtcpMux ? socket : rtcpSocket
        // A group's receivers report from their own addresses: its RTCP socket stays unconnected.
        let multicast = config.destination.isMulticast && !config.rtcpMux
        if config.feedback || multicast, let feedbackSocket {
            if config.feedback, let rtcpSocket { try rtcpSocket.connect(Self.rtcpPeer(of: config.destination)) }  // only the receiver's RTCP
            try feedbackSocket.enableReceiveTimestamps()  // RTT from kernel arrival times
            try feedbackSocket.enableDropCounter()
            let receiver = try UDPMultishotReceiver(ring: ring, socket: feedbackSocket,
                                                    groupID: Self.firstFeedbackGroup + UInt16(index),
                                                    bufferCount: 32, maxPayload: 4096)
            try receiver.arm()
            feedbackReceiver = receiver
        } else {
            feedbackReceiver = nil
        }
        let route = paced.addRoute(socket: socket, destination: nil, mark: mark)
        // Path-MTU probes: same socket and class, a route of their own (never in a media GSO
        // send), and Not-ECT: they are not media, so no CE mark on them should count as one.
        let probeRoute = paced.addRoute(socket: socket, destination: nil,
                                        mark: TrafficMark(config.serviceClass, ecn: .notECT))
        let (mtu, source) = MediaSender.datagramBudget(socket: socket, setting: config.mtu)
        do { flow = try MediaFlow(route: route, maxDatagramSize: mtu - socket.headerOverhead - trailer,
                                  payloadType: config.payloadType, ssrc: handle.ssrc, tracksPackets: config.feedback) }
        catch { throw ConfigurationError("packetizer", "MTU \(mtu) is too small") }
        flow.sharedPlans = plans
        var fixedMTU: Int?
        if case .fixed(let value) = config.mtu { fixedMTU = value }
        let socket = socket
        // No RFC 8899 probes with SRTP: a probe's sequence number is its id, outside the media's
        // sequence space on the media's SSRC, so it would reuse an SRTP packet index (the same
        // keystream) and libsrtp2 refuses it. The kernel's path MTU and ICMP size the flow.
        let probes = config.feedback && feedbackReceiver != nil && srtp == nil
        pathMTU = PathMTUController(flow: flow, socket: socket, probeRoute: probeRoute, fixedMTU: fixedMTU,
                                    feedback: probes, trailer: trailer, configure: {
            $0.reprobeInterval = config.pathMTUReprobeInterval.nanoseconds
            if socket.family == .ipv4 { $0.baseMTU = config.pathMTUBaseIPv4 }
        }, now: monotonicNanoseconds())
        // ICMP and local errors are read when the socket signals one, not at every wake-up.
        pathMTU.armErrorWatch = { (try? socket.armErrorWatch(on: ring, payload: UInt64(index))) != nil }
        if config.feedback {
            flow.maxUnconfirmedBytes = config.maxUnconfirmedBytes
                ?? max(Int((config.paceBitsPerSecond ?? 8_000_000) / 8), 256 * 1024)
        }
        bound = flow.maxUnconfirmedBytes
        rtcp = SenderFeedback(ssrc: flow.ssrc, cname: handle.cname)
        rtcp.ecnCheck = ECNPathCheck(sent: config.ecn)
        if multicast {
            multicastReceivers = MulticastReceivers(capacity: config.maxMulticastReceivers,
                                                    packetOverhead: socket.family == .ipv6 ? 48 : 28)
        }
        retransmitter = config.retransmission && feedbackReceiver != nil
            ? Self.makeRetransmitter(config, flow: flow, rtxSSRC: handle.rtxSSRC, producer: pathMTU, paced: paced,
                                     socket: socket, mark: mark) : nil
        if let history = retransmitter?.history, !history.sameSSRC { rtcp.rtxSSRC = history.ssrc }
        let inner: DatagramProducer = retransmitter ?? pathMTU
        if let srtp { producer = SRTPProtectingProducer(inner, session: srtp.outbound) } else { producer = inner }
        local.pathMTU = pathMTU.mtu
        local.mtuSource = source == .configured ? source : pathMTU.source
        local.dscp = mark.dscp
        local.ecn = config.ecn.name
        local.pacingRate = config.paceBitsPerSecond ?? 0
        local.ssrc = flow.ssrc
        local.feedback = config.feedback
        local.maxUnconfirmedBytes = bound ?? 0
        local.flowIndex = index
        local.destination = "\(config.destination)"
        if let setting = config.congestionControl {
            let controller = setting.makeController(ecn: config.ecn, maxPacketSize: mtu - socket.headerOverhead)
            flow.congestion = controller
            flow.maxFrameWait = config.maxFrameWait.nanoseconds
            mediaRate = MediaRateControl(allowance: config.maxFrameWait.nanoseconds / 4)
            startTarget = controller.targetBitrate
            if case .scream(let configuration) = setting { mediaMinimum = configuration.minBitrate }
            var congestion = CongestionStats()
            congestion.controller = setting.name
            congestion.targetBitrate = startTarget
            local.congestion = congestion
        }
        eventDetector = SenderEventDetector(initial: local)
    }

    /// The flow's pacing burst (bytes; nil: the pacer's default, 2 ms of the pace). Under an L4S
    /// controller (ECT(1)) half a millisecond of the pace, at least a datagram: an L4S bottleneck
    /// marks what waits over about 1 ms, and a 2 ms burst arriving at once would mark its own
    /// tail (measured in tools/cc-eval case a: 5.7 % of packets marked, the rate held at 83 %).
    /// Without a controller (a fixed pace: a file's, `--pace`) `Pacer.fixedPaceQuantum`: a few
    /// datagrams per wake-up where 2 ms of the pace is about one.
    var burstQuantum: Int? {
        if let configured = config.burstQuantum { return configured }
        guard let pace else { return nil }
        if flow.congestion == nil {
            return Pacer.fixedPaceQuantum(rateBitsPerSecond: pace, datagram: flow.maxDatagramSize)
        }
        guard flow.congestionActive, ecn == .ect1 else { return nil }
        return max(Int(pace / 8 * 0.0005), flow.maxDatagramSize)
    }

    /// The flow's pace now (bits per second; nil: unpaced): its controller's pacing rate while it
    /// obeys one, the configured pace otherwise.
    ///
    /// A backlog in the flow's queue (a keyframe, several times a frame's size) is paced faster,
    /// up to twice the controller's rate, so that it drains within a quarter of `maxFrameWait`:
    /// paced at the target's rate with little headroom, a keyframe's excess would drain at only
    /// that headroom (5 % by default, seconds for one keyframe) and the frames behind it would
    /// age out. The window still bounds what is in flight, so the path's queue grows by at most
    /// the window's headroom.
    ///
    /// Under an L4S controller (ECT(1)), once it has measured the rate at which the bottleneck
    /// delivers the flow's packets while a queue stands (`CongestionController.bottleneckRate`),
    /// the flow goes no faster than `backlogBottleneckShare` of it (or its target, if that is
    /// more): faster, a backlog only moves from the sender's queue into the path's, where an L4S
    /// bottleneck marks what waits over about 1 ms and the controller cuts for the flow's own
    /// keyframe (tools/cc-eval case a: a burst of marks at every keyframe, 86.5 % of the link;
    /// 89.2-89.7 % with this, results/cc/bottleneck-rate.md). Not for a classic flow: a classic
    /// queue takes a keyframe's burst in (the controller answers delay from 10 ms on), and its
    /// frames reach the receiver sooner through it than waiting in the sender at 0.9 of the
    /// link (case f: 93 frames aged out at the sender, against about 30 without the cap).
    var pace: Double? {
        if flow.congestionActive, let congestion = flow.congestion {
            let rate = Double(congestion.pacingRate)
            let pace = min(max(rate, backlogDrainRate), 2 * rate)
            guard ecn == .ect1, let bottleneck = congestion.bottleneckRate else { return pace }
            return min(pace, max(Double(congestion.targetBitrate), Self.backlogBottleneckShare * Double(bottleneck)))
        }
        return streamPace ?? config.paceBitsPerSecond
    }

    /// The most of the bottleneck's measured rate a backlog is paced at: room for the
    /// measurement's error and the path's jitter.
    static let backlogBottleneckShare = 0.9

    /// The rate (bits per second) that sends the flow's queued bytes within a quarter of
    /// `maxFrameWait`.
    private var backlogDrainRate: Double {
        Double(flow.pendingBytes) * 8 * 4e9 / Double(max(config.maxFrameWait.nanoseconds, 1))
    }

    /// With `config.paceStreamMultiple`: sets `streamPace` from the stream's rate and the
    /// backlog (see `MediaSenderConfig.paceStreamMultiple`). It moves in steps, not with every
    /// frame's size (`steppedPace`), so the shared pacer is not reset per frame, also when the
    /// stream's rate hovers at the least pace.
    private func followStream() {
        guard let multiple = config.paceStreamMultiple, let least = config.paceBitsPerSecond else { return }
        let measured = (streamRate.bitsPerSecond ?? 0) * multiple
        let wanted = max(measured, backlogDrainRate)
        let before = streamPace
        streamPace = Self.steppedPace(asked: wanted, now: streamPace, least: least)
        if streamPace != before { retransmitter?.followPace(streamPace ?? least) }  // a quarter of the pace
    }

    /// The pace a stream follows (nil: `least`) after `asked` was asked of it at `now` (nil:
    /// `least`): unchanged while `asked` is within 80 – 100 % of it, else 1.1 x `asked`.
    static func steppedPace(asked: Double, now: Double?, least: Double) -> Double? {
        let current = now ?? least
        guard asked > current || asked < 0.8 * current else { return now }
        let next = 1.1 * asked
        return next > least ? next : nil
    }

    private static func rtcpPeer(of destination: SocketAddress) -> SocketAddress {
        var peer = destination
        peer.port = peer.port &+ 1
        return peer
    }

    /// Opens an RTP socket on an even local port and, unless muxed, its RTCP socket on the next.
    /// Ports are always bound by number (a free pair picked at random when none is configured):
    /// a socket bound to port 0 loses its port when it is connected again to take a new source
    /// address (`UDPSocket.reconnect`), and the receiver knows the flow by its port.
    private static func openSockets(_ config: MediaSenderConfig) throws(SystemError) -> (rtp: UDPSocket, rtcp: UDPSocket?) {
        let family = config.destination.family
        for _ in 0..<(config.localPort == nil ? 64 : 1) {
            let port = config.localPort ?? UInt16.random(in: 20_000...30_000) * 2  // even, 40000-60000
            let any = SocketAddress(ip: family == .ipv6 ? "::" : "0.0.0.0", port: port)!
            let rtp = try UDPSocket(family: family)
            do throws(SystemError) {
                try bind(rtp, to: any, takingOver: config.takesOverReservedPorts)
            } catch where error.errno == EADDRINUSE && config.localPort == nil {
                continue
            }
            guard (config.feedback || config.destination.isMulticast) && !config.rtcpMux else { return (rtp, nil) }
            var rtcpAddress = try rtp.localAddress()
            guard rtcpAddress.port < 65_535 else { continue }
            rtcpAddress.port += 1
            let rtcp = try UDPSocket(family: family)
            if (try? bind(rtcp, to: rtcpAddress, takingOver: config.takesOverReservedPorts)) != nil { return (rtp, rtcp) }
        }
        throw SystemError("cannot bind", errno: EADDRINUSE,
                          context: config.localPort.map { "RTP/RTCP ports \($0)-\(Int($0) + 1)" } ?? "an RTP/RTCP port pair")
    }

    /// Binds `socket`; `takingOver` a port a reservation socket holds and lets share: shared for
    /// the bind, then with no one.
    private static func bind(_ socket: UDPSocket, to address: SocketAddress, takingOver: Bool) throws(SystemError) {
        if takingOver { try socket.allowSharedPort() }
        try socket.bind(address)
        if takingOver { try socket.allowSharedPort(false) }
    }

    /// Takes what other threads handed over: access units (as many as the queue has room
    /// for), the end of input, a new destination. Returns false, at once, when nothing was
    /// handed over since the last call.
    @discardableResult
    func takeInput() -> Bool {
        guard handle.inboxChanged.exchange(false, ordering: .acquiring) else { return false }
        let room = max(0, config.maxQueuedFrames - flow.queuedAccessUnits)
        // The inbox's list and this flow's empty one change places when all of it fits (the
        // usual case): both keep their storage, so taking the frames allocates nothing (a list
        // was made for them at every wake-up: results/profile.md section 41).
        var incoming: [(accessUnit: AccessUnit, due: Int64?)] = []
        swap(&incoming, &spareInbox)
        let (isFinished, dropped, newDestination) = handle.inbox.withLock { box in
            if box.accessUnits.count <= room {
                swap(&incoming, &box.accessUnits)
            } else {
                incoming.append(contentsOf: box.accessUnits.prefix(room))
                box.accessUnits.removeFirst(room)
                // What did not fit waits for room: look again at the next wake-up.
                handle.inboxChanged.store(true, ordering: .relaxed)
            }
            defer { box.newDestination = nil }
            return (box.finished && box.accessUnits.isEmpty, box.dropped, box.newDestination)
        }
        let now = incoming.isEmpty ? 0 : monotonicNanoseconds()
        for (accessUnit, due) in incoming {
            flow.enqueue(accessUnit, at: now, due: due)
            if flow.congestionActive { mediaRate.frameQueued(at: due ?? now, queueDelay: flow.queueDelay(now: now)) }
        }
        if config.paceStreamMultiple != nil {
            for (accessUnit, due) in incoming { streamRate.add(byteCount: accessUnit.byteCount, at: due ?? now) }
        }
        incoming.removeAll(keepingCapacity: true)
        swap(&incoming, &spareInbox)
        inputFinished = isFinished
        local.framesDroppedQueueFull = dropped
        if let newDestination, newDestination != destination { redirect(to: newDestination) }
        return true
    }

    /// Points the flow at a new receiver address (same family): the sockets are connected
    /// there, and it starts from a keyframe.
    private func redirect(to newDestination: SocketAddress) {
        do throws(SystemError) {
            try socket.connect(newDestination)
            if config.feedback, let rtcpSocket { try rtcpSocket.connect(Self.rtcpPeer(of: newDestination)) }
            destination = newDestination
            local.destination = "\(newDestination)"
            local.redirects += 1
            // What the old receiver has not confirmed yet it never will: its feedback is no
            // longer accepted. Written off, not lost, and out of the bound.
            flow.log.abandonUnconfirmed()
            requestKeyframe()
            if let pathQuery { refreshPath(pathQuery) }  // the new receiver's path
        } catch {
            local.errors[.redirect(error), default: 0] += 1
        }
    }

    /// Keyframes are expensive: however many PLIs arrive, at most one is forced per
    /// `minKeyframeInterval` (feedback must not turn into an amplifier). The engine's own
    /// reasons (the bound, a receiver back or probed) are rare by construction and go through.
    /// A PLI within the interval is not lost: the receiver sends one when a frame is lost, and
    /// cannot decode until a keyframe comes (a keyframe forced just before may be the frame it
    /// lost, as after a route's return), so the first such PLI forces one when the interval
    /// has passed; the others meanwhile are ignored.
    func requestKeyframe(fromPLI: Bool = false) {
        let now = monotonicNanoseconds()
        guard !fromPLI || now - lastForcedKeyframe >= config.minKeyframeInterval.nanoseconds else {
            if keyframeDeferred {
                local.keyframeRequestsIgnored += 1
            } else {
                keyframeDeferred = true
                local.keyframeRequestsDeferred += 1
            }
            return
        }
        keyframeDeferred = false
        lastForcedKeyframe = now
        local.keyframeRequests += 1
        handle.keyframeRequested.store(true, ordering: .relaxed)
    }

    /// When the next sender report is due (nil: none until packets are sent). Reports go out
    /// at random times (the interval +-50 %) from an alarm of their own, never at the pacer's
    /// wake-ups: a report sent at the first wake-up after it was due would leave just before
    /// a media batch every time, see the bottleneck queue at the low point of our own send
    /// rhythm, and the RTT would read low (measured: 0.1-1.3 ms below ping at 3 Mbit/s).
    func senderReportDue(now: Int64) -> Int64? {
        // A group's packets are not tracked (no log): its first written frame starts the reports.
        let sending = flow.log.sent > 0 || (multicastReceivers != nil && flow.framesWritten > 0)
        guard config.feedback || multicastReceivers != nil, feedbackSocket != nil, sending else { return nil }
        // The first goes with the first packets: its SDES tells the receiver the RTX stream's SSRC
        // (`SenderFeedback.rtxSSRC`) before a packet reordered at the start is asked for, and its
        // answer gives the first RTT sample at once.
        if nextSenderReport == 0 { nextSenderReport = now }
        return nextSenderReport
    }

    private func scheduleSenderReport(after now: Int64) {
        nextSenderReport = now + Int64(Double(config.senderReportInterval.nanoseconds) * Double.random(in: 0.5...1.5))
    }

    /// From the alarm: sends a sender report if one is due.
    func sendSenderReportIfDue(now: Int64) {
        guard let due = senderReportDue(now: now), now >= due, let feedbackSocket else { return }
        guard pathState.viable else {
            scheduleSenderReport(after: now)  // no route: it could not leave (ENETUNREACH)
            return
        }
        scheduleSenderReport(after: now)
        let realtime = realtimeNanoseconds()
        // The packet count is every media packet handed to the kernel, in sequence (RFC 3550
        // 6.4.1): the receiver finds a lost tail by it (`ReceiveSession`), so it must not lag
        // behind sends whose completions are not in yet.
        var plain = rtcp.senderReport(flow: flow, realtime: realtime,
                                      packets: flow.packetsWritten, octets: local.bytesSent,
                                      mediaFlowing: flow.lastMediaWrite.map { now - $0 <= Self.mediaFlowingWindow } ?? false)
        if let multicastReceivers {
            // The group's receivers do not hear each other: the summary (RFC 5760 RSI) tells them
            // how many they are, for their report interval (RFC 3550 6.3).
            plain += RTCPCompoundBuilder.build([.receiverSummary(multicastReceivers.summary(ssrc: flow.ssrc, realtime: realtime))])
            self.multicastReceivers!.noteSent(bytes: plain.count)
        }
        guard let report = srtp.map({ $0.protectRTCP(plain) }) ?? plain else { return }  // counted in srtp.protectFailed
        // To a group's RTCP port (its receivers join it there too); a unicast socket is connected.
        let group = multicastReceivers != nil ? Self.rtcpPeer(of: destination) : nil
        let sent = report.withUnsafeBytes { (try? PlainUDP.sendTo(feedbackSocket, $0, destination: group)) != nil }
        if sent { local.senderReports += 1 }
    }

    /// The stream ends (RFC 3550 6.6): a BYE for every SSRC the flow used (media, and RTX when it
    /// has its own), in a compound with a last sender report, to where the reports go. Sent once,
    /// after the flow's last packet and its linger (`isDone`), or at a stop.
    func sendGoodbye() {
        guard config.feedback || multicastReceivers != nil, let feedbackSocket, flow.packetsWritten > 0,
              pathState.viable else { return }
        var ssrcs = [flow.ssrc]
        if let history = retransmitter?.history, !history.sameSSRC { ssrcs.append(history.ssrc) }
        let plain = rtcp.senderReport(flow: flow, realtime: realtimeNanoseconds(), packets: flow.packetsWritten,
                                      octets: local.bytesSent, mediaFlowing: false)
            + RTCPCompoundBuilder.build([.goodbye(RTCPGoodbye(ssrcs: ssrcs))])
        guard let datagram = srtp.map({ $0.protectRTCP(plain) }) ?? plain else { return }  // counted in srtp.protectFailed
        let group = multicastReceivers != nil ? Self.rtcpPeer(of: destination) : nil
        let sent = datagram.withUnsafeBytes { (try? PlainUDP.sendTo(feedbackSocket, $0, destination: group)) != nil }
        if sent { local.byeSent += 1 }
    }

    /// When the flow's congestion controller, while obeyed, next needs its tick
    /// (`CongestionController.nextTimeout`, monotonic nanoseconds).
    var congestionTimeout: Int64? { flow.congestionActive ? flow.congestion?.nextTimeout?.nanoseconds : nil }

    /// Periodic work: loss by age, liveness, keyframe requests, the path MTU.
    func tick(now: Int64) {
        flow.now = now
        followStream()
        feedbackSinceTick = false
        if flow.log.sent > 0 && firstSend == nil { firstSend = now }
        // Never any feedback: a receiver that sends none. No bound until feedback appears.
        let silentSinceStart = config.feedback && !rtcp.feedbackSeen && now - (firstSend ?? now) > config.noFeedbackTimeout.nanoseconds
        // Ours send per-packet feedback from their first report on (it follows the first media
        // packets); a receiver that sends only receiver reports (ffmpeg, GStreamer), or nothing,
        // cannot confirm probes.
        let confirmsProbes: Bool? = rtcp.perPacketFeedback ? true
            : (rtcp.receiverReportsOnly || silentSinceStart) ? false : nil
        if !pathState.viable {
            pathMTU.pause()
        } else {
            pathMTU.tick(now: now, roundTripMilliseconds: rtcp.rttSmoothed,
                         receiverAlive: rtcp.feedbackSeen && !rtcp.receiverGone && now - rtcp.lastFeedback < 1_000_000_000,
                         receiverConfirmsProbes: confirmsProbes)
        }
        guard config.feedback, feedbackSocket != nil else { return }  // no feedback: packets are not tracked
        if silentSinceStart {
            // Nothing heard since the start (ffmpeg reading an SDP sends no RTCP): no receiver
            // will confirm these, and what age declared lost was only ever a guess.
            flow.log.abandonUnreported()
        } else if !rtcp.receiverGone {
            // A receiver that stopped reporting keeps its packets unconfirmed: the bound holds.
            flow.log.expireUnconfirmed(sentBefore: now - rtcp.lossTimeout)
        }
        local.feedbackAbsent = silentSinceStart
        var effectiveBound = bound
        if config.maxUnconfirmedBytes == nil, let bound, let streamPace {
            // The default bound is about a second at the pace: at the pace the stream asks for.
            effectiveBound = max(bound, Int(streamPace / 8))
        }
        if config.maxUnconfirmedBytes == nil, let bound = effectiveBound, rtcp.receiverReportsOnly,
           let interval = rtcp.expectedReportInterval {
            // The default bound (about a second) against a receiver that confirms only once per
            // report interval (RFC 3550: 5 s) would stall the flow between its reports: room for
            // two intervals at the pace instead (at most 16 MB). A configured bound stays as set.
            let perInterval = (streamPace ?? config.paceBitsPerSecond ?? 8_000_000) / 8 * Double(interval) / 1e9
            effectiveBound = max(bound, min(Int(2 * perInterval), 16 << 20))
        }
        flow.maxUnconfirmedBytes = silentSinceStart ? nil : effectiveBound
        local.maxUnconfirmedBytes = effectiveBound ?? 0
        _ = rtcp.checkLiveness(now: now, sending: flow.log.unconfirmedPackets > 0)
        flow.receiverGone = rtcp.receiverGone
        if flow.congestion != nil {
            flow.congestion?.advance(to: .nanoseconds(now))
            // Only per-packet feedback from a receiver that is there can drive the controller: until
            // the first such report (a third-party receiver sends none, or only receiver reports)
            // and while the receiver is gone, the flow runs as without one (paced as configured,
            // under its bound), so a receiver that cannot answer never stalls it.
            flow.congestionActive = rtcp.perPacketFeedback && !silentSinceStart && !rtcp.receiverGone
            flow.dropFramesWaitingTooLong()
        }
        if rtcp.receiverGone && now - lastGoneProbe >= config.goneProbeInterval.nanoseconds {
            // A receiver that went away (or a new one in its place) can only answer what
            // reaches it: once a second, what waited unconfirmed counts as lost and one
            // keyframe goes out, so the bound holds and a new receiver can start decoding.
            lastGoneProbe = now
            flow.log.expireUnconfirmed(sentBefore: now)
            flow.probeFrames = 1
            flow.keyframeWanted = true
        }
        if flow.keyframeWanted {
            flow.keyframeWanted = false
            requestKeyframe()
        }
        if keyframeDeferred && now - lastForcedKeyframe >= config.minKeyframeInterval.nanoseconds {
            requestKeyframe(fromPLI: true)
        }
    }

    /// True once the input is finished, everything is sent, and the final feedback is in
    /// (or `finalFeedbackWait` passed). The engine stops when every flow is done.
    func isDone(now: Int64) -> Bool {
        guard inputFinished else { return false }
        if flow.dueIn(now: now) != nil { return false }  // frames handed ahead still wait for their time
        if let multicastReceivers {
            // A group's stream ends when every receiver it knows has reported its last packet
            // (their next regular report after it), or after `finalFeedbackWait`.
            guard flow.isEmpty else { return false }
            if lingerDeadline == nil { lingerDeadline = now + config.finalFeedbackWait.nanoseconds }
            return multicastReceivers.allReported(through: flow.nextSequence &- 1) || now >= lingerDeadline!
        }
        // A congestion window that holds packets back leaves the pump idle with frames still queued.
        if flow.congestionActive && !flow.isEmpty { return false }
        guard config.feedback, !local.feedbackAbsent else { return true }
        if lingerDeadline == nil { lingerDeadline = now + config.finalFeedbackWait.nanoseconds }
        if now >= lingerDeadline! { return true }
        // With retransmission, the history answers NACKs for `rtxTime` after the last packet: a
        // loss at the very end (found by the receiver from a sender report sent meanwhile) or a
        // retransmission lost near it can still be repaired.
        if retransmitter != nil, let last = flow.lastMediaWrite, now - last < config.rtxTime.nanoseconds { return false }
        return flow.log.unconfirmedPackets == 0
    }

    /// A send completion of this flow's datagrams.
    func handleSendReport(_ report: SendReport) {
        if pathMTU.handleSendReport(report) { return }  // probes are not media
        if retransmitter?.handleSendReport(report) == true { return }  // nor are retransmissions
        local.packetsSent += report.sentDatagrams
        local.bytesSent += report.sentBytes
        local.packetsFailed += report.failedDatagrams
        if let error = report.error { local.errors[.send(error), default: 0] += report.failedDatagrams }
    }

    /// A receive completion of this flow's feedback socket.
    func handleFeedback(_ completion: Completion) {
        guard let feedbackReceiver else { return }
        feedbackSinceTick = true
        try? feedbackReceiver.handle(completion) { datagram in
            let arrival = datagram.timestampNanoseconds > 0 ? datagram.timestampNanoseconds : realtimeNanoseconds()
            guard let srtp else { return handleRTCP(datagram.payload, from: datagram.source, arrival: arrival) }
            // Only what authenticates reaches the feedback logic; the rest is counted in srtp.rejected.
            _ = srtp.inbound.unprotect(datagram.payload, kind: .rtcp) {
                handleRTCP($0, from: datagram.source, arrival: arrival)
            }
        }
    }

    /// One RTCP datagram from the receiver (plaintext: authenticated first when SRTP is on).
    private func handleRTCP(_ payload: UnsafeRawBufferPointer, from source: SocketAddress?, arrival: Int64) {
        if multicastReceivers != nil {
            // Reports of a group's receivers: their state, and their PLIs (rate-limited as any).
            if multicastReceivers!.handle(payload, ssrc: flow.ssrc, clockRate: 90_000, now: monotonicNanoseconds(),
                                          realtime: arrival, from: source) {
                requestKeyframe(fromPLI: true)
            }
            return
        }
        if rtcp.handle(payload, flow: flow, now: monotonicNanoseconds(), realtime: arrival) {
            requestKeyframe(fromPLI: true)
        }
        if ecn == .ect1 && rtcp.ecnCheck.verdict == .remarked { takeECNVerdict() }
        answerNACKs(from: source)
        if rtcp.receiverBack {
            rtcp.receiverBack = false
            requestKeyframe()
        }
        pathMTU.confirmed(rtcp.takeProbeConfirmations(), now: monotonicNanoseconds())
    }

    /// The path delivers the flow's ECT(1) as ECT(0): to every AQM after that hop it is a classic
    /// flow, so a CE mark there asks for a classic response (RFC 9331 section 4.3), which an L4S
    /// response (a cut in proportion to the marks) does not give. The flow sends ECT(0) from
    /// now on (the socket's own mark, and its routes' for what is not yet written) and its
    /// controller answers CE as a classic flow (`CongestionController.ecnChanged(to:)`).
    private func takeECNVerdict() {
        let mark = TrafficMark(config.serviceClass, ecn: .ect0)
        try? socket.setTrafficMark(mark)  // the routes' marks below go as a cmsg if this fails
        paced.setMark(mark, route: flow.route)
        if let retransmitter { paced.setMark(mark, route: retransmitter.route) }
        rtcp.ecnCheck.sending(.ect0)  // now `ecn`
        flow.congestion?.ecnChanged(to: .ect0)
        local.ecn = ecn.name
        local.ecnRemarkedAtPacket = flow.packetsWritten
    }

    /// Stores the frames the flow is done with where other threads read them at once
    /// (`FlowHandle.framesFinished`, what `MediaSender.framesFinished` reads); returns the count.
    func storeFramesFinished() -> Int {
        let finished = flow.framesWritten + flow.framesDroppedUnviable + flow.framesDroppedUnconfirmed
            + local.framesDroppedQueueFull
        if finished != storedFramesFinished {
            storedFramesFinished = finished
            handle.framesFinished.store(finished, ordering: .sequentiallyConsistent)
        }
        return finished
    }

    /// Copies the counters where other threads read them.
    func publish(paced: PacedSender, flows: Int, mixedSubmissions: Int) {
        pathMTU.publish(into: &local)
        publishPath(now: monotonicNanoseconds())
        // A receiver that reports only its highest sequence and a loss count: the count is
        // among the packets confirmed through that highest.
        let reportedLost = min(rtcp.reportedLost, flow.log.confirmed)
        local.packetsConfirmed = flow.log.confirmed - reportedLost
        local.packetsLost = flow.log.lost + reportedLost
        local.packetsAbandoned = flow.log.abandoned
        local.packetsUnconfirmed = flow.log.unconfirmedPackets
        local.bytesUnconfirmed = flow.log.unconfirmedBytes
        local.peakUnconfirmedBytes = flow.peakUnconfirmedBytes
        local.framesDroppedUnconfirmed = flow.framesDroppedUnconfirmed
        local.rttLast = rtcp.rttLast
        local.rttMin = rtcp.rttMin
        local.rttSmoothed = rtcp.rttSmoothed
        local.rttMedian = rtcp.rttWhileSending.median
        local.rtt95thPercentile = rtcp.rttWhileSending.percentile95
        local.rttSamplesWhileSending = rtcp.rttWhileSending.count
        local.rttLastAt = rtcp.rttLastAt.map { Double($0) / 1e9 }
        local.ceReported = rtcp.ceReported
        local.ecnPath = rtcp.ecnCheck.verdict.rawValue
        local.ecnReported = ECNReportCounts(asSent: rtcp.ecnCheck.asSent, ce: rtcp.ecnCheck.ce,
                                            bleached: rtcp.ecnCheck.bleached, remarked: rtcp.ecnCheck.remarked)
        local.receiverGone = rtcp.receiverGone
        local.receiverGoneEvents = rtcp.receiverGoneEvents
        local.feedbackReports = rtcp.reportsAccepted
        local.feedbackIntervalMs = rtcp.reportInterval.map { Double($0) / 1e6 }
        local.feedbackRejected = rtcp.rejected
        feedbackReceiver?.refreshKernelDrops()
        local.feedbackKernelDrops = Int(feedbackReceiver?.counters.kernelDrops ?? 0)
        if let multicastReceivers {
            local.receivers = multicastReceivers.reports
            local.receiversEvicted = multicastReceivers.evicted
        }
        publishRetransmissions()
        local.framesEncoded = flow.framesQueued + local.framesDroppedQueueFull
        local.framesSent = flow.framesWritten
        local.keyframes = flow.keyframesWritten
        local.datagramSize = flow.largestDatagram > 0 ? flow.largestDatagram + (srtp?.outbound.overhead(.rtp) ?? 0) : 0
        local.clamped = flow.clamped
        local.batches = paced.queue.counters.batches
        local.sendCalls = paced.queue.counters.sendCalls
        local.gsoSends = paced.queue.counters.gsoSends
        local.enterCalls = ring.enterCalls
        local.flows = flows
        local.mixedSubmissions = mixedSubmissions
        local.pacingRate = pace ?? 0
        publishCongestion()
        local.srtp = srtp?.stats
        let snapshot = local
        handle.statsBox.withLock { $0 = snapshot }
        handle.events.emit(eventDetector.update(snapshot, now: monotonicNanoseconds()))
    }

    /// The controller's state into `local.congestion`; a new target is announced once it moved
    /// by `targetBitrateStep`.
    private func publishCongestion() {
        guard let congestion = flow.congestion, var stats = local.congestion else { return }
        stats.active = flow.congestionActive
        // Not obeyed: the start until the receiver is known to send no per-packet reports (receiver
        // reports only, or nothing), then `targetBitrateWithoutFeedback`; once the controller was
        // obeyed (the receiver gone since), the last one announced stays.
        if !flow.congestionActive { mediaRate.reset() }
        mediaRate.sent(mediaBytes: local.bytesSent, retransmittedBytes: retransmitter?.sentBytes ?? 0, at: flow.now)
        let withoutFeedback = rtcp.receiverReportsOnly || local.feedbackAbsent
        let target = flow.congestionActive ? mediaRate.mediaTarget(congestion.targetBitrate, minimum: mediaMinimum)
            : rtcp.perPacketFeedback ? stats.targetBitrate
            : withoutFeedback ? config.targetBitrateWithoutFeedback ?? startTarget : startTarget
        let step = config.targetBitrateStep * Double(stats.targetBitrate)
        let now = monotonicNanoseconds()
        if abs(Double(target - stats.targetBitrate)) >= step
            && (now - lastTargetAnnounced >= config.targetBitrateInterval.nanoseconds
                || Double(stats.targetBitrate - target) >= 4 * step) {
            stats.targetBitrate = target
            stats.rateChanges += 1
            lastTargetAnnounced = now
        }
        stats.controllerTarget = congestion.targetBitrate
        stats.senderQueueMs = Double(flow.queueDelay(now: flow.now)) / 1e6
        stats.window = congestion.window
        stats.bytesInFlight = congestion.bytesInFlight
        stats.pacingRate = Int(pace ?? 0)
        stats.queueDelayMs = congestion.queueDelayEstimate.map { Double($0.nanoseconds) / 1e6 }
        stats.losses = congestion.lossCounts
        stats.competition = congestion.competition
        stats.bottleneckRate = congestion.bottleneckRate
        let confirmed = flow.log.confirmed
        if confirmed > lastConfirmedForCE {
            stats.ceFraction = Double(max(0, rtcp.ceReported - lastCEReported)) / Double(confirmed - lastConfirmedForCE)
            lastConfirmedForCE = confirmed
            lastCEReported = rtcp.ceReported
        }
        stats.framesDropped = flow.framesDroppedCongestion
        local.congestion = stats
    }
}

@available(*, unavailable, message: "owned by the sender's engine thread")
extension SenderFlow: Sendable {}
