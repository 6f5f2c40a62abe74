import MediaFormats
import UringIO

/// One RTP stream: access units in, RFC 7798 packets out, written straight into send slots.
///
/// The packetizer's budget follows the flow's path MTU (IP, UDP and RTP headers taken off),
/// read again for every access unit.
final class MediaFlow: DatagramProducer {
    let route: Int
    let ssrc: UInt32
    let payloadType: UInt8
    private let timestampOffset: UInt32
    // `@exclusivity(unchecked)` on the state read or written per datagram (`peekDatagram`,
    // `writeDatagram`, `pendingBytes`) and per frame: the flow is the engine thread's alone, and
    // the runtime's dynamic checks (`swift_beginAccess`, a thread-local access set) cost more
    // than the work they guard. The static checks still apply.
    @exclusivity(unchecked) private(set) var nextSequence: UInt16
    /// An access unit waiting, with its times and its byte count (counted once, on enqueue).
    private struct Waiting {
        var accessUnit: AccessUnit
        /// When it was enqueued (`now` then), or its due time when it has one (`maxFrameWait`
        /// counts from there).
        var enqueuedAt: Int64
        /// When it may start (`Int64.min`: at once).
        var dueAt: Int64
        /// `accessUnit.byteCount`.
        var byteCount: Int
    }
    @exclusivity(unchecked) private var queue: [Waiting] = []
    @exclusivity(unchecked) private var queueHead = 0
    /// The first access unit in `queue` not seen due yet (due times rise along the queue, so
    /// those before it are all due).
    @exclusivity(unchecked) private var firstNotDue = 0
    /// Bytes of the access units in `queue` from `queueHead` up to `firstNotDue`.
    @exclusivity(unchecked) private var dueBytes = 0
    @exclusivity(unchecked) private var current: AccessUnit?
    /// The payloads of `current`, in sending order (set with `setPlan`, which keeps `planBytes`).
    @exclusivity(unchecked) private var plan: [HEVCPayload] = []
    /// Wire bytes of `plan`, and of its packets written so far (`pendingBytes` without a walk over the plan).
    @exclusivity(unchecked) private var planBytes = 0
    @exclusivity(unchecked) private var planBytesWritten = 0
    @exclusivity(unchecked) private var planIndex = 0
    /// Plans shared with the engine's other flows (nil: this flow plans alone).
    @exclusivity(unchecked) var sharedPlans: AccessUnitPlans?
    @exclusivity(unchecked) private var packetizer: HEVCPacketizer
    /// The largest UDP payload allowed on this flow's path.
    @exclusivity(unchecked) private(set) var maxDatagramSize: Int
    /// Bytes media packets leave free under `maxDatagramSize` (2 for RFC 4588 retransmissions,
    /// whose original sequence number makes them longer). Takes effect from the next access unit.
    var payloadReserve = 0 {
        didSet { try? setMaxDatagramSize(maxDatagramSize) }
    }
    /// Every packet sent and what became of it (kept only when feedback is expected).
    @exclusivity(unchecked) var log: SentPacketLog
    /// Record packets in `log`: off when no feedback will ever confirm them.
    @exclusivity(unchecked) var tracksPackets: Bool
    @exclusivity(unchecked) private var extendedSequence: Int64
    /// Bound on sent-but-unconfirmed bytes (nil: no bound, e.g. no feedback expected).
    @exclusivity(unchecked) var maxUnconfirmedBytes: Int?
    /// After a frame was dropped for the bound, frames are dropped until a keyframe.
    @exclusivity(unchecked) private(set) var awaitingKeyframe = false
    /// The congestion controller the flow obeys (nil: none).
    @exclusivity(unchecked) var congestion: (any CongestionController)?
    /// The flow obeys `congestion` now: its window holds packets back, and frames that waited
    /// `maxFrameWait` are dropped. Off while the receiver gives no per-packet feedback.
    @exclusivity(unchecked) var congestionActive = false
    /// With `congestionActive`: how long a frame may wait in the queue (nanoseconds).
    var maxFrameWait: Int64 = 500_000_000
    /// Frames dropped for waiting too long (and those after them until a keyframe).
    private(set) var framesDroppedCongestion = 0
    /// The keyframe awaited is after frames dropped for congestion (its drops count there).
    private var awaitingKeyframeForCongestion = false
    /// Set when the flow needs a keyframe from the source (taken by the sender).
    var keyframeWanted = false
    /// The receiver stopped reporting: only probe keyframes go out (`probeFrames` of them).
    @exclusivity(unchecked) var receiverGone = false
    /// Keyframes that may go out while the receiver is gone.
    var probeFrames = 0
    /// The clock for send times in the log.
    @exclusivity(unchecked) var now: Int64 = 0
    /// The kernel has a route for the flow (the route monitor says). While it has none, no
    /// media goes out: what waits and what arrives is dropped and counted
    /// (`framesDroppedUnviable`), never queued; when a route is back the flow starts again
    /// at a keyframe.
    var pathViable = true {
        didSet {
            if pathViable && !oldValue { resumedAt = now }
        }
    }
    /// Frames dropped because the path was not viable (and after it, until a keyframe).
    private(set) var framesDroppedUnviable = 0
    @exclusivity(unchecked) private var awaitingKeyframeAfterOutage = false
    /// When the path was viable again (monotonic), until the first keyframe after it is written.
    @exclusivity(unchecked) private var resumedAt: Int64?
    /// Nanoseconds from the path's return to the first packet of the keyframe that resumed the
    /// flow (the last such outage's).
    private(set) var lastResumeDelay: Int64?

