import Glibc
import MediaFormats
import SecureRTP
import Synchronization
import UringIO

/// Configuration of a media receiver.
public struct MediaReceiverConfig: Sendable {
    /// Where to listen.
    public var listen: SocketAddress
    /// Largest access unit accepted (bigger ones are abandoned before they are allocated).
    public var maxAccessUnitSize: Int = 8 << 20
    /// How many packets of reordering are waited for.
    public var reorderWindow: Int = 64
    /// Only accept the stream from this address (default: lock onto the first valid stream).
    public var from: SocketAddress?
    /// Send RTCP feedback (RR, RFC 8888, PLI) to the sender.
    public var feedback = true
    /// Feedback goes to the sender's RTP port + 1 and is received on ours + 1 (what ffmpeg and
    /// GStreamer do), or, with `rtcpMux`, on the RTP ports themselves.
    public var rtcpMux = false
    /// The least time between two reports while packets (or sender reports) arrive: a report
    /// goes out at the end of a frame once this has passed, or this long after the first
    /// packet not yet reported when no frame ends (`ReceiveSession`).
    public var reportInterval: Duration = .milliseconds(20)
    /// SRTP and SRTCP (RFC 3711) with this master key: every datagram is authenticated and
    /// decrypted before the receive session sees it (what fails is dropped and counted in
    /// `ReceiverStats.srtp`, nothing else), and the feedback is protected. nil: plain RTP.
    public var srtp: SRTPMasterKey?
    /// With a multicast `listen` address (the group is joined on `init` and left on exit): only
    /// datagrams from this source (source-specific, `MCAST_JOIN_SOURCE_GROUP`); nil: any source.
    public var multicastSource: SocketAddress?
    /// With a multicast `listen` address: the interface index to join on (0: the route's).
    public var multicastInterface: UInt32 = 0
    /// Ask for lost packets (RFC 4585 generic NACK) and take their retransmissions (RFC 4588
    /// RTX on its own SSRC with `rtxPayloadType`, or the original resent unchanged on the media
    /// SSRC), holding the packets behind a gap in a playout buffer until the missing one comes
    /// or its frame's deadline passes. Needs `feedback`.
    public var retransmission = false
    /// The payload type of RFC 4588 retransmissions.
    public var rtxPayloadType: UInt8 = 97
    /// With `retransmission`: the playout delay: every frame goes out this long after the
    /// kernel receive time of its first packet (not before), and waits at most this long for a
    /// missing packet after the packet that showed the gap arrived. nil: derived, max(50 ms, 3 x RTT + jitter)
    /// (two chances per loss), with the RTT measured from NACK to retransmission (50 ms until
    /// measured).
    public var latency: Duration?

    /// Makes a configuration listening on `listen`.
    public init(listen: SocketAddress) { self.listen = listen }
}

/// Receives an RTP H.265 stream, accounts for every packet, and rebuilds access units.
///
/// The socket is bound at `init` (so a busy port fails early and port 0 is resolved);
/// `run` then receives on the calling thread until `stop` or its frame limit.
public final class MediaReceiver: @unchecked Sendable {  // @unchecked: the socket is used only by the thread in `run`; shared state is in Mutex/Atomic
    /// The configuration.
    public let config: MediaReceiverConfig
    /// The address actually bound.
    public let localAddress: SocketAddress
    private let socket: UDPSocket
    private let rtcpSocket: UDPSocket?
    fileprivate let statsBox = Mutex(ReceiverStats())
    fileprivate let stopRequested = Atomic<Bool>(false)
    /// Ends the receive loop's wait when `stop` is called, so an idle loop need not poll for it.
    fileprivate let stopWake: WakeEvent

