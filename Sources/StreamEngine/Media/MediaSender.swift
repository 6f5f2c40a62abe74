import Glibc
import MediaFormats
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
    /// Largest burst in bytes (nil: 2 ms of the pace).
    public var burstQuantum: Int?
    /// RTP payload type.
    public var payloadType: UInt8 = 96
    /// Access units that may wait for the wire before new ones are dropped (counted).
    public var maxQueuedFrames: Int = 120
    /// Expect RTCP feedback from the receiver (RR, RFC 8888, PLI) and bound what is
    /// unconfirmed. Off for receivers that send none (multicast, plain RTP players).
    public var feedback = true
    /// Bound on sent-but-unconfirmed bytes (nil: about one second at the pace, at least 256 KB).
    public var maxUnconfirmedBytes: Int?
    /// Feedback on the RTP ports themselves instead of RTP port + 1.
    public var rtcpMux = false
    /// Local RTP port (RTCP on the next one unless muxed); nil: any free even/odd pair.
    public var localPort: UInt16?
    /// After the last packet, how long to wait for the final feedback (nanoseconds).
    public var finalFeedbackWait: Int64 = 2_000_000_000
    /// Forced keyframes (PLI, bound, receiver back) at most this often (nanoseconds).
    public var minKeyframeInterval: Int64 = 500_000_000
    /// While the receiver is gone, how often a keyframe goes out to find it again (nanoseconds).
    public var goneProbeInterval: Int64 = 1_000_000_000
    /// How often a sender report goes out (nanoseconds); each one gives an RTT sample.
    public var senderReportInterval: Int64 = 100_000_000
    /// When no feedback at all arrives this long after the first packet, the receiver is
    /// taken for one that sends none (ffmpeg 5.1's RTP input cannot): the bound is lifted
    /// until feedback appears (nanoseconds).
    public var noFeedbackTimeout: Int64 = 3_000_000_000
    /// With `mtu` auto: how long after a path-MTU search ends the next one starts, to find a
    /// larger path again (nanoseconds).
    public var pathMTUReprobeInterval: Int64 = 15_000_000_000
    /// With `mtu` auto: the smallest MTU assumed to work on an IPv4 path (IPv6: 1280).
    public var pathMTUBaseIPv4 = 1200

    /// Makes a configuration for `destination` with the defaults.
    public init(destination: SocketAddress) { self.destination = destination }
}

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
    /// Where it came from: `kernel`, `configured` (or `probe` once probing confirms it).
    public var mtuSource = "kernel"
    /// The largest UDP payload put on the wire.
    public var datagramSize = 0
    /// Packets that would have exceeded the path MTU (planned for a larger one, then dropped).
    public var clamped = 0
    /// Frames cut short by such a drop (the rest of the frame was not sent).
    public var framesClamped = 0
    /// Path-MTU probes put on the wire, confirmed by the receiver, and given up.
    public var probesSent = 0
    public var probesConfirmed = 0
    public var probesLost = 0
    /// ICMP "fragmentation needed" / "packet too big" taken into account.
    public var icmpMTUReports = 0
    /// Times the MTU in use stopped getting through (black hole) and fell back to the base.
    public var blackHoles = 0
    /// Path-MTU searches started.
    public var mtuSearches = 0
    /// Milliseconds from the start until the last search found its size (nil while none has).
    public var mtuFoundAfterMs: Double?
    /// The TOS byte's DSCP.
    public var dscp: UInt8 = 0
    /// The ECN codepoint sent.
    public var ecn = "ect0"
    /// Pacing rate (bits per second, 0 = unpaced).
    public var pacingRate = 0.0
    /// Submissions (io_uring_enter calls that carried sends).
    public var batches = 0
    /// Sends that used UDP GSO.
    public var gsoSends = 0
    /// Calls to io_uring_enter.
    public var enterCalls = 0
    /// The SSRC of the stream.
    public var ssrc: UInt32 = 0
    /// Send errors by errno name.
    public var errors: [String: Int] = [:]
    /// Feedback is expected (false with `--no-feedback`).
    public var feedback = true
    /// Packets feedback confirmed arrived.
    public var packetsConfirmed = 0
    /// Packets reported missing or unconfirmed too long (and not confirmed since).
    public var packetsLost = 0
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
    /// Round-trip time in milliseconds: last, min, smoothed (nil until measured).
    public var rttLast: Double?
    public var rttMin: Double?
    public var rttSmoothed: Double?
    /// Packets the receiver reported CE-marked.
    public var ceReported = 0
    /// The receiver stopped sending feedback (and has not come back).
    public var receiverGone = false
    /// Times the receiver went silent.
    public var receiverGoneEvents = 0
    /// Keyframes forced (PLI, bound, receiver back).
    public var keyframeRequests = 0
    /// Keyframe requests ignored because one was forced less than `minKeyframeInterval` ago.
    public var keyframeRequestsIgnored = 0
    /// RTCP datagrams accepted from the receiver.
    public var feedbackReports = 0
    /// RTCP rejected, by reason (malformed, confirmations of packets never sent).
    public var feedbackRejected: [String: Int] = [:]
    /// Sender reports sent.
    public var senderReports = 0
    /// Feedback was expected but none ever arrived: the sender runs without the bound.
    public var feedbackAbsent = false
    /// RTCP datagrams the kernel dropped on the feedback socket (its buffer full: a flood).
    public var feedbackKernelDrops = 0
}

