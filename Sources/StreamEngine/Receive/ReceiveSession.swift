import MediaFormats
import UringIO

/// The receiving end of one RTP H.265 stream, without sockets, clocks or threads: the
/// protocol core that `MediaReceiver` drives.
///
/// The caller feeds it input events, each with the time it happens (`now`: nanoseconds
/// since the Unix epoch, CLOCK_REALTIME, the clock of kernel receive timestamps):
/// - `handleDatagram`: a datagram arrived (bytes, source address, TOS byte, kernel arrival
///   time, and whether it came on the RTP or the RTCP port); `handleSegments`: the datagrams of
///   one receive completion (GRO segments sharing source, TOS byte and time), the same as each
///   through `handleDatagram` but a run of the stream's next packets taken at once;
/// - `handleTimeout`: time has come to `nextDeadline`;
/// - `finish`: the stream ends.
///
/// and drains what happened with `pollOutput` after each: access units to deliver (complete
/// or not, in order) and feedback datagrams to send (bytes and destination). The counters
/// are in `stats`; the caller tells the session how its sends went (`recordFeedbackSend`)
/// and what its socket counted (`recordSocketCounters`).
///
/// What it does: locks onto the first valid stream (or the one from `config.from`), rejects
/// and counts everything else by `ReceiveRejection`, follows another stream once the stream
/// said BYE or fell silent for `streamTimeout` (a sender started again: `considerNewStream`),
/// follows sequence restarts (two packets
/// in sequence far from the stream's numbers, as `RTPSequenceTracker` decides) and an RTP
/// clock that moved on (two packets in sequence on the new clock), taking both packets, confirms path-MTU probes, rebuilds access units (`HEVCDepacketizer`), accounts for
/// frames (complete, incomplete, missing, undecodable), asks for a keyframe (PLI, at most one
/// per 200 ms) when a frame is incomplete or follows no keyframe this receiver had (it joined
/// mid-stream), and again every second while no complete keyframe has mended the chain of
/// references since (RFC 4585 lets a PLI be repeated), and sends feedback (receiver report, SDES, RFC 8888
/// per-packet feedback, PLI) to the sender's RTP port + 1 (the RTP port itself with
/// `rtcpMux`) about once per frame, at the arrival of its last packet (marker bit) once
/// `reportInterval` has passed since the last report, `reportInterval` after the first
/// unreported packet when no frame ends, every `reportInterval` while other news waits
/// (`ReceiverFeedback.reportDue`), every 250 ms anyway, at once when
/// its memory of arrivals is full, and in answer to each sender report. A receiver of a
/// multicast group (`config.listen` a group) instead sends receiver reports (no per-packet
/// feedback) at the RFC 3550 interval for the group's size (`MulticastReportTiming`), a PLI at
/// once, and a last report when the stream ends. A BYE from the sender ends the stream's
/// waits at once: every gap is given up and every frame held comes out.
///
/// With `config.retransmission` it also recovers losses (`LossRecovery`): packets behind a gap
/// wait in a playout buffer (`PlayoutBuffer`) until the missing one comes or the frame's
/// deadline passes, every frame waits for its playout time (`FramePlayout`: its first
/// packet's arrival + the latency), missing packets are asked for with generic NACKs (`NACKGenerator`), and
/// RFC 4588 retransmissions (or originals resent on the media SSRC) fill the gaps; packets
/// lost at the end of what was sent, which no later packet reveals, are found by the sender
/// reports' packet count and asked for the same way. Only
/// originals count in `received` and `lost` (and in the RFC 8888 feedback); a retransmission
/// that fills a gap in time counts in `recovered`.
///
/// Memory is bounded whatever arrives: the depacketizer's window and one access unit, the
/// tracker's bitmap, the feedback's pending arrivals, a few datagrams kept aside, and the
/// outputs of one input (drain them after each).
public struct ReceiveSession: Sendable {
    /// Which of the receiver's ports a datagram came on.
    public enum Port: Sendable, Hashable {
        /// The RTP port (also RTCP, with `rtcpMux`).
        case rtp
        /// The RTCP port (RTP port + 1).
        case rtcp
    }

    /// A datagram for the caller to send.
    public struct Transmit: Sendable, Hashable {
        /// The datagram.
        public var bytes: [UInt8]
        /// Where it goes.
        public var destination: SocketAddress
    }

    /// What happened, drained with `pollOutput`.
    public enum Output: Sendable {
        /// An access unit rebuilt (complete or not), in stream order, with
        /// `followsIntactChain` set.
        case accessUnit(DepacketizedAccessUnit)
        /// Feedback for the sender. Report how the send went with `recordFeedbackSend`.
        case transmit(Transmit)
    }

    /// The configuration (its `listen` address is not used here).
    public let config: MediaReceiverConfig

    private var feedback: ReceiverFeedback
    private var tracker = RTPSequenceTracker()
    private var depacketizer: HEVCDepacketizer
    /// The counters kept here; `stats` adds the tracker's and the depacketizer's.
    private var counts = ReceiverStats()
    private var lockedSSRC: UInt32?
    private var lockedPayloadType: UInt8?
    private var lockedSource: SocketAddress? {
        didSet {
            completionFromLockedSource = nil
            lockedSourceDescription = lockedSource?.description
        }
    }
    /// `lockedSource?.description`, made when the source is set, not each time `stats` is read:
    /// `MediaReceiver` publishes the stats every 50 ms, and formatting the address was over half
    /// of what reading them cost (results/profile.md section 23).
    private var lockedSourceDescription: String?
    /// `lockedSource != nil`, read from its description: testing the optional itself copied the
    /// 133-byte address (three times per packet with loss recovery; results/profile.md section 31).
    private var sourceIsLocked: Bool { lockedSourceDescription != nil }
    /// The `completion` of `handleDatagram` whose source was found to be `lockedSource`: its
    /// other datagrams (GRO segments sharing the source) skip the comparison, the 132-byte
    /// address copied and compared per datagram otherwise (results/profile.md section 15).
    private var completionFromLockedSource: Int?
    private var lastAcceptedTimestamp: UInt32?
    /// Packets of the stream from another address, kept aside until they prove a move (at most
    /// `moveEvidence - 1` of them).
    private var moveCandidate: (source: SocketAddress, nextSequence: UInt16, held: [HeldPacket])?
    /// The last packet rejected for its timestamp (its bytes in `candidateBytes`): if the next
    /// one follows it in sequence and in time, the stream's clock moved on (wall-clock
    /// timestamps across a long pause) and both are taken.
    private var timestampJumpCandidate: (header: RTPHeader, tos: UInt8, arrival: Int64, payloadRange: Range<Int>)?
    private var candidateBytes: [UInt8] = []
    /// The last packet the tracker found far from the stream's sequence numbers (its payload
    /// in `sequenceJumpPayload`): if the next one follows it, the sender restarted its
    /// sequence, the tracker counts both received, and both go into the frames.
    private var sequenceJumpCandidate: (header: RTPHeader, arrival: Int64, tos: UInt8, uncountedBytes: Int)?
    private var sequenceJumpPayload: [UInt8] = []
    /// The stream's sender said BYE: another stream may take its place (`considerNewStream`).
    private var streamEnded = false
    /// When the stream last showed its sender alive (`now` of its last media packet,
    /// retransmission or sender report): silent for `streamTimeout`, another stream may take
    /// its place.
    private var lastStreamActivity: Int64 = 0
    /// Packets of another stream kept aside, after the stream ended, while they may be a new
    /// one (at most `newStreamEvidence - 1` of them), with where the next one must continue.
    private var newStreamCandidate: (source: SocketAddress, header: RTPHeader, held: [HeldPacket])?
    /// RTCP that came before the stream's first packet (ffmpeg sends its first sender report
    /// before its first RTP packet): the latest such datagram (`earlyRTCPBytes`), handled when
    /// the stream locks if it came from the stream's host at most `earlyRTCPLifetime` before.
    /// `rejected`: counted `rtcpForeignSource` meanwhile (no source was pinned), taken back then.
    private var earlyRTCP: (source: SocketAddress, arrival: Int64, at: Int64, rejected: Bool)?
    private var earlyRTCPBytes: [UInt8] = []
    /// The stats of the streams received before this one (nil while the first is): `stats`
    /// adds them up with this stream's.
    private var earlierStreams: ReceiverStats?
    private var lastReport: Int64 = 0
    /// When a report last went out early to answer a sender report about to be replaced.
    private var lastEarlyAnswer: Int64 = 0
    private var lastKeyframeRequest: Int64 = 0
    /// The RTP timestamp of the last frame emitted, and the smallest step seen between frames.
    private var lastTimestamp: UInt32?
    private var frameInterval: UInt32?
    /// The stream's first steps between frames after a loss, counted again if the interval turns out shorter.
    private var earlySteps: [UInt32] = []
    static let earlyStepsKept = 64
    private var chainIntact = false
    /// A keyframe was asked for and no complete keyframe has mended the chain since.
    private var keyframeAwaited = false
    /// Which parameter sets (VPS, SPS, PPS: bits 0, 1, 2) have come in band so far.
    private var parameterSetsSeen: UInt8 = 0
    /// A complete keyframe came before (see `mendsChain(_:)`).
    private var keyframeSeen = false
    private var outputs: [Output] = []
    private var nextOutput = 0
    /// With `config.retransmission` (and feedback): the loss-recovery state (NACK, RTX, playout
    /// buffer), used only when `recovers`. Not an optional: each force-unwrap tested the
    /// optional's tag in an outlined call, eight times per packet, and a non-mutating method
    /// called on the unwrapped value copied the whole `LossRecovery` (results/profile.md
    /// sections 15.2 and 31).
    private var recovery: LossRecovery
    /// Whether the session recovers losses (`recovery` is used), fixed at init.
    private let recovers: Bool
    /// The TOS byte of the last accepted packets and how many of them in a row are not yet in
    /// `counts.ecn` and `counts.dscp`: a completion's GRO segments share their TOS byte, so the
    /// two counts move once per run of equal marks, not per packet; `stats` adds the open run.
    private var markRun: (tos: UInt8, count: Int) = (0, 0)
    /// Empty between inputs: the capacity `push` reuses for the access units the depacketizer
    /// completes (an array returned per packet was released per packet, empty or not).
    private var depacketized: [DepacketizedAccessUnit] = []
    /// Empty between inputs: the capacity `push` reuses for the packets the playout buffer releases.
    private var releasedScratch: [PlayoutBuffer.Packet] = []
    /// Packets taken in runs (`takeRun`), for tests: that the runs were taken at all.
    private(set) var runPackets = 0
    /// Frames waiting for their playout time, for tests.
    var waitingFrames: Int { recovery.frames.waitingCount }
    /// The NACK byte budget left, for tests: runs fill it as `accept` does.
    var nackTokens: Double { recovery.nack.tokens }
    /// With a multicast `listen` group and feedback: when the regular reports go.
    private var multicastTiming: MulticastReportTiming?
    /// `multicastTiming != nil`, fixed at init (per packet, as `recovers`).
    private let reportsToGroup: Bool
    /// `config.reportInterval` in nanoseconds, worked out once: a `Duration`'s are a 128-bit
    /// division and multiplication, and `nextDeadline` is read at every wake-up.
    private let reportInterval: Int64

