import MediaFormats
import Synchronization
import Testing
@testable import StreamEngine

/// A flow's queue of datagrams for the scheduler: each is `size` bytes of its flow's number.
private final class QueuedFlow: DatagramProducer {
    let flow: UInt8
    var sizes: [Int]
    /// Reported as `pendingBytes` when set (otherwise the sum of the sizes).
    var pendingOverride: Int?
    /// How often the scheduler asked this flow for its next datagram.
    private(set) var peeks = 0
    private var nextTag: UInt64 = 0

    init(_ flow: UInt8, count: Int, size: Int = 1000) {
        self.flow = flow
        sizes = Array(repeating: size, count: count)
    }

    func peekDatagram() -> PendingDatagram? {
        peeks += 1
        return sizes.first.map { PendingDatagram(route: Int(flow), size: $0, tag: nextTag) }
    }

    func writeDatagram(into buffer: UnsafeMutableRawBufferPointer) {
        precondition(buffer.count == sizes.first)
        for index in buffer.indices { buffer[index] = flow }
        sizes.removeFirst()
        nextTag += 1
    }

    var pendingBytes: Int { pendingOverride ?? sizes.reduce(0, +) }
}

/// A clock the test moves by hand (monotonic nanoseconds).
private final class ManualClock: Sendable {
    private let time = Atomic<Int64>(0)
    var now: Int64 { time.load(ordering: .relaxed) }
    func advance(_ nanoseconds: Int64) { time.add(nanoseconds, ordering: .relaxed) }
}

/// Takes every datagram the scheduler releases now, as the paced sender would, and returns
/// the flow of each (read from the bytes written, not from the tag).
private func drain(_ scheduler: FlowScheduler, limit: Int = .max) -> [UInt8] {
    var flows: [UInt8] = []
    while flows.count < limit, let datagram = scheduler.peekDatagram() {
        var bytes = [UInt8](repeating: 0xEE, count: datagram.size)
        bytes.withUnsafeMutableBytes { scheduler.writeDatagram(into: $0) }
        #expect(Set(bytes).count == 1, "a datagram of one flow's bytes")
        #expect(FlowScheduler.flowIndex(ofTag: datagram.tag) == Int(bytes[0]), "the tag names the flow written")
        flows.append(bytes[0])
    }
    return flows
}

/// `FlowScheduler` (Sources/StreamEngine/Media/FlowScheduler.swift): round robin in byte
/// quanta, turns given away by idle flows, and each flow's own cap, on a synthetic clock.
@Suite struct FlowSchedulerTests {
    static let millisecond: Int64 = 1_000_000

    /// Unpaced flows take turns of one quantum each (3 x 1,000 B of a 3,000 B quantum).
    @Test func flowsTakeTurnsOfOneQuantum() {
        let flows = [QueuedFlow(0, count: 6), QueuedFlow(1, count: 6)]
        let scheduler = FlowScheduler(flows, paces: [nil, nil], burstQuanta: [nil, nil], quantum: 3000, clock: { 0 })
        #expect(drain(scheduler) == [0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1])
        #expect(scheduler.peekDatagram() == nil)
    }

    /// Turns are in proportion to the paces (8 and 4 Mbit/s: 4,000 and 2,000 B), so over a
    /// busy period the bytes split 2:1; no turn is below 1,500 B (two 1,000 B datagrams for
    /// the 1 kbit/s flow).
    @Test func turnsAreInProportionToThePaces() {
        let flows = [QueuedFlow(0, count: 40), QueuedFlow(1, count: 40), QueuedFlow(2, count: 40)]
        // Caps far above what is sent here, so only the turns decide.
        let scheduler = FlowScheduler(flows, paces: [8e6, 4e6, 1e3], burstQuanta: [1 << 30, 1 << 30, 1 << 30],
                                      quantum: 4000, clock: { 0 })
        let order = drain(scheduler, limit: 32)
        #expect(Array(order.prefix(10)) == [0, 0, 0, 0, 1, 1, 2, 2, 0, 0])
        let counts = (0..<3).map { flow in order.filter { $0 == UInt8(flow) }.count }
        #expect(counts == [16, 8, 8], "\(counts)")
    }

    /// A flow with nothing to send gives its turn away at once: the busy one sends
    /// everything back to back, and an empty scheduler says so.
    @Test func idleFlowsGiveTheirTurnsAway() {
        let flows = [QueuedFlow(0, count: 0), QueuedFlow(1, count: 7), QueuedFlow(2, count: 0)]
        let scheduler = FlowScheduler(flows, paces: [nil, nil, nil], burstQuanta: [nil, nil, nil], quantum: 2000,
                                      clock: { 0 })
        #expect(drain(scheduler) == Array(repeating: 1, count: 7))
        #expect(scheduler.peekDatagram() == nil)
        #expect(scheduler.readyIn(now: 0) == nil, "unpaced flows wait for nothing")
        flows[0].sizes = [1000]  // a flow that comes back is served once the engine wakes it
        scheduler.wake(flow: 0)
        #expect(drain(scheduler) == [0])
    }

