import MediaFormats

/// The RFC 7798 packetization plans of the latest access units, shared by the flows of one
/// engine: an access unit handed to many flows is planned once per payload budget, not once
/// per flow (only the RTP header of each packet differs between the flows).
///
/// An access unit is known by its value: the copies each flow holds share their storage, so
/// comparing them costs a few loads, and a different access unit is never taken for it.
final class AccessUnitPlans {
    /// A plan, with the bytes its packets take on the wire (RTP headers included).
    struct Plan {
        var payloads: [HEVCPayload]
        var wireBytes: Int

        /// Plans `accessUnit` with `packetizer`.
        init(of accessUnit: AccessUnit, packetizer: HEVCPacketizer) {
            var payloads: [HEVCPayload] = []
            self.init(of: accessUnit, packetizer: packetizer, reusing: &payloads)
        }

        /// Plans `accessUnit` with `packetizer` into `storage`'s array (taken, left empty).
        init(of accessUnit: AccessUnit, packetizer: HEVCPacketizer, reusing storage: inout [HEVCPayload]) {
            packetizer.plan(accessUnit, into: &storage)
            payloads = storage
            storage = []
            wireBytes = payloads.reduce(0) { $0 + RTPHeader.fixedSize + $1.size }
        }

        /// A plan of `payloads` taking `wireBytes` on the wire.
        init(payloads: [HEVCPayload], wireBytes: Int) {
            self.payloads = payloads
            self.wireBytes = wireBytes
        }
    }

    private struct Entry {
        var accessUnit: AccessUnit
        var maxPayloadSize: Int
        var plan: Plan
    }

    /// How many recent plans are kept: flows a few frames apart still share them.
    static let capacity = 8
    /// `@exclusivity(unchecked)`: one engine thread plans, and no access stays open across a
    /// call out (the dynamic checks cost ~60 instructions each, three a frame: results/profile.md
    /// section 41).
    @exclusivity(unchecked) private var entries: [Entry] = []
    private var oldest = 0
    /// Plans made, and plans found made already (counters for tests and profiles).
    private(set) var planned = 0
    private(set) var shared = 0

    /// The plan of `accessUnit` for `packetizer`'s payload budget, made once for all the flows.
    func plan(_ accessUnit: AccessUnit, packetizer: HEVCPacketizer) -> Plan {
        // By index, not `for entry in entries`: a copy of each entry would retain and release
        // its access unit and plan.
        for index in entries.indices where entries[index].maxPayloadSize == packetizer.maxPayloadSize
            && entries[index].accessUnit.timestamp == accessUnit.timestamp && entries[index].accessUnit == accessUnit {
            shared += 1
            return entries[index].plan
        }
        guard entries.count == Self.capacity else {
            let plan = Plan(of: accessUnit, packetizer: packetizer)
            entries.append(Entry(accessUnit: accessUnit, maxPayloadSize: packetizer.maxPayloadSize, plan: plan))
            planned += 1
            return plan
        }
        // The oldest plan's array is planned into: its flows have moved on, so it is held by
        // the entry alone, and a stream of frames allocates no plan once the cache is full (a
        // flow still sending it keeps its own: the array is copied on write then).
        var storage: [HEVCPayload] = []
        swap(&storage, &entries[oldest].plan.payloads)
        let plan = Plan(of: accessUnit, packetizer: packetizer, reusing: &storage)
        entries[oldest] = Entry(accessUnit: accessUnit, maxPayloadSize: packetizer.maxPayloadSize, plan: plan)
        oldest = (oldest + 1) % Self.capacity
        planned += 1
        return plan
    }
}

@available(*, unavailable, message: "owned by the sender's engine thread")
extension AccessUnitPlans: Sendable {}