    /// Largest RTP timestamp step accepted within a stream: 10 s at 90 kHz.
    static let maxTimestampStep: Int32 = 900_000
    /// Feedback goes out at least this often once a stream is locked (nanoseconds).
    static let maxReportInterval: Int64 = 250_000_000
    /// At most one keyframe request per this long (nanoseconds): the first is what matters.
    static let keyframeRequestInterval: Int64 = 200_000_000
    /// While the chain stays broken after a keyframe request, it is repeated this often
    /// (nanoseconds): longer than a keyframe takes to come back on any path we expect (a
    /// round trip, the sender's encoder and its keyframe interval defence of 500 ms), so a
    /// keyframe on its way is not asked for twice; short enough that a lost request or a
    /// lost keyframe costs about a second of frames, not the rest of the group of pictures.
    static let keyframeRepeatInterval: Int64 = 1_000_000_000

    /// Makes a session that has seen nothing. Its reports are sent from `ssrc` with CNAME `cname`.
    public init(config: MediaReceiverConfig, ssrc: UInt32 = UInt32.random(in: 1...UInt32.max),
                cname: String = RTCPSourceDescription.randomCNAME()) {
        self.config = config
        feedback = ReceiverFeedback(ssrc: ssrc, cname: cname)
        let recovers = config.retransmission && config.feedback
        // With a playout buffer, packets reach the depacketizer in order: a gap it sees was given up.
        depacketizer = HEVCDepacketizer(maxAccessUnitSize: config.maxAccessUnitSize,
                                        reorderWindow: recovers ? 0 : config.reorderWindow)
        lockedSource = config.from
        lockedSourceDescription = config.from?.description
        self.recovers = recovers
        reportsToGroup = config.listen.isMulticast && config.feedback
        reportInterval = config.reportInterval.nanoseconds
        recovery = LossRecovery(latency: config.latency?.nanoseconds)
        if reportsToGroup { multicastTiming = MulticastReportTiming(ipv6: config.listen.family == .ipv6) }
        // No per-packet feedback to a group's sender, and none at all without feedback (the
        // arrivals would only fill the report's memory, 8,192 of them, never sent).
        if reportsToGroup || !config.feedback { feedback.perPacket = false }
    }

    // MARK: Inputs

    /// A datagram arrived.
    /// - Parameters:
    ///   - datagram: its bytes (only read during the call).
    ///   - source: where it came from.
    ///   - tos: its TOS byte (DSCP and ECN).
    ///   - arrival: the kernel's receive time (CLOCK_REALTIME nanoseconds), 0 if none.
    ///   - port: the port it came on.
    ///   - now: the time now.
    ///   - completion: the number of the receive completion it came in, nil if none: datagrams
    ///     given the same number must share their source (the GRO segments of one completion),
    ///     which is then compared with the stream's once for all of them.
    public mutating func handleDatagram(_ datagram: UnsafeRawBufferPointer, from source: SocketAddress?, tos: UInt8,
                                        arrival: Int64, port: Port = .rtp, now: Int64, completion: Int? = nil) {
        handleDatagram(datagram, source: { source }, tos: tos, arrival: arrival, port: port, now: now, completion: completion)
    }