/// Sends HEVC access units as an RTP stream (RFC 7798) through the io_uring engine:
/// packetized to the path MTU, marked with a service class and ECN codepoint, paced,
/// many datagrams per submission.
///
/// Any thread may hand it access units (`send`); `run` drives the ring on the thread
/// that calls it until `finish` or `stop`.
public final class MediaSender: Sendable {
    private struct Inbox {
        var accessUnits: [AccessUnit] = []
        var finished = false
        var dropped = 0
    }

    /// The configuration.
    public let config: MediaSenderConfig
    private let inbox = Mutex(Inbox())
    private let statsBox = Mutex(SenderStats())
    private let stopRequested = Atomic<Bool>(false)
    private let keyframeRequested = Atomic<Bool>(false)
    private let wakeEvent: WakeEvent

    /// Makes a sender. Nothing is opened until `run`.
    public init(config: MediaSenderConfig) throws(SystemError) {
        self.config = config
        wakeEvent = try WakeEvent()
    }

    /// Hands an access unit to the sender. Returns false (and counts a dropped frame) when
    /// `maxQueuedFrames` are already waiting.
    @discardableResult
    public func send(_ accessUnit: AccessUnit) -> Bool {
        let accepted = inbox.withLock { box -> Bool in
            guard box.accessUnits.count < config.maxQueuedFrames else {
                box.dropped += 1
                return false
            }
            box.accessUnits.append(accessUnit)
            return true
        }
        wake()
        return accepted
    }

    /// No more access units: `run` returns once everything queued is on the wire.
    public func finish() {
        inbox.withLock { $0.finished = true }
        wake()
    }

    /// Stop as soon as possible (what is in flight completes, the rest is not sent).
    public func stop() {
        stopRequested.store(true, ordering: .relaxed)
        wake()
    }

    /// The counters so far.
    public var stats: SenderStats { statsBox.withLock { $0 } }

    /// True (once) when the receiver or the bound asked for a keyframe since the last call:
    /// a source with an encoder forces its next picture to IDR.
    public func takeKeyframeRequest() -> Bool { keyframeRequested.exchange(false, ordering: .relaxed) }

    private func wake() { wakeEvent.signal() }

    /// The largest UDP payload for this path and configuration, and where the MTU came from.
    static func datagramBudget(socket: UDPSocket, setting: MTUSetting) -> (mtu: Int, source: String) {
        switch setting {
        case .fixed(let mtu): return (mtu, "configured")
        case .auto:
            let kernel = socket.kernelPathMTU() ?? 1500
            return (min(kernel, 1500), "kernel")
        }
    }

