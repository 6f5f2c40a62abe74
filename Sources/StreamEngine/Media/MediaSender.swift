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
    /// Packets that would have exceeded the path MTU.
    public var clamped = 0
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

    /// Opens the socket and the ring and sends until `finish` (and everything is sent) or `stop`.
    public func run() throws(SystemError) {
        let ring = try Ring(entries: 256)
        var senderConfig = PacedSenderConfig(rateBitsPerSecond: config.paceBitsPerSecond,
                                             burstQuantum: config.burstQuantum)
        senderConfig.completionWindow = 2
        let paced = PacedSender(ring: ring, config: senderConfig)
        let socket = try UDPSocket(family: config.destination.family)
        try socket.connect(config.destination)
        try socket.setPathMTUDiscovery(.do)
        let mark = TrafficMark(config.serviceClass, ecn: config.ecn)
        try socket.setTrafficMark(mark)
        socket.setSendBufferSize(4 << 20)
        let route = paced.addRoute(socket: socket, destination: nil, mark: mark)
        let (mtu, source) = Self.datagramBudget(socket: socket, setting: config.mtu)
        let flow: MediaFlow
        do { flow = try MediaFlow(route: route, maxDatagramSize: mtu - socket.headerOverhead,
                                  payloadType: config.payloadType) }
        catch { throw SystemError("packetizer", errno: EINVAL, context: "MTU \(mtu) is too small") }
        var local = SenderStats()
        local.pathMTU = mtu
        local.mtuSource = source
        local.dscp = mark.dscp
        local.ecn = config.ecn.name
        local.pacingRate = config.paceBitsPerSecond ?? 0
        local.ssrc = flow.ssrc
        paced.queue.onReport = { report in
            local.packetsSent += report.sentDatagrams
            local.bytesSent += report.sentBytes
            local.packetsFailed += report.failedDatagrams
            if report.errno != 0 {
                local.errors[String(cString: strerror(report.errno)), default: 0] += report.failedDatagrams
            }
        }

        var finished = false
        var lastPublish: Int64 = 0
        try paced.run(flow, idlePoll: 200_000_000, isFinished: { finished }, beforePump: { () throws(SystemError) -> Bool in
            try ring.armWake(wakeEvent)  // other threads' access units wake the ring
            let (incoming, isFinished, dropped) = inbox.withLock { box in
                let taken = box.accessUnits
                box.accessUnits.removeAll(keepingCapacity: true)
                return (taken, box.finished, box.dropped)
            }
            for accessUnit in incoming { flow.enqueue(accessUnit) }
            finished = isFinished
            local.framesDroppedQueueFull = dropped
            let now = monotonicNanoseconds()
            if now - lastPublish > 50_000_000 {
                lastPublish = now
                publish(&local, flow: flow, paced: paced, ring: ring)
            }
            return !stopRequested.load(ordering: .relaxed)
        })
        publish(&local, flow: flow, paced: paced, ring: ring)
    }

    private func publish(_ local: inout SenderStats, flow: MediaFlow, paced: PacedSender, ring: Ring) {
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
