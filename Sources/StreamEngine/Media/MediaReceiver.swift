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
    /// Send RTCP feedback (RR, RFC 8888, PLI) to the sender.
    public var feedback = true
    /// Feedback goes to the sender's RTP port + 1 and is received on ours + 1 (what ffmpeg and
    /// GStreamer do), or, with `rtcpMux`, on the RTP ports themselves.
    public var rtcpMux = false
    /// How often feedback goes out while packets (or sender reports) arrive (nanoseconds).
    public var reportInterval: Int64 = 20_000_000

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
    /// Complete keyframes (a decoder can start at each).
    public var keyframes = 0
    /// Payload bytes of the stream received.
    public var bytesReceived = 0
    /// Datagrams rejected, by reason (bad RTP header, foreign source, bad payload...).
    public var rejected: [ReceiveRejection: Int] = [:]
    /// Datagrams the kernel dropped for lack of receive-buffer space.
    public var kernelDrops = 0
    /// The stream's SSRC, once locked.
    public var ssrc: UInt32?
    /// The sender's address, once locked.
    public var source: String?
    /// Frames that never arrived at all (gaps in the RTP timestamps of a constant frame rate).
    public var framesMissing = 0
    /// Frames not decodable on their own line of references: incomplete, or after an
    /// incomplete or missing frame until the next complete keyframe (and before the first).
    public var framesUndecodable = 0
    /// RTCP datagrams sent to the sender.
    public var feedbackSent = 0
    /// Keyframe requests (PLI) sent.
    public var keyframeRequests = 0
    /// RTCP datagrams from the sender (sender reports) accepted.
    public var senderReports = 0
    /// Feedback sends that failed (the sender gone, no route): counted, not fatal.
    public var feedbackErrors = 0
    /// Path-MTU probes from the sender received (and confirmed): not media, not in `received`.
    public var probesReceived = 0
    /// Datagrams larger than this receiver's buffers (its own size, whatever the sender
    /// thinks the MTU is): the kernel cut them, so they are counted here and dropped.
    public var truncated = 0
    /// Times the stream's RTP clock moved on by more than 10 s and two packets in sequence on
    /// the new clock made the receiver follow it (a sender that stamps by wall clock and paused).
    public var timestampRestarts = 0
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
    private let statsBox = Mutex(ReceiverStats())
    private let stopRequested = Atomic<Bool>(false)

    /// Binds the socket. Fails with a one-line error when the address is busy or invalid.
    public init(config: MediaReceiverConfig) throws(SystemError) {
        self.config = config
        // RTP on an even port and RTCP on the next one; with port 0, find a free pair.
        var attempt = 0
        while true {
            attempt += 1
            let rtp = try UDPSocket(family: config.listen.family)
            try rtp.bind(config.listen)
            let bound = try rtp.localAddress()
            guard config.feedback && !config.rtcpMux else {
                (socket, rtcpSocket, localAddress) = (rtp, nil, bound)
                break
            }
            var rtcpAddress = bound
            rtcpAddress.port = bound.port &+ 1
            let rtcp = try UDPSocket(family: config.listen.family)
            do throws(SystemError) {
                guard bound.port < 65_535 else { throw SystemError("cannot bind", errno: EADDRINUSE, context: "RTCP port") }
                try rtcp.bind(rtcpAddress)
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
        socket.setReceiveBufferSize(16 << 20)
        // Sender reports' arrival times must be the kernel's: DLSR, and so the sender's RTT, count from them.
        try rtcpSocket?.enableReceiveTimestamps()
    }

    /// With rtcp-mux, an RTCP packet on the RTP port: its second byte is an RTCP packet type
    /// (RFC 5761 4: 192-223, where no RTP payload type with the marker bit collides).
    private static func isMultiplexedRTCP(_ datagram: UnsafeRawBufferPointer) -> Bool {
        datagram.count >= 8 && datagram[0] >> 6 == 2 && (192...223).contains(datagram[1])
    }

    /// Largest RTP timestamp step accepted within a stream: 10 s at 90 kHz.
    private static let maxTimestampStep: Int32 = 900_000

    /// Within 10 s of each other on the 90 kHz clock (wrapping).
    private static func isNear(_ a: UInt32, _ b: UInt32) -> Bool {
        let step = Int32(bitPattern: a &- b)
        return step <= maxTimestampStep && step >= -maxTimestampStep
    }

    /// Asks `run` to return.
    public func stop() { stopRequested.store(true, ordering: .relaxed) }

    /// The counters so far.
    public var stats: ReceiverStats { statsBox.withLock { $0 } }

    /// Receives until `stop`, or until `frameLimit` frames were emitted, passing each
    /// rebuilt access unit (complete or not) to `onAccessUnit`.
    public func run(frameLimit: Int? = nil, onAccessUnit: (DepacketizedAccessUnit) -> Void) throws(SystemError) {
        var sockets: [(socket: UDPSocket, bufferCount: Int, maxPayload: Int)] = [(socket, 256, 65_536)]
        if let rtcpSocket { sockets.append((rtcpSocket, 16, 2048)) }
        let loop = try DatagramReceiveLoop(sockets: sockets)
        var feedback = ReceiverFeedback(ssrc: UInt32.random(in: 1...UInt32.max))
        var lastReport: Int64 = 0
        var lastKeyframeRequest: Int64 = 0
        var lastTimestamp: UInt32?
        var chainIntact = false
        var frameInterval: UInt32?
        var depacketizer = HEVCDepacketizer(maxAccessUnitSize: config.maxAccessUnitSize,
                                            reorderWindow: config.reorderWindow)
        var tracker = RTPSequenceTracker()
        var local = ReceiverStats()
        var lockedSSRC: UInt32?
        var lockedPayloadType: UInt8?
        var lastAcceptedTimestamp: UInt32?
        // The last packet rejected for its timestamp (its bytes in `candidateBytes`): if the next
        // one follows it in sequence and in time, the stream's clock moved on (wall-clock
        // timestamps across a long pause) and both are taken.
        var timestampJumpCandidate: (header: RTPHeader, tos: UInt8, timestampNanoseconds: Int64, payloadRange: Range<Int>)?
        var candidateBytes: [UInt8] = []
        var lockedSource = config.from
        var frames = 0
        var lastPublish: Int64 = 0

        func emit(_ units: [DepacketizedAccessUnit]) {
            for var unit in units {
                if unit.isComplete && unit.isKeyframe { local.keyframes += 1 }
                if unit.isComplete { local.framesComplete += 1 } else {
                    local.framesIncomplete += 1
                    // At most one keyframe request per 200 ms: the first is what matters.
                    let now = monotonicNanoseconds()
                    if now - lastKeyframeRequest > 200_000_000 {
                        lastKeyframeRequest = now
                        feedback.requestKeyframe()
                    }
                }
                let missingBefore = local.framesMissing
                countMissingFrames(before: unit.timestamp)
                // The chain of references breaks at an incomplete or missing frame and mends at
                // the next complete keyframe; the first frame received needs one too.
                if unit.isComplete && unit.isKeyframe {
                    chainIntact = true
                } else if !unit.isComplete || local.framesMissing > missingBefore {
                    chainIntact = false
                }
                unit.followsIntactChain = chainIntact && unit.isComplete
                if !unit.followsIntactChain { local.framesUndecodable += 1 }
                frames += 1
                onAccessUnit(unit)
            }
        }
        /// Frames whose every packet was lost leave a gap of whole frame intervals in the
        /// timestamps (the interval is the smallest step seen).
        func countMissingFrames(before timestamp: UInt32) {
            defer { lastTimestamp = timestamp }
            guard let last = lastTimestamp else { return }
            let step = timestamp &- last
            guard step > 0, step < 90_000 * 10 else { return }
            if frameInterval == nil || step < frameInterval! {
                frameInterval = step
                return
            }
            let interval = frameInterval!
            if step >= interval * 2 - interval / 2 { local.framesMissing += Int((step + interval / 2) / interval) - 1 }
        }
        /// A packet of the stream: counted, tracked, reported, and into the depacketizer.
        func accept(_ header: RTPHeader, datagram: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer,
                    tos: UInt8, timestampNanoseconds: Int64) {
            let mark = TrafficMark(tos: tos)
            local.ecn[Int(mark.ecn.rawValue)] += 1
            local.dscp[Int(mark.dscp)] += 1
            local.bytesReceived += datagram.count
            // 90 kHz units, at 10 us resolution (no overflow for any realtime clock value).
            let arrival = UInt32(truncatingIfNeeded: timestampNanoseconds / 100_000 * 9)
            let tracked = tracker.track(sequence: header.sequenceNumber, rtpTimestamp: header.timestamp, arrival: arrival)
            switch tracked.outcome {
            case .sequenceJump:
                // Far from the stream's sequence numbers: counted, kept out of the frames.
                local.rejected[.sequenceJump, default: 0] += 1
                return
            case .late, .duplicate:
                return  // counted by the tracker; the frame it belonged to is gone or whole
            case .first, .inOrder, .reordered, .restarted:
                break
            }
            lastAcceptedTimestamp = header.timestamp
            feedback.record(sequence: header.sequenceNumber, arrival: timestampNanoseconds, ecn: mark.ecn.rawValue)
            // One sequence logic: the depacketizer orders by the tracker's extended numbers.
            emit(depacketizer.push(header, payload: payload, tracked: tracked))
        }
        // Feedback leaves from the RTCP socket, or with rtcp-mux from the RTP socket itself.
        let feedbackSocket = rtcpSocket ?? (config.rtcpMux && config.feedback ? socket : nil)
        func sendFeedback(now: Int64, answeringSenderReport: Bool = false) {
            guard let feedbackSocket, let ssrc = lockedSSRC, let source = lockedSource else { return }
            var destination = source
            if !config.rtcpMux { destination.port = source.port &+ 1 }
            // A sender report about to be replaced by a newer one is answered first (at most one
            // report per quarter interval), so every one gives the sender its RTT sample: SRs
            // that a draining queue delivers close together would otherwise leave only the
            // later, less delayed one answered, and the sender's RTT would read low.
            let due = feedback.isFull || now - lastReport >= 250_000_000
                || (feedback.hasNews && now - lastReport >= config.reportInterval)
                || (answeringSenderReport && now - lastReport >= config.reportInterval / 4)
            guard due else { return }
            lastReport = now
            let pliBefore = feedback.pictureLossIndications
            for datagram in feedback.makeReports(now: now, mediaSSRC: ssrc, tracker: &tracker) {
                let sent = datagram.withUnsafeBytes { bytes in
                    (try? PlainUDP.sendTo(feedbackSocket, bytes, destination: destination)) != nil
                }
                if sent { local.feedbackSent += 1 } else { local.feedbackErrors += 1 }
            }
            local.keyframeRequests += feedback.pictureLossIndications - pliBefore
        }
        func publish() {
            local.received = tracker.received
            local.lost = tracker.lost
            local.duplicate = tracker.duplicate
            local.reordered = tracker.reordered
            local.late = tracker.late + depacketizer.counters.late
            local.kernelDrops = Int(loop.receiver.counters.kernelDrops)
            local.truncated = loop.receiver.counters.truncated
            local.ssrc = lockedSSRC
            local.source = lockedSource?.description
            for (reason, count) in depacketizer.counters.rejected { local.rejected[.payload(reason)] = count }
            let snapshot = local
            statsBox.withLock { $0 = snapshot }
        }

        try loop.run(checkInterval: min(10_000_000, max(config.reportInterval, 1_000_000)), shouldStop: {
            stopRequested.load(ordering: .relaxed) || (frameLimit.map { frames >= $0 } ?? false)
        }, tick: {
            if config.feedback { sendFeedback(now: realtimeNanoseconds()) }
            let now = monotonicNanoseconds()
            if now - lastPublish > 50_000_000 {
                lastPublish = now
                publish()
            }
        }) { socketIndex, datagram in
            if socketIndex == 1 || (config.rtcpMux && Self.isMultiplexedRTCP(datagram.payload)) {
                // RTCP from the sender: only its sender reports matter here (LSR/DLSR).
                guard let source = lockedSource, let from = datagram.source, from.host == source.host else {
                    local.rejected[.rtcpForeignSource, default: 0] += 1
                    return
                }
                let parsed = RTCPPacket.parseCompound(datagram.payload)
                for error in parsed.errors { local.rejected[.rtcp(error.kind), default: 0] += 1 }
                for packet in parsed.packets {
                    if case .senderReport(let report) = packet, report.ssrc == lockedSSRC {
                        if config.feedback && feedback.senderReportUnanswered {
                            sendFeedback(now: realtimeNanoseconds(), answeringSenderReport: true)
                        }
                        feedback.noteSenderReport(ntpTimestamp: report.ntpTimestamp,
                                                  arrival: datagram.timestampNanoseconds > 0
                                                      ? datagram.timestampNanoseconds : realtimeNanoseconds())
                        local.senderReports += 1
                    }
                }
                return
            }
            let parsed: RTPParsedPacket
            do throws(RTPPacketError) {
                parsed = try RTPHeader.parse(datagram.payload)
            } catch {
                local.rejected[.rtp(error), default: 0] += 1
                return
            }
            if let source = lockedSource, let from = datagram.source, from != source {
                local.rejected[.foreignSource, default: 0] += 1
                return
            }
            if let ssrc = lockedSSRC, parsed.header.ssrc != ssrc {
                local.rejected[.foreignSSRC, default: 0] += 1
                return
            }
            if parsed.header.payloadType == PathMTUProbe.payloadType {
                if lockedSSRC == nil {
                    lockedSSRC = parsed.header.ssrc
                    if lockedSource == nil { lockedSource = datagram.source }
                }
                // A path-MTU probe: confirmed in the next feedback, never media.
                let body = UnsafeRawBufferPointer(rebasing: datagram.payload[parsed.payloadRange])
                if let probe = PathMTUProbe(header: parsed.header, payload: body, datagramSize: datagram.payload.count) {
                    local.probesReceived += 1
                    feedback.confirmProbe(id: probe.probeID, size: probe.size)
                } else {
                    local.rejected[.badProbe, default: 0] += 1
                }
                return
            }
            if let payloadType = lockedPayloadType, parsed.header.payloadType != payloadType {
                local.rejected[.unexpectedPayloadType, default: 0] += 1
                return
            }
            if let last = lastAcceptedTimestamp, !Self.isNear(parsed.header.timestamp, last) {
                // More than 10 s away from the stream's clock: not a frame of this stream, unless
                // it is the second packet in a row on a new clock (then the clock moved on, and
                // the first one, kept aside, is taken after all).
                let header = parsed.header
                guard let candidate = timestampJumpCandidate, header.sequenceNumber == candidate.header.sequenceNumber &+ 1,
                      Self.isNear(header.timestamp, candidate.header.timestamp) else {
                    timestampJumpCandidate = (header, datagram.tos, datagram.timestampNanoseconds, parsed.payloadRange)
                    candidateBytes.removeAll(keepingCapacity: true)
                    candidateBytes.append(contentsOf: datagram.payload)
                    local.rejected[.timestampJump, default: 0] += 1
                    return
                }
                timestampJumpCandidate = nil
                local.timestampRestarts += 1
                local.rejected[.timestampJump, default: 0] -= 1
                candidateBytes.withUnsafeBytes { bytes in
                    accept(candidate.header, datagram: bytes, payload: UnsafeRawBufferPointer(rebasing: bytes[candidate.payloadRange]),
                           tos: candidate.tos, timestampNanoseconds: candidate.timestampNanoseconds)
                }
            } else {
                timestampJumpCandidate = nil
            }
            if lockedPayloadType == nil {
                lockedSSRC = parsed.header.ssrc
                lockedPayloadType = parsed.header.payloadType
                if lockedSource == nil { lockedSource = datagram.source }
            }
            accept(parsed.header, datagram: datagram.payload,
                   payload: UnsafeRawBufferPointer(rebasing: datagram.payload[parsed.payloadRange]),
                   tos: datagram.tos, timestampNanoseconds: datagram.timestampNanoseconds)
            let now = monotonicNanoseconds()
            if now - lastPublish > 50_000_000 {
                lastPublish = now
                publish()
            }
        }
        emit(depacketizer.flush())
        if config.feedback {
            // The last word: everything received is reported before the receiver goes.
            lastReport = 0
            sendFeedback(now: realtimeNanoseconds())
        }
        publish()
    }
}