    /// A datagram arrived, its source given by `source`, which is called only when the source
    /// is needed: not for the further segments of a completion whose source was found to be
    /// the stream's (a caller that holds the address in a receive buffer reads it only then).
    /// Otherwise as `handleDatagram(_:from:tos:arrival:port:now:completion:)`.
    public mutating func handleDatagram(_ datagram: UnsafeRawBufferPointer, source: () -> SocketAddress?, tos: UInt8,
                                        arrival: Int64, port: Port = .rtp, now: Int64, completion: Int?) {
        if port == .rtcp || (config.rtcpMux && Self.isMultiplexedRTCP(datagram)) {
            handleRTCP(datagram, from: source(), arrival: arrival, now: now)
            return
        }
        let parsed: RTPParsedPacket
        do throws(RTPPacketError) {
            parsed = try RTPHeader.parse(datagram)
        } catch {
            reject(.rtp(error))
            return
        }
        if let completion, completion == completionFromLockedSource {
            // Another segment of a completion whose source is the stream's: nothing to compare.
        } else if let locked = lockedSource, let source = source(), source != locked {
            // Counted foreign for now; taken back if the stream turns out to have moved there.
            reject(.foreignSource)
            guard let held = considerMove(parsed.header, datagram, from: source, tos: tos, arrival: arrival) else {
                if mayFollowAnotherStream(now: now) {
                    considerNewStream(parsed.header, datagram, from: source, reason: .foreignSource, tos: tos,
                                      arrival: arrival, now: now)
                }
                return
            }
            // The sender's address changed (a new source address on its path): the stream
            // goes on from there, and so does the feedback. The packets kept aside go first.
            lockedSource = source
            counts.sourceMoves += 1
            // What was reported to the old address in the last second may be lost with it.
            feedback.reportAgain(since: (arrival > 0 ? arrival : now) - 1_000_000_000)
            Self.takeBack(held.count + 1, of: .foreignSource, from: &counts.rejected)
            for packet in held {
                handleDatagram(packet.bytes, from: source, tos: packet.tos, arrival: packet.arrival, port: port, now: now)
            }
        } else if sourceIsLocked {
            // The stream's own source is alive: no move. (The candidates are cleared only when
            // set: storing nil into an optional tuple costs a runtime call, per packet.)
            if moveCandidate != nil { moveCandidate = nil }
            completionFromLockedSource = completion
        }
        if let ssrc = lockedSSRC, parsed.header.ssrc != ssrc {
            if recovers, parsed.header.payloadType == config.rtxPayloadType, lockedPayloadType != nil {
                handleRTX(parsed, datagram: datagram, tos: tos, now: now, arrival: arrival)
                return
            }
            reject(.foreignSSRC)
            if mayFollowAnotherStream(now: now), let source = source() {
                considerNewStream(parsed.header, datagram, from: source, reason: .foreignSSRC, tos: tos, arrival: arrival, now: now)
            }
            return
        }
        if parsed.header.payloadType == PathMTUProbe.payloadType {
            if lockedSSRC == nil {
                lockedSSRC = parsed.header.ssrc
                if lockedSource == nil { lockedSource = source() }
                handleEarlyRTCP(now: now)
            }
            // A path-MTU probe: confirmed in the next feedback, never media.
            let body = UnsafeRawBufferPointer(rebasing: datagram[parsed.payloadRange])
            if let probe = PathMTUProbe(header: parsed.header, payload: body, datagramSize: datagram.count) {
                counts.probesReceived += 1
                feedback.confirmProbe(id: probe.probeID, size: probe.size)
            } else {
                reject(.badProbe)
            }
            return
        }
        if let payloadType = lockedPayloadType, parsed.header.payloadType != payloadType {
            reject(.unexpectedPayloadType)
            return
        }
        if let last = lastAcceptedTimestamp, !Self.isNear(parsed.header.timestamp, last) {
            // More than 10 s away from the stream's clock: not a frame of this stream, unless
            // it is the second packet in a row on a new clock (then the clock moved on, and
            // the first one, kept aside, is taken after all).
            let header = parsed.header
            guard let candidate = timestampJumpCandidate, header.sequenceNumber == candidate.header.sequenceNumber &+ 1,
                  Self.isNear(header.timestamp, candidate.header.timestamp) else {
                timestampJumpCandidate = (header, tos, arrival, parsed.payloadRange)
                candidateBytes.removeAll(keepingCapacity: true)
                candidateBytes.append(contentsOf: datagram)
                reject(.timestampJump)
                return
            }
            timestampJumpCandidate = nil
            counts.timestampRestarts += 1
            counts.rejected[.timestampJump, default: 0] -= 1
            let bytes = candidateBytes
            bytes.withUnsafeBytes { bytes in
                accept(candidate.header, datagram: bytes, payload: UnsafeRawBufferPointer(rebasing: bytes[candidate.payloadRange]),
                       tos: candidate.tos, arrival: candidate.arrival, now: now)
            }
        } else if timestampJumpCandidate != nil {
            timestampJumpCandidate = nil
        }
        if lockedPayloadType == nil {
            let first = lockedSSRC == nil
            lockedSSRC = parsed.header.ssrc
            lockedPayloadType = parsed.header.payloadType
            if lockedSource == nil { lockedSource = source() }
            if first { handleEarlyRTCP(now: now) }
        }
        accept(parsed.header, datagram: datagram, payload: UnsafeRawBufferPointer(rebasing: datagram[parsed.payloadRange]),
               tos: tos, arrival: arrival, now: now)
    }

    /// The datagrams of one receive completion: `segments` holds them back to back, each
    /// `segmentSize` bytes but the last (which may be shorter), all from one source with one TOS
    /// byte and arrival time (the GRO segments of one completion, or a single datagram).
    ///
    /// The same as handing each to `handleDatagram(_:source:tos:arrival:port:now:completion:)` in
    /// order (the same stats, the same outputs in the same order), but cheaper per packet: a run of
    /// the stream's next packets from its source (each the next sequence number, on its SSRC,
    /// payload type and clock, with no CSRC, header extension or padding) is taken with the
    /// stream's state and the source checked once for the run (`takeRun`); whatever is not such a
    /// packet goes through `handleDatagram`.
    /// - Precondition: `segmentSize > 0`.
    public mutating func handleSegments(_ segments: UnsafeRawBufferPointer, segmentSize: Int, source: () -> SocketAddress?,
                                        tos: UInt8, arrival: Int64, port: Port = .rtp, now: Int64, completion: Int) {
        precondition(segmentSize > 0, "segmentSize must be positive, got \(segmentSize)")
        var offset = 0
        repeat {
            if port == .rtp {
                let runEnd = takeRun(segments, from: offset, segmentSize: segmentSize, source: source, tos: tos,
                                     arrival: arrival, now: now, completion: completion)
                if runEnd > offset {
                    offset = runEnd
                    continue
                }
            }
            let end = min(offset + segmentSize, segments.count)
            handleDatagram(UnsafeRawBufferPointer(rebasing: segments[offset..<end]), source: source, tos: tos,
                           arrival: arrival, port: port, now: now, completion: completion)
            offset = end
        } while offset < segments.count
    }

    /// Takes the datagrams from `start` on while each is the stream's next packet, as
    /// `handleDatagram` and `accept` would; returns the offset of the first datagram not taken.
    /// What `handleDatagram` checks per packet is checked here once for the run: no group reports
    /// (they take every packet their own way), with loss recovery nothing held, missing or asked
    /// for (`LossRecovery.isCaughtUp`: no packet of the run is then a retransmission on the media
    /// SSRC, each is released at once and no NACK comes due), the stream locked, no packet kept
    /// aside as the start of a new clock or a new sequence, the payload type not one RTCP
    /// multiplexing would claim, the completion's source the stream's (compared once per
    /// completion, where `handleDatagram` compares it: at its first valid RTP packet); per packet
    /// only its header (fixed 12 bytes: version 2, no padding, extension or CSRC), its SSRC and
    /// payload type, a timestamp near the last one and the next sequence number
    /// (`RTPSequenceTracker.trackNext`).
    private mutating func takeRun(_ segments: UnsafeRawBufferPointer, from start: Int, segmentSize: Int,
                                  source: () -> SocketAddress?, tos: UInt8, arrival: Int64, now: Int64,
                                  completion: Int) -> Int {
        guard !reportsToGroup, sourceIsLocked, let ssrc = lockedSSRC, let payloadType = lockedPayloadType,
              var last = lastAcceptedTimestamp, timestampJumpCandidate == nil, sequenceJumpCandidate == nil,
              !rtcpMuxClaims(payloadType), let base = segments.baseAddress else { return start }
        if recovers {
            // Loss recovery with nothing held, missing or asked for: each next packet is released
            // at once and alone (`push`'s usual case), and no NACK comes due (`accept`'s ask).
            guard let highest = tracker.extendedHighestSequence, recovery.isCaughtUp(at: Int64(highest)) else { return start }
        }
        let ecn = TrafficMark.ecnBits(of: tos)
        let arrival90kHz = Self.in90kHz(arrival)
        let frameArrival = arrival > 0 ? arrival : now
        var offset = start
        var taken = 0
        while offset < segments.count {
            let count = min(segmentSize, segments.count - offset)
            let packet = base + offset
            guard count >= RTPHeader.fixedSize, packet.load(as: UInt8.self) == 0x80 else { break }
            let header = RTPHeader(fixedHeaderAt: packet)
            guard header.payloadType == payloadType, header.ssrc == ssrc, Self.isNear(header.timestamp, last) else { break }
            if completion != completionFromLockedSource {
                // The completion's source, compared where `handleDatagram` would (a valid RTP packet):
                // another one is `handleDatagram`'s to judge (foreign, or the stream moving there).
                if let from = source(), from != lockedSource { break }
                if moveCandidate != nil { moveCandidate = nil }
                completionFromLockedSource = completion
            }
            guard let extended = tracker.trackNext(sequence: header.sequenceNumber, rtpTimestamp: header.timestamp,
                                                   arrival: arrival90kHz) else { break }
            taken += 1
            last = header.timestamp
            feedback.record(sequence: header.sequenceNumber, arrival: arrival, ecn: ecn, marker: header.marker)
            if recovers {
                // As `accept` and `push` with loss recovery, in one place.
                recovery.nack.noteMediaBytes(count)
                recovery.jitter = tracker.jitter
                // Not a retransmission on the media SSRC (`accept`'s first test): nothing is
                // missing, and every number recovered is below the next (`restartSequence`).
                assert(!recovery.isSameSSRCRetransmission(extended), "a caught-up stream's next packet is an original")
                recovery.frames.noteArrival(timestamp: header.timestamp, arrival: frameArrival)
                let released = recovery.releaseInOrder(extended)
                assert(released, "a caught-up playout buffer releases the next packet at once")
            }
            let body = UnsafeRawBufferPointer(start: packet + RTPHeader.fixedSize, count: count - RTPHeader.fixedSize)
            if !depacketizer.pushFragment(header, payload: body, sequence: extended, into: &depacketized) {
                depacketizer.push(header, payload: body, tracked: .init(outcome: .inOrder, extendedSequence: extended),
                                  into: &depacketized)
            }
            emitDepacketized(now: now)
            offset += count
        }
        guard taken > 0 else { return start }
        runPackets += taken
        lastStreamActivity = now
        lastAcceptedTimestamp = last
        // The run's marks and bytes, as `accept` counts them packet by packet.
        noteMarks(tos: tos, count: taken)
        counts.bytesReceived += offset - start
        return offset
    }

