import MediaFormats

/// Which lost packets to ask the sender for again (RFC 4585 generic NACK), and when. Pure:
/// times are passed in (nanoseconds).
///
/// A missing packet is asked for once it is beyond the reorder allowance (`reorderPackets`
/// higher sequence numbers arrived, or `reorderTime` passed since the gap was seen): a packet
/// merely reordered asks nothing. The allowance follows the path: a missing packet that then
/// arrives on its own (not a retransmission) was reordered, and the allowance grows to a
/// quarter more than the longest such wait and the most higher numbers that came first (at
/// most `maxReorderTime`), halving after `reorderMemory` without reordering. Still missing
/// about one RTT after an ask (`reaskDelay`), it is asked again, at most `maxAsks` times. It is never asked for once the answer cannot
/// arrive before its deadline (now + RTT past it): then it is dropped from the list, counted
/// `abandoned`. NACK bytes are bounded by a token bucket filled by a share (`share`) of the
/// media bytes received, at most `burst` bytes ahead: what the bucket cannot pay waits
/// (counted `budgetLimited`).
struct NACKGenerator: Sendable {
    struct Ask: Sendable {
        /// When the gap was seen.
        var detected: Int64
        /// The playout deadline of the packet.
        var deadline: Int64
        /// When it was last asked for, nil before the first ask.
        var lastAsked: Int64?
        /// When it was first asked for.
        var firstAsked: Int64?
        var asks = 0
    }

    /// Higher sequence numbers that must arrive before a gap is asked for, on a path not seen to
    /// reorder more.
    static let leastReorderPackets: Int64 = 3
    /// Or this long since the gap was seen (nanoseconds), likewise.
    static let leastReorderTime: Int64 = 5_000_000
    /// The longest reorder allowance (nanoseconds): a path that reorders more loses time to
    /// spurious asks rather than to asks too late.
    static let maxReorderTime: Int64 = 100_000_000
    /// How long the reordering seen is remembered at full size (nanoseconds).
    static let reorderMemory: Int64 = 10_000_000_000
    /// The longest a missing packet took to arrive on its own, and the most higher numbers that
    /// arrived before one did (decaying by `reorderMemory`).
    private(set) var reorderDelayPeak: Int64 = 0
    private(set) var reorderDistancePeak: Int64 = 0
    private var reorderSeenAt: Int64 = 0
    /// Packets asked for that then arrived on their own: the asks reordering cost.
    private(set) var spuriousAsks = 0

    /// Higher sequence numbers that must arrive before a gap is asked for.
    var reorderPackets: Int64 { max(Self.leastReorderPackets, reorderDistancePeak + reorderDistancePeak / 4 + 1) }
    /// Or this long since the gap was seen (nanoseconds).
    var reorderTime: Int64 {
        min(max(Self.leastReorderTime, reorderDelayPeak + reorderDelayPeak / 4), Self.maxReorderTime)
    }
    /// Most asks per packet.
    var maxAsks = 8
    /// Share of the media bytes NACKs may use.
    var share = 0.02
    /// Bytes of NACK the bucket holds at most.
    var burst = 1500.0
    /// A generic NACK's bytes: its header and SSRCs, and each entry (FCI) after them.
    static let headerBytes = 12, entryBytes = 4

    private(set) var asks: [Int64: Ask] = [:]
    /// When each gap was asked for, kept after the gap was given up or its asks abandoned
    /// (the last `forgottenAskMemory` to twice that): an answer that comes after all still
    /// measures the round trip (`LossRecovery.takeRetransmission`).
    private var forgottenAsks: [Int64: Ask] = [:]
    private var forgottenOrder: [Int64] = []
    static let forgottenAskMemory = 512
    /// NACK bytes the budget can pay now.
    private(set) var tokens = 1500.0
    /// Sequence numbers asked for (each ask of each one).
    private(set) var requested = 0
    /// Sequence numbers dropped from the list because no answer could arrive in time.
    private(set) var abandoned = 0
    /// Times a due ask waited for the byte budget.
    private(set) var budgetLimited = 0
    /// NACK bytes (RTCP feedback packets, header and FCI) built.
    private(set) var bytes = 0
    /// NACK packets built.
    private(set) var packets = 0