    // Counters (engine thread only).
    private(set) var framesQueued = 0
    @exclusivity(unchecked) private(set) var framesWritten = 0
    @exclusivity(unchecked) private(set) var keyframesWritten = 0
    @exclusivity(unchecked) private(set) var packetsWritten = 0
    @exclusivity(unchecked) private(set) var largestDatagram = 0
    @exclusivity(unchecked) private(set) var clamped = 0
    /// Frames cut short because the path MTU dropped under packets planned for the old one.
    private(set) var framesClamped = 0
    private(set) var framesDroppedUnconfirmed = 0
    private(set) var peakUnconfirmedBytes = 0
    /// When the last media datagram was written (`now` then; nil before the first).
    @exclusivity(unchecked) private(set) var lastMediaWrite: Int64?
    /// RTP timestamp of the last access unit started (for sender reports).
    @exclusivity(unchecked) private(set) var lastRTPTimestamp: UInt32 = 0

    /// Makes a flow for send route `route` (`ssrc`: nil, a random one). With `tracksPackets` off
    /// (no feedback will confirm anything) its log keeps no room for packets (1.5 MB less per flow).
    init(route: Int, maxDatagramSize: Int, payloadType: UInt8 = RTPHeader.defaultHEVCPayloadType,
         ssrc: UInt32? = nil, tracksPackets: Bool = true) throws(HEVCPacketizerError) {
        self.route = route
        self.tracksPackets = tracksPackets
        log = tracksPackets ? SentPacketLog() : SentPacketLog(capacity: 1)
        self.payloadType = payloadType
        self.maxDatagramSize = maxDatagramSize
        var generator = SystemRandomNumberGenerator()
        self.ssrc = ssrc ?? generator.next()
        nextSequence = generator.next()
        extendedSequence = Int64(nextSequence)
        timestampOffset = generator.next()
        packetizer = try HEVCPacketizer(maxPayloadSize: maxDatagramSize - RTPHeader.fixedSize)
    }

    /// Access units waiting (not yet started).
    var queuedAccessUnits: Int { queue.count - queueHead }

    /// True when nothing is waiting or half-written.
    var isEmpty: Bool { queuedAccessUnits == 0 && planIndex >= plan.count }

    /// Queues an access unit that arrived at `time` (default: `now`). With a `due` time
    /// (monotonic nanoseconds) it does not start before `now` reaches it, and its wait
    /// (`maxFrameWait`) counts from then.
    func enqueue(_ accessUnit: AccessUnit, at time: Int64? = nil, due: Int64? = nil) {
        let waiting = Waiting(accessUnit: accessUnit, enqueuedAt: due ?? time ?? now, dueAt: due ?? .min,
                              byteCount: accessUnit.byteCount)
        queue.append(waiting)
        framesQueued += 1
    }

    /// What is left of the frame being sent plus the access units waiting (an estimate:
    /// headers of packets not planned yet are not counted, and the bound may drop some).
    /// Access units not due yet are not counted; those that came due since the last call are
    /// added to a running count (no walk over the queue).
    var pendingBytes: Int {
        while firstNotDue < queue.count && queue[firstNotDue].dueAt <= now {
            dueBytes += queue[firstNotDue].byteCount
            firstNotDue += 1
        }
        return dueBytes + planBytes - planBytesWritten
    }

    /// How long the oldest access unit not yet started has waited (nanoseconds at `now`, from
    /// its due time when it had one; 0 when none waits): the backlog behind the one being
    /// sent, which at a pace just over the stream's takes most of a frame interval by design.
    func queueDelay(now: Int64) -> Int64 {
        guard queueHead < queue.count, queue[queueHead].dueAt <= now else { return 0 }
        return max(0, now - queue[queueHead].enqueuedAt)
    }