    /// A packet of another address kept aside while it may be the stream moving there.
    struct HeldPacket {
        var bytes: [UInt8]
        var tos: UInt8
        var arrival: Int64
        /// Why it was counted rejected while held (taken back if it turns out to be the stream's).
        var reason: ReceiveRejection = .foreignSource
    }

    /// The stream's packets from another address: a move of the sender (RFC 3550 8.2 allows a
    /// source to change its transport address; its SSRC stays) once `moveEvidence` packets in a
    /// row came from there, with nothing from the stream's own source between them: media of
    /// the locked SSRC and payload type, the first just ahead of the highest sequence number
    /// (at most `maxMoveAhead`), each next one +1, timestamps near the stream's clock. Never
    /// when the user pinned the sender's address (`from`). Returns the packets kept aside
    /// before this one when the move is proven, nil otherwise (this one kept aside, or foreign).
    private mutating func considerMove(_ header: RTPHeader, _ datagram: UnsafeRawBufferPointer, from source: SocketAddress,
                                       tos: UInt8, arrival: Int64) -> [HeldPacket]? {
        guard config.from == nil, let ssrc = lockedSSRC, header.ssrc == ssrc, header.payloadType == lockedPayloadType,
              let highest = tracker.extendedHighestSequence, let last = lastAcceptedTimestamp,
              Self.isNear(header.timestamp, last) else { return nil }
        if var candidate = moveCandidate, candidate.source == source, header.sequenceNumber == candidate.nextSequence {
            if candidate.held.count + 1 >= Self.moveEvidence {
                moveCandidate = nil
                return candidate.held
            }
            candidate.held.append(HeldPacket(bytes: Array(datagram), tos: tos, arrival: arrival))
            candidate.nextSequence &+= 1
            moveCandidate = candidate
            return nil
        }
        let ahead = header.sequenceNumber &- UInt16(truncatingIfNeeded: highest)
        guard ahead >= 1 && ahead <= Self.maxMoveAhead else { return nil }
        moveCandidate = (source, header.sequenceNumber &+ 1, [HeldPacket(bytes: Array(datagram), tos: tos, arrival: arrival)])
        return nil
    }

    /// Packets in a row from a new address that prove a move (see `considerMove`).
    static let moveEvidence = 3
    /// How far ahead of the highest sequence number the first packet from a moved sender may be
    /// (what a short outage during the move can lose).
    static let maxMoveAhead: UInt16 = 512

    /// A packet no path of the stream took, after the stream ended (its BYE) or fell silent for
    /// `streamTimeout`: another stream takes the stream's place (a sender restarted: a new SSRC,
    /// sequence and clock, from its address or another) once `newStreamEvidence` such packets
    /// came in a row from one address: media of one SSRC and payload type (not a probe's, an
    /// RTX one's or one RTCP multiplexing would claim), each the next sequence number, their
    /// timestamps near each other; from the pinned address only, if the user pinned one (`from`).
    /// Until then they are kept aside, counted rejected (`reason`), and taken back when the new
    /// stream is followed.
    private mutating func considerNewStream(_ header: RTPHeader, _ datagram: UnsafeRawBufferPointer, from source: SocketAddress,
                                            reason: ReceiveRejection, tos: UInt8, arrival: Int64, now: Int64) {
        guard header.payloadType != PathMTUProbe.payloadType, !(recovers && header.payloadType == config.rtxPayloadType),
              !rtcpMuxClaims(header.payloadType), config.from.map({ $0 == source }) ?? true else { return }
        let packet = HeldPacket(bytes: Array(datagram), tos: tos, arrival: arrival, reason: reason)
        guard var candidate = newStreamCandidate, candidate.source == source, header.ssrc == candidate.header.ssrc,
              header.payloadType == candidate.header.payloadType,
              header.sequenceNumber == candidate.header.sequenceNumber &+ 1,
              Self.isNear(header.timestamp, candidate.header.timestamp) else {
            newStreamCandidate = (source, header, [packet])
            return
        }
        candidate.held.append(packet)
        guard candidate.held.count >= Self.newStreamEvidence else {
            candidate.header = header
            newStreamCandidate = candidate
            return
        }
        followNewStream(candidate.held, from: source, now: now)
    }

    /// `count` packets counted rejected for `reason` turned out to be the stream's: counted no more.
    private static func takeBack(_ count: Int, of reason: ReceiveRejection, from rejected: inout [ReceiveRejection: Int]) {
        rejected[reason, default: 0] -= count
        if rejected[reason] == 0 { rejected[reason] = nil }
    }

    /// Whether another stream may take the stream's place now: it said BYE, or fell silent for `streamTimeout`.
    private func mayFollowAnotherStream(now: Int64) -> Bool {
        streamEnded || now - lastStreamActivity >= Self.streamTimeout
    }

    /// Whether RTCP multiplexing (`config.rtcpMux`) claims RTP payload type `payloadType` (RFC 5761 4:
    /// 64-95, whose byte with the marker bit is an RTCP packet type).
    private func rtcpMuxClaims(_ payloadType: UInt8) -> Bool {
        config.rtcpMux && (64...95).contains(payloadType)
    }

    /// Packets in a row of another stream that prove it took the ended stream's place.
    static let newStreamEvidence = 3
    /// How long a stream may fall silent (no media, retransmission or sender report) before
    /// another may take its place (nanoseconds): a sender that stopped without a BYE
    /// (killed, or one that sends no RTCP) and was started again.
    static let streamTimeout: Int64 = 2_000_000_000

    /// The stream ended and `packets` (in order, from `source`) begin the one that takes its
    /// place: what is held of the ended stream goes out (as at its end), and the session starts
    /// again on the new stream as a new session would, keeping the counts so far
    /// (`earlierStreams`), the outputs not yet polled, its own SSRC and CNAME, and the frames'
    /// delays; then `packets` go in, no longer counted rejected.
    private mutating func followNewStream(_ packets: [HeldPacket], from source: SocketAddress, now: Int64) {
        releaseEverything(now: now)
        var earlier = stats
        for packet in packets { Self.takeBack(1, of: packet.reason, from: &earlier.rejected) }
        earlier.streamChanges += 1
        var next = ReceiveSession(config: config, ssrc: feedback.ssrc, cname: feedback.cname)
        next.earlierStreams = earlier
        next.outputs = Array(outputs[nextOutput...])
        next.recovery.frames.carryMeasurements(from: recovery.frames)
        next.runPackets = runPackets
        self = next
        for packet in packets {
            handleDatagram(packet.bytes, from: source, tos: packet.tos, arrival: packet.arrival, port: .rtp, now: now)
        }
    }

    /// A datagram arrived; see `handleDatagram(_:from:tos:arrival:port:now:)`.
    public mutating func handleDatagram(_ datagram: [UInt8], from source: SocketAddress?, tos: UInt8 = 0,
                                        arrival: Int64, port: Port = .rtp, now: Int64) {
        datagram.withUnsafeBytes { handleDatagram($0, from: source, tos: tos, arrival: arrival, port: port, now: now) }
    }

    /// Time has passed: sends the feedback that is due (see `nextDeadline`). Calling it early,
    /// or often, does no harm.
    public mutating func handleTimeout(now: Int64) {
        if recovers {
            releaseDue(now: now)
            releaseTail(now: now)
            releaseFrames(now: now)
            askForRetransmissions(now: now)
        }
        sendFeedback(now: now)
    }

