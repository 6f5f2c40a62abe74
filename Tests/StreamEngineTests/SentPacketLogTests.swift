import MediaFormats
import Testing
@testable import StreamEngine

struct SentPacketLogTests {
    /// A receiver that reports only its highest sequence number: a report covering packets
    /// already declared lost for their age confirms them after all; counts stay exact.
    @Test func cumulativeReportsConfirmPacketsDeclaredLostForTheirAge() {
        var log = SentPacketLog(capacity: 64)
        for sequence in 1000..<1010 { log.recordSent(sequence: Int64(sequence), bytes: 100, at: Int64(sequence)) }
        #expect(log.expireUnconfirmed(sentBefore: 1006) == 6)  // 1000...1005 too old
        #expect(log.lost == 6 && log.unconfirmedPackets == 4)
        log.confirmThrough(1007)
        #expect(log.confirmed == 8 && log.lost == 0 && log.unconfirmedPackets == 2)
        log.confirmThrough(1003)  // an older report changes nothing
        #expect(log.confirmed == 8 && log.lost == 0)
        log.confirmThrough(1009)
        #expect(log.confirmed == 10 && log.unconfirmedPackets == 0 && log.unconfirmedBytes == 0)
        log.confirmThrough(2000)  // beyond what was sent: nothing more
        #expect(log.confirmed == 10 && log.sent == 10)
    }

    /// Per-packet feedback: the send time of the newest-sent packet confirmed, whatever its
    /// size and the order of the confirmations (what overtook the flow's retransmissions).
    @Test func theNewestConfirmedSendTimeIsKept() {
        var log = SentPacketLog(capacity: 64)
        #expect(log.newestConfirmedSentAt == .min)
        for sequence in 0..<6 { log.recordSent(sequence: Int64(sequence), bytes: 100 + sequence, at: 1_000 + Int64(sequence)) }
        log.confirm(3)
        #expect(log.newestConfirmedSentAt == 1_003)
        log.confirm(1)  // an older one confirmed later moves nothing
        #expect(log.newestConfirmedSentAt == 1_003)
        _ = log.expireUnconfirmed(sentBefore: 1_005)
        log.confirm(4)  // declared lost for its age, then confirmed
        #expect(log.newestConfirmedSentAt == 1_004)
    }
}

struct SentPacketLogLostPacketsTests {
    /// The packets declared lost keep their size and send time (the path-MTU controller counts
    /// the sends a streak of large losses came from), once each, only when asked for.
    @Test func lostPacketsCarryTheirSizeAndSendTime() {
        var log = SentPacketLog(capacity: 64)
        log.recordsLostPackets = true
        for sequence in 0..<6 { log.recordSent(sequence: Int64(sequence), bytes: 1000 + sequence, at: 100 + Int64(sequence / 3)) }
        #expect(log.expireUnconfirmed(sentBefore: 101) == 3)
        #expect(log.takeLostPackets() == (0..<3).map { SentPacketLog.LostPacket(bytes: Int32(1000 + $0), sentAt: 100) })
        #expect(log.takeLostPackets().isEmpty)
        log.confirm(4)
        #expect(log.expireUnconfirmed(sentBefore: 102) == 2)  // 3 and 5; 4 confirmed
        #expect(log.takeLostPackets().map(\.bytes) == [1003, 1005] && log.lost == 5)
        var unrecorded = SentPacketLog(capacity: 64)
        unrecorded.recordSent(sequence: 0, bytes: 1000, at: 0)
        #expect(unrecorded.expireUnconfirmed(sentBefore: 1) == 1)
        #expect(unrecorded.takeLostPackets().isEmpty)
    }
}

