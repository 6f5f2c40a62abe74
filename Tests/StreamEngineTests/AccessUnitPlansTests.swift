import MediaFormats
@testable import StreamEngine
import Testing

@Suite struct AccessUnitPlansTests {
    static func unit(_ index: Int) -> AccessUnit {
        AccessUnit(nalUnits: [[0x02, 0x01] + [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 500 + 997 * (index % 5))],
                   timestamp: UInt32(index * 3000), isKeyframe: false)
    }

    /// Past the cache's capacity each new plan goes into the array of the oldest: every access
    /// unit still gets its own plan (as the packetizer plans it alone, the wire bytes with it),
    /// and a plan a caller still holds from before is not changed by the reuse.
    @Test func plansIntoReusedStorageStayTheirOwn() throws {
        let plans = AccessUnitPlans()
        let packetizer = try HEVCPacketizer(maxPayloadSize: 1188)
        let held = plans.plan(Self.unit(0), packetizer: packetizer)
        for index in 1..<(AccessUnitPlans.capacity * 3) {
            let plan = plans.plan(Self.unit(index), packetizer: packetizer)
            let expected = packetizer.plan(Self.unit(index))
            #expect(plan.payloads == expected)
            #expect(plan.wireBytes == expected.reduce(0) { $0 + RTPHeader.fixedSize + $1.size })
        }
        #expect(held.payloads == packetizer.plan(Self.unit(0)))
        #expect(plans.planned == AccessUnitPlans.capacity * 3 && plans.shared == 0)
        // The latest are still shared.
        let again = plans.plan(Self.unit(AccessUnitPlans.capacity * 3 - 1), packetizer: packetizer)
        #expect(plans.shared == 1 && again.payloads == packetizer.plan(Self.unit(AccessUnitPlans.capacity * 3 - 1)))
    }
}
