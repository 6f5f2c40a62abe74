@testable import StreamEngine
import MediaFormats
import Testing

/// The sender's history of sent packets and its answers to NACKs, with a fake clock.
@Suite struct RetransmissionHistoryTests {
    static let mediaSSRC: UInt32 = 0x1111_2222
    static let millisecond: Int64 = 1_000_000

    /// A media packet: sequence `sequence`, `size` bytes of payload derived from it.
    static func packet(_ sequence: UInt16, size: Int = 1000, marker: Bool = false) -> [UInt8] {
        let header = RTPHeader(marker: marker, payloadType: 96, sequenceNumber: sequence,
                               timestamp: 90_000 &+ UInt32(sequence / 4) &* 3000, ssrc: mediaSSRC)
        return header.bytes + (0..<size).map { UInt8(truncatingIfNeeded: Int(sequence) &* 31 &+ $0) }
    }

    static func nack(_ sequences: [UInt16], ssrc: UInt32 = mediaSSRC) -> RTCPGenericNACK {
        RTCPGenericNACK(senderSSRC: 0xFEED, mediaSSRC: ssrc, sequenceNumbers: sequences)
    }

    /// A history that recorded packets `first..<first+count`, one per millisecond from 0.
    static func history(first: UInt16 = 65_530, count: Int = 20, sameSSRC: Bool = false,
                        rate: Double? = nil) -> RetransmissionHistory {
        var history = RetransmissionHistory(ssrc: 0x0BAD_F00D, rtxTime: 500 * millisecond, sameSSRC: sameSSRC,
                                            rateBytesPerSecond: rate, firstSequence: 7)
        for index in 0..<count {
            packet(first &+ UInt16(index), marker: index % 4 == 3).withUnsafeBytes {
                history.record($0, at: Int64(index) * millisecond)
            }
        }
        return history
    }

    @Test func aNACKIsAnsweredWithRFC4588Packets() throws {
        var history = Self.history()
        // Across the wrap: 65534, 65535, 0 and 3 (BLP bits).
        let datagrams = history.answer(Self.nack([65_534, 65_535, 0, 3]), now: 30 * Self.millisecond)
        #expect(datagrams.count == 4)
        for (index, (datagram, original)) in zip(datagrams, [65_534, 65_535, 0, 3].map { Self.packet($0) }).enumerated() {
            let rtx = try RTPHeader.parse(datagram)
            let media = try RTPHeader.parse(original)
            #expect(rtx.header.ssrc == 0x0BAD_F00D && rtx.header.payloadType == 97)
            #expect(rtx.header.sequenceNumber == UInt16(7 + index))
            #expect(rtx.header.timestamp == media.header.timestamp)
            #expect(rtx.header.marker == (media.header.sequenceNumber % 4 == 1))  // marker kept (65_533 + 4k)
            let payload = Array(datagram[rtx.payloadRange])
            #expect(payload.prefix(2) == [UInt8(media.header.sequenceNumber >> 8), UInt8(media.header.sequenceNumber & 0xff)])
            #expect(Array(payload.dropFirst(2)) == Array(original[media.payloadRange]))
        }
        #expect(history.retransmitted == 4 && history.requested == 4 && history.rejected.isEmpty)
        #expect(history.retransmittedBytes == history.requestedBytes + 4 * 2)
    }

    @Test func theSameSSRCOptionResendsTheOriginal() {
        var history = Self.history(sameSSRC: true)
        #expect(history.answer(Self.nack([2]), now: 30 * Self.millisecond) == [Self.packet(2)])
        #expect(history.retransmittedBytes == history.requestedBytes)
    }

    @Test func requestsForPacketsNeverSentOrTooOldAreRejected() {
        var history = Self.history()
        // 14 is ahead of the newest (13); 65_000 is before the first.
        #expect(history.answer(Self.nack([14, 65_000]), now: 30 * Self.millisecond).isEmpty)
        #expect(history.rejected == [.neverSent: 2])
        // 518 ms on, packet 65_530 (sent at 0) is gone; 13 (sent at 19 ms) is not; at 600 ms it is.
        #expect(history.answer(Self.nack([65_530, 13]), now: 518 * Self.millisecond).count == 1)
        #expect(history.answer(Self.nack([13]), now: 600 * Self.millisecond).isEmpty)
        #expect(history.rejected == [.neverSent: 2, .tooOld: 2])
        #expect(history.count == 0)
    }