    /// Opens an RTP socket on an even local port and, unless muxed, its RTCP socket on the next.
    private func openSockets() throws(SystemError) -> (rtp: UDPSocket, rtcp: UDPSocket?) {
        let family = config.destination.family
        let any = SocketAddress(ip: family == .ipv6 ? "::" : "0.0.0.0", port: config.localPort ?? 0)!
        for _ in 0..<(config.localPort == nil ? 32 : 1) {
            let rtp = try UDPSocket(family: family)
            try rtp.bind(any)
            guard config.feedback && !config.rtcpMux else { return (rtp, nil) }
            var rtcpAddress = try rtp.localAddress()
            guard rtcpAddress.port < 65_535 else { continue }
            rtcpAddress.port += 1
            let rtcp = try UDPSocket(family: family)
            if (try? rtcp.bind(rtcpAddress)) != nil { return (rtp, rtcp) }
        }
        throw SystemError("cannot bind", errno: EADDRINUSE,
                          context: config.localPort.map { "RTP/RTCP ports \($0)-\(Int($0) + 1)" } ?? "an RTP/RTCP port pair")
    }

    /// Opens the sockets and the ring and sends until `finish` (and everything is sent and
    /// the final feedback is in) or `stop`.
    public func run() throws(SystemError) {
        let ring = try Ring(entries: 256)
        var senderConfig = PacedSenderConfig(rateBitsPerSecond: config.paceBitsPerSecond,
                                             burstQuantum: config.burstQuantum)
        senderConfig.completionWindow = 2
        let paced = PacedSender(ring: ring, config: senderConfig)
        let (socket, rtcpSocket) = try openSockets()
        try socket.connect(config.destination)
        // DF always. With auto, IP_PMTUDISC_PROBE: the engine's own measured MTU is the clamp,
        // and probes above the kernel's cached path MTU (which lasts 10 minutes) must still go
        // out, or a path that grew again could never be found. A pinned MTU keeps DO.
        try socket.setPathMTUDiscovery(config.mtu == .auto ? .probe : .do)
        try socket.enableReceiveErrors()
        let mark = TrafficMark(config.serviceClass, ecn: config.ecn)
        try socket.setTrafficMark(mark)
        socket.setSendBufferSize(4 << 20)
        var feedbackReceiver: UDPMultishotReceiver?
        let feedbackSocket = config.rtcpMux ? socket : rtcpSocket
        if config.feedback, let feedbackSocket {
            if let rtcpSocket {
                var peer = config.destination
                peer.port = peer.port &+ 1
                try rtcpSocket.connect(peer)  // only the receiver's RTCP is accepted
            }
            try feedbackSocket.enableReceiveTimestamps()  // RTT from kernel arrival times
            try feedbackSocket.enableDropCounter()
            feedbackReceiver = try UDPMultishotReceiver(ring: ring, socket: feedbackSocket, groupID: 2,
                                                        bufferCount: 32, maxPayload: 4096)
            try feedbackReceiver?.arm()
        }
        let route = paced.addRoute(socket: socket, destination: nil, mark: mark)
        // Path-MTU probes: same socket and class, a route of their own (never in a media GSO
        // send), and Not-ECT: they are not media, so no CE mark on them should count as one.
        let probeRoute = paced.addRoute(socket: socket, destination: nil, mark: TrafficMark(config.serviceClass, ecn: .notECT))
        let (mtu, source) = Self.datagramBudget(socket: socket, setting: config.mtu)
        let flow: MediaFlow
        do { flow = try MediaFlow(route: route, maxDatagramSize: mtu - socket.headerOverhead,
                                  payloadType: config.payloadType) }
        catch { throw SystemError("packetizer", errno: EINVAL, context: "MTU \(mtu) is too small") }
        var fixedMTU: Int?
        if case .fixed(let value) = config.mtu { fixedMTU = value }
        let pathMTU = PathMTUController(flow: flow, socket: socket, probeRoute: probeRoute, fixedMTU: fixedMTU,
                                        feedback: config.feedback && feedbackReceiver != nil, configure: {
            $0.reprobeInterval = config.pathMTUReprobeInterval
            if socket.family == .ipv4 { $0.baseMTU = config.pathMTUBaseIPv4 }
        }, now: monotonicNanoseconds())
        flow.tracksPackets = config.feedback
        if config.feedback {
            flow.maxUnconfirmedBytes = config.maxUnconfirmedBytes
                ?? max(Int((config.paceBitsPerSecond ?? 8_000_000) / 8), 256 * 1024)
        }
        let rtcp = SenderFeedback(ssrc: flow.ssrc)
        var local = SenderStats()
        local.pathMTU = pathMTU.mtu
        local.mtuSource = source == "configured" ? source : pathMTU.source
        local.dscp = mark.dscp
        local.ecn = config.ecn.name
        local.pacingRate = config.paceBitsPerSecond ?? 0
        local.ssrc = flow.ssrc
        local.feedback = config.feedback
        local.maxUnconfirmedBytes = flow.maxUnconfirmedBytes ?? 0
        paced.queue.onReport = { report in
            if pathMTU.handleSendReport(report) { return }  // probes are not media
            local.packetsSent += report.sentDatagrams
            local.bytesSent += report.sentBytes
            local.packetsFailed += report.failedDatagrams
            if report.errno != 0 {
                local.errors[String(cString: strerror(report.errno)), default: 0] += report.failedDatagrams
            }
        }
        // Keyframes are expensive: however many PLIs arrive, at most one is forced per
        // `minKeyframeInterval` (feedback must not turn into an amplifier). The engine's own
        // reasons (the bound, a receiver back or probed) are rare by construction and go through.
        var lastForcedKeyframe: Int64 = -1 << 62
        func requestKeyframe(fromPLI: Bool = false) {
            let now = monotonicNanoseconds()
            guard !fromPLI || now - lastForcedKeyframe >= config.minKeyframeInterval else {
                local.keyframeRequestsIgnored += 1
                return
            }
            lastForcedKeyframe = now
            local.keyframeRequests += 1
            keyframeRequested.store(true, ordering: .relaxed)
        }

        let bound = flow.maxUnconfirmedBytes
        var firstSend: Int64?
        var finished = false
        var lingerDeadline: Int64?
        var lastPublish: Int64 = 0
        // Sender reports go out at random times (an alarm of their own, the interval +-50 %),
        // not at the pacer's wake-ups: tied to those, every RTT sample would see the queue at
        // the same point of our own send rhythm instead of as it is on average.
        var nextSenderReport: Int64 = 0
        var lastGoneProbe: Int64 = 0
        func sendSenderReportIfDue(now: Int64) throws(SystemError) {
            guard config.feedback, let feedbackSocket, flow.log.sent > 0 else { return }
            if now < nextSenderReport {
                try ring.armAlarm(nanoseconds: nextSenderReport - now)
                return
            }
            nextSenderReport = now + Int64(Double(config.senderReportInterval) * Double.random(in: 0.5...1.5))
            try ring.armAlarm(nanoseconds: nextSenderReport - now)
            let report = rtcp.senderReport(flow: flow, realtime: realtimeNanoseconds(),
                                           packets: local.packetsSent, octets: local.bytesSent)
            let sent = report.withUnsafeBytes { (try? PlainUDP.sendTo(feedbackSocket, $0)) != nil }
            if sent { local.senderReports += 1 }
        }
        // Periodic work: loss by age, liveness, keyframe requests.
        func tick(now: Int64) {
            flow.now = now
            pathMTU.tick(now: now, roundTripMilliseconds: rtcp.rttSmoothed,
                         receiverAlive: rtcp.feedbackSeen && !rtcp.receiverGone && now - rtcp.lastFeedback < 1_000_000_000)
            guard config.feedback, feedbackSocket != nil else { return }
            if !rtcp.receiverGone {
                // A receiver that stopped reporting keeps its packets unconfirmed: the bound holds.
                flow.log.expireUnconfirmed(sentBefore: now - rtcp.lossTimeout)
            }
            if flow.log.sent > 0 && firstSend == nil { firstSend = now }
            // Never any feedback: a receiver that sends none. No bound until feedback appears.
            let silentSinceStart = !rtcp.feedbackSeen && now - (firstSend ?? now) > config.noFeedbackTimeout
            local.feedbackAbsent = silentSinceStart
            flow.maxUnconfirmedBytes = silentSinceStart ? nil : bound
            _ = rtcp.checkLiveness(now: now, sending: flow.log.unconfirmedPackets > 0)
            flow.receiverGone = rtcp.receiverGone
            if rtcp.receiverGone && now - lastGoneProbe >= config.goneProbeInterval {
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
        }

        try paced.run(pathMTU, idlePoll: 20_000_000, isFinished: {
            guard finished else { return false }
            guard config.feedback, !local.feedbackAbsent else { return true }
            let now = monotonicNanoseconds()
            if lingerDeadline == nil { lingerDeadline = now + config.finalFeedbackWait }
            return flow.log.unconfirmedPackets == 0 || now >= lingerDeadline!
        }, beforePump: { () throws(SystemError) -> Bool in
            try ring.armWake(wakeEvent)  // other threads' access units wake the ring
            let room = config.maxQueuedFrames - flow.queuedAccessUnits
            let (incoming, isFinished, dropped) = inbox.withLock { box in
                let taken = Array(box.accessUnits.prefix(max(0, room)))
                box.accessUnits.removeFirst(taken.count)
                return (taken, box.finished && box.accessUnits.isEmpty, box.dropped)
            }
            for accessUnit in incoming { flow.enqueue(accessUnit) }
            finished = isFinished
            local.framesDroppedQueueFull = dropped
            let now = monotonicNanoseconds()
            tick(now: now)
            try sendSenderReportIfDue(now: now)
            if now - lastPublish > 50_000_000 {
                lastPublish = now
                publish(&local, flow: flow, paced: paced, ring: ring, feedback: rtcp, pathMTU: pathMTU,
                        feedbackReceiver: feedbackReceiver)
            }
            return !stopRequested.load(ordering: .relaxed)
        }, other: { completion in
            guard completion.tag.kind == CompletionTag.receiveKind, let feedbackReceiver else { return }
            try? feedbackReceiver.handle(completion) { datagram in
                let arrival = datagram.timestampNanoseconds > 0 ? datagram.timestampNanoseconds : realtimeNanoseconds()
                if rtcp.handle(datagram.payload, flow: flow, now: monotonicNanoseconds(), realtime: arrival) {
                    requestKeyframe(fromPLI: true)
                }
                if rtcp.receiverBack {
                    rtcp.receiverBack = false
                    requestKeyframe()
                }
                pathMTU.confirmed(rtcp.takeProbeConfirmations(), now: monotonicNanoseconds())
            }
        })
        publish(&local, flow: flow, paced: paced, ring: ring, feedback: rtcp, pathMTU: pathMTU,
                feedbackReceiver: feedbackReceiver)
    }

    private func publish(_ local: inout SenderStats, flow: MediaFlow, paced: PacedSender, ring: Ring,
                         feedback: SenderFeedback, pathMTU: PathMTUController, feedbackReceiver: UDPMultishotReceiver?) {
        pathMTU.publish(into: &local)
        local.packetsConfirmed = flow.log.confirmed
        local.packetsLost = flow.log.lost
        local.packetsUnconfirmed = flow.log.unconfirmedPackets
        local.bytesUnconfirmed = flow.log.unconfirmedBytes
        local.peakUnconfirmedBytes = flow.peakUnconfirmedBytes
        local.framesDroppedUnconfirmed = flow.framesDroppedUnconfirmed
        local.rttLast = feedback.rttLast
        local.rttMin = feedback.rttMin
        local.rttSmoothed = feedback.rttSmoothed
        local.ceReported = feedback.ceReported
        local.receiverGone = feedback.receiverGone
        local.receiverGoneEvents = feedback.receiverGoneEvents
        local.feedbackReports = feedback.reportsAccepted
        local.feedbackRejected = feedback.rejected
        local.feedbackKernelDrops = Int(feedbackReceiver?.counters.kernelDrops ?? 0)
        local.framesEncoded = flow.framesQueued + local.framesDroppedQueueFull
        local.framesSent = flow.framesWritten
        local.keyframes = flow.keyframesWritten
        local.datagramSize = flow.largestDatagram
        local.clamped = flow.clamped
        local.batches = paced.queue.counters.batches
        local.gsoSends = paced.queue.counters.gsoSends
        local.enterCalls = ring.enterCalls
        let snapshot = local
        statsBox.withLock { $0 = snapshot }
    }
}