struct SentPacketLogMoveTests {
    /// A flow that moves to another receiver writes off what the old one had not confirmed:
    /// out of the unconfirmed count, not lost; the new receiver's cumulative report does not
    /// claim them; the four states always add up to what was sent.
    @Test func movingAwayAbandonsWhatIsUnconfirmed() {
        var log = SentPacketLog(capacity: 64)
        for sequence in 0..<10 { log.recordSent(sequence: Int64(sequence), bytes: 100, at: Int64(sequence)) }
        for sequence in 0..<4 { log.confirm(Int64(sequence)) }
        #expect(log.expireUnconfirmed(sentBefore: 5) == 1)  // 4 too old
        #expect(log.abandonUnconfirmed() == 5)  // 5...9
        #expect(log.abandoned == 5 && log.unconfirmedPackets == 0 && log.unconfirmedBytes == 0 && log.lost == 1)
        for sequence in 10..<14 { log.recordSent(sequence: Int64(sequence), bytes: 100, at: Int64(sequence)) }
        log.confirmThrough(13)  // the new receiver's highest: its own packets only, and the lost one
        #expect(log.confirmed == 9 && log.abandoned == 5 && log.lost == 0 && log.unconfirmedPackets == 0)
        #expect(log.confirm(7) == .confirmed)  // per-packet word that one arrived after all
        #expect(log.abandoned == 4 && log.confirmed == 10)
        #expect(log.sent == log.confirmed + log.lost + log.unconfirmedPackets + log.abandoned)
    }
}

struct SentPacketLogSilenceTests {
    /// A receiver that never reported: what age declared lost and what is unconfirmed become
    /// abandoned; a per-packet confirmation arriving after all still counts.
    @Test func silenceTurnsGuessedLossIntoAbandoned() {
        var log = SentPacketLog(capacity: 64)
        for sequence in 0..<10 { log.recordSent(sequence: Int64(sequence), bytes: 100, at: Int64(sequence)) }
        #expect(log.expireUnconfirmed(sentBefore: 6) == 6)
        #expect(log.abandonUnreported() == 10)
        #expect(log.lost == 0 && log.unconfirmedPackets == 0 && log.abandoned == 10 && log.unconfirmedBytes == 0)
        #expect(log.abandonUnreported() == 0)
        #expect(log.confirm(2) == .confirmed && log.abandoned == 9 && log.confirmed == 1)
        #expect(log.sent == log.confirmed + log.lost + log.unconfirmedPackets + log.abandoned)
    }
}

struct SenderRTTTests {
    /// Receiver reports that answer the same sender report (LSR) again, with a longer DLSR,
    /// are one round trip, not several: only a new LSR makes a new RTT sample.
    @Test func oneSamplePerSenderReport() throws {
        let ssrc: UInt32 = 0x1234_5678
        let feedback = SenderFeedback(ssrc: ssrc, cname: "test")
        let flow = try MediaFlow(route: 0, maxDatagramSize: 1200)
        let second: Int64 = 1_000_000_000
        let sentAt = 1_800_000_000 * second  // the sender report's NTP time, realtime
        let lsr = NTPTime(unixSeconds: sentAt / second, nanoseconds: 0).compact
        func report(lastSR: UInt32, dlsrMilliseconds: UInt32) -> [UInt8] {
            let block = RTCPReportBlock(ssrc: ssrc, fractionLost: 0, cumulativeLost: 0, extendedHighestSequence: 0,
                                        jitter: 0, lastSR: lastSR, delaySinceLastSR: dlsrMilliseconds * 65_536 / 1000)
            return RTCPCompoundBuilder.build([.receiverReport(RTCPReceiverReport(ssrc: 7, reportBlocks: [block]))])
        }
        func deliver(_ bytes: [UInt8], at realtime: Int64) {
            _ = bytes.withUnsafeBytes { feedback.handle($0, flow: flow, now: realtime, realtime: realtime) }
        }
        // The first answer: 50 ms after the SR, 10 ms held at the receiver: 40 ms.
        deliver(report(lastSR: lsr, dlsrMilliseconds: 10), at: sentAt + 50_000_000)
        #expect(abs((feedback.rttLast ?? 0) - 40) < 0.1)
        let firstAt = feedback.rttLastAt
        #expect(firstAt == sentAt + 50_000_000)
        // The same SR answered again 20 ms later (30 ms held): no new sample.
        deliver(report(lastSR: lsr, dlsrMilliseconds: 30), at: sentAt + 70_000_000)
        #expect(feedback.rttLastAt == firstAt)
        // A new SR (sent 100 ms later) with a 60 ms round trip is a new sample.
        let lsr2 = NTPTime(unixSeconds: sentAt / second, nanoseconds: 100_000_000).compact
        deliver(report(lastSR: lsr2, dlsrMilliseconds: 5), at: sentAt + 165_000_000)
        #expect(abs((feedback.rttLast ?? 0) - 60) < 0.1)
        #expect(feedback.rttLastAt == sentAt + 165_000_000)
        let smoothed: Double = feedback.rttSmoothed ?? 0
        let expected: Double = 40.0 * 7 / 8 + 60.0 / 8
        #expect(abs(smoothed - expected) < 0.1)
    }
}

