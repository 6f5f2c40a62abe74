import UringIO

/// Takes datagrams from several flows for one paced sender: round robin in byte quanta
/// (each flow's in proportion to its pace), so one flow's burst delays another's by at
/// most one quantum, and a flow with nothing to send gives its turn away at once.
///
/// With several flows, each paced flow also has a token bucket of its own at its pace: the
/// shared pacer runs at the sum of the paces, and without its own cap a flow would take
/// the whole sum while the others are idle, bursting past what its path was paced for.
///
/// A flow's datagrams stay together for up to a quantum, so they still make long GSO runs;
/// flows change between send slots, never inside one (a slot has one route).
/// Each datagram's tag carries its flow's index (`flowIndex(ofTag:)`), so send completions
/// find their flow.
///
/// With many flows, most are idle or held by their caps at any moment, and a fill looks at
/// every flow several times (each turn, the wait, the bytes pending). So the scheduler
/// remembers: a flow that had nothing is skipped until the engine says it may have something
/// again (`wake(flow:)` when input, feedback or a send completion reached it, `wakeAll()` with
/// the flows' periodic work), and a flow held by its cap is skipped until the cap's time.
final class FlowScheduler: DatagramProducer {
    private static let indexShift: UInt64 = 48
    private static let indexMask: UInt64 = 0xff << indexShift
    /// The most flows one scheduler takes.
    static let maxFlows = 255

    private let producers: [DatagramProducer]
    /// The first flow's producer, and whether it is the only one. Called through this `let`,
    /// it is borrowed from the scheduler; an element of `producers` is copied out of the array,
    /// and an optional bound with `if let` is copied too (each retained and released around
    /// every call, per datagram).
    private let first: any DatagramProducer
    private let single: Bool
    private let quanta: [Int]
    /// Each flow's own rate cap (nil: unpaced, or the only flow, which the shared pacer caps).
    private var caps: [Pacer?]
    /// Whether any flow has a cap (not with a single flow): the per-datagram path skips them otherwise.
    private var hasCaps: Bool
    /// Flows that had nothing to send when last asked (skipped until woken). Read per datagram:
    /// `@exclusivity(unchecked)` as in `PacedSender` (no access to it overlaps another).
    @exclusivity(unchecked) private var idle: [Bool]
    /// When each flow's cap lets its next datagram go (0: not known to be held).
    private var capReadyAt: [Int64]
    private var current = 0
    private var credit: Int
    private var peeked = 0
    /// The clock reading of the last peek that consulted a cap.
    private var peekedAt: Int64 = 0
    /// The first flow written in this pump (-1: none yet), and whether another one followed.
    private var firstFlowThisPump = -1
    private var pumpMixesFlows = false
    /// Pumps that wrote datagrams of more than one flow (each pump is one submission).
    private(set) var mixedSubmissions = 0
    /// Monotonic nanoseconds, read by the caps (a synthetic clock in tests).
    private let clock: () -> Int64

    /// Schedules `producers` (at most `maxFlows`) paced at `paces` (bits per second; nil for
    /// unpaced): the fastest gets `quantum` bytes per turn, the others in proportion, none
    /// less than a datagram. With several flows, each paced one is capped at its own pace
    /// with bursts of at most `burstQuanta` bytes (nil: 2 ms of its pace, at least 1500).
    /// The caps read `clock`, which is `now` at the start.
    init(_ producers: [DatagramProducer], paces: [Double?], burstQuanta: [Int?], quantum: Int,
         clock: @escaping () -> Int64 = monotonicNanoseconds) {
        precondition(!producers.isEmpty && producers.count <= Self.maxFlows)
        self.clock = clock
        let now = clock()
        precondition(paces.count == producers.count && burstQuanta.count == producers.count)
        self.producers = producers
        first = producers[0]
        single = producers.count == 1
        let weights = paces.map { $0 ?? 1 }
        let heaviest = max(weights.max() ?? 1, 1e-9)
        quanta = weights.map { max(Int(Double(quantum) * max($0, 0) / heaviest), 1500) }
        credit = quanta[0]
        let caps: [Pacer?] = zip(paces, burstQuanta).map { pace, burst in
            guard producers.count > 1, let pace, pace > 0 else { return nil }
            return Pacer(rateBitsPerSecond: pace,
                         burstQuantum: burst ?? Pacer.defaultQuantum(rateBitsPerSecond: pace, minimum: 1500), now: now)
        }
        self.caps = caps
        hasCaps = caps.contains { $0 != nil }
        idle = Array(repeating: false, count: producers.count)
        capReadyAt = Array(repeating: 0, count: producers.count)
    }

    /// Flow `index` may have something to send again (input, feedback, a completion reached it).
    func wake(flow index: Int) { idle[index] = false }

    /// Every flow may have something to send again (time-driven work ran: timers, probes, drops).
    func wakeAll() {
        for index in idle.indices { idle[index] = false }
    }

