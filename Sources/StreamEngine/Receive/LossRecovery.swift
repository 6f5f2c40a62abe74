import MediaFormats

/// The receive session's loss recovery: the playout buffer, the NACK generator, the RTT
/// measured from asks to retransmissions, and their counters. Pure, like the session.
struct LossRecovery: Sendable {
    /// Counters kept here (the NACK generator's and the buffer's are read from them).
    struct Counts: Sendable {
        var recovered = 0
        var rtxReceived = 0
        var rtxBytes = 0
        var rtxLate = 0
        var rtxDuplicate = 0
        /// Originals that arrived after their gap was given up.
        var late = 0
        var framesLate = 0
    }

    var playout = PlayoutBuffer()
    /// Frames waiting for their playout time (first packet's arrival + latency).
    var frames = FramePlayout()
    var nack = NACKGenerator()
    var counts = Counts()
    /// The SSRC of the RFC 4588 retransmission stream: of the first retransmission that
    /// answered an ask, or the one the sender's SDES names.
    var rtxSSRC: UInt32?
    /// The configured playout latency (nanoseconds); nil: derived.
    let configuredLatency: Int64?
    /// Smoothed RTT from ask to retransmission (nanoseconds), nil before the first sample,
    /// and its mean deviation (RFC 6298).
    private(set) var measuredRTT: Int64?
    private var rttVariation: Int64 = 0
    /// The stream's interarrival jitter, RTP units (90 kHz), as the tracker has it.
    var jitter: UInt32 = 0
    /// The last sequence number the sender's reports say it sent, past the highest that came
    /// (the missing tail), and when it is given up; nil: no tail missing.
    private(set) var tailThrough: Int64?
    private(set) var tailDeadline: Int64?
    /// The end of the last tail given up (lost, unless later packets come past it).
    private var givenUpTailThrough: Int64?
    /// The smallest difference seen between a sender report's packet count and the packets
    /// expected here (nonzero for a receiver that missed the stream's first packets).
    var senderCountOffset: Int64?
    /// The packet count of the last sender report.
    var lastSenderCount: UInt32?

    /// The RTT assumed until one is measured.
    static let initialRTT: Int64 = 50_000_000
    /// The smallest derived playout latency.
    static let minimumLatency: Int64 = 50_000_000

    init(latency: Int64?) {
        configuredLatency = latency
    }

    /// The RTT to plan with.
    var rtt: Int64 { measuredRTT ?? Self.initialRTT }

    /// The RTT asks again are timed with: the smoothed RTT and twice its deviation (an answer
    /// delayed by the sender's pacer or window is not asked for again at once). Whether an
    /// answer can still arrive in time is judged with the smoothed RTT alone.
    var nackRTT: Int64 { rtt + 2 * rttVariation }

    /// The playout latency to hold: configured, or max(50 ms, 3 x RTT + jitter): a loss gets two
    /// chances (ask, answer lost, ask again about an RTT later, answer). Measured in the lab at
    /// 50 ms RTT and 10 % loss, 2 x RTT left one chance and 7 % of the frames broken.
    /// Where asks fail so often that two chances leave more than `residualLoss` of the losses
    /// unrepaired (``repairRounds``), the latency holds the asks that need: the reorder
    /// allowance before the first, a re-ask delay between asks, an RTT for the last answer.
    // Read at every wake-up (the next frame's release) and every release: inlined, as
    // `isSameSSRCRetransmission` below, since out of line (where the repair rounds' term made it
    // too large for the optimizer) each read copied the whole `LossRecovery` from the session to
    // the stack first, ~180 instructions of `memcpy` per frame (results/profile.md section 58).
    @inline(__always)
    var targetLatency: Int64 {
        if let configuredLatency { return configuredLatency }
        let jitterNanoseconds = Int64(jitter) * 100_000 / 9
        var target = max(Self.minimumLatency, 3 * rtt + jitterNanoseconds)
        if let rounds = repairRounds {
            target = max(target, nack.reorderTime + Int64(rounds - 1) * nack.reaskDelay(rtt: nackRTT) + rtt + jitterNanoseconds)
        }
        return target
    }