    /// Most FCI entries in one NACK (800 bytes).
    static let maxEntriesPerPacket = 200
    /// Most missing sequence numbers remembered (older ones are forgotten).
    static let maxAsksKept = 4096

    /// Sequence numbers seen missing at `now`, with their playout deadline.
    mutating func noteMissing(_ sequences: Range<Int64>, now: Int64, deadline: Int64) {
        for sequence in sequences.suffix(Self.maxAsksKept) where asks[sequence] == nil {
            asks[sequence] = Ask(detected: now, deadline: deadline)
        }
        if asks.count > Self.maxAsksKept, let cut = asks.keys.sorted().dropLast(Self.maxAsksKept).last {
            forget(through: cut)
        }
    }

    /// A packet arrived (or was given up): no more asks for it. Returns what was asked.
    @discardableResult
    mutating func remove(_ sequence: Int64) -> Ask? { asks.isEmpty ? nil : asks.removeValue(forKey: sequence) }

    /// The original of a packet asked for arrived after its retransmission: the ask was spurious.
    mutating func noteSpuriousAsk() { spuriousAsks += 1 }

    /// The original of packet `sequence` arrived at `now` with `highest` the highest number
    /// received before it: no more asks for it, and if it was missing, the path reordered it.
    mutating func originalArrived(_ sequence: Int64, now: Int64, highest: Int64) {
        guard let ask = remove(sequence) else { return }
        if ask.lastAsked != nil { spuriousAsks += 1 }
        if now - reorderSeenAt > Self.reorderMemory {
            reorderDelayPeak /= 2
            reorderDistancePeak /= 2
        }
        reorderSeenAt = now
        reorderDelayPeak = max(reorderDelayPeak, now - ask.detected)
        reorderDistancePeak = max(reorderDistancePeak, highest - sequence)
    }

    /// Forgets every sequence number up to `sequence`.
    mutating func forget(through sequence: Int64) {
        for (forgotten, ask) in asks where forgotten <= sequence { keepAsk(forgotten, ask) }
        asks = asks.filter { $0.key > sequence }
    }

    /// Keeps when `sequence` was asked for (nothing when it never was).
    private mutating func keepAsk(_ sequence: Int64, _ ask: Ask) {
        guard ask.firstAsked != nil else { return }
        forgottenAsks[sequence] = ask
        forgottenOrder.append(sequence)
        if forgottenOrder.count > 2 * Self.forgottenAskMemory {
            for old in forgottenOrder.prefix(Self.forgottenAskMemory) { forgottenAsks.removeValue(forKey: old) }
            forgottenOrder.removeFirst(Self.forgottenAskMemory)
        }
    }

    /// When `sequence` was asked for before it was given up (taken: one answer measures; the
    /// ask is still remembered, `remembersAsk`, with its times cleared).
    mutating func takeForgottenAsk(_ sequence: Int64) -> Ask? {
        guard !forgottenAsks.isEmpty, let ask = forgottenAsks[sequence], ask.firstAsked != nil else { return nil }
        forgottenAsks[sequence]?.firstAsked = nil
        return ask
    }

    /// Whether `sequence` was asked for before it was given up (one of the last
    /// `forgottenAskMemory` to twice that), whether or not an answer measured it since.
    func remembersAsk(_ sequence: Int64) -> Bool { !forgottenAsks.isEmpty && forgottenAsks[sequence] != nil }

    /// The sequence numbers restarted: no ask of the old numbers is remembered.
    mutating func dropForgottenAsks() {
        forgottenAsks.removeAll()
        forgottenOrder.removeAll()
    }

    /// Media bytes arrived: the NACK budget grows by its share of them.
    mutating func noteMediaBytes(_ count: Int) {
        tokens = min(burst, tokens + share * Double(count))
    }

