import MediaFormats

/// The receiver's playout (jitter) buffer: packets of the stream in sequence order, held
/// behind a gap until the missing packet comes (late original or retransmission) or the
/// gap's deadline passes. Pure: times are passed in (nanoseconds, the clock of kernel
/// receive timestamps).
///
/// Packets in sequence go straight out (their frame then waits for its playout time in
/// `FramePlayout`, not here). A gap gets a
/// deadline when it is seen: the arrival of the packet after it plus the playout latency (a
/// frame comes out at most the latency after the packet that showed its loss). When the
/// deadline passes, the gap is given up and the packets
/// behind it go out (the depacketizer then sees the gap and the frame comes out incomplete,
/// never corrupt). A packet whose gap was given up is late.
///
/// At the stream's start the first packets are held a moment (`startHold`, at most half the
/// latency): a packet reordered ahead of the first one to arrive (the keyframe's parameter
/// sets, say) still starts the stream. Released at once, the first packet fixed the start,
/// the earlier one was dropped as a duplicate, and the first keyframe, whole but without its
/// parameter sets, left every frame up to the next keyframe undecodable (60 of 600 frames in a
/// quick run of tools/cc-eval case h). A packet from before the start that comes later still is
/// `beforeStart`.
///
/// Memory is bounded: at most `maxSpan` sequence numbers between the next one to release
/// and the highest; a packet further ahead gives up the oldest gaps at once.
struct PlayoutBuffer: Sendable {
    /// A packet of the stream, owned.
    struct Packet: Sendable {
        var header: RTPHeader
        var payload: [UInt8]
        /// Extended sequence number (the receive tracker's numbering).
        var sequence: Int64
    }

    /// What `insert` made of a packet.
    enum Insertion: Sendable, Equatable {
        /// Taken: released now or held behind a gap.
        case accepted
        /// Its sequence number was given up (its deadline passed).
        case late
        /// Already released or held.
        case duplicate
        /// Numbered before the packet the stream started at, once its start hold ended: never
        /// held, never released.
        case beforeStart
    }

    /// The longest the first packets are held for packets reordered ahead of them (nanoseconds).
    static let startHold: Int64 = 20_000_000
    /// While the stream's first packets are held: until when.
    private var startHoldUntil: Int64?
    /// The sequence number the stream started at.
    private var startSequence: Int64 = 0

    /// Most sequence numbers held between the next one out and the highest.
    let maxSpan: Int
    /// Next sequence number to release; nil before the first packet.
    private(set) var nextSequence: Int64?
    private(set) var highestSequence: Int64 = 0
    private var held: [Int64: Packet] = [:]
    /// Missing sequence numbers (between `nextSequence` and the highest) and their deadlines.
    private(set) var deadlines: [Int64: Int64] = [:]
    /// The latest sequence numbers given up (to tell a late packet from a duplicate).
    private var givenUp: [Int64] = []
    private var givenUpNext = 0
    static let givenUpMemory = 1024
    /// Sequence numbers given up at their deadline (or for room).
    private(set) var gaveUp = 0

    init(maxSpan: Int = 4096) {
        self.maxSpan = maxSpan
    }

    /// Packets held behind a gap.
    var heldCount: Int { held.count }

    /// When the earliest gap's deadline passes, if there is a gap.
    var nextDeadline: Int64? {
        if let startHoldUntil { return startHoldUntil }
        guard let next = nextSequence, !held.isEmpty else { return nil }
        return deadlines[next]
    }

    /// Takes a packet that arrived at `arrival`; `latency` sets the deadline of the gaps it
    /// reveals. Released packets are appended to `output` in sequence order.
    mutating func insert(_ packet: Packet, arrival: Int64, latency: Int64, into output: inout [Packet]) -> Insertion {
        let sequence = packet.sequence
        guard let next = nextSequence else {
            (nextSequence, startSequence, highestSequence) = (sequence, sequence, sequence)
            held[sequence] = packet
            startHoldUntil = arrival + min(Self.startHold, latency / 2)
            return .accepted
        }
        if startHoldUntil != nil && sequence < next && highestSequence - sequence < Int64(maxSpan) {
            // Reordered ahead of the first packets, still held: the stream starts here; what lies
            // between waits as a gap does.
            guard held[sequence] == nil else { return .duplicate }
            for missing in (sequence + 1)..<next where held[missing] == nil { deadlines[missing] = arrival + latency }
            (nextSequence, startSequence) = (sequence, sequence)
            held[sequence] = packet
            return .accepted
        }
        if sequence < next {
            if sequence < startSequence { return .beforeStart }
            return wasGivenUp(sequence) ? .late : .duplicate
        }
        // The dictionaries are empty while nothing is missing (the usual case): not hashed then.
        if (!held.isEmpty && held[sequence] != nil) || (sequence <= highestSequence && !isMissing(sequence)) {
            return .duplicate
        }
        if sequence > highestSequence {
            // The missing packets wait at most the latency from now: a frame whose packets all
            // came is out by then, however long it took to arrive (a paced keyframe may take
            // longer than the latency itself).
            for missing in (highestSequence + 1)..<sequence where missing >= sequence - Int64(maxSpan) {
                deadlines[missing] = arrival + latency
            }
            highestSequence = sequence
        }
        if !deadlines.isEmpty { deadlines[sequence] = nil }
        if startHoldUntil != nil {
            held[sequence] = packet  // the start is held: nothing goes out yet
        } else if sequence == next {
            output.append(packet)
            nextSequence = next + 1
        } else {
            held[sequence] = packet
        }
        // No more than maxSpan sequence numbers wait.
        if highestSequence - (nextSequence ?? 0) >= Int64(maxSpan) {
            startHoldUntil = nil
            releaseUpTo(highestSequence - Int64(maxSpan) + 1, into: &output)
        }
        if startHoldUntil == nil { releaseContiguous(into: &output) }
        return .accepted
    }