    /// When `handleTimeout` has something to do next, if anything: nil before a stream is
    /// locked or without feedback. May be in the past. Read on a `var` session (it changes
    /// nothing; see below).
    // Inlined: called out of line on a session held in another value, the whole session
    // (~2.7 KB) was copied to the stack for each call, once per wake-up of a receive loop
    // (results/profile.md section 31). A `mutating get`, though it changes nothing: read in
    // place, not as a value, so the fields are loaded where they are tested; as a plain getter,
    // inlined into the loop, ~20 fields of every branch were loaded and the multicast timing
    // (144 B) copied before the first test, twice per wake-up (section 39).
    @inline(__always)
    public var nextDeadline: Int64? {
        mutating get {
            guard config.feedback, lockedSSRC != nil, sourceIsLocked else { return nil }
            if feedback.isFull { return Int64.min }
            if let multicastTiming {
                return feedback.pictureLossPending ? Int64.min : multicastTiming.nextDeadline
            }
            var deadline = lastReport + Self.maxReportInterval
            if feedback.hasNews { deadline = min(deadline, feedback.reportDue(lastReport: lastReport, interval: reportInterval)) }
            if recovers {
                if let release = recovery.playout.nextDeadline { deadline = min(deadline, release) }
                if let ask = recovery.nack.nextDue(rtt: recovery.nackRTT) { deadline = min(deadline, ask) }
                if let release = recovery.nextFrameRelease { deadline = min(deadline, release) }
                if let tail = recovery.tailDeadline { deadline = min(deadline, tail) }
            }
            return deadline
        }
    }

    /// The stream ends: gives up every gap, outputs what is left and, with feedback, the last
    /// report (everything received is reported before the receiver goes).
    public mutating func finish(now: Int64) {
        releaseEverything(now: now)
        guard config.feedback else { return }
        lastReport = 0
        sendFeedback(now: now, now: true)
    }

    /// Every gap and missing tail given up, every frame out (complete ones in order, the
    /// incomplete last one too), at once: the stream ended (`finish`, or the sender's BYE).
    /// Packets the BYE overtook (RTCP on a socket of its own, behind a long media queue) may
    /// still come: those of the frame put out are late (`closeAccessUnit`).
    private mutating func releaseEverything(now: Int64) {
        if recovers {
            var released: [PlayoutBuffer.Packet] = []
            recovery.playout.flush(into: &released)
            recovery.forgetTail()
            pushReleased(released, now: now)
        }
        closeAccessUnit(now: now)
        if recovers { releaseFrames(now: now, all: true) }
    }

    /// The frame under assembly ends here, incomplete: every gap is given up and it is emitted
    /// now. Its packets that come later are late, not a second frame of its timestamp
    /// (`HEVCDepacketizer.closeAccessUnit`).
    private mutating func closeAccessUnit(now: Int64) {
        var closed: [DepacketizedAccessUnit] = []
        depacketizer.closeAccessUnit(into: &closed)
        emit(&closed, now: now)
    }

    /// The caller sent (or failed to send) a `.transmit` output: counted in
    /// `feedbackSent` or `feedbackErrors`.
    public mutating func recordFeedbackSend(succeeded: Bool) {
        if succeeded { counts.feedbackSent += 1 } else { counts.feedbackErrors += 1 }
    }

    /// What the caller's socket counted, which the session cannot see: datagrams the kernel
    /// dropped for lack of buffer space, and datagrams cut for being larger than the buffers.
    public mutating func recordSocketCounters(kernelDrops: Int, truncated: Int) {
        counts.kernelDrops = kernelDrops
        counts.truncated = truncated
    }

    // MARK: Outputs

    /// The next thing that happened, oldest first; nil when there is nothing more.
    // Inlined: `MediaReceiver` asks after every datagram, and nearly always gets nil; out of
    // line, the optional `Output` (~150 bytes) is returned through memory.
    @inline(__always)
    public mutating func pollOutput() -> Output? {
        guard nextOutput < outputs.count else {
            if !outputs.isEmpty {
                outputs.removeAll(keepingCapacity: true)
                nextOutput = 0
            }
            return nil
        }
        // The last one (usually the only one: a wake-up's frame) is moved out, not copied (an
        // `Output` is copied and destroyed through its value witnesses: results/profile.md
        // section 33), and the ones polled before it are cleared with it.
        if nextOutput == outputs.count - 1 {
            let last = outputs.removeLast()
            if nextOutput > 0 {
                outputs.removeAll(keepingCapacity: true)
                nextOutput = 0
            }
            return last
        }
        defer { nextOutput += 1 }
        return outputs[nextOutput]
    }

    /// Gives back the NAL units of an access unit `pollOutput` delivered, once the caller is done
    /// with them: the depacketizer reuses their arrays for the frames to come
    /// (`HEVCDepacketizer.recycle(_:)`; arrays still shared elsewhere are left intact).
    /// Optional: a caller that keeps its frames simply does not call it.
    public mutating func recycle(_ nalUnits: inout [[UInt8]]) {
        depacketizer.recycle(&nalUnits)
    }

    /// The counters so far.
    // Inlined for the reason `nextDeadline` is: `MediaReceiver` reads it every 50 ms.
    @inline(__always)
    public var stats: ReceiverStats {
        var stats = counts
        if markRun.count > 0 { Self.countMarks(markRun, in: &stats) }
        stats.received = tracker.received
        stats.lost = tracker.lost
        stats.duplicate = tracker.duplicate
        stats.reordered = tracker.reordered
        stats.late = tracker.late + depacketizer.counters.late
        if recovers {
            recovery.addStats(to: &stats)
            // A missing tail (the sender's reports say it was sent) is lost as a gap is.
            if let highest = tracker.extendedHighestSequence { stats.lost += max(0, recovery.highestExpected - Int64(highest)) }
        }
        stats.ssrc = lockedSSRC
        stats.source = lockedSourceDescription
        if let multicastTiming {
            stats.rtcpIntervalSeconds = multicastTiming.intervalSeconds
            stats.rtcpMembers = multicastTiming.members
        }
        for (reason, count) in depacketizer.counters.rejected { stats.rejected[.payload(reason)] = count }
        if let earlierStreams { stats.addEarlierStreams(earlierStreams) }
        return stats
    }

    // MARK: Media

    private mutating func reject(_ reason: ReceiveRejection) {
        counts.rejected[reason, default: 0] += 1
    }

    /// A packet of the stream: counted, tracked, reported, and into the depacketizer.
    private mutating func accept(_ header: RTPHeader, datagram: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer,
                                 tos: UInt8, arrival: Int64, now: Int64) {
        let ecn = TrafficMark.ecnBits(of: tos)
        lastStreamActivity = now
        if recovers, let sequence = recovery.extend(header.sequenceNumber), recovery.isSameSSRCRetransmission(sequence) {
            // The original resent unchanged on the media SSRC (RFC 4588's alternative for
            // receivers of one payload type): a retransmission, not an original's arrival.
            noteStreamBytes(datagram.count, tos: tos, now: now)
            recovery.counts.rtxReceived += 1
            takeRetransmission(header, payload: payload, sequence: sequence, arrival: arrival, now: now)
            return
        }
        let arrival90kHz = Self.in90kHz(arrival)
        var tracked = tracker.track(sequence: header.sequenceNumber, rtpTimestamp: header.timestamp, arrival: arrival90kHz)
        // A packet far from the stream's numbers is not the stream's, unless it begins a
        // restarted sequence: its bytes and mark count then. (Counted at once, stray packets of
        // the stream's SSRC grew `bytesReceived` and refilled the NACK budget.)
        if tracked.outcome != .sequenceJump { noteStreamBytes(datagram.count, tos: tos, now: now) }
        switch tracked.outcome {
        case .sequenceJump, .late:
            // Far from the stream's sequence numbers (counted), or older than the tracker's
            // window (counted by it): kept out of the frames, and aside in case the sender restarted.
            if tracked.outcome == .sequenceJump { reject(.sequenceJump) }
            sequenceJumpCandidate = (header, arrival, tos, tracked.outcome == .sequenceJump ? datagram.count : 0)
            sequenceJumpPayload.removeAll(keepingCapacity: true)
            sequenceJumpPayload.append(contentsOf: payload)
            return
        case .duplicate:
            return  // counted by the tracker; the frame it belonged to is whole
        case .restarted:
            // The packet kept aside began the restarted stream: it goes first.
            if let candidate = sequenceJumpCandidate, candidate.header.sequenceNumber == header.sequenceNumber &- 1 {
                if candidate.uncountedBytes > 0 { noteStreamBytes(candidate.uncountedBytes, tos: candidate.tos, now: now) }
                feedback.record(sequence: candidate.header.sequenceNumber, arrival: candidate.arrival,
                                ecn: TrafficMark.ecnBits(of: candidate.tos), marker: candidate.header.marker)
                let restart = RTPSequenceTracker.Tracked(outcome: .restarted, extendedSequence: tracked.extendedSequence - 1)
                let candidatePayload = sequenceJumpPayload
                candidatePayload.withUnsafeBytes {
                    push(candidate.header, payload: $0, tracked: restart, arrival: candidate.arrival, now: now)
                }
                tracked.outcome = .inOrder
            }
        case .first, .inOrder, .reordered:
            break
        }
        if sequenceJumpCandidate != nil { sequenceJumpCandidate = nil }
        lastAcceptedTimestamp = header.timestamp
        if recovers { recovery.jitter = tracker.jitter }
        feedback.record(sequence: header.sequenceNumber, arrival: arrival, ecn: ecn, marker: header.marker)
        push(header, payload: payload, tracked: tracked, arrival: arrival, now: now)
        if recovers { askForRetransmissions(now: now) }
    }