    /// Nanoseconds from `now` until the next access unit waiting is due (nil: none waits for
    /// its time). The engine's wait ends then.
    /// Held against the flow's own `now` (what `peekDatagram` went by), so a unit that came
    /// due since then gives 0, not nil.
    func dueIn(now: Int64) -> Int64? {
        guard queueHead < queue.count, queue[queueHead].dueAt > self.now else { return nil }
        return max(queue[queueHead].dueAt - now, 0)
    }

    /// Whether the next access unit waiting had a due time and `now` reached it.
    var dueWaiting: Bool {
        guard queueHead < queue.count else { return false }
        let dueAt = queue[queueHead].dueAt
        return dueAt != .min && dueAt <= now
    }

    /// The size of a full packet at `maxDatagramSize`: every fragment of a large NAL unit but
    /// its last (`payloadReserve` left free).
    var fullDatagramSize: Int { maxDatagramSize - payloadReserve }

    /// Changes the datagram budget from the next access unit on.
    func setMaxDatagramSize(_ size: Int) throws(HEVCPacketizerError) {
        packetizer = try HEVCPacketizer(maxPayloadSize: size - RTPHeader.fixedSize - payloadReserve)
        maxDatagramSize = size
    }

    /// Makes `planned` the plan under way, from its first packet.
    private func setPlan(_ planned: AccessUnitPlans.Plan) {
        plan = planned.payloads
        planBytes = planned.wireBytes
        planBytesWritten = 0
        planIndex = 0
    }

    /// Drops the plan under way (nothing of it is sent any more).
    private func clearPlan() {
        setPlan(AccessUnitPlans.Plan(payloads: [], wireBytes: 0))
    }

    /// Whether `accessUnit` may start now (a viable path; after an outage, a keyframe; the
    /// unconfirmed bound, against `wireBytes`: its datagrams as planned, RTP headers and FU
    /// headers included, the bytes the log will count); drops (and counts) it if not.
    private func admit(_ accessUnit: AccessUnit, wireBytes: Int) -> Bool {
        guard pathViable else {
            framesDroppedUnviable += 1
            awaitingKeyframeAfterOutage = true
            return false
        }
        if awaitingKeyframeAfterOutage {
            guard accessUnit.isKeyframe else {
                framesDroppedUnviable += 1
                return false
            }
            awaitingKeyframeAfterOutage = false
        }
        guard let bound = maxUnconfirmedBytes else { return true }
        if receiverGone {
            // Nothing confirms anything: just a keyframe now and then, to find the receiver again.
            guard accessUnit.isKeyframe && probeFrames > 0 else {
                framesDroppedUnconfirmed += 1
                awaitingKeyframe = true
                return false
            }
            probeFrames -= 1
        }
        if awaitingKeyframe && !accessUnit.isKeyframe {
            if awaitingKeyframeForCongestion { framesDroppedCongestion += 1 } else { framesDroppedUnconfirmed += 1 }
            return false
        }
        if log.unconfirmedBytes > 0 && log.unconfirmedBytes + wireBytes > bound {
            // Not queued: dropped, and the decoder can only start again at a keyframe.
            framesDroppedUnconfirmed += 1
            if !awaitingKeyframe { keyframeWanted = true }
            awaitingKeyframe = true
            awaitingKeyframeForCongestion = false
            return false
        }
        awaitingKeyframe = false
        return true
    }

    /// With the congestion controller obeyed: frames that have waited `maxFrameWait` for the path
    /// (it carries less than the source gives) are dropped whole, never one partly sent, and
    /// the flow goes on at a keyframe, requested, as after the bound.
    func dropFramesWaitingTooLong() {
        guard congestionActive else { return }
        while queueHead < queue.count && now - queue[queueHead].enqueuedAt > maxFrameWait {
            _ = dequeue()
            framesDroppedCongestion += 1
            if !awaitingKeyframe { keyframeWanted = true }
            awaitingKeyframe = true
            awaitingKeyframeForCongestion = true
        }
    }

    /// Takes the oldest access unit waiting.
    private func dequeue() -> AccessUnit {
        let next = queue[queueHead]
        if firstNotDue > queueHead { dueBytes -= next.byteCount } else { firstNotDue = queueHead + 1 }
        queueHead += 1
        if queueHead > 64 && queueHead * 2 > queue.count {
            queue.removeFirst(queueHead)
            firstNotDue -= queueHead
            queueHead = 0
        }
        return next.accessUnit
    }