    /// The share of losses the derived latency may leave unrepaired, when it must hold more
    /// asks than two to keep to it (at 1 %, a 6-packet frame at 20 % loss is broken about one
    /// time in a hundred; at 2 or 10 % loss two asks already do).
    static let residualLoss = 0.01
    /// The most asks per loss the derived latency holds room for.
    static let maxRepairRounds = 6
    /// The asks of the last `repairMemory` or so (decayed weights), and the packets they brought
    /// back: one minus their ratio is how often an ask fails (its ask or its answer lost, or the
    /// answer later than the next ask: all cost a round).
    private var askWeight = 0.0
    private var repairWeight = 0.0
    static let repairMemory = 128.0
    /// How many asks a loss needs for at most `residualLoss` of the losses to go unrepaired, when
    /// that is more than two and enough asks (32) and repairs (8) were seen to tell; nil
    /// otherwise. Worked out when an ask is made or answered, not each time the latency is read.
    private(set) var repairRounds: Int?

    /// `count` packets were asked for (asks again included).
    mutating func noteAsks(_ count: Int) {
        guard count > 0 else { return }
        let keep = 1 - 1 / Self.repairMemory
        for _ in 0..<count {
            askWeight = askWeight * keep + 1
            repairWeight *= keep
        }
        updateRepairRounds()
    }

    private mutating func updateRepairRounds() {
        guard askWeight >= 32, repairWeight >= 8 else {
            repairRounds = nil
            return
        }
        let failure = max(0, 1 - repairWeight / askWeight)
        // The fewest asks k with failure^k <= residualLoss (no libm on this path).
        var rounds = 1, unrepaired = failure
        while unrepaired > Self.residualLoss && rounds < Self.maxRepairRounds {
            rounds += 1
            unrepaired *= failure
        }
        repairRounds = rounds > 2 ? rounds : nil
    }

    /// The derived latency in use, following `targetLatency` (``PlayoutLatency``).
    private var derivedLatency = PlayoutLatency()

    /// The playout latency in use (as of the last `followLatency(now:)`): configured, or the
    /// derived latency on its way to its target.
    @inline(__always)
    var latency: Int64 { configuredLatency ?? derivedLatency.current ?? targetLatency }

    /// Moves the derived latency in use toward its target by what the time since its last
    /// move allows. Called before the latency is read, and before its target changes.
    mutating func followLatency(now: Int64) {
        if configuredLatency == nil { derivedLatency.follow(targetLatency, now: now) }
    }

    /// When the oldest frame waiting for its playout time is due (the latency in use moving
    /// toward its target meanwhile); nil when none waits.
    @inline(__always)
    var nextFrameRelease: Int64? {
        frames.nextFirstArrival.map { derivedLatency.releaseTime(firstArrival: $0, target: targetLatency) }
    }

    /// The extended sequence number of `sequence` near the highest one in the buffer; nil before the first packet.
    func extend(_ sequence: UInt16) -> Int64? {
        guard playout.nextSequence != nil else { return nil }
        let highest = playout.highestSequence
        return highest + Int64(Int16(bitPattern: sequence &- UInt16(truncatingIfNeeded: highest)))
    }

    /// Whether a packet of the media SSRC with `sequence` is a retransmission of the original
    /// (resent unchanged): it is missing and was asked for, or it was recovered already (a
    /// second answer), or it was asked for and given up (an answer after its deadline, which
    /// measures the RTT all the same: without it, on a path whose round trip is over the
    /// latency, every answer came late as an original and the latency never grew), and the
    /// sender has not shown that it retransmits on an RTX stream of its own (then such a packet
    /// is an original, late).
    // Asked for every packet: inlined, since called out of line on the session's stored value
    // the whole 456-byte `LossRecovery` was copied to the stack first, and the set of recovered
    // sequence numbers is not hashed into while it is empty (results/profile.md section 32);
    // nor the asks of given-up gaps for a packet ahead of the buffer (every new one).
    @inline(__always)
    func isSameSSRCRetransmission(_ sequence: Int64) -> Bool {
        rtxSSRC == nil && ((playout.isMissing(sequence) && wasAskedFor(sequence))
                           || wasRecovered(sequence)
                           || (sequence < (playout.nextSequence ?? .min) && nack.remembersAsk(sequence)
                               && playout.wasGivenUp(sequence)))
    }

