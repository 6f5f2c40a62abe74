import Testing
import TestSupport
@testable import MediaFormats

private func bytes(of packet: RTCPPacket) -> [UInt8] {
    var out = [UInt8]()
    packet.serialize(into: &out)
    return out
}

private func hex(_ text: String) -> [UInt8] {
    let digits = text.filter { $0.isHexDigit }
    var out = [UInt8]()
    var index = digits.startIndex
    while index < digits.endIndex {
        let next = digits.index(index, offsetBy: 2)
        out.append(UInt8(digits[index..<next], radix: 16)!)
        index = next
    }
    return out
}

private func roundTrip(_ packet: RTCPPacket) throws -> RTCPPacket {
    let result = RTCPPacket.parseCompound(bytes(of: packet))
    #expect(result.errors.isEmpty, "\(result.errors)")
    return try #require(result.packets.first)
}

private let sampleBlock = RTCPReportBlock(
    ssrc: 0x5566_7788, fractionLost: 0x40, cumulativeLost: -1, extendedHighestSequence: 0x0001_0005,
    jitter: 0x10, lastSR: 0x1234_5678, delaySinceLastSR: 0x0001_0000)

@Suite("RTCP golden bytes")
struct RTCPGoldenTests {
    @Test func senderReport() throws {
        let sr = RTCPSenderReport(
            ssrc: 0x1122_3344, ntpTimestamp: 0xAABB_CCDD_EEFF_0011, rtpTimestamp: 0x0102_0304,
            packetCount: 5, octetCount: 1000, reportBlocks: [sampleBlock])
        let expected = hex(
            """
            81 C8 00 0C 11 22 33 44 AA BB CC DD EE FF 00 11 01 02 03 04 00 00 00 05 00 00 03 E8
            55 66 77 88 40 FF FF FF 00 01 00 05 00 00 00 10 12 34 56 78 00 01 00 00
            """)
        #expect(bytes(of: .senderReport(sr)) == expected)
        #expect(RTCPPacket.parseCompound(expected).packets == [.senderReport(sr)])
    }

    @Test func receiverReport() {
        let rr = RTCPReceiverReport(
            ssrc: 1,
            reportBlocks: [
                RTCPReportBlock(
                    ssrc: 2, fractionLost: 0, cumulativeLost: 3, extendedHighestSequence: 100, jitter: 7, lastSR: 0,
                    delaySinceLastSR: 0)
            ])
        let expected = hex(
            "81 C9 00 07 00 00 00 01 00 00 00 02 00 00 00 03 00 00 00 64 00 00 00 07 00 00 00 00 00 00 00 00")
        #expect(bytes(of: .receiverReport(rr)) == expected)
        #expect(bytes(of: .receiverReport(RTCPReceiverReport(ssrc: 1))) == hex("80 C9 00 01 00 00 00 01"))
    }

    @Test func pictureLossIndication() {
        let pli = RTCPPictureLossIndication(senderSSRC: 0x0102_0304, mediaSSRC: 0x0506_0708)
        let expected = hex("81 CE 00 02 01 02 03 04 05 06 07 08")
        #expect(bytes(of: .pictureLossIndication(pli)) == expected)
        #expect(RTCPPacket.parseCompound(expected).packets == [.pictureLossIndication(pli)])
    }

    @Test func genericNACK() {
        let nack = RTCPGenericNACK(senderSSRC: 0x0102_0304, mediaSSRC: 0x0506_0708, sequenceNumbers: [100, 101, 103, 117])
        #expect(nack.entries == [.init(packetID: 100, lostBitmask: 0x0005), .init(packetID: 117, lostBitmask: 0)])
        let expected = hex("81 CD 00 04 01 02 03 04 05 06 07 08 00 64 00 05 00 75 00 00")
        #expect(bytes(of: .genericNACK(nack)) == expected)
        #expect(RTCPPacket.parseCompound(expected).packets == [.genericNACK(nack)])
    }

    @Test func congestionControlFeedback() {
        let feedback = RTCPCongestionControlFeedback(
            senderSSRC: 0xAABB_CCDD,
            reports: [
                .init(
                    mediaSSRC: 0x1111_1111, beginSequence: 1000,
                    metrics: [
                        .init(received: true, ecn: 2, arrivalTimeOffset: 5),
                        .notReceived,
                        .init(received: true, ecn: 3, arrivalTimeOffset: 0x1FFE),
                    ])
            ],
            reportTimestamp: 0x1234_5678)
        // No "media source SSRC" word: the report block follows the sender SSRC directly;
        // three metrics are padded with two zero bytes; the timestamp comes last.
        let expected = hex(
            "8B CD 00 06 AA BB CC DD 11 11 11 11 03 E8 00 03 C0 05 00 00 FF FE 00 00 12 34 56 78")
        #expect(bytes(of: .congestionControlFeedback(feedback)) == expected)
        #expect(RTCPPacket.parseCompound(expected).packets == [.congestionControlFeedback(feedback)])
    }