    /// Binds the socket. Fails with a one-line error when the address is busy or invalid.
    public init(config: MediaReceiverConfig) throws(SystemError) {
        self.config = config
        stopWake = try WakeEvent()
        // RTP on an even port and RTCP on the next one; with port 0, find a free pair.
        var attempt = 0
        while true {
            attempt += 1
            let rtp = try UDPSocket(family: config.listen.family)
            if config.listen.isMulticast {
                // Bound to the group: several receivers of it on one host, each hearing only it.
                try rtp.allowSharedPort()
                try rtp.bind(config.listen.scoped(to: config.multicastInterface))
                try rtp.joinMulticast(group: config.listen, source: config.multicastSource,
                                      interface: config.multicastInterface)
            } else {
                try rtp.bind(config.listen)
            }
            let bound = try rtp.localAddress()
            guard config.feedback && !config.rtcpMux else {
                (socket, rtcpSocket, localAddress) = (rtp, nil, bound)
                break
            }
            // A multicast receiver's RTCP goes out from (and comes back to) its unicast address.
            var rtcpAddress = config.listen.isMulticast
                ? SocketAddress(ip: config.listen.family == .ipv6 ? "::" : "0.0.0.0", port: 0)! : bound
            rtcpAddress.port = bound.port &+ 1
            let rtcp = try UDPSocket(family: config.listen.family)
            if config.listen.isMulticast { try rtcp.allowSharedPort() }
            do throws(SystemError) {
                guard bound.port < 65_535 else { throw SystemError("cannot bind", errno: EADDRINUSE, context: "RTCP port") }
                try rtcp.bind(rtcpAddress)
                if config.listen.isMulticast {  // the sender's reports go to the group's RTCP port
                    var group = config.listen
                    group.port = rtcpAddress.port
                    try rtcp.joinMulticast(group: group, source: config.multicastSource, interface: config.multicastInterface)
                }
                (socket, rtcpSocket, localAddress) = (rtp, rtcp, bound)
                break
            } catch {
                if config.listen.port != 0 || attempt > 20 {
                    throw SystemError("cannot bind", errno: error.errno, context: "\(rtcpAddress) (RTCP, RTP port + 1)")
                }
            }
        }
        try socket.enableReceiveTrafficMark()
        try socket.enableReceiveTimestamps()
        try socket.enableDropCounter()
        // The datagrams of one GSO send (or that the NIC coalesced) arrive as one buffer the
        // receiver splits by segment size: one trip through the stack and one completion per
        // burst instead of one per packet (results/profile.md). The buffers hold 64 KB, what
        // the kernel coalesces at most. Where the kernel has no UDP_GRO, datagrams come one by one.
        try? socket.enableGRO()
        socket.setReceiveBufferSize(16 << 20)
        // Sender reports' arrival times must be the kernel's: DLSR, and so the sender's RTT, count from them.
        try rtcpSocket?.enableReceiveTimestamps()
    }

    /// Asks `run` to return (at once: its wait is woken). Safe from any thread.
    public func stop() {
        stopRequested.store(true, ordering: .relaxed)
        stopWake.signal()
    }

    /// The counters so far.
    public var stats: ReceiverStats { statsBox.withLock { $0 } }

    /// How late the receive loop may serve a deadline of the session (a frame's playout time, a
    /// report, a NACK) so that a datagram's wake-up serves it instead of a wake-up of its own:
    /// a quarter of the report interval, at most 5 ms (about a frame at 240 fps), and only while
    /// datagrams wake the loop at least that often (`datagramInterval`, smoothed): at lower
    /// rates no wake-up would be saved, so none. A frame's playout time falls between the
    /// arrivals of later frames, so waking exactly at it cost wake-ups of their own with loss
    /// recovery (10-20 % more than without, results/profile.md section 6); frames still go out
    /// after their playout time, never before.
    /// `limit`: the most slack, from the report interval (`slackLimit`).
    static func deadlineSlack(limit: Int64, datagramInterval: Int64) -> Int64 {
        datagramInterval <= limit ? limit : 0
    }

    /// The most slack `deadlineSlack` gives with `reportInterval` (nanoseconds), worked out
    /// once per receiver: a `Duration`'s nanoseconds are a 128-bit division and multiplication.
    static func slackLimit(reportInterval: Duration) -> Int64 { min(5_000_000, reportInterval.nanoseconds / 4) }

    /// Receives until `stop`, or until `frameLimit` frames were emitted, passing each
    /// rebuilt access unit (complete or not) to `onAccessUnit`. The protocol is a
    /// `ReceiveSession`; this loop feeds it datagrams and the time, and carries out what it says.
    public func run(frameLimit: Int? = nil, onAccessUnit: (DepacketizedAccessUnit) -> Void) throws(SystemError) {
        // 8 buffers of 64 KB. The kernel takes them in turn, so a datagram lands in the buffer
        // used `count` datagrams (GRO bursts) before: with 64, a frame's burst went into memory
        // last touched 64 frames ago, out of the core's cache, and the kernel's copy into it and
        // the payload's copy out of it missed (8 buffers: 6 – 11 % less CPU per packet in a
        // 12-round interleaved series, also without GRO; results/profile.md section 24). 8 GRO
        // bursts are several frames waiting to be handled; should they run out, the datagrams
        // wait in the socket's buffer until the receive is re-armed (no loss: the socket buffer
        // is the bound, as before).
        var sockets: [(socket: UDPSocket, bufferCount: Int, maxPayload: Int)] = [(socket, 8, 65_536)]
        if let rtcpSocket { sockets.append((rtcpSocket, 16, 2048)) }
        // Made here, on the thread that runs it: its ring defers the kernel's receive work to its waits.
        let loop = try DatagramReceiveLoop(sockets: sockets, deferTaskRun: true, wake: stopWake)
        let srtp = try config.srtp.map { key throws(SystemError) in try SRTPEndpoint(key: key) }
        // Feedback leaves from the RTCP socket, or with rtcp-mux from the RTP socket itself.
        let feedbackSocket = rtcpSocket ?? socket
        try withoutActuallyEscaping(onAccessUnit) { onAccessUnit throws(SystemError) in
            // The loop's state in one value the loop borrows `inout` (DatagramReceiveLoop.run(_:)).
            var handler = ReceiveLoopHandler(receiver: self, loop: loop, session: ReceiveSession(config: config), srtp: srtp,
                                             feedbackSocket: feedbackSocket, frameLimit: frameLimit, onAccessUnit: onAccessUnit)
            try loop.run(&handler)
            handler.session.finish(now: realtimeNanoseconds())
            handler.drainOutputs()
            handler.publish(final: true)
        }
    }
}