    /// Whether `sequence` was asked for: its ask is open, or was abandoned as hopeless or its
    /// gap given up (the first ask remembered).
    func wasAskedFor(_ sequence: Int64) -> Bool {
        nack.asks[sequence]?.lastAsked != nil || nack.remembersAsk(sequence)
    }

    /// Whether a retransmission of `sequence` from an SSRC not known yet can be the first of
    /// the stream's RTX stream: the packet was asked for, or recovered already (its original
    /// came late as an answer on the media SSRC, or another answer came first).
    func answersAnAsk(_ sequence: Int64) -> Bool {
        wasAskedFor(sequence) || wasRecovered(sequence)
    }

    /// Whether a retransmission recovered `sequence` lately (the set is not hashed into while empty).
    @inline(__always)
    func wasRecovered(_ sequence: Int64) -> Bool { !recoveredSequences.isEmpty && recoveredSequences.contains(sequence) }

    /// Sequence numbers recovered lately (the last `recoveredMemory` to twice that), in order in `recoveredOrder`.
    private var recoveredSequences = Set<Int64>()
    private var recoveredOrder: [Int64] = []
    static let recoveredMemory = 4096

    /// Notes a packet recovered by a retransmission.
    mutating func noteRecovered(_ sequence: Int64) {
        repairWeight += 1
        updateRepairRounds()
        recoveredSequences.insert(sequence)
        recoveredOrder.append(sequence)
        if recoveredOrder.count > 2 * Self.recoveredMemory {
            for old in recoveredOrder.prefix(Self.recoveredMemory) { recoveredSequences.remove(old) }
            recoveredOrder.removeFirst(Self.recoveredMemory)
        }
    }

    /// The original of a packet a retransmission recovered came after all (the path reordered
    /// it past its ask): it was not lost, so not recovered, and its ask was spurious. Returns
    /// whether `sequence` had been recovered.
    mutating func originalFollowedItsRetransmission(_ sequence: Int64) -> Bool {
        guard !recoveredSequences.isEmpty, recoveredSequences.remove(sequence) != nil else { return false }
        counts.recovered -= 1
        nack.noteSpuriousAsk()
        return true
    }

    /// An original packet into the playout buffer; the gaps it reveals go on the NACK list.
    mutating func insert(_ packet: PlayoutBuffer.Packet, arrival: Int64, now: Int64,
                         into output: inout [PlayoutBuffer.Packet]) -> PlayoutBuffer.Insertion {
        let highestBefore = playout.nextSequence == nil ? nil : playout.highestSequence
        followLatency(now: now)
        let result = playout.insert(packet, arrival: arrival > 0 ? arrival : now, latency: latency, into: &output)
        if let before = highestBefore, packet.sequence > before + 1, let deadline = playout.deadlines[packet.sequence - 1] {
            nack.noteMissing((before + 1)..<packet.sequence, now: now, deadline: deadline)
        }
        if let before = highestBefore, packet.sequence < before {
            // No more asks for it (the generator removes them), and reordered if it was missing.
            nack.originalArrived(packet.sequence, now: now, highest: before)
            settleBehind()
        } else {
            settle(packet.sequence)
        }
        return result
    }

    /// The sender restarted its sequence at `sequence`, a packet the caller passed on itself.
    mutating func beginSequence(at sequence: Int64) {
        playout.begin(at: sequence)
        settle(sequence)
    }

    /// A packet numbered `sequence` went into the playout buffer: it is asked for no more, and
    /// neither is anything before the buffer's next one; a missing tail it reaches is settled.
    private mutating func settle(_ sequence: Int64) {
        nack.remove(sequence)
        settleBehind()
    }

    /// Nothing before the playout buffer's next packet is asked for any more; a missing tail it
    /// reaches is settled.
    private mutating func settleBehind() {
        forgetGivenUp()
        settleTail()
    }