    func peekDatagram() -> PendingDatagram? {
        if !pathViable {
            dropWhileUnviable()
            return nil
        }
        while true {
            guard let pending = peekPlanned() else { return nil }
            if pending.size <= maxDatagramSize { return congestionWindowAllows(pending.size) ? pending : nil }
            clampCurrentFrame()
        }
    }

    /// Bytes of RFC 4588 retransmissions on the wire, neither confirmed by per-packet feedback
    /// on the RTX SSRC nor written off (kept by the flow's `Retransmitter`): they count with the
    /// controller's bytes in flight against its window, so retransmissions spend the media's
    /// budget, and the controller is told (`CongestionController.otherBytesInFlight`).
    var retransmissionBytesInFlight = 0 {
        didSet { congestion?.otherBytesInFlight = retransmissionBytesInFlight }
    }

    /// Whether the controller's window has room for `bytes` more in flight (always when the flow
    /// does not obey one, and when nothing is in flight, so a window under a packet cannot stall it).
    func congestionWindowAllows(_ bytes: Int) -> Bool {
        guard congestionActive, let congestion else { return true }
        let inFlight = congestion.bytesInFlight + retransmissionBytesInFlight
        return inFlight == 0 || inFlight + bytes <= congestion.window
    }

    /// No route: the rest of a frame under way and every frame waiting are dropped (counted).
    private func dropWhileUnviable() {
        if current != nil {
            framesDroppedUnviable += 1
            clearPlan()
            current = nil
        }
        awaitingKeyframeAfterOutage = true
        while peekPlanned() != nil {}  // admit drops each one while not viable
    }

    /// The path MTU dropped under the next planned packet. A frame not started yet is planned
    /// again for the new size; the rest of a frame already partly sent cannot be, so it is
    /// dropped: each packet that would not fit is counted in `clamped`, the frame in
    /// `framesClamped`, and a keyframe is wanted (the receiver lost a reference).
    private func clampCurrentFrame() {
        if planIndex == 0, let accessUnit = current {
            setPlan(AccessUnitPlans.Plan(of: accessUnit, packetizer: packetizer))
            return
        }
        clamped += plan[planIndex...].filter { RTPHeader.fixedSize + $0.size > maxDatagramSize }.count
        framesClamped += 1
        clearPlan()
        current = nil
        keyframeWanted = true
    }

    private func peekPlanned() -> PendingDatagram? {
        while planIndex >= plan.count {
            guard queueHead < queue.count, queue[queueHead].dueAt <= now else { return nil }
            let next = dequeue()
            let planned = sharedPlans?.plan(next, packetizer: packetizer) ?? AccessUnitPlans.Plan(of: next, packetizer: packetizer)
            guard admit(next, wireBytes: planned.wireBytes) else { continue }
            current = next
            lastRTPTimestamp = next.timestamp &+ timestampOffset
            setPlan(planned)
        }
        return PendingDatagram(route: route, size: RTPHeader.fixedSize + plan[planIndex].size,
                               tag: UInt64(packetsWritten))
    }

    func writeDatagram(into buffer: UnsafeMutableRawBufferPointer) {
        // Moved out of `current` for the write and back after it (not copied): a copy would be
        // retained and released around the packetizer's call, for every datagram.
        guard let accessUnit = current.take() else { return }
        let payload = plan[planIndex]
        let header = RTPHeader(marker: payload.marker, payloadType: payloadType, sequenceNumber: nextSequence,
                               timestamp: accessUnit.timestamp &+ timestampOffset, ssrc: ssrc)
        header.write(to: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<RTPHeader.fixedSize]))
        let written = packetizer.write(payload, of: accessUnit,
                                       into: UnsafeMutableRawBufferPointer(rebasing: buffer[RTPHeader.fixedSize...]))
        let size = RTPHeader.fixedSize + written
        planBytesWritten += RTPHeader.fixedSize + payload.size
        if size > maxDatagramSize { clamped += 1 }
        largestDatagram = max(largestDatagram, size)
        if tracksPackets {
            log.recordSent(sequence: extendedSequence, bytes: size, at: now)
            peakUnconfirmedBytes = max(peakUnconfirmedBytes, log.unconfirmedBytes)
            congestion?.packetSent(SentPacketRecord(sequence: extendedSequence, bytes: size, sentAt: .nanoseconds(now)))
        }
        lastMediaWrite = now
        if let resumedAt, planIndex == 0, accessUnit.isKeyframe {
            lastResumeDelay = now - resumedAt
            self.resumedAt = nil
        }
        extendedSequence += 1
        nextSequence &+= 1
        packetsWritten += 1
        planIndex += 1
        if planIndex == plan.count {
            framesWritten += 1
            if accessUnit.isKeyframe { keyframesWritten += 1 }
        } else {
            current = accessUnit
        }
    }
}