    /// A flow found idle is not asked again, however often the others are, until it is woken
    /// (by its own input or feedback, or all of them by the periodic work); its bytes do not
    /// count as pending meanwhile.
    @Test func anIdleFlowIsSkippedUntilWoken() {
        let flows = [QueuedFlow(0, count: 0), QueuedFlow(1, count: 4), QueuedFlow(2, count: 0)]
        let scheduler = FlowScheduler(flows, paces: [nil, nil, nil], burstQuanta: [nil, nil, nil], quantum: 1000,
                                      clock: { 0 })
        #expect(drain(scheduler) == [1, 1, 1, 1])
        let asked = flows[0].peeks
        for _ in 0..<10 { #expect(scheduler.peekDatagram() == nil) }
        #expect(flows[0].peeks == asked, "an idle flow is not asked again")
        flows[0].sizes = [1000, 1000]
        flows[2].sizes = [1000]
        #expect(scheduler.peekDatagram() == nil && scheduler.pendingBytes == 0, "not woken: not seen")
        scheduler.wake(flow: 2)
        #expect(scheduler.pendingBytes == 1000)
        #expect(drain(scheduler) == [2])
        scheduler.wakeAll()
        #expect(drain(scheduler) == [0, 0])
    }

    /// A flow held by its own cap is not asked again before the cap's time: many peeks at one
    /// instant ask it once, and the wait comes from what was remembered.
    @Test func aCappedFlowIsAskedAgainOnlyWhenItsCapAllows() {
        let clock = ManualClock()
        let flows = [QueuedFlow(0, count: 10), QueuedFlow(1, count: 0)]
        let scheduler = FlowScheduler(flows, paces: [8e6, 8e6], burstQuanta: [1000, 1000], quantum: 4000,
                                      clock: { clock.now })
        #expect(drain(scheduler) == [0])  // its 1,000 B burst
        let asked = flows[0].peeks
        for _ in 0..<10 { #expect(scheduler.peekDatagram() == nil) }
        #expect(flows[0].peeks == asked)
        #expect(scheduler.readyIn(now: clock.now) == Self.millisecond)
        #expect(flows[0].peeks == asked)
        clock.advance(Self.millisecond)
        #expect(drain(scheduler) == [0])
    }

    /// Flows of one engine with the same payload budget plan an access unit once: their
    /// packets carry the same payloads under their own RTP headers (SSRC, sequence numbers).
    @Test func flowsShareOnePlanPerAccessUnit() throws {
        let plans = AccessUnitPlans()
        let flows = try (0..<3).map { _ in try MediaFlow(route: 0, maxDatagramSize: 1200) }
        for flow in flows { flow.sharedPlans = plans }
        let units = (0..<2).map { index in
            AccessUnit(nalUnits: [[0x02, 0x01] + (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ index) }],
                       timestamp: UInt32(index * 3000), isKeyframe: false)
        }
        for unit in units { for flow in flows { flow.enqueue(unit) } }
        var packets: [[[UInt8]]] = flows.map { _ in [] }
        for (index, flow) in flows.enumerated() {
            while let datagram = flow.peekDatagram() {
                var bytes = [UInt8](repeating: 0, count: datagram.size)
                bytes.withUnsafeMutableBytes { flow.writeDatagram(into: $0) }
                packets[index].append(bytes)
            }
        }
        #expect(plans.planned == 2 && plans.shared == 4, "planned \(plans.planned), shared \(plans.shared)")
        #expect(packets[0].count == 10)  // 5,002 B in FUs of at most 1,185 B: 5 packets per access unit
        for other in packets.dropFirst() {
            #expect(other.map { Array($0.dropFirst(RTPHeader.fixedSize)) } == packets[0].map { Array($0.dropFirst(RTPHeader.fixedSize)) })
            #expect(other.map { Array($0[8..<12]) } != packets[0].map { Array($0[8..<12]) }, "each flow its own SSRC")
        }
        // A flow with another budget plans for itself.
        let small = try MediaFlow(route: 0, maxDatagramSize: 600)
        small.sharedPlans = plans
        small.enqueue(units[0])
        #expect(small.peekDatagram()!.size <= 600)
        #expect(plans.planned == 3)
    }

    /// Two flows paced at 8 Mbit/s (1,000 B per ms) with 2,000 B bursts, the second idle: the
    /// busy one keeps to its own pace (not the 16 Mbit/s sum), looked at every 100 us for
    /// 100 ms: 2 datagrams at once, then one per ms, never above burst + rate x t.
    @Test func aPacedFlowAloneKeepsToItsOwnCap() {
        let clock = ManualClock()
        let flows = [QueuedFlow(0, count: 1000), QueuedFlow(1, count: 0)]
        let scheduler = FlowScheduler(flows, paces: [8e6, 8e6], burstQuanta: [2000, 2000], quantum: 4000,
                                      clock: { clock.now })
        var sent = 0
        var worstExcess = Int.min
        while clock.now <= 100 * Self.millisecond {
            sent += drain(scheduler).count * 1000
            worstExcess = max(worstExcess, sent - (2000 + Int(clock.now / 1000)))
            if sent < 1_000_000, scheduler.peekDatagram() == nil {
                // Held back by its cap only: the scheduler says how long.
                let wait = scheduler.readyIn(now: clock.now)
                #expect(wait != nil && wait! > 0 && wait! <= Self.millisecond)
            }
            clock.advance(100_000)
        }
        #expect(worstExcess <= 0, "\(worstExcess) B above the flow's line")
        #expect(sent == 102_000)  // 2,000 B at once, then 1,000 B for each of 100 ms
    }

    /// Caps are per flow: one flow out of budget does not hold back another that has budget.
    @Test func oneFlowsCapDoesNotHoldBackAnother() {
        let flows = [QueuedFlow(0, count: 10), QueuedFlow(1, count: 10)]
        let scheduler = FlowScheduler(flows, paces: [8e6, 80e6], burstQuanta: [1000, 10_000], quantum: 20_000,
                                      clock: { 0 })
        let order = drain(scheduler)
        #expect(order.filter { $0 == 0 }.count == 1)  // its 1,000 B burst
        #expect(order.filter { $0 == 1 }.count == 10)
        #expect(scheduler.readyIn(now: 0) == Self.millisecond)  // flow 0's next datagram in 1 ms
    }

    /// A single flow has no cap of its own (the shared pacer is its cap): it is never held back.
    @Test func aSingleFlowIsNotCapped() {
        let flows = [QueuedFlow(0, count: 50)]
        let scheduler = FlowScheduler(flows, paces: [8e6], burstQuanta: [1000], quantum: 1500, clock: { 0 })
        #expect(drain(scheduler).count == 50)
        #expect(scheduler.readyIn(now: 0) == nil)
    }

    /// One flow (its own path through the scheduler): every datagram in order with the flow's
    /// own tag, no mixed submissions, and once idle it is not asked again until woken.
    @Test func aSingleFlowIsDrainedInOrderAndSkippedUntilWoken() {
        let flows = [QueuedFlow(0, count: 3)]
        let scheduler = FlowScheduler(flows, paces: [nil], burstQuanta: [nil], quantum: 1500, clock: { 0 })
        var tags: [UInt64] = []
        while let datagram = scheduler.peekDatagram() {
            tags.append(datagram.tag)
            var bytes = [UInt8](repeating: 0xEE, count: datagram.size)
            bytes.withUnsafeMutableBytes { scheduler.writeDatagram(into: $0) }
            #expect(bytes == [UInt8](repeating: 0, count: 1000))
        }
        scheduler.endPump()
        #expect(tags == [0, 1, 2] && scheduler.mixedSubmissions == 0)
        let asked = flows[0].peeks
        flows[0].sizes = [1000]
        #expect(scheduler.peekDatagram() == nil && flows[0].peeks == asked, "idle: not asked before a wake-up")
        scheduler.wake(flow: 0)
        #expect(drain(scheduler) == [0])
    }

    /// Tags carry the flow's index beside the flow's own tag; mixed submissions are counted per pump.
    @Test func tagsAndMixedSubmissions() {
        let flows = [QueuedFlow(0, count: 4), QueuedFlow(1, count: 4)]
        let scheduler = FlowScheduler(flows, paces: [nil, nil], burstQuanta: [nil, nil], quantum: 2000, clock: { 0 })
        let first = scheduler.peekDatagram()!
        #expect(FlowScheduler.flowIndex(ofTag: first.tag) == 0 && FlowScheduler.flowTag(first.tag) == 0)
        _ = drain(scheduler, limit: 2)  // flow 0 only
        scheduler.endPump()
        #expect(scheduler.mixedSubmissions == 0)
        let next = scheduler.peekDatagram()!
        #expect(FlowScheduler.flowIndex(ofTag: next.tag) == 1 && FlowScheduler.flowTag(next.tag) == 0)
        _ = drain(scheduler, limit: 4)  // flow 1, then flow 0 again
        scheduler.endPump()
        #expect(scheduler.mixedSubmissions == 1)
        let third = scheduler.peekDatagram()!
        #expect(FlowScheduler.flowIndex(ofTag: third.tag) == 1 && FlowScheduler.flowTag(third.tag) == 2)
    }

    /// What waits is the sum over the flows, and an unknown amount (Int.max) does not overflow it.
    @Test func pendingBytesSumsWithoutOverflow() {
        let flows = [QueuedFlow(0, count: 3), QueuedFlow(1, count: 2, size: 500)]
        let scheduler = FlowScheduler(flows, paces: [nil, nil], burstQuanta: [nil, nil], quantum: 2000, clock: { 0 })
        #expect(scheduler.pendingBytes == 4000)
        flows[1].pendingOverride = .max
        #expect(scheduler.pendingBytes == .max)
    }
}