    /// Takes the packet numbered `sequence` if it is the next one out with nothing held and
    /// nothing missing (the usual case): it would be released at once, alone, and `insert`
    /// would change nothing but the two counters this moves on. Returns false, changing
    /// nothing, otherwise (then `insert` takes it). The caller keeps the packet's bytes: no
    /// `Packet` is made, none goes through a list of released packets.
    mutating func releaseInOrder(_ sequence: Int64) -> Bool {
        guard isCaughtUp(at: sequence - 1) else { return false }
        nextSequence = sequence + 1
        highestSequence = sequence
        return true
    }

    /// Whether the buffer is at `highest` with nothing held or missing: the packet after it is
    /// released at once and alone (`releaseInOrder`).
    func isCaughtUp(at highest: Int64) -> Bool {
        startHoldUntil == nil && held.isEmpty && deadlines.isEmpty && nextSequence == highest + 1 && highestSequence == highest
    }

    /// Gives up the gaps whose deadline is at or before `now`, releasing what waited behind them.
    mutating func release(now: Int64, into output: inout [Packet]) {
        if let until = startHoldUntil {
            guard until <= now else { return }
            startHoldUntil = nil
            releaseContiguous(into: &output)
        }
        while let next = nextSequence, !held.isEmpty, let deadline = deadlines[next], deadline <= now {
            giveUp(next)
            releaseContiguous(into: &output)
        }
    }

    /// The stream ends or restarts: every gap is given up and everything held goes out; the
    /// next packet starts a new sequence.
    mutating func flush(into output: inout [Packet]) {
        startHoldUntil = nil
        releaseUpTo(highestSequence + 1, into: &output)
        nextSequence = nil
        deadlines.removeAll()
    }

    /// The sender says it sent packets past the highest one here (its report's packet count):
    /// those through `last` (at most `maxSpan` past the highest) are missing from now on, with
    /// `deadline`, as a gap is. Nothing arrived behind them, so `release` never gives them up:
    /// `giveUpTail` does.
    mutating func expectTail(through last: Int64, deadline: Int64) {
        guard nextSequence != nil, last > highestSequence else { return }
        for sequence in (highestSequence + 1)...min(last, highestSequence + Int64(maxSpan)) where deadlines[sequence] == nil {
            deadlines[sequence] = deadline
        }
    }

    /// Gives up the missing tail through `last`. The next packet out stays the one after the
    /// highest that came: a sender whose count runs ahead of its sequence numbers (one that
    /// counts what it resends) loses nothing that comes later.
    mutating func giveUpTail(through last: Int64) {
        guard nextSequence != nil, last > highestSequence else { return }
        for sequence in (highestSequence + 1)...last where deadlines.removeValue(forKey: sequence) != nil { gaveUp += 1 }
    }

    /// Whether a packet numbered `sequence` would never be held by `insert`: it is released
    /// at once (the first packet, or the next one out) or dropped as a duplicate. Its bytes
    /// then need not be kept.
    func releasesAtOnce(_ sequence: Int64) -> Bool { startHoldUntil == nil && nextSequence == sequence }

    /// Starts the sequence at `sequence`, a packet the caller passed on itself (a sender's
    /// restart): no start hold, the next one out is the one after it.
    mutating func begin(at sequence: Int64) {
        (nextSequence, startSequence, highestSequence) = (sequence + 1, sequence, sequence)
        startHoldUntil = nil
    }

    /// Whether `sequence` is missing (seen as a gap and not yet given up).
    func isMissing(_ sequence: Int64) -> Bool { !deadlines.isEmpty && deadlines[sequence] != nil }

    private mutating func releaseUpTo(_ target: Int64, into output: inout [Packet]) {
        while let next = nextSequence, next < target, !held.isEmpty {
            if let packet = held.removeValue(forKey: next) {
                output.append(packet)
                nextSequence = next + 1
            } else {
                giveUp(next)
            }
        }
        if let next = nextSequence, next < target {
            // Nothing held: the rest of the range is gaps at most.
            for sequence in next..<target where deadlines[sequence] != nil { giveUp(sequence) }
            nextSequence = target
        }
    }

    private mutating func releaseContiguous(into output: inout [Packet]) {
        while !held.isEmpty, let next = nextSequence, let packet = held.removeValue(forKey: next) {
            output.append(packet)
            nextSequence = next + 1
        }
        // Nothing waits: the gaps left are at the head and wait only for their own packets.
    }

    private mutating func giveUp(_ sequence: Int64) {
        deadlines[sequence] = nil
        gaveUp += 1
        if givenUp.count < Self.givenUpMemory {
            givenUp.append(sequence)
        } else {
            givenUp[givenUpNext] = sequence
            givenUpNext = (givenUpNext + 1) % Self.givenUpMemory
        }
        if nextSequence == sequence { nextSequence = sequence + 1 }
    }

    func wasGivenUp(_ sequence: Int64) -> Bool { givenUp.contains(sequence) }
}
