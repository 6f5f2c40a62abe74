import UringIO

/// Takes datagrams from several flows for one paced sender: round robin in byte quanta
/// (each flow's in proportion to its pace), so one flow's burst delays another's by at
/// most one quantum, and a flow with nothing to send gives its turn away at once.
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
    private var current = 0
    private var credit: Int
    private var peeked = 0
    /// The first flow written in this pump (-1: none yet), and whether another one followed.
    private var firstFlowThisPump = -1
    private var pumpMixesFlows = false
    /// Pumps that wrote datagrams of more than one flow (each pump is one submission).
    private(set) var mixedSubmissions = 0

    /// Schedules `producers` (at most `maxFlows`); `weights` (e.g. their paces) size each
    /// one's quantum: the heaviest gets `quantum` bytes per turn, none less than a datagram.
    init(_ producers: [DatagramProducer], weights: [Double], quantum: Int) {
        precondition(!producers.isEmpty && producers.count <= Self.maxFlows && weights.count == producers.count)
        self.producers = producers
        let heaviest = max(weights.max() ?? 1, 1e-9)
        quanta = weights.map { max(Int(Double(quantum) * max($0, 0) / heaviest), 1500) }
        credit = quanta[0]
    }

    /// The flow a tag from `peekDatagram` belongs to.
    static func flowIndex(ofTag tag: UInt64) -> Int { Int((tag & indexMask) >> indexShift) }

    /// The tag as the flow made it.
    static func flowTag(_ tag: UInt64) -> UInt64 { tag & ~indexMask }

    func peekDatagram() -> PendingDatagram? {
        for _ in 0...producers.count {
            if credit > 0, var datagram = producers[current].peekDatagram() {
                peeked = current
                datagram.tag = Self.flowTag(datagram.tag) | UInt64(current) << Self.indexShift
                return datagram
            }
            current = (current + 1) % producers.count
            credit = quanta[current]
        }
        return nil
    }

    func writeDatagram(into buffer: UnsafeMutableRawBufferPointer) {
        producers[peeked].writeDatagram(into: buffer)
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
