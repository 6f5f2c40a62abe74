import Testing
import TestSupport
import MediaFormats

@Suite struct HEVCPacketizerTests {
    func au(_ nals: [[UInt8]]) -> AccessUnit { AccessUnit(nalUnits: nals, timestamp: 90_000, isKeyframe: false) }

    @Test func rejectsTinyBudget() {
        #expect(throws: HEVCPacketizerError.payloadBudgetTooSmall(3)) { try HEVCPacketizer(maxPayloadSize: 3) }
        #expect((try? HEVCPacketizer(maxPayloadSize: 4)) != nil)
    }

    @Test func nalExactlyAtLimitIsSingle() throws {
        let packetizer = try HEVCPacketizer(maxPayloadSize: 100)
        let nal = makeNAL(type: 1, size: 100)
        let unit = au([nal])
        let plan = packetizer.plan(unit)
        #expect(plan == [HEVCPayload(kind: .single(nal: 0), size: 100, marker: true)])
        #expect(packetizer.bytes(of: plan[0], of: unit) == nal)
    }

    @Test func oneByteOverIsTwoFragments() throws {
        let packetizer = try HEVCPacketizer(maxPayloadSize: 100)
        let nal = makeNAL(type: 19, size: 101, layerId: 5, tid: 3)
        let unit = au([nal])
        let plan = packetizer.plan(unit)
        #expect(plan == [
            HEVCPayload(kind: .fragment(nal: 0, offset: 0, length: 97, isStart: true, isEnd: false), size: 100, marker: false),
            HEVCPayload(kind: .fragment(nal: 0, offset: 97, length: 2, isStart: false, isEnd: true), size: 5, marker: true),
        ])
        let first = packetizer.bytes(of: plan[0], of: unit)
        let second = packetizer.bytes(of: plan[1], of: unit)
        let payloadHeader = HEVCNALHeader(type: .fragmentationUnit, layerId: 5, temporalIdPlusOne: 3)
        #expect(Array(first.prefix(3)) == [payloadHeader.byte0, payloadHeader.byte1, 0x80 | 19])
        #expect(Array(first.dropFirst(3)) == Array(nal[2..<99]))
        #expect(second == [payloadHeader.byte0, payloadHeader.byte1, 0x40 | 19] + Array(nal[99...]))
    }

    @Test func manyFragmentsAreFilledExceptTheLast() throws {
        let packetizer = try HEVCPacketizer(maxPayloadSize: 1200)
        let nal = makeNAL(type: 1, size: 10_000)
        let unit = au([nal])
        let plan = packetizer.plan(unit)
        #expect(plan.count == 9)  // 9998 bytes / 1197 per fragment
        #expect(plan.dropLast().allSatisfy { $0.size == 1200 && !$0.marker })
        #expect(plan.last?.size == 3 + 9998 - 8 * 1197 && plan.last?.marker == true)
        var rebuilt: [UInt8] = Array(nal.prefix(2))
        for (index, payload) in plan.enumerated() {
            let bytes = packetizer.bytes(of: payload, of: unit)
            #expect((bytes[2] & 0x80 != 0) == (index == 0))
            #expect((bytes[2] & 0x40 != 0) == (index == plan.count - 1))
            #expect(bytes[0] >> 1 == 49 && bytes[2] & 0x3f == 1)
            rebuilt += bytes.dropFirst(3)
        }
        #expect(rebuilt == nal)
    }

    @Test func aggregatesTwoSmallUnits() throws {
        let packetizer = try HEVCPacketizer(maxPayloadSize: 100)
        let a = makeNAL(type: 32, size: 20, layerId: 3, tid: 2)
        let b = makeNAL(type: 33, size: 30, layerId: 1, tid: 4)
        let big = makeNAL(type: 19, size: 90)
        let unit = au([a, b, big])
        let plan = packetizer.plan(unit)
        #expect(plan == [
            HEVCPayload(kind: .aggregation(nals: 0..<2), size: 2 + 2 + 20 + 2 + 30, marker: false),
            HEVCPayload(kind: .single(nal: 2), size: 90, marker: true),
        ])
        let header = HEVCNALHeader(type: .aggregationPacket, layerId: 1, temporalIdPlusOne: 2)
        #expect(packetizer.bytes(of: plan[0], of: unit) == [header.byte0, header.byte1, 0, 20] + a + [0, 30] + b)
    }

    @Test func aggregatesManyUnitsGreedily() throws {
        let packetizer = try HEVCPacketizer(maxPayloadSize: 100)
        let nals = (0..<10).map { makeNAL(type: 39, size: 14, fill: UInt8($0)) }  // 16 bytes each in an AP
        let unit = au(nals)
        let plan = packetizer.plan(unit)
        // 2 + 6 * 16 = 98 fits, a 7th does not; the remaining 4 form a second AP.
        #expect(plan == [
            HEVCPayload(kind: .aggregation(nals: 0..<6), size: 98, marker: false),
            HEVCPayload(kind: .aggregation(nals: 6..<10), size: 66, marker: true),
        ])
        var expected: [UInt8] = [48 << 1, 1]
        for nal in nals.prefix(6) { expected += [0, 14] + nal }
        #expect(packetizer.bytes(of: plan[0], of: unit) == expected)
        // Forbidden bit of any unit shows in the AP header.
        var flagged = nals
        flagged[7][0] |= 0x80
        #expect(packetizer.bytes(of: plan[1], of: au(flagged))[0] & 0x80 != 0)
        // A lone small unit between large ones is never a 1-unit AP.
        let lone = packetizer.plan(au([makeNAL(type: 1, size: 300), makeNAL(type: 39, size: 10), makeNAL(type: 1, size: 300)]))
        #expect(lone.filter { if case .aggregation = $0.kind { true } else { false } }.isEmpty)
        #expect(lone.contains(HEVCPayload(kind: .single(nal: 1), size: 10, marker: false)))
    }

    @Test func everyPayloadFitsTheBudgetAroundTheBoundary() throws {
        var checked = 0
        for budget in [4, 5, 6, 7, 8, 10, 13, 64, 100, 1200, 1400] {
            let packetizer = try HEVCPacketizer(maxPayloadSize: budget)
            var sizes = Array(2...min(3 * budget + 8, 200))
            sizes += (budget - 8...budget + 8).filter { $0 >= 2 } + [2 * budget - 1, 2 * budget, 2 * budget + 1, 5 * budget + 3]
            for size in sizes {
                for shape in 0..<3 {
                    let nal = makeNAL(type: 1, size: size)
                    let nals: [[UInt8]] = switch shape {
                    case 0: [nal]
                    case 1: [makeNAL(type: 32, size: 2), nal, makeNAL(type: 39, size: 3)]
                    default: [nal, nal]
                    }
                    let unit = au(nals)
                    let plan = packetizer.plan(unit)
                    #expect(plan.allSatisfy { $0.size <= budget && $0.size > 0 }, "budget \(budget) size \(size)")
                    #expect(plan.filter(\.marker).count == 1 && plan.last?.marker == true)
                    for payload in plan {
                        if case .fragment(_, _, _, let isStart, let isEnd) = payload.kind { #expect(!(isStart && isEnd)) }
                        #expect(packetizer.bytes(of: payload, of: unit).count == payload.size)
                    }
                    if shape == 0 {
                        #expect((plan.count == 1) == (size <= budget), "budget \(budget) size \(size)")
                    }
                    checked += 1
                }
            }
        }
        #expect(checked > 1000)
    }

    /// Planning into one array reused from access unit to access unit (as the sender does)
    /// gives each unit the plan `plan(_:)` gives it: a long plan, then a shorter one (nothing
    /// of the first left over), then one of aggregates, and the array keeps its storage.
    @Test func planningIntoAReusedArrayGivesTheSamePlan() throws {
        let packetizer = try HEVCPacketizer(maxPayloadSize: 1200)
        let units = [au([makeNAL(type: 19, size: 12_000)]), au([makeNAL(type: 1, size: 3000)]),
                     au([makeNAL(type: 32, size: 30), makeNAL(type: 33, size: 40), makeNAL(type: 1, size: 900)]),
                     au([[0x02], makeNAL(type: 1, size: 1200)])]
        var reused: [HEVCPayload] = []
        packetizer.plan(units[0], into: &reused)
        let capacity = reused.capacity
        for unit in units {
            packetizer.plan(unit, into: &reused)
            #expect(reused == packetizer.plan(unit))
            #expect(reused.last?.marker == true && reused.filter(\.marker).count == 1)
        }
        #expect(reused.capacity == capacity)
    }

    /// An access unit whose NAL units are slices of one buffer (at offsets, so not zero-based,
    /// with other bytes between them) plans and writes the same payloads, byte for byte, as the
    /// same NAL units as arrays: single NAL units, aggregation packets and fragments.
    @Test func slicesOfOneBufferPacketizeAsArrays() throws {
        var rng = SplitMix64(seed: 15)
        for round in 0..<60 {
            let budget = Int.random(in: 100...1400, using: &rng)
            let packetizer = try HEVCPacketizer(maxPayloadSize: budget)
            var nals: [[UInt8]] = []
            for _ in 0..<Int.random(in: 1...8, using: &rng) {
                let size = [Int.random(in: 2...40, using: &rng), Int.random(in: 2...3 * budget, using: &rng),
                            Int.random(in: budget - 2...budget + 2, using: &rng), Int.random(in: 2...20_000, using: &rng)]
                    .randomElement(using: &rng)!
                nals.append(randomNAL(type: [1, 19, 32, 39].randomElement(using: &rng)!, size: size, using: &rng))
            }
            var buffer: [UInt8] = []
            var ranges: [Range<Int>] = []
            for nal in nals {
                buffer += [UInt8](repeating: 0xEE, count: Int.random(in: 1...5, using: &rng))
                ranges.append(buffer.count..<(buffer.count + nal.count))
                buffer += nal
            }
            let fromArrays = au(nals)
            let fromSlices = AccessUnit(nalUnitSlices: ranges.map { buffer[$0] }, timestamp: 90_000, isKeyframe: false)
            let plan = packetizer.plan(fromSlices)
            #expect(plan == packetizer.plan(fromArrays), "round \(round)")
            #expect(plan.map { packetizer.bytes(of: $0, of: fromSlices) } == plan.map { packetizer.bytes(of: $0, of: fromArrays) },
                    "round \(round) budget \(budget)")
            #expect(plan.map(\.size).reduce(0, +) >= fromArrays.byteCount)
        }
    }

    @Test func roundTripThroughDepacketizerIsByteIdentical() throws {
        var rng = SplitMix64(seed: 2024)
        for round in 0..<60 {
            let budget = Int.random(in: 100...1400, using: &rng)
            var aus: [AccessUnit] = []
            for frame in 0..<Int.random(in: 1...6, using: &rng) {
                let keyframe = frame == 0
                var nals: [[UInt8]] = []
                if keyframe {
                    nals += [randomNAL(type: 32, size: 24, using: &rng), randomNAL(type: 33, size: 45, using: &rng),
                             randomNAL(type: 34, size: 7, using: &rng)]
                }
                for _ in 0..<Int.random(in: 1...4, using: &rng) {
                    let size = [Int.random(in: 2...40, using: &rng), Int.random(in: 2...3 * budget, using: &rng),
                                Int.random(in: budget - 2...budget + 2, using: &rng), Int.random(in: 2...20_000, using: &rng)]
                        .randomElement(using: &rng)!
                    nals.append(randomNAL(type: keyframe ? 19 : 1, size: size, using: &rng))
                }
                aus.append(AccessUnit(nalUnits: nals, timestamp: UInt32(frame * 3000), isKeyframe: keyframe))
            }
            let packets = try rtpPackets(aus, budget: budget, firstSequence: UInt16.random(in: 0...UInt16.max, using: &rng))
            #expect(packets.allSatisfy { $0.1.count <= budget })
            var depacketizer = HEVCDepacketizer()
            let out = depacketize(packets, into: &depacketizer)
            #expect(out.map(\.accessUnit) == aus, "round \(round) budget \(budget)")
            #expect(out.allSatisfy { $0.isComplete && $0.missingPackets == 0 })
            #expect(out.map(\.annexB) == aus.map(\.annexB))
            #expect(depacketizer.counters.rejectedTotal == 0 && depacketizer.counters.lostPackets == 0)
            #expect(out.map(\.packetCount).reduce(0, +) == packets.count)
        }
    }
}
