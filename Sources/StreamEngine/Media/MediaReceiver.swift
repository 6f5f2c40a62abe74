import Glibc
import MediaFormats
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

    /// Makes a configuration listening on `listen`.
    public init(listen: SocketAddress) { self.listen = listen }
}

/// A receiver's counters, as in the stats JSON.
public struct ReceiverStats: Sendable, Equatable {
    /// Packets of the stream received (distinct).
    public var received = 0
    /// Packets missing at the end (gaps not filled).
    public var lost: Int64 = 0
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
    /// Payload bytes of the stream received.
    public var bytesReceived = 0
    /// Datagrams rejected, by reason (bad RTP header, foreign source, bad payload...).
    public var rejected: [String: Int] = [:]
    /// Datagrams the kernel dropped for lack of receive-buffer space.
    public var kernelDrops = 0
    /// The stream's SSRC, once locked.
    public var ssrc: UInt32?
    /// The sender's address, once locked.
    public var source: String?
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
    private let statsBox = Mutex(ReceiverStats())
    private let stopRequested = Atomic<Bool>(false)

    /// Binds the socket. Fails with a one-line error when the address is busy or invalid.
    public init(config: MediaReceiverConfig) throws(SystemError) {
        self.config = config
        socket = try UDPSocket(family: config.listen.family)
        try socket.bind(config.listen)
        try socket.enableReceiveTrafficMark()
        try socket.enableReceiveTimestamps()
        try socket.enableDropCounter()
        socket.setReceiveBufferSize(16 << 20)
        localAddress = try socket.localAddress()
    }

    /// Asks `run` to return.
    public func stop() { stopRequested.store(true, ordering: .relaxed) }

    /// The counters so far.
    public var stats: ReceiverStats { statsBox.withLock { $0 } }

    /// Receives until `stop`, or until `frameLimit` frames were emitted, passing each
    /// rebuilt access unit (complete or not) to `onAccessUnit`.
    public func run(frameLimit: Int? = nil, onAccessUnit: (DepacketizedAccessUnit) -> Void) throws(SystemError) {
        let loop = try DatagramReceiveLoop(socket: socket, bufferCount: 256, maxPayload: 65_536)
        var depacketizer = HEVCDepacketizer(maxAccessUnitSize: config.maxAccessUnitSize,
                                            reorderWindow: config.reorderWindow)
        var tracker = RTPSequenceTracker()
        var local = ReceiverStats()
        var lockedSSRC: UInt32?
        var lockedSource = config.from
        var frames = 0
        var lastPublish: Int64 = 0

        func emit(_ units: [DepacketizedAccessUnit]) {
            for unit in units {
                if unit.isComplete { local.framesComplete += 1 } else { local.framesIncomplete += 1 }
                frames += 1
                onAccessUnit(unit)
            }
        }
        func publish() {
            local.received = tracker.received
            local.lost = tracker.lost
            local.duplicate = tracker.duplicate
            local.reordered = tracker.reordered
            local.late = tracker.late + depacketizer.counters.late
            local.kernelDrops = Int(loop.receiver.counters.kernelDrops)
            local.ssrc = lockedSSRC
            local.source = lockedSource?.description
            for (reason, count) in depacketizer.counters.rejected { local.rejected["payload." + reason] = count }
            let snapshot = local
            statsBox.withLock { $0 = snapshot }
        }

        try loop.run(shouldStop: {
            stopRequested.load(ordering: .relaxed) || (frameLimit.map { frames >= $0 } ?? false)
        }) { datagram in
            let parsed: RTPParsedPacket
            do throws(RTPPacketError) {
                parsed = try RTPHeader.parse(datagram.payload)
            } catch {
                local.rejected["rtp." + error.reason, default: 0] += 1
                return
            }
            if let source = lockedSource, let from = datagram.source, from != source {
                local.rejected["foreignSource", default: 0] += 1
                return
            }
            if let ssrc = lockedSSRC, parsed.header.ssrc != ssrc {
                local.rejected["foreignSSRC", default: 0] += 1
                return
            }
            if lockedSSRC == nil {
                lockedSSRC = parsed.header.ssrc
                if lockedSource == nil { lockedSource = datagram.source }
            }
            let mark = TrafficMark(tos: datagram.tos)
            local.ecn[Int(mark.ecn.rawValue)] += 1
            local.dscp[Int(mark.dscp)] += 1
            local.bytesReceived += datagram.payload.count
            // 90 kHz units, at 10 us resolution (no overflow for any realtime clock value).
            let arrival = UInt32(truncatingIfNeeded: datagram.timestampNanoseconds / 100_000 * 9)
            _ = tracker.record(sequence: parsed.header.sequenceNumber, rtpTimestamp: parsed.header.timestamp,
                               arrival: arrival)
            let payload = UnsafeRawBufferPointer(rebasing: datagram.payload[parsed.payloadRange])
            emit(depacketizer.push(parsed.header, payload: payload))
            let now = monotonicNanoseconds()
            if now - lastPublish > 50_000_000 {
                lastPublish = now
                publish()
            }
        }
        emit(depacketizer.flush())
        publish()
    }
}