    @Test func sourceDescription() {
        let sdes = RTCPSourceDescription(ssrc: 0x0102_0304, cname: "ab")
        let expected = hex("81 CA 00 03 01 02 03 04 01 02 61 62 00 00 00 00")
        #expect(bytes(of: .sourceDescription(sdes)) == expected)
    }

    /// Text from a string is its UTF-8, cut to 255 bytes without splitting a scalar.
    @Test func textFromAStringIsCutOnAScalarBoundary() {
        let text = RTCPText(String(repeating: "é", count: 200))  // 2 bytes each
        #expect(text.bytes.count == 254)
        #expect(text.string == String(repeating: "é", count: 127))
        #expect(RTCPText(bytes: [UInt8](repeating: 0x61, count: 300)).bytes.count == 255)
        let sdes = RTCPSourceDescription(ssrc: 1, cname: String(repeating: "€", count: 100))  // 3 bytes each
        #expect(RTCPPacket.parseCompound(bytes(of: .sourceDescription(sdes))).packets == [.sourceDescription(sdes)])
        #expect(sdes.chunks[0].cname?.bytes.count == 255)
    }

    @Test func goodbye() {
        let bye = RTCPGoodbye(ssrcs: [7], reason: "bye")
        let expected = hex("81 CB 00 02 00 00 00 07 03 62 79 65")
        #expect(bytes(of: .goodbye(bye)) == expected)
    }
}

@Suite("RTCP round trips")
struct RTCPRoundTripTests {
    @Test func everyType() throws {
        // Built in parts with their types spelled out: as one literal it takes the type checker
        // long enough to fail under load.
        let chunks: [RTCPSourceDescription.Chunk] = [
            .init(ssrc: 1, cname: "streamer@host"), .init(ssrc: 2, cname: nil), .init(ssrc: 3, cname: "x"),
            .init(ssrc: 4, cname: "héllo"),
        ]
        let metrics = (0..<10).map { (index: Int) -> RTCPCongestionControlFeedback.Metric in
            let received: Bool = index % 3 != 0
            return RTCPCongestionControlFeedback.Metric(received: received, ecn: UInt8(index % 4),
                                                        arrivalTimeOffset: UInt16(index * 100))
        }
        let streams: [RTCPCongestionControlFeedback.StreamReport] = [
            .init(mediaSSRC: 6, beginSequence: 65530, metrics: metrics),
            .init(mediaSSRC: 7, beginSequence: 0, metrics: []),
            .init(mediaSSRC: 8, beginSequence: 9, metrics: [.notReceived]),
        ]
        let ntp = NTPTime(unixSeconds: 1_700_000_000, nanoseconds: 5).rawValue
        var packets: [RTCPPacket] = [
            .senderReport(RTCPSenderReport(ssrc: 9, ntpTimestamp: ntp, rtpTimestamp: 90_000, packetCount: 1,
                                           octetCount: 2, reportBlocks: [sampleBlock, sampleBlock])),
            .senderReport(RTCPSenderReport(ssrc: 9, ntpTimestamp: 1, rtpTimestamp: 2, packetCount: 3, octetCount: 4)),
            .receiverReport(RTCPReceiverReport(ssrc: 3, reportBlocks: [sampleBlock])),
            .receiverReport(RTCPReceiverReport(ssrc: 3)),
            .sourceDescription(RTCPSourceDescription(chunks: chunks)),
        ]
        packets += [
            .goodbye(RTCPGoodbye(ssrcs: [1, 2, 3], reason: "shutting down")),
            .goodbye(RTCPGoodbye(ssrcs: [], reason: nil)),
            .pictureLossIndication(RTCPPictureLossIndication(senderSSRC: 1, mediaSSRC: 2)),
            .genericNACK(RTCPGenericNACK(senderSSRC: 1, mediaSSRC: 2, sequenceNumbers: [65534, 65535, 0, 1, 40])),
            .congestionControlFeedback(RTCPCongestionControlFeedback(senderSSRC: 5, reports: streams, reportTimestamp: 77)),
            .congestionControlFeedback(RTCPCongestionControlFeedback(senderSSRC: 5, reports: [], reportTimestamp: 1)),
        ]
        for packet in packets {
            #expect(try roundTrip(packet) == packet)
        }
        // All of them in one compound packet, in order.
        let compound = RTCPCompoundBuilder.build(packets)
        let result = RTCPPacket.parseCompound(compound)
        #expect(result.isClean)
        #expect(result.packets == packets)
    }