    @Test func noAmplification() {
        var history = Self.history()
        // Entries that overlap name 1 three times: one answer.
        let overlapping = RTCPGenericNACK(senderSSRC: 1, mediaSSRC: Self.mediaSSRC,
                                          entries: [.init(packetID: 0, lostBitmask: 1), .init(packetID: 1, lostBitmask: 0),
                                                    .init(packetID: 65_535, lostBitmask: 0b11)])
        #expect(history.answer(overlapping, now: 30 * Self.millisecond).count == 3)  // 65535, 0, 1
        // Asked again at once (a repeated NACK): nothing; a round trip later: again.
        #expect(history.answer(Self.nack([1]), now: 35 * Self.millisecond).isEmpty)
        #expect(history.answer(Self.nack([1]), now: 41 * Self.millisecond).count == 1)
        #expect(history.rejected == [.repeated: 1])
        #expect(history.retransmitted == 4 && history.requestedBytes == 4 * Self.packet(1).count)
    }

    @Test func aRequestBeforeThePacketCouldHaveArrivedIsPremature() {
        var history = Self.history()
        history.minAge = 5 * Self.millisecond
        // Packet 13 was sent at 19 ms: asked at 22 ms, too early; at 24 ms, answered.
        #expect(history.answer(Self.nack([13]), now: 22 * Self.millisecond).isEmpty)
        #expect(history.answer(Self.nack([13]), now: 24 * Self.millisecond).count == 1)
        #expect(history.rejected == [.tooEarly: 1])
    }

    @Test func theRateLimitHolds() {
        // 100 KB/s: a burst of 64 KB, then 100 bytes per millisecond.
        var history = Self.history(count: 200, rate: 100_000)
        let all = (0..<200).map { 65_530 &+ UInt16($0) }
        let first = history.answer(Self.nack(all), now: 250 * Self.millisecond)
        #expect(first.count == 64 * 1024 / 1014 && history.rejected[.rateLimited] == 200 - first.count)
        let later = history.answer(Self.nack(Array(all.suffix(100))), now: 350 * Self.millisecond)
        #expect(later.count == (64 * 1024 - first.count * 1014 + 10_000) / 1014)
    }

    /// More packets than the history's first slots, of mixed sizes, across the 16-bit wrap and
    /// past `rtxTime` (expired entries' arrays reused for the next of the same size): every
    /// packet still in the history is answered with its own bytes, the expired ones are too old.
    @Test func manyPacketsOfMixedSizesAreEachAnsweredWithTheirOwnBytes() {
        var history = RetransmissionHistory(ssrc: 1, rtxTime: 500 * Self.millisecond, sameSSRC: true)
        let first: UInt16 = 64_000
        let size = { (index: Int) in index % 7 == 6 ? 300 : 1000 }
        for index in 0..<8_000 {  // 10 a millisecond: 800 ms
            Self.packet(first &+ UInt16(index), size: size(index)).withUnsafeBytes {
                history.record($0, at: Int64(index) * Self.millisecond / 10)
            }
        }
        #expect(history.count == 5_001)  // sent at 299.9 ms and later, 500 ms before the last
        let now = 7_999 * Self.millisecond / 10  // the last one's time: 2,999 is 500 ms old, still in
        let asked = [0, 2_998, 2_999, 3_000, 4_095, 4_096, 6_006, 7_999]
        let answers = history.answer(Self.nack(asked.map { first &+ UInt16($0) }), now: now)
        let expected = asked.filter { $0 >= 2_999 }.map { Self.packet(first &+ UInt16($0), size: size($0)) }
        let same = answers == expected  // (compared apart: a failure would print every byte)
        #expect(same && answers.count == 6)
        #expect(history.rejected == [.tooOld: 2])
    }