    /// A datagram of `count` bytes of the stream, marked `tos`: counted, and into the NACK budget.
    @inline(__always)
    private mutating func noteStreamBytes(_ count: Int, tos: UInt8, now: Int64) {
        noteMarks(tos: tos, count: 1)
        counts.bytesReceived += count
        if reportsToGroup { multicastTiming!.noteMedia(bytes: count, now: now) }
        if recovers { recovery.nack.noteMediaBytes(count) }
    }

    /// An arrival time (nanoseconds) in 90 kHz units, at 10 us resolution (no overflow for any
    /// realtime clock value), as the sequence tracker's jitter takes it.
    private static func in90kHz(_ arrival: Int64) -> UInt32 {
        UInt32(truncatingIfNeeded: arrival / 100_000 * 9)
    }

    /// `count` more accepted packets marked `tos`: into the open run of one mark, or the open
    /// run counted (`countMarks`) and a new one begun.
    private mutating func noteMarks(tos: UInt8, count: Int) {
        if tos != markRun.tos {
            if markRun.count > 0 { Self.countMarks(markRun, in: &counts) }
            markRun = (tos, 0)
        }
        markRun.count += count
    }

    /// `run.count` accepted packets marked `run.tos`, into the ECN and DSCP counts.
    private static func countMarks(_ run: (tos: UInt8, count: Int), in stats: inout ReceiverStats) {
        let mark = TrafficMark(tos: run.tos)
        stats.ecn[Int(mark.ecn.rawValue)] += run.count
        stats.dscp[Int(mark.dscp)] += run.count
    }

    /// A packet of the stream into the frames: straight into the depacketizer, or with loss
    /// recovery through the playout buffer (which releases packets in order).
    private mutating func push(_ header: RTPHeader, payload: UnsafeRawBufferPointer, tracked: RTPSequenceTracker.Tracked,
                               arrival: Int64, now: Int64) {
        guard recovers else {
            depacketizer.push(header, payload: payload, tracked: tracked, into: &depacketized)
            emitDepacketized(now: now)
            return
        }
        recovery.frames.noteArrival(timestamp: header.timestamp, arrival: arrival > 0 ? arrival : now)
        var released: [PlayoutBuffer.Packet] = []
        if tracked.outcome == .restarted {
            // A new sequence: what waited for the old one goes out first, and nothing of it is asked for again.
            recovery.restartSequence(into: &released)
            pushReleased(released, now: now)
            released.removeAll()
            emit(depacketizer.push(header, payload: payload, tracked: tracked), now: now)
            // The buffer starts the new sequence at this packet (pushed above).
            recovery.beginSequence(at: tracked.extendedSequence)
            return
        }
        // The next packet with nothing held and nothing missing (the usual case): released at
        // once and alone, straight into the depacketizer, no packet made and no list of
        // released packets walked (results/profile.md section 32).
        if recovery.releaseInOrder(tracked.extendedSequence) {
            depacketizer.push(header, payload: payload, tracked: .init(outcome: .inOrder, extendedSequence: tracked.extendedSequence),
                              into: &depacketized)
            emitDepacketized(now: now)
            return
        }
        // A packet the buffer releases at once (the first, or the next one out while others
        // wait) goes into the depacketizer from the datagram's bytes; only one that may wait is copied.
        let atOnce = recovery.playout.releasesAtOnce(tracked.extendedSequence)
        let packet = PlayoutBuffer.Packet(header: header, payload: atOnce ? [] : Array(payload),
                                          sequence: tracked.extendedSequence)
        // The list of released packets is reused from packet to packet: no allocation per packet.
        swap(&released, &releasedScratch)
        switch recovery.insert(packet, arrival: arrival, now: now, into: &released) {
        case .late, .beforeStart:
            // A gap given up, or before the stream's start; or a retransmission took its place.
            if !recovery.originalFollowedItsRetransmission(tracked.extendedSequence) { recovery.counts.late += 1 }
        case .duplicate:
            // (The tracker lets no duplicate original through: a retransmission took its place.)
            _ = recovery.originalFollowedItsRetransmission(tracked.extendedSequence)
        case .accepted: break
        }
        pushReleased(released, now: now, arriving: atOnce ? (tracked.extendedSequence, payload) : nil)
        // Emptied one by one: `removeAll(keepingCapacity:)` is a generic range replacement,
        // ~150 instructions for the one packet usually here (results/profile.md section 31).
        while released.popLast() != nil {}
        swap(&released, &releasedScratch)
    }

    /// Emits what the depacketizer completed into `depacketized` (usually nothing), leaving it
    /// empty with its capacity.
    private mutating func emitDepacketized(now: Int64) {
        guard !depacketized.isEmpty else { return }
        var units: [DepacketizedAccessUnit] = []
        swap(&units, &depacketized)
        emit(&units, now: now)
        swap(&units, &depacketized)
    }

    /// Packets the playout buffer released, in order, into the depacketizer; the one numbered
    /// `arriving.sequence` (inserted without its bytes) is read from `arriving.payload`.
    private mutating func pushReleased(_ packets: [PlayoutBuffer.Packet], now: Int64,
                                       arriving: (sequence: Int64, payload: UnsafeRawBufferPointer)? = nil) {
        for packet in packets {
            let tracked = RTPSequenceTracker.Tracked(outcome: .inOrder, extendedSequence: packet.sequence)
            let units: [DepacketizedAccessUnit]
            if let arriving, arriving.sequence == packet.sequence {
                units = depacketizer.push(packet.header, payload: arriving.payload, tracked: tracked)
            } else {
                units = packet.payload.withUnsafeBytes { depacketizer.push(packet.header, payload: $0, tracked: tracked) }
            }
            emit(units, now: now)
        }
    }

    // MARK: Loss recovery

    /// An RFC 4588 retransmission: the original sequence number in the payload's first two
    /// bytes, then the original payload; header fields other than SSRC, payload type and
    /// sequence number are the original's.
    private mutating func handleRTX(_ parsed: RTPParsedPacket, datagram: UnsafeRawBufferPointer, tos: UInt8, now: Int64,
                                    arrival: Int64) {
        guard let ssrc = lockedSSRC, let payloadType = lockedPayloadType else { return }
        let body = UnsafeRawBufferPointer(rebasing: datagram[parsed.payloadRange])
        if let rtxSSRC = recovery.rtxSSRC, rtxSSRC != parsed.header.ssrc {
            reject(.foreignSSRC)
            return
        }
        lastStreamActivity = now
        guard body.count > 2 else {
            reject(.badRetransmission)
            return
        }
        let originalSequence = UInt16(body[0]) << 8 | UInt16(body[1])
        let sequence = recovery.extend(originalSequence)
        if recovery.rtxSSRC == nil {
            // The RTX stream is the SSRC whose first retransmission answers an ask (or the one
            // the sender's SDES names): a stray packet of payload type `rtxPayloadType` from
            // any other SSRC is foreign, and does not shut the stream's retransmissions out.
            guard let sequence, recovery.answersAnAsk(sequence) else {
                reject(.foreignSSRC)
                return
            }
            recovery.rtxSSRC = parsed.header.ssrc
        }
        recovery.counts.rtxReceived += 1
        recovery.counts.rtxBytes += datagram.count
        // Reported per packet under the RTX SSRC: the sender learns which retransmissions got through.
        feedback.recordRetransmission(sequence: parsed.header.sequenceNumber, arrival: arrival > 0 ? arrival : now,
                                      ecn: TrafficMark.ecnBits(of: tos))
        let header = RTPHeader(marker: parsed.header.marker, payloadType: payloadType, sequenceNumber: originalSequence,
                               timestamp: parsed.header.timestamp, ssrc: ssrc)
        guard let sequence else { return }
        takeRetransmission(header, payload: UnsafeRawBufferPointer(rebasing: body[2...]), sequence: sequence,
                           arrival: arrival, now: now)
    }