    @Test func cumulativeLostIs24BitSigned() throws {
        for lost: Int32 in [0, 1, -1, 0x7F_FFFF, -0x80_0000, 12345, -12345] {
            var block = sampleBlock
            block.cumulativeLost = lost
            let rr = RTCPPacket.receiverReport(RTCPReceiverReport(ssrc: 1, reportBlocks: [block]))
            #expect(try roundTrip(rr) == rr)
        }
        var block = sampleBlock
        block.cumulativeLost = 50_000_000
        let parsed = try roundTrip(.receiverReport(RTCPReceiverReport(ssrc: 1, reportBlocks: [block])))
        guard case .receiverReport(let rr) = parsed else { Issue.record("not an RR"); return }
        #expect(rr.reportBlocks[0].cumulativeLost == 0x7F_FFFF)
    }

    @Test func nackExpansion() {
        let entry = RTCPGenericNACK.Entry(packetID: 65535, lostBitmask: 0b1000_0000_0000_0011)
        #expect(entry.sequenceNumbers == [65535, 0, 1, 15])
        let sequences: [UInt16] = [10, 12, 11, 10, 30, 26, 27]
        let nack = RTCPGenericNACK(senderSSRC: 1, mediaSSRC: 2, sequenceNumbers: sequences)
        #expect(Set(nack.sequenceNumbers) == Set(sequences))
        #expect(nack.entries.count == 2)
        #expect(RTCPGenericNACK(senderSSRC: 1, mediaSSRC: 2, sequenceNumbers: []).entries.isEmpty)
    }

    @Test func paddedPacketParses() {
        // RR with the padding bit and 4 bytes of padding (count in the last byte).
        let padded = hex("A0 C9 00 02 00 00 00 01 00 00 00 04")
        #expect(RTCPPacket.parseCompound(padded).packets == [.receiverReport(RTCPReceiverReport(ssrc: 1))])
    }

    @Test func unknownTypesAreSkipped() {
        // APP packet, then a transport-wide CC (FMT 15), then a PLI.
        let compound = hex(
            "80 CC 00 02 00 00 00 01 41 42 43 44  8F CD 00 02 00 00 00 01 00 00 00 02  81 CE 00 02 00 00 00 01 00 00 00 02")
        let result = RTCPPacket.parseCompound(compound)
        #expect(result.isClean)
        #expect(
            result.packets == [
                .application(.init(ssrc: 1, name: "ABCD")), .unknown(packetType: 205),
                .pictureLossIndication(.init(senderSSRC: 1, mediaSSRC: 2)),
            ])
    }
}

@Suite("RTCP rejections")
struct RTCPRejectionTests {
    private func reasons(_ bytes: [UInt8]) -> [String] {
        RTCPPacket.parseCompound(bytes).errors.map(\.reason)
    }

    @Test func headerDefects() {
        #expect(reasons([]) == ["tooShort"])
        #expect(reasons([0x80, 0xC9]) == ["tooShort"])
        #expect(reasons(hex("40 C9 00 01 00 00 00 01")) == ["badVersion"])
        #expect(reasons(hex("80 C9 00 02 00 00 00 01")) == ["badLength"])
        #expect(reasons(hex("80 C9 FF FF 00 00 00 01")) == ["badLength"])
        // A good RR followed by three stray bytes.
        let result = RTCPPacket.parseCompound(hex("80 C9 00 01 00 00 00 01 80 C9 00"))
        #expect(result.packets.count == 1)
        #expect(result.errors.map(\.reason) == ["tooShort"])
        #expect(result.errors[0].offset == 8)
    }

    @Test func paddingDefects() {
        #expect(reasons(hex("A0 C9 00 01 00 00 00 00")) == ["badPadding"])
        #expect(reasons(hex("A0 C9 00 01 00 00 00 05")) == ["badPadding"])
        // Padding eats the SSRC: the body is then too short for an RR.
        #expect(reasons(hex("A0 C9 00 01 00 00 00 04")) == ["tooShort"])
    }