    /// When an ask comes due next, if ever: not while the byte budget cannot pay for one NACK
    /// entry. The budget grows only with media arriving, which wakes the session anyway; an
    /// ask due in the past that cannot be paid for woke a receive loop at once, again and
    /// again, until the next packet came (found by `ReceiveSessionChaosTests`).
    // A loop: the lazy map's closure held a copy of the generator in an object allocated at
    // every call, and the session asks at every wake-up, mostly with nothing asked for
    // (results/profile.md section 32).
    func nextDue(rtt: Int64) -> Int64? {
        guard !asks.isEmpty, tokens >= Double(Self.headerBytes + Self.entryBytes) else { return nil }
        var next = Int64.max
        for ask in asks.values { next = min(next, dueTime(ask, rtt: rtt)) }
        return next
    }

    private func dueTime(_ ask: Ask, rtt: Int64) -> Int64 {
        if let last = ask.lastAsked { return last + reaskDelay(rtt: rtt) }
        return ask.detected + reorderTime
    }

    /// Re-ask delay: one RTT and a quarter (the answer is paced and may queue behind media).
    func reaskDelay(rtt: Int64) -> Int64 { rtt + rtt / 4 + 1_000_000 }

    /// The sequence numbers to ask for now (the highest received is `highest`, the RTT
    /// estimate `rtt`), packed as NACK entries within the byte budget, for the media
    /// stream of 16-bit sequence numbers. Marks them asked.
    /// `reaskRTT` (default `rtt`) times the asks again: an RTT with a margin for its deviation,
    /// while `rtt` alone says whether an answer can still arrive in time.
    mutating func due(now: Int64, highest: Int64, rtt: Int64, reaskRTT: Int64? = nil) -> [RTCPGenericNACK.Entry] {
        guard !asks.isEmpty else { return [] }  // the usual case, and the session asks at every packet
        var ready: [Int64] = []
        var hopeless: [Int64] = []
        let packetAllowance = reorderPackets, time = reorderTime
        for (sequence, ask) in asks {
            let beyondReorder = highest - sequence >= packetAllowance
            let due = ask.lastAsked == nil ? (beyondReorder || now >= ask.detected + time)
                                           : now >= dueTime(ask, rtt: reaskRTT ?? rtt)
            guard due else { continue }
            if now + rtt > ask.deadline || ask.asks >= maxAsks {
                hopeless.append(sequence)
            } else {
                ready.append(sequence)
            }
        }
        for sequence in hopeless {
            if let ask = asks.removeValue(forKey: sequence) { keepAsk(sequence, ask) }
            abandoned += 1
        }
        guard !ready.isEmpty else { return [] }
        ready.sort()
        var entries = RTCPGenericNACK(senderSSRC: 0, mediaSSRC: 0,
                                      sequenceNumbers: ready.map { UInt16(truncatingIfNeeded: $0) }).entries
        let affordable = max(0, Int((tokens - Double(Self.headerBytes)) / Double(Self.entryBytes)))
        if affordable < entries.count {
            budgetLimited += 1
            entries.removeLast(entries.count - affordable)
        }
        // One NACK stays well inside a datagram; the rest goes in the next.
        if entries.count > Self.maxEntriesPerPacket { entries.removeLast(entries.count - Self.maxEntriesPerPacket) }
        guard !entries.isEmpty else { return [] }
        let asked = Set(entries.flatMap(\.sequenceNumbers))
        for sequence in ready where asked.contains(UInt16(truncatingIfNeeded: sequence)) {
            asks[sequence]?.lastAsked = now
            if asks[sequence]?.firstAsked == nil { asks[sequence]?.firstAsked = now }
            asks[sequence]?.asks += 1
            requested += 1
        }
        let cost = Self.headerBytes + Self.entryBytes * entries.count
        tokens -= Double(cost)
        bytes += cost
        packets += 1
        return entries
    }
}