    /// A retransmitted packet (RTX restored, or the original resent): into the playout buffer
    /// if its gap still waits (recovered), else counted late or duplicate.
    private mutating func takeRetransmission(_ header: RTPHeader, payload: UnsafeRawBufferPointer, sequence: Int64,
                                             arrival: Int64, now: Int64) {
        var released: [PlayoutBuffer.Packet] = []
        let packet = PlayoutBuffer.Packet(header: header, payload: Array(payload), sequence: sequence)
        switch recovery.takeRetransmission(packet, arrival: arrival > 0 ? arrival : now, now: now, into: &released) {
        case .accepted:
            recovery.counts.recovered += 1
            recovery.noteRecovered(sequence)
            recovery.frames.noteArrival(timestamp: header.timestamp, arrival: arrival > 0 ? arrival : now)
        case .late: recovery.counts.rtxLate += 1
        case .duplicate, .beforeStart: recovery.counts.rtxDuplicate += 1  // (only a missing packet is taken)
        }
        pushReleased(released, now: now)
    }

    /// Gives up the missing tail if its deadline passed: nothing came after it, so the frame it
    /// ends is over and comes out incomplete (lost packets counted as at the stream's end). The
    /// stream goes on: the tail's packets may still come (behind a long queue, or from a
    /// sender whose count runs ahead); those of the frame put out are late, not a second frame.
    private mutating func releaseTail(now: Int64) {
        guard recovery.releaseTail(now: now) else { return }
        closeAccessUnit(now: now)
    }

    /// RFC 3550 6.4.1: a sender report's packet count is what the sender had sent when it wrote
    /// it. When two reports in a row say the same (the sender sent nothing between them, so
    /// nothing it counted can still be on its way) and that is more than this receiver has seen
    /// through its highest sequence number, the stream's last packets were lost, and nothing
    /// after them would ever show the gap (the frame they end would wait for the end of the
    /// stream). They are missing as a gap is: asked for (once beyond the reorder allowance),
    /// given up at their deadline. A report while packets flow is never taken for a loss: it
    /// may overtake them (measured in the lab: spurious retransmissions). Counts are compared
    /// with the smallest difference seen (a receiver that joined late missed packets no report
    /// names; a report delayed behind packets sent after it reads low, never below zero).
    private mutating func noteSenderPacketCount(_ count: UInt32, arrival: Int64, now: Int64) {
        guard recovers, let highest = tracker.extendedHighestSequence else { return }
        let difference = Int64(count) - tracker.expected
        let offset = min(recovery.senderCountOffset ?? max(0, difference), max(0, difference))
        recovery.senderCountOffset = offset
        let idle = recovery.lastSenderCount == count
        recovery.lastSenderCount = count
        let missing = min(difference - offset, Int64(recovery.playout.maxSpan / 4))
        guard idle, missing > 0 else { return }
        recovery.expectTail(through: Int64(highest) + missing, arrival: arrival, now: now)
        askForRetransmissions(now: now)
    }

    /// Gives up the gaps whose deadline passed.
    private mutating func releaseDue(now: Int64) {
        var released: [PlayoutBuffer.Packet] = []
        recovery.release(now: now, into: &released)
        pushReleased(released, now: now)
    }

    /// Sends a NACK (in a feedback report, at once) for the missing packets due for an ask.
    private mutating func askForRetransmissions(now: Int64) {
        guard lockedSSRC != nil, sourceIsLocked else { return }
        let entries = recovery.due(now: now)
        guard !entries.isEmpty else { return }
        feedback.requestRetransmission(entries)
        sendFeedback(now: now, now: true)
    }

    /// Emits `units` (the depacketizer's answer to one packet, or its flush), oldest first.
    private mutating func emit(_ units: consuming [DepacketizedAccessUnit], now: Int64) {
        var units = units
        emit(&units, now: now)
    }

    /// Emits `units` oldest first and leaves the list empty (its capacity kept). Each is moved
    /// out of the list, not copied: a copy retains its arrays, and the list's clearing
    /// (`removeAll(keepingCapacity:)`) destroys the originals through the generic array code,
    /// once per frame (results/profile.md section 33).
    private mutating func emit(_ units: inout [DepacketizedAccessUnit], now: Int64) {
        guard !units.isEmpty else { return }
        if units.count > 1 { units.reverse() }
        while let unit = units.popLast() { emit(unit, now: now) }
        if recovers { releaseFrames(now: now) }
    }

    /// Counts one access unit, sets its `followsIntactChain` and outputs it (or holds it for
    /// its playout time).
    private mutating func emit(_ finished: consuming DepacketizedAccessUnit, now: Int64) {
        var unit = finished
        if unit.isComplete && unit.isKeyframe { counts.keyframes += 1 }
        if unit.isComplete {
            counts.framesComplete += 1
        } else {
            counts.framesIncomplete += 1
            // With a playout buffer a missing packet was waited for until the frame's deadline.
            if recovers && unit.missingPackets > 0 { recovery.counts.framesLate += 1 }
        }
        countMissingFrames(before: unit.timestamp, afterLoss: !unit.isComplete)
        // The chain of references breaks at an incomplete or missing frame and mends at
        // the next complete keyframe; the first frame received needs one too.
        if mendsChain(unit) {
            chainIntact = true
            keyframeAwaited = false
        } else if !unit.isComplete {
            chainIntact = false
        }
        if !chainIntact {
            // Broken (a frame incomplete or lost whole, or none from a complete keyframe yet: a
            // receiver that joined mid-stream): a keyframe is asked for, at each incomplete frame
            // (at most one per 200 ms), and again every second while the chain stays broken (the
            // request or the keyframe it asked for may have been lost).
            let interval = unit.isComplete && keyframeAwaited ? Self.keyframeRepeatInterval : Self.keyframeRequestInterval
            requestKeyframe(now: now, after: interval)
        }
        unit.followsIntactChain = chainIntact && unit.isComplete
        if !unit.followsIntactChain { counts.framesUndecodable += 1 }
        if recovers {
            recovery.frames.hold(unit, now: now)
        } else {
            outputs.append(.accessUnit(unit))
        }
    }

    /// Asks for a keyframe (a PLI in the next feedback) unless one was asked for within `interval`.
    private mutating func requestKeyframe(now: Int64, after interval: Int64) {
        guard now - lastKeyframeRequest > interval else { return }
        lastKeyframeRequest = now
        keyframeAwaited = true
        feedback.requestKeyframe()
    }

    /// Outputs the frames whose playout time came (all of them with `all`).
    private mutating func releaseFrames(now: Int64, all: Bool = false) {
        recovery.followLatency(now: now)
        let latency = recovery.latency
        // Each frame moved straight into the outputs (a list of the frames released was
        // allocated and freed per frame).
        var out: [Output] = []
        swap(&out, &outputs)
        recovery.frames.release(now: now, latency: latency, all: all) { out.append(.accessUnit($0)) }
        swap(&out, &outputs)
    }

    /// Whether `unit` starts an unbroken chain of references: a complete keyframe, and, for the
    /// first keyframe of the stream, with the parameter sets it needs already in band (in it or
    /// before it). A receiver that starts listening within a keyframe's access unit sees its
    /// slices whole from their first packet, and so a complete frame, while the VPS/SPS/PPS sent
    /// just before (in a datagram of their own) never reached it; a decoder cannot use that frame
    /// (ffmpeg: "PPS id out of range"). Later keyframes mend the chain as they are, so a stream
    /// whose parameter sets travel only out of band (an SDP's sprop-*) loses its first one only.
    private mutating func mendsChain(_ unit: DepacketizedAccessUnit) -> Bool {
        if parameterSetsSeen != 0b111 {
            for nal in unit.nalUnits where !nal.isEmpty {
                switch nal[0] >> 1 & 0x3F {
                case 32: parameterSetsSeen |= 0b001
                case 33: parameterSetsSeen |= 0b010
                case 34: parameterSetsSeen |= 0b100
                default: break
                }
            }
        }
        guard unit.isComplete && unit.isKeyframe else { return false }
        defer { keyframeSeen = true }
        return keyframeSeen || parameterSetsSeen == 0b111
    }