    @Test func bodyDefectsDoNotStopTheWalk() {
        // RR claiming 2 report blocks in an 8-byte packet, then a good PLI.
        let result = RTCPPacket.parseCompound(
            hex("82 C9 00 01 00 00 00 01  81 CE 00 02 00 00 00 01 00 00 00 02"))
        #expect(result.errors.map(\.reason) == ["badReportCount"])
        #expect(result.packets == [.pictureLossIndication(.init(senderSSRC: 1, mediaSSRC: 2))])
        #expect(result.errors[0].description.hasPrefix("rtcp: badReportCount at offset 0 (PT 201)"))
    }

    @Test func feedbackDefects() {
        #expect(reasons(hex("81 CD 00 02 00 00 00 01 00 00 00 02")) == ["badFCI"])  // NACK without FCI
        #expect(reasons(hex("81 CE 00 03 00 00 00 01 00 00 00 02 00 00 00 00")) == ["badFCI"])  // PLI with FCI
        #expect(reasons(hex("81 CE 00 01 00 00 00 01")) == ["tooShort"])
        // RFC 8888 block claiming 5 metrics with room for 2.
        #expect(reasons(hex("8B CD 00 05 00 00 00 01 00 00 00 02 00 00 00 05 80 00 80 00 00 00 00 09")) == ["badFCI"])
        // Block header cut short.
        #expect(reasons(hex("8B CD 00 03 00 00 00 01 00 00 00 02 00 00 00 09")) == ["badFCI"])
        #expect(reasons(hex("8B CD 00 01 00 00 00 01")) == ["tooShort"])
    }

    @Test func sdesAndByeDefects() {
        // Item length runs past the packet.
        #expect(reasons(hex("81 CA 00 02 00 00 00 01 01 09 61 62")) == ["badSDES"])
        // Two chunks announced, one present.
        #expect(reasons(hex("82 CA 00 02 00 00 00 01 00 00 00 00")) == ["badSDES"])
        // Unterminated item list.
        #expect(reasons(hex("81 CA 00 02 00 00 00 01 02 02 61 62")) == ["badSDES"])
        #expect(reasons(hex("81 CB 00 02 00 00 00 07 09 62 79 65")) == ["badBye"])
        #expect(reasons(hex("83 CB 00 02 00 00 00 07 00 00 00 08")) == ["badReportCount"])
        // Unknown SDES items are skipped.
        let result = RTCPPacket.parseCompound(hex("81 CA 00 03 00 00 00 01 05 01 7A 01 01 61 00 00"))
        #expect(result.packets == [.sourceDescription(.init(ssrc: 1, cname: "a"))])
    }

    @Test func countersAccumulate() {
        var counters = RTCPParseCounters()
        counters.record(RTCPPacket.parseCompound(hex("80 C9 00 01 00 00 00 01 40 C9 00 01")))
        counters.record(RTCPPacket.parseCompound(hex("80 CF 00 00")))
        #expect(counters.packets == 2)
        #expect(counters.unknownPackets == 1)
        #expect(counters.rejections == [.badVersion: 1])
        #expect(counters.rejected == 1)
    }