    /// Over 65,536 packets within `rtxTime`: the numbers wrap inside the history, each number
    /// holds its newest packet, and the history holds one packet per number.
    @Test func aWrapWithinTheHistoryKeepsTheNewerPacket() {
        var history = RetransmissionHistory(ssrc: 1, rtxTime: 500 * Self.millisecond, sameSSRC: true, maxBytes: 1 << 30)
        for index in 0..<70_000 {
            let sequence = UInt16(truncatingIfNeeded: index)
            var packet = Self.packet(sequence, size: 4)
            packet[12] = UInt8(index >> 16)  // which pass of the numbers
            packet.withUnsafeBytes { history.record($0, at: 0) }
        }
        #expect(history.count == 65_536)
        let answers = history.answer(Self.nack([100, 4_463, 4_464, 65_535]), now: 0)
        // Byte 12 says the pass: 100 and 4,463 were sent again (as packets 65,636 and 69,999).
        #expect(answers.map { $0[12] } == [1, 1, 0, 0])
        #expect(answers.map { UInt16($0[2]) << 8 | UInt16($0[3]) } == [100, 4_463, 4_464, 65_535])
    }

    /// Packets of 44 to 3,012 bytes, one a millisecond, under both bounds at once
    /// (100 ms and 120,000 bytes, each binding in turn): the ring of bytes wraps, grows and is
    /// reused many times over, and after every packet the history holds exactly the newest
    /// packets both bounds allow, each answered with its own bytes (a packet written over a
    /// live one is caught by the next look), while the ring stays within `maxBytes` and two
    /// largest datagrams.
    @Test func packetsOfRandomSizesUnderBothBoundsAreEachAnsweredWithTheirOwnBytes() {
        let maxBytes = 120_000
        var history = RetransmissionHistory(ssrc: 1, rtxTime: 100 * Self.millisecond, sameSSRC: true, maxBytes: maxBytes)
        history.minRepeatInterval = 0  // each look asks for every packet again
        var state: UInt32 = 12_345
        var sent: [[UInt8]] = []
        var wrong = 0
        var tooOld = 0
        for index in 0..<4_000 {
            state = state &* 1_664_525 &+ 1_013_904_223
            // Sizes up to a cap that rises over the first 3,000 packets: the bytes live at once
            // grow while the ring has wrapped, so a packet must not go over the oldest's bytes.
            let packet = Self.packet(UInt16(truncatingIfNeeded: index), size: 32 + Int(state >> 8) % (1 + min(index, 2_968)))
            sent.append(packet)
            let now = Int64(index) * Self.millisecond
            packet.withUnsafeBytes { history.record($0, at: now) }
            // The newest packets within 100 ms whose bytes add up to at most maxBytes.
            var kept = 0
            var bytes = 0
            while kept <= 100, kept < sent.count, bytes + sent[sent.count - 1 - kept].count <= maxBytes {
                bytes += sent[sent.count - 1 - kept].count
                kept += 1
            }
            let asked = (max(0, sent.count - kept - 3)..<sent.count).map { UInt16(truncatingIfNeeded: $0) }
            let answers = history.answer(Self.nack(asked), now: now)
            // (Counted, not expected one by one: a failure would print every byte.)
            if history.count != kept || answers != Array(sent.suffix(kept)) { wrong += 1 }
            tooOld += asked.count - kept
            #expect(history.storeCapacity <= maxBytes + 2 * 65_536)
        }
        #expect(wrong == 0)
        #expect(tooOld > 10_000 && history.rejected == [.tooOld: tooOld])
    }

    @Test func theHistoryIsBoundedInBytes() {
        var history = RetransmissionHistory(ssrc: 1, maxBytes: 10 * 1012)
        for sequence: UInt16 in 0..<50 { Self.packet(sequence).withUnsafeBytes { history.record($0, at: 0) } }
        #expect(history.count == 10)
        #expect(history.answer(Self.nack([39, 40, 49]), now: 0).count == 2)
        #expect(history.rejected == [.tooOld: 1])
    }
}