/// What `MediaReceiver.run` keeps between wake-ups, and what it does on each: feeds the
/// session datagrams and the time, and carries out what it says.
private struct ReceiveLoopHandler: DatagramHandler {
    let receiver: MediaReceiver
    let loop: DatagramReceiveLoop
    var session: ReceiveSession
    let srtp: SRTPEndpoint?
    let feedbackSocket: UDPSocket
    let frameLimit: Int?
    let onAccessUnit: (DepacketizedAccessUnit) -> Void
    var frames = 0
    var lastPublish: Int64 = 0
    /// A datagram was handled since the stats were last published.
    var handledSincePublish = false
    /// The longest wait while nothing is due and nothing is unpublished (nanoseconds).
    static let idleWait: Int64 = 250_000_000
    /// The RTP socket's receive completions at the last publication (`publish`).
    var completionsAtLastPublish = -1
    /// The NAL units of the frames `onAccessUnit` was given in this drain, given back to the
    /// session once the outputs no longer hold them (then, unless `onAccessUnit` kept them,
    /// their arrays are unshared and are reused for the frames to come).
    var delivered: [[[UInt8]]] = []
    /// One clock read per wake-up for all its datagrams, and the datagrams' smoothed
    /// interval for the deadlines' slack (`MediaReceiver.deadlineSlack`).
    var clock = ReceiveWakeClock()
    var config: MediaReceiverConfig { receiver.config }
    /// The deadlines' most slack (`MediaReceiver.slackLimit`), worked out once: a `Duration`'s
    /// nanoseconds are a 128-bit multiplication, and the code for it cold at each wake-up.
    let slackLimit: Int64

    init(receiver: MediaReceiver, loop: DatagramReceiveLoop, session: ReceiveSession, srtp: SRTPEndpoint?,
         feedbackSocket: UDPSocket, frameLimit: Int?, onAccessUnit: @escaping (DepacketizedAccessUnit) -> Void) {
        (self.receiver, self.loop, self.session, self.srtp) = (receiver, loop, session, srtp)
        (self.feedbackSocket, self.frameLimit, self.onAccessUnit) = (feedbackSocket, frameLimit, onAccessUnit)
        let config = receiver.config
        slackLimit = MediaReceiver.slackLimit(reportInterval: config.reportInterval)
    }

    /// The longest wait after datagrams while nothing of the session's is due sooner: twice the
    /// stats' publication interval. While datagrams keep coming, their wake-ups publish (at most
    /// every 50 ms) and this never runs out; when they stop, it publishes what the last ones
    /// changed. (The loop used to wake every 10 ms for that, and to poll a session with
    /// feedback: at 30 fps three wake-ups a frame of their own, ~55 µs of CPU each on this
    /// project's VMs, results/profile.md section 42.)
    static let publicationWait: Int64 = 100_000_000

    // The session's deadlines (NACKs, playout, reports) are served by the first wake-up at or
    // after them, at most the slack late: see `MediaReceiver.deadlineSlack`. Between them the
    // loop sleeps: a stop request wakes it (`MediaReceiver.stop`), and datagrams do.
    mutating func nextWait() -> Int64 {
        // No feedback, or no stream yet: nothing of the session's is due. A receiver waiting for its
        // stream woke 100 times a second, ~60 µs of CPU each (results/profile.md section 36).
        let longest = handledSincePublish ? Self.publicationWait : Self.idleWait
        guard let deadline = session.nextDeadline else { return longest }
        let now = realtimeNanoseconds()
        // Past (or Int64.min: feedback to send now): at once.
        let slack = clock.deadlineSlack(limit: slackLimit, now: now)
        return deadline <= now ? 0 : min(longest, deadline - now + slack)
    }

    mutating func shouldStop() -> Bool {
        receiver.stopRequested.load(ordering: .relaxed) || (frameLimit.map { frames >= $0 } ?? false)
    }