    /// Takes the packet numbered `sequence` without a copy when the playout buffer releases it
    /// at once and alone (`PlayoutBuffer.releaseInOrder`): then it is settled as `insert`
    /// settles it, and the caller passes its bytes on. False, changing nothing, otherwise.
    mutating func releaseInOrder(_ sequence: Int64) -> Bool {
        guard playout.releaseInOrder(sequence) else { return false }
        settle(sequence)
        return true
    }

    /// Whether every packet following `highest` in sequence (the receive tracker's highest
    /// extended sequence number) would be released at once and alone (`releaseInOrder`) with
    /// nothing to ask for: the buffer's highest is `highest`, nothing is held or missing and no
    /// ask is pending. Then a run of such packets changes nothing here but the two numbers
    /// `releaseInOrder` moves on, and `due` has nothing to give.
    func isCaughtUp(at highest: Int64) -> Bool { playout.isCaughtUp(at: highest) && nack.asks.isEmpty }

    /// The sender's report says it sent packets through `last`, past the highest that came:
    /// missing like a gap (deadline: the report's arrival + the latency), asked for.
    mutating func expectTail(through last: Int64, arrival: Int64, now: Int64) {
        guard playout.nextSequence != nil, last > highestExpected else { return }
        followLatency(now: now)
        let deadline = (arrival > 0 ? arrival : now) + latency
        let first = highestExpected + 1
        playout.expectTail(through: last, deadline: deadline)
        nack.noteMissing(first..<(last + 1), now: now, deadline: deadline)
        tailThrough = last
        if tailDeadline == nil { tailDeadline = deadline }
    }

    /// The missing tail's deadline passed: it is given up. Returns false when no tail was due.
    mutating func releaseTail(now: Int64) -> Bool {
        guard let deadline = tailDeadline, deadline <= now, let last = tailThrough else { return false }
        playout.giveUpTail(through: last)
        nack.forget(through: last)
        (tailThrough, tailDeadline) = (nil, nil)
        givenUpTailThrough = max(givenUpTailThrough ?? last, last)
        return true
    }

    /// The highest sequence number known sent: the highest in the buffer, or the end of a
    /// missing tail (waited for or given up).
    var highestExpected: Int64 { max(playout.highestSequence, tailThrough ?? .min, givenUpTailThrough ?? .min) }

    /// Packets arrived (originals or retransmissions) through the tail's end: it is a tail no more.
    private mutating func settleTail() {
        if let last = tailThrough, playout.highestSequence >= last { (tailThrough, tailDeadline) = (nil, nil) }
    }

    /// The stream ends or restarts: no tail is waited for.
    mutating func forgetTail() { (tailThrough, tailDeadline) = (nil, nil) }

    /// The sender restarted its sequence numbers: what waited goes out into `released`, and
    /// nothing numbered in the old sequence is asked for, waited for or taken for a recovered
    /// packet again (the new sequence's numbers may be the old ones: a packet of the new stream
    /// numbered as one recovered before is an original, not a second answer).
    mutating func restartSequence(into released: inout [PlayoutBuffer.Packet]) {
        playout.flush(into: &released)
        nack.forget(through: Int64.max)
        nack.dropForgottenAsks()
        forgetTail()
        givenUpTailThrough = nil
        recoveredSequences.removeAll()
        recoveredOrder.removeAll()
    }

    /// A retransmission into the playout buffer if its gap still waits. It measures the RTT
    /// (``noteRoundTrip(ask:arrival:)``), also when its gap was given up before it came.
    mutating func takeRetransmission(_ packet: PlayoutBuffer.Packet, arrival: Int64, now: Int64,
                                     into output: inout [PlayoutBuffer.Packet]) -> PlayoutBuffer.Insertion {
        let ask = nack.remove(packet.sequence) ?? nack.takeForgottenAsk(packet.sequence)
        followLatency(now: now)  // up to now toward the target before this sample moves it
        if let ask { noteRoundTrip(ask: ask, arrival: arrival) }
        guard playout.isMissing(packet.sequence) else {
            if let next = playout.nextSequence, packet.sequence < next, playout.wasGivenUp(packet.sequence) { return .late }
            return .duplicate
        }
        let result = playout.insert(packet, arrival: arrival, latency: latency, into: &output)
        forgetGivenUp()
        settleTail()
        return result
    }

