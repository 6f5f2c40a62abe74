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
final class FlowScheduler: DatagramProducer {
    private static let indexShift: UInt64 = 48
    private static let indexMask: UInt64 = 0xff << indexShift
    /// The most flows one scheduler takes.
    static let maxFlows = 255

    private let producers: [DatagramProducer]
    private let quanta: [Int]
    /// Each flow's own rate cap (nil: unpaced, or the only flow, which the shared pacer caps).
    private var caps: [Pacer?]
    /// Whether any flow has a cap (not with a single flow): the per-datagram path skips them otherwise.
    private var hasCaps: Bool
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
        hasCaps = caps.contains { $0 != nil }
    }

    /// The flow a tag from `peekDatagram` belongs to.
    static func flowIndex(ofTag tag: UInt64) -> Int { Int((tag & indexMask) >> indexShift) }

    /// The tag as the flow made it.
    static func flowTag(_ tag: UInt64) -> UInt64 { tag & ~indexMask }

    func peekDatagram() -> PendingDatagram? {
        var now: Int64?
        for _ in 0...producers.count {
            if credit > 0, var datagram = producers[current].peekDatagram(), capAllows(current, datagram.size, &now) {
                peeked = current
                datagram.tag = Self.flowTag(datagram.tag) | UInt64(current) << Self.indexShift
                return datagram
            }
            current = (current + 1) % producers.count
            credit = quanta[current]
        }
        return nil
    }

    /// Whether flow `index`'s own cap lets `bytes` go now (reads the clock once per peek).
    private func capAllows(_ index: Int, _ bytes: Int, _ now: inout Int64?) -> Bool {
        guard hasCaps, caps[index] != nil else { return true }
        let time = now ?? clock()
        now = time
        peekedAt = time
        return caps[index]!.delay(for: bytes, now: time) == 0
    }

    /// Nanoseconds until a flow held back only by its own cap may send (nil when none is).
    func readyIn(now: Int64) -> Int64? {
        guard hasCaps else { return nil }
        var soonest: Int64?
        for index in producers.indices where caps[index] != nil {
            guard let datagram = producers[index].peekDatagram() else { continue }
            let wait = caps[index]!.delay(for: datagram.size, now: now)
            soonest = min(soonest ?? wait, wait)
        }
        return soonest
    }

    func writeDatagram(into buffer: UnsafeMutableRawBufferPointer) {
        producers[peeked].writeDatagram(into: buffer)
        if hasCaps { caps[peeked]?.consume(buffer.count, now: peekedAt) }
        credit -= buffer.count
        if firstFlowThisPump < 0 { firstFlowThisPump = peeked } else if peeked != firstFlowThisPump { pumpMixesFlows = true }
    }

    var pendingBytes: Int {
        producers.reduce(0) { total, producer in
            let (sum, overflow) = total.addingReportingOverflow(producer.pendingBytes)
            return overflow ? .max : sum
        }
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