    // The clock is read here only for a deadline of the session (none without feedback); the
    // publication's pace takes the time this wake-up's first datagram read, when one came: a
    // wake-up read the clock three times before, each call the first touch of the vDSO's code
    // and data after the wait (results/profile.md section 23).
    mutating func tick() {
        let wakeTime = clock.wakeTime
        clock.wokeUp()
        if let deadline = session.nextDeadline {
            let now = realtimeNanoseconds()
            if now >= deadline {
                session.handleTimeout(now: now)
                drainOutputs()
            }
        }
        publishEvery50Milliseconds(now: wakeTime ?? realtimeNanoseconds())
    }

    mutating func handle(socketIndex: Int, _ datagram: ReceivedDatagram) {
        handledSincePublish = true
        let port: ReceiveSession.Port = socketIndex == 1 ? .rtcp : .rtp
        let now = clock.datagramTime(clock: realtimeNanoseconds)
        let completion = port == .rtp ? datagram.completion : nil
        if let srtp {
            // Authenticated and decrypted first: what fails never reaches the session.
            let isRTCP = port == .rtcp || (config.rtcpMux && ReceiveSession.isMultiplexedRTCP(datagram.payload))
            _ = srtp.inbound.unprotect(datagram.payload, kind: isRTCP ? .rtcp : .rtp) { payload in
                session.handleDatagram(payload, source: { datagram.source }, tos: datagram.tos,
                                       arrival: datagram.timestampNanoseconds, port: port, now: now, completion: completion)
            }
        } else {
            // The source is read from the receive buffer only when the session compares it.
            session.handleDatagram(datagram.payload, source: { datagram.source }, tos: datagram.tos,
                                   arrival: datagram.timestampNanoseconds, port: port, now: now, completion: completion)
        }
        drainOutputs()
    }

    /// A completion's datagrams: on the RTP socket without SRTP, to the session together (it
    /// takes a run of the stream's packets at once: `ReceiveSession.handleSegments`), one clock
    /// read and one drain for all of them; otherwise one by one.
    mutating func handle(socketIndex: Int, segments: ReceivedSegments) {
        guard socketIndex == 0, srtp == nil else {
            segments.forEach { handle(socketIndex: socketIndex, $0) }
            return
        }
        handledSincePublish = true
        let now = clock.datagramTime(clock: realtimeNanoseconds)
        let all = segments.all
        session.handleSegments(all.payload, segmentSize: segments.segmentSize, source: { all.source }, tos: all.tos,
                               arrival: all.timestampNanoseconds, now: now, completion: all.completion)
        drainOutputs()
    }

    mutating func drainOutputs() {
        while let output = session.pollOutput() {
            switch output {
            case .accessUnit(let unit):
                // Frames still waiting for their playout time when the limit was reached come
                // out at the end (`finish`): not delivered past the limit.
                if let frameLimit, frames >= frameLimit { continue }
                frames += 1
                onAccessUnit(unit)
                delivered.append(unit.nalUnits)
            case .transmit(let transmit):
                guard let datagram = srtp.map({ $0.protectRTCP(transmit.bytes) }) ?? transmit.bytes else {
                    session.recordFeedbackSend(succeeded: false)  // counted in srtp.protectFailed too
                    continue
                }
                let sent = datagram.withUnsafeBytes { bytes in
                    (try? PlainUDP.sendTo(feedbackSocket, bytes, destination: transmit.destination)) != nil
                }
                session.recordFeedbackSend(succeeded: sent)
            }
        }
        // Taken out one by one: `removeAll(keepingCapacity:)` destroys through the generic
        // array code (results/profile.md section 33).
        while var nalUnits = delivered.popLast() { session.recycle(&nalUnits) }
    }

    /// Publishes the stats. Each datagram carries the socket's drop count when it was queued
    /// (`SO_RXQ_OVFL`), so while datagrams come the count is theirs, and the system call that
    /// reads the socket's own (`SO_MEMINFO`, for drops after the last datagram) is made only
    /// when none came since the last publication, and at the end (`final`).
    mutating func publish(final: Bool = false) {
        handledSincePublish = false
        let completions = loop.receiver.counters.completions
        if final || completions == completionsAtLastPublish { loop.receiver.refreshKernelDrops() }
        completionsAtLastPublish = completions
        session.recordSocketCounters(kernelDrops: Int(loop.receiver.counters.kernelDrops),
                                     truncated: loop.receiver.counters.truncated)
        var snapshot = session.stats
        snapshot.srtp = srtp?.stats
        snapshot.enterCalls = loop.enterCalls
        receiver.statsBox.withLock { $0 = snapshot }
    }

    /// Publishes the stats if 50 ms passed since the last time (`now`: CLOCK_REALTIME, so a
    /// step of the clock back publishes at once rather than waiting for it to catch up).
    mutating func publishEvery50Milliseconds(now: Int64) {
        if now - lastPublish > 50_000_000 || now < lastPublish {
            lastPublish = now
            publish()
        }
    }
}