    @Test func randomAndMutatedInputNeverTrap() {
        var generator = SplitMix64(seed: 42)
        let valid = RTCPCompoundBuilder.build([
            .senderReport(.init(ssrc: 1, ntpTimestamp: 2, rtpTimestamp: 3, packetCount: 4, octetCount: 5, reportBlocks: [sampleBlock])),
            .sourceDescription(.init(ssrc: 1, cname: "cname")),
            .genericNACK(.init(senderSSRC: 1, mediaSSRC: 2, sequenceNumbers: [1, 5, 9])),
            .congestionControlFeedback(.init(senderSSRC: 1, reports: [.init(mediaSSRC: 2, beginSequence: 3, metrics: [.notReceived])], reportTimestamp: 4)),
            .goodbye(.init(ssrcs: [1], reason: "x")),
        ])
        var parsedSomething = 0
        for round in 0..<20_000 {
            var input: [UInt8]
            if round % 2 == 0 {
                input = valid
                for _ in 0..<(1 + Int(generator.next() % 4)) {
                    input[Int(generator.next() % UInt64(input.count))] = UInt8(truncatingIfNeeded: generator.next())
                }
                input = Array(input.prefix(Int(generator.next() % UInt64(input.count + 1))))
            } else {
                input = (0..<Int(generator.next() % 64)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
                if !input.isEmpty { input[0] = 0x80 | (input[0] & 0x3F) }
            }
            let result = RTCPPacket.parseCompound(input)
            parsedSomething += result.packets.count
            for error in result.errors { #expect(RTCPParseError.Kind(rawValue: error.reason) != nil) }
        }
        #expect(parsedSomething > 0)
    }
}

@Suite("NTP time")
struct NTPTimeTests {
    @Test func unixConversion() {
        let time = NTPTime(unixSeconds: 0, nanoseconds: 500_000_000)
        #expect(time.seconds == 2_208_988_800)
        #expect(time.fraction == 0x8000_0000)
        #expect(time.compact == UInt32(truncatingIfNeeded: (UInt64(2_208_988_800) << 16) | 0x8000))
        var generator = SplitMix64(seed: 7)
        for _ in 0..<10_000 {
            let seconds = Int64(generator.next() % 4_000_000_000)
            let nanos = UInt32(generator.next() % 1_000_000_000)
            let back = NTPTime(unixSeconds: seconds, nanoseconds: nanos).unixTime
            #expect(back.seconds == seconds && back.nanoseconds == nanos)
        }
        // Era 1: after 2036-02-07 the NTP seconds wrap.
        let later = NTPTime(unixSeconds: 2_085_978_496 + 10, nanoseconds: 0)
        #expect(later.seconds == 10)
        #expect(later.unixTime.seconds == 2_085_978_506)
        #expect(NTPTime(rawValue: UInt64.max).unixTime.nanoseconds == 999_999_999)
    }

    @Test func roundTripTime() {
        // RFC 3550 section 6.4.1 example: A = 0xb710:8000, LSR = 0xb705:2000, DLSR = 0x0005:4000.
        #expect(NTPTime.roundTripTime(arrivalCompact: 0xB710_8000, lastSR: 0xB705_2000, delaySinceLastSR: 0x0005_4000) == 0x0006_2000)
        #expect(NTPTime.microseconds(compact: 0x0006_2000) == 6_125_000)
        #expect(NTPTime.roundTripTime(arrivalCompact: 100, lastSR: 0, delaySinceLastSR: 0) == nil)
        #expect(NTPTime.roundTripTime(arrivalCompact: 100, lastSR: 90, delaySinceLastSR: 20) == nil)
        // Wraps across the 32-bit boundary.
        #expect(NTPTime.roundTripTime(arrivalCompact: 0x0000_0010, lastSR: 0xFFFF_FFF0, delaySinceLastSR: 0x10) == 0x10)
    }
    /// RFC 5760 RSI (PT 209) with a Group and Average Packet Size sub-report (SRBT 12): the
    /// bytes as laid out in RFC 5760 7.1 and its sub-report, and back.
    @Test func receiverSummaryWithGroupSize() throws {
        let wire = hex("""
            80 d1 0006 11223344 11223344 e1234567 89abcdef
            0c 02 0064 00000020
            """)
        let parsed = RTCPPacket.parseCompound(wire)
        #expect(parsed.isClean, "\(parsed.errors)")
        guard case .receiverSummary(let summary) = try #require(parsed.packets.first) else {
            Issue.record("not an RSI: \(parsed.packets)")
            return
        }
        #expect(summary.ssrc == 0x1122_3344 && summary.summarizedSSRC == 0x1122_3344)
        #expect(summary.ntpTimestamp == 0xE123_4567_89AB_CDEF)
        #expect(summary.groupAndAveragePacketSize?.groupSize == 32)
        #expect(summary.groupAndAveragePacketSize?.averagePacketSize == 100)
        #expect(bytes(of: .receiverSummary(summary)) == wire)
    }

    /// Other sub-reports are kept as read; a sub-report of length 0 or running past the packet is refused.
    @Test func receiverSummaryOtherAndBrokenSubReports() throws {
        let other = RTCPReceiverSummary(ssrc: 1, summarizedSSRC: 2, ntpTimestamp: 3, subReports: [
            .other(type: 11, headerField: 0x8000, body: [0, 0, 1, 0]),
            .groupAndAveragePacketSize(groupSize: 1000, averagePacketSize: 120),
        ])
        #expect(try roundTrip(.receiverSummary(other)) == .receiverSummary(other))
        for broken in ["80 d1 0005 00000001 00000002 00000000 00000003 0c 00 0064",
                       "80 d1 0005 00000001 00000002 00000000 00000003 0c 03 0064"] {
            let parsed = RTCPPacket.parseCompound(hex(broken))
            #expect(parsed.packets.isEmpty)
            #expect(parsed.errors.map(\.kind) == [.badLength], "\(broken)")
        }
        let short = RTCPPacket.parseCompound(hex("80 d1 0002 00000001 00000002"))
        #expect(short.errors.map(\.kind) == [.tooShort])
    }
}