struct RTCPCompoundTests {
    /// RFC 3550 6.1: every compound packet either end sends is a report followed by an SDES
    /// with the sender's CNAME (RFC 7022: 96 random bits, base64), and the rest after that.
    @Test func reportsCarryTheirCNAME() throws {
        let cname = RTCPSourceDescription.randomCNAME()
        let decoded = try Base64.decode(cname)
        #expect(cname.count == 16 && decoded.count == 12)
        #expect(RTCPSourceDescription.randomCNAME() != cname)
        let sender = SenderFeedback(ssrc: 77, cname: cname)
        let flow = try MediaFlow(route: 0, maxDatagramSize: 1200)
        let report = sender.senderReport(flow: flow, realtime: 1_800_000_000_000_000_000, packets: 3, octets: 3000,
                                         mediaFlowing: true)
        let sent = RTCPPacket.parseCompound(report)
        #expect(sent.errors.isEmpty)
        try #require(sent.packets.count == 2)
        guard case .senderReport(let sr) = sent.packets[0], case .sourceDescription(let sdes) = sent.packets[1] else {
            Issue.record("not SR then SDES: \(sent.packets)")
            return
        }
        #expect(sr.ssrc == 77 && sr.packetCount == 3 && sr.octetCount == 3000)
        #expect(sdes.chunks == [.init(ssrc: 77, cname: RTCPText(cname))])
        // With an RTX stream (RFC 4588 8.3), the SDES binds it to the media by the same CNAME.
        sender.rtxSSRC = 78
        let withRTX = RTCPPacket.parseCompound(sender.senderReport(flow: flow, realtime: 1_800_000_000_000_000_000, packets: 3,
                                                                   octets: 3000, mediaFlowing: true))
        guard case .sourceDescription(let both) = withRTX.packets.last else { Issue.record("no SDES: \(withRTX.packets)"); return }
        #expect(both.chunks == [.init(ssrc: 77, cname: RTCPText(cname)), .init(ssrc: 78, cname: RTCPText(cname))])

        var receiver = ReceiverFeedback(ssrc: 99, cname: "receiver-cname")
        var tracker = RTPSequenceTracker()
        _ = tracker.record(sequence: 1000, rtpTimestamp: 0, arrival: 0)
        receiver.record(sequence: 1000, arrival: 5_000_000, ecn: 2, marker: true)
        receiver.requestKeyframe()
        let datagrams = receiver.makeReports(now: 6_000_000, mediaSSRC: 77, tracker: &tracker)
        try #require(datagrams.count == 1)
        let answer = RTCPPacket.parseCompound(datagrams[0])
        #expect(answer.errors.isEmpty)
        try #require(answer.packets.count == 4)
        guard case .receiverReport(let rr) = answer.packets[0], case .sourceDescription(let rsdes) = answer.packets[1],
              case .congestionControlFeedback = answer.packets[2], case .pictureLossIndication = answer.packets[3] else {
            Issue.record("not RR, SDES, CCFB, PLI: \(answer.packets)")
            return
        }
        #expect(rr.ssrc == 99 && rr.reportBlocks.first?.ssrc == 77)
        #expect(rsdes.chunks == [.init(ssrc: 99, cname: "receiver-cname")])
    }
}