    /// Changes one flow's own cap to `pace` (bits per second; nil: none) from now on, as a
    /// congestion controller's pacing rate moves. A single flow has none: the shared pacer is its cap.
    func setPace(_ pace: Double?, burstQuantum: Int?, flow index: Int) {
        guard producers.count > 1 else { return }
        if let pace, pace > 0 {
            let burst = burstQuantum ?? Pacer.defaultQuantum(rateBitsPerSecond: pace, minimum: 1500)
            if caps[index] == nil {
                caps[index] = Pacer(rateBitsPerSecond: pace, burstQuantum: burst, now: clock())
            } else {
                caps[index]!.setRate(pace, burstQuantum: burst, now: clock())
            }
        } else {
            caps[index] = nil
        }
        capReadyAt[index] = 0
        hasCaps = caps.contains { $0 != nil }
    }

    /// The flow a tag from `peekDatagram` belongs to.
    static func flowIndex(ofTag tag: UInt64) -> Int { Int((tag & indexMask) >> indexShift) }

    /// The tag as the flow made it.
    static func flowTag(_ tag: UInt64) -> UInt64 { tag & ~indexMask }

    func peekDatagram() -> PendingDatagram? {
        if single {
            // One flow: no turns, no caps (the shared pacer is its cap), index 0 in the tag.
            guard !idle[0], var datagram = first.peekDatagram() else {
                idle[0] = true
                return nil
            }
            datagram.tag = Self.flowTag(datagram.tag)
            return datagram
        }
        var now: Int64?
        for _ in 0...producers.count {
            if credit > 0, !idle[current], !heldByCap(current, &now) {
                if var datagram = producers[current].peekDatagram() {
                    if capAllows(current, datagram.size, &now) {
                        peeked = current
                        datagram.tag = Self.flowTag(datagram.tag) | UInt64(current) << Self.indexShift
                        return datagram
                    }
                } else {
                    idle[current] = true
                }
            }
            current = (current + 1) % producers.count
            credit = quanta[current]
        }
        return nil
    }

    /// The clock reading of this peek (read once, and only when a cap is consulted).
    private func peekTime(_ now: inout Int64?) -> Int64 {
        let time = now ?? clock()
        now = time
        peekedAt = time
        return time
    }

    /// Whether flow `index` is known to be held by its cap now.
    private func heldByCap(_ index: Int, _ now: inout Int64?) -> Bool {
        guard hasCaps, capReadyAt[index] > 0 else { return false }
        return capReadyAt[index] > peekTime(&now)
    }

    /// Whether flow `index`'s own cap lets `bytes` go now; if not, remembers when it will.
    private func capAllows(_ index: Int, _ bytes: Int, _ now: inout Int64?) -> Bool {
        guard hasCaps, caps[index] != nil else { return true }
        let time = peekTime(&now)
        let wait = caps[index]!.delay(for: bytes, now: time)
        capReadyAt[index] = wait > 0 ? time + wait : 0
        return wait == 0
    }

    /// Nanoseconds until the next access unit some flow holds for its due time may start
    /// (nil: none waits); set by the engine, read when nothing can go now.
    var nextDueIn: ((Int64) -> Int64?)?

    /// Nanoseconds until a flow held back only by its own cap may send, or until an access
    /// unit waiting for its time is due, whichever comes first (nil when neither waits).
    func readyIn(now: Int64) -> Int64? {
        let due = nextDueIn?(now)
        guard let capped = capsReadyIn(now: now) else { return due }
        return min(capped, due ?? capped)
    }

    /// Nanoseconds until a flow held back only by its own cap may send (nil when none is).
    private func capsReadyIn(now: Int64) -> Int64? {
        guard hasCaps else { return nil }
        var soonest: Int64?
        for index in producers.indices where caps[index] != nil && !idle[index] {
            var wait = capReadyAt[index] - now
            if wait <= 0 {
                guard let datagram = producers[index].peekDatagram() else { continue }
                wait = caps[index]!.delay(for: datagram.size, now: now)
            }
            soonest = min(soonest ?? wait, wait)
        }
        return soonest
    }

    func writeDatagram(into buffer: UnsafeMutableRawBufferPointer) {
        if single { return first.writeDatagram(into: buffer) }
        producers[peeked].writeDatagram(into: buffer)
        if hasCaps { caps[peeked]?.consume(buffer.count, now: peekedAt) }
        credit -= buffer.count
        if firstFlowThisPump < 0 { firstFlowThisPump = peeked } else if peeked != firstFlowThisPump { pumpMixesFlows = true }
    }

    /// What the flows not known to be idle have waiting (an idle flow's bytes, if any, are
    /// held by its window or path and cannot go now).
    var pendingBytes: Int {
        var total = 0
        for index in producers.indices where !idle[index] {
            let (sum, overflow) = total.addingReportingOverflow(producers[index].pendingBytes)
            if overflow { return .max }
            total = sum
        }
        return total
    }

    /// Call after each pump: counts a submission that mixed flows.
    func endPump() {
        if pumpMixesFlows { mixedSubmissions += 1 }
        firstFlowThisPump = -1
        pumpMixesFlows = false
    }
}

@available(*, unavailable, message: "owned by the sender's engine thread")
extension FlowScheduler: Sendable {}