    /// Frames whose every packet was lost leave a gap of whole frame intervals in the
    /// timestamps (the interval is the smallest step seen) before a frame whose packets before
    /// it were lost too (`afterLoss`: not complete). Without packets lost no frame can be
    /// missing: a longer step is the source's (a camera slowing down in the dark, a variable
    /// frame rate), counted nothing and breaking no chain. The first steps after a loss are kept
    /// (`earlySteps`) and counted again when a smaller one shows that the interval was shorter:
    /// a frame lost just after the first one left a step of two intervals before any step of one.
    private mutating func countMissingFrames(before timestamp: UInt32, afterLoss: Bool) {
        defer { lastTimestamp = timestamp }
        guard let last = lastTimestamp else { return }
        let step = timestamp &- last
        guard step > 0, step < 90_000 * 10 else { return }
        if let interval = frameInterval, step >= interval {
            if afterLoss { counts.framesMissing += Self.framesMissing(in: step, interval: interval) }
        } else {
            if let interval = frameInterval {
                for early in earlySteps {
                    counts.framesMissing += Self.framesMissing(in: early, interval: step) - Self.framesMissing(in: early, interval: interval)
                }
            }
            frameInterval = step
        }
        if afterLoss && earlySteps.count < Self.earlyStepsKept { earlySteps.append(step) }
    }

    /// Whole frame intervals missing in a step of `step` between two frames (half an interval's slack).
    private static func framesMissing(in step: UInt32, interval: UInt32) -> Int {
        step >= interval * 2 - interval / 2 ? Int((step + interval / 2) / interval) - 1 : 0
    }

    // MARK: RTCP

    /// RTCP from the sender: its sender reports (LSR/DLSR, the missing tail) and its BYE (the
    /// stream ended: every frame out at once).
    private mutating func handleRTCP(_ datagram: UnsafeRawBufferPointer, from source: SocketAddress?,
                                     arrival: Int64, now: Int64) {
        guard let locked = lockedSource, let source, source.host == locked.host else {
            reject(.rtcpForeignSource)
            if lockedSSRC == nil, let source { holdEarlyRTCP(datagram, from: source, arrival: arrival, now: now, rejected: true) }
            return
        }
        if lockedSSRC == nil {
            // From the pinned host (`--from`) before its stream: nothing to relate it to yet.
            holdEarlyRTCP(datagram, from: source, arrival: arrival, now: now, rejected: false)
            return
        }
        let parsed = RTCPPacket.parseCompound(datagram)
        for error in parsed.errors { reject(.rtcp(error.kind)) }
        if multicastTiming != nil {
            multicastTiming!.noteReceived(bytes: datagram.count, sources: parsed.packets.compactMap {
                if case .senderReport(let report) = $0 { return report.ssrc }
                return nil
            })
        }
        for packet in parsed.packets {
            if case .receiverSummary(let summary) = packet, summary.ssrc == lockedSSRC,
               let group = summary.groupAndAveragePacketSize {
                multicastTiming?.noteSummary(groupSize: group.groupSize, averagePacketSize: group.averagePacketSize)
            }
            if recovers, recovery.rtxSSRC == nil, case .sourceDescription(let description) = packet,
               let ssrc = lockedSSRC, let media = description.chunks.first(where: { $0.ssrc == ssrc }), media.cname != nil,
               let rtx = description.chunks.first(where: { $0.ssrc != ssrc && $0.cname == media.cname }) {
                // RFC 4588 8.3: the sender's retransmission stream, bound to the media by its CNAME. Known
                // before the first retransmission, a late packet on the media SSRC is an original.
                recovery.rtxSSRC = rtx.ssrc
            }
            if case .goodbye(let bye) = packet, let ssrc = lockedSSRC, bye.ssrcs.contains(ssrc) {
                // RFC 3550 6.6: the sender left. What waits for it (gaps, a tail, frames) never comes.
                counts.byeReceived += 1
                streamEnded = true
                releaseEverything(now: now)
                continue
            }
            guard case .senderReport(let report) = packet, report.ssrc == lockedSSRC else { continue }
            if feedback.senderReportUnanswered {
                sendFeedback(now: now, answeringSenderReport: true)
            }
            feedback.noteSenderReport(ntpTimestamp: report.ntpTimestamp, arrival: arrival > 0 ? arrival : now)
            counts.senderReports += 1
            lastStreamActivity = now
            noteSenderPacketCount(report.packetCount, arrival: arrival, now: now)
        }
    }

    /// RTCP datagrams larger than this are not kept before the stream's first packet.
    static let earlyRTCPLimit = 1500
    /// How long RTCP that came before the stream's first packet is kept for it.
    static let earlyRTCPLifetime: Int64 = 2_000_000_000

    /// Keeps RTCP that came before the stream's first packet (the latest only: bounded).
    private mutating func holdEarlyRTCP(_ datagram: UnsafeRawBufferPointer, from source: SocketAddress, arrival: Int64,
                                        now: Int64, rejected: Bool) {
        guard datagram.count <= Self.earlyRTCPLimit else { return }
        if let early = earlyRTCP, !early.rejected && rejected { return }  // the pinned host's is kept
        earlyRTCPBytes.removeAll(keepingCapacity: true)
        earlyRTCPBytes.append(contentsOf: datagram)
        earlyRTCP = (source, arrival, now, rejected)
    }

    /// The stream locked: RTCP kept from before it is handled now if it came from the stream's
    /// host recently enough (then it is no longer counted foreign).
    private mutating func handleEarlyRTCP(now: Int64) {
        guard let early = earlyRTCP else { return }
        earlyRTCP = nil
        guard now - early.at <= Self.earlyRTCPLifetime, let locked = lockedSource, early.source.host == locked.host else { return }
        if early.rejected { Self.takeBack(1, of: .rtcpForeignSource, from: &counts.rejected) }
        let bytes = earlyRTCPBytes
        bytes.withUnsafeBytes { handleRTCP($0, from: early.source, arrival: early.arrival, now: now) }
    }

    /// With rtcp-mux, an RTCP packet on the RTP port: its second byte is an RTCP packet type
    /// (RFC 5761 4: 192-223, where no RTP payload type with the marker bit collides).
    static func isMultiplexedRTCP(_ datagram: UnsafeRawBufferPointer) -> Bool {
        datagram.count >= 8 && datagram[0] >> 6 == 2 && (192...223).contains(datagram[1])
    }

    /// Within 10 s of each other on the 90 kHz clock (wrapping).
    static func isNear(_ a: UInt32, _ b: UInt32) -> Bool {
        let step = Int32(bitPattern: a &- b)
        return step <= maxTimestampStep && step >= -maxTimestampStep
    }

    /// Queues the feedback datagrams if a report is due.
    private mutating func sendFeedback(now: Int64, answeringSenderReport: Bool = false, now immediately: Bool = false) {
        guard config.feedback, let ssrc = lockedSSRC, var destination = lockedSource else { return }
        if !config.rtcpMux { destination.port = destination.port &+ 1 }
        // A sender report about to be replaced by a newer one is answered first, so every one
        // gives the sender its RTT sample: two that a draining queue delivers back to back (no
        // media left between them) would otherwise leave only the later, less delayed one
        // answered, and the sender's RTT would read low. Such early answers go at most once a
        // quarter interval, counted apart from the regular reports: counted with them, a pair
        // that came right behind a frame's last packet (whose report had just gone) lost its
        // first answer (1.8 % of the reports behind a 3 Mbit/s queue with bursts of seven
        // datagrams, each one at the queue's top: results/profile.md section 46).
        let due: Bool
        var answersEarly = false
        if multicastTiming != nil {
            // A group's receiver: at its RFC 3550 interval; a PLI at once (RFC 4585 early feedback).
            due = immediately || feedback.pictureLossPending
                || multicastTiming!.due(now: now, unit: Double.random(in: 0...1))
        } else {
            due = immediately || feedback.isFull || now - lastReport >= Self.maxReportInterval
                || (feedback.hasNews && now >= feedback.reportDue(lastReport: lastReport, interval: reportInterval))
            answersEarly = !due && answeringSenderReport && now - lastEarlyAnswer >= reportInterval / 4
        }
        guard due || answersEarly else { return }
        if answersEarly { lastEarlyAnswer = now }
        lastReport = now
        let pliBefore = feedback.pictureLossIndications
        for datagram in feedback.makeReports(now: now, mediaSSRC: ssrc, rtxSSRC: recovers ? recovery.rtxSSRC : nil, tracker: &tracker) {
            multicastTiming?.noteSent(bytes: datagram.count)
            outputs.append(.transmit(Transmit(bytes: datagram, destination: destination)))
        }
        multicastTiming?.reported(now: now, unit: Double.random(in: 0...1))
        counts.keyframeRequests += feedback.pictureLossIndications - pliBefore
    }
}