    /// An answer to `ask` arrived at `arrival`: an RTT sample. Asked once, the answer is to that
    /// ask. Asked more often, it answers one of the asks (the first whose ask and answer got
    /// through): the round trip is at least `arrival` − the last ask and at most `arrival` − the
    /// first. The longest (the first ask's, as this took before) counts the re-ask delays the
    /// estimate itself sets, so a path that loses asks or answers often inflated its own RTT:
    /// with a third of them lost the estimate grew without bound (8 ms answers read 160 ms,
    /// `RepairAsksTests`). The shortest is taken only when it is above the estimate, which is
    /// then too short for certain: on a path whose round trip is over the re-ask delay (the
    /// 50 ms assumed at the start, a queue that grows) every loss is asked for twice or answered
    /// after its gap was given up, and this is how its RTT is learned (tools/cc-eval case e);
    /// as the estimate and its re-ask delay grow, single asks measure it exactly.
    mutating func noteRoundTrip(ask: NACKGenerator.Ask, arrival: Int64) {
        guard let first = ask.firstAsked else { return }
        let sample: Int64
        if ask.asks <= 1 {
            sample = arrival - first
        } else {
            let shortest = arrival - (ask.lastAsked ?? first)
            guard shortest > (measuredRTT ?? 0) else { return }
            sample = shortest
        }
        guard sample > 0 else { return }
        if let smoothed = measuredRTT {
            rttVariation = (rttVariation * 3 + abs(smoothed - sample)) / 4
            measuredRTT = (smoothed * 7 + sample) / 8
        } else {
            rttVariation = sample / 2
            measuredRTT = sample
        }
    }

    /// Gives up the gaps whose deadline passed.
    mutating func release(now: Int64, into output: inout [PlayoutBuffer.Packet]) {
        playout.release(now: now, into: &output)
        forgetGivenUp()
    }

    /// The NACK entries due now.
    mutating func due(now: Int64) -> [RTCPGenericNACK.Entry] {
        let before = nack.requested
        let entries = nack.due(now: now, highest: playout.highestSequence, rtt: rtt, reaskRTT: nackRTT)
        noteAsks(nack.requested - before)
        return entries
    }

    /// Nothing before the buffer's next sequence number is asked for any more.
    private mutating func forgetGivenUp() {
        // Run after every packet: nothing asked for (the usual case) is known without a walk.
        guard !nack.asks.isEmpty, let next = playout.nextSequence, let oldest = nack.asks.keys.min(), oldest < next else { return }
        nack.forget(through: next - 1)
    }

    /// The counters into the session's stats.
    func addStats(to stats: inout ReceiverStats) {
        stats.sentBeforeFirst = senderCountOffset
        stats.late += counts.late
        stats.recovered = counts.recovered
        stats.framesLate = counts.framesLate
        stats.rtxReceived = counts.rtxReceived
        stats.rtxBytes = counts.rtxBytes
        stats.rtxLate = counts.rtxLate
        stats.rtxDuplicate = counts.rtxDuplicate
        stats.nackSent = nack.packets
        stats.nackRequested = nack.requested
        stats.nackBytes = nack.bytes
        stats.nackAbandoned = nack.abandoned
        stats.nackBudgetLimited = nack.budgetLimited
        stats.nackSpurious = nack.spuriousAsks
        stats.playoutLatencyMs = Double(latency) / 1e6
        stats.playoutLatencyTargetMs = Double(targetLatency) / 1e6
        stats.playoutLatencyDerived = configuredLatency == nil
        stats.playoutRepairAsks = configuredLatency == nil ? repairRounds : nil
        stats.playoutAddedLatencyMs = frames.addedLatency.count == 0 ? nil : ReceiverStats.PercentilesMs(
            p50: frames.addedLatency.median ?? 0, p95: frames.addedLatency.percentile95 ?? 0,
            max: Double(frames.maxAddedLatency) / 1e6, frames: frames.addedLatency.count)
        stats.retransmissionRTTMs = measuredRTT.map { Double($0) / 1e6 }
    }
}
