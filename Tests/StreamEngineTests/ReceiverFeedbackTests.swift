import MediaFormats
import Testing
@testable import StreamEngine

/// `ReceiverFeedback.makeReports` cuts what arrived since the last report into datagrams of at
/// most `metricsPerDatagram` sequence numbers each: every arrival is reported once, in order.
@Suite struct ReceiverFeedbackTests {
    /// Reported sequence numbers (received metrics) of each datagram's CCFB.
    static func reported(_ datagram: [UInt8]) -> [Int] {
        var sequences: [Int] = []
        for case .congestionControlFeedback(let ccfb) in RTCPPacket.parseCompound(datagram).packets {
            for report in ccfb.reports {
                for (offset, metric) in report.metrics.enumerated() where metric.received {
                    sequences.append(Int(report.beginSequence) + offset)
                }
            }
        }
        return sequences
    }

    @Test(arguments: [1, 479, 480, 481, 1000, 2000])
    func everyArrivalIsReportedOnceInDatagramsOfAtMostOneCCFBsSpan(count: Int) {
        var feedback = ReceiverFeedback(ssrc: 9, cname: "r")
        var tracker = RTPSequenceTracker()
        // Out of order within each run of ten, one in 97 lost: the cut is by sequence number.
        let lost = Set(stride(from: 50, to: count, by: 97))
        for base in stride(from: 0, to: count, by: 10) {
            for sequence in (base..<min(base + 10, count)).reversed() where !lost.contains(sequence) {
                _ = tracker.record(sequence: UInt16(sequence), rtpTimestamp: 0, arrival: 0)
                feedback.record(sequence: UInt16(sequence), arrival: 1_000_000, ecn: 0, marker: false)
            }
        }
        let datagrams = feedback.makeReports(now: 2_000_000, mediaSSRC: 7, tracker: &tracker)
        let expected = (0..<count).filter { !lost.contains($0) }
        #expect(datagrams.count == (expected.last! - expected.first!) / ReceiverFeedback.metricsPerDatagram + 1)
        #expect(datagrams.flatMap(Self.reported) == expected)
        for datagram in datagrams {
            let span = Self.reported(datagram)
            #expect(span.last! - span.first! < ReceiverFeedback.metricsPerDatagram)
        }
        #expect(!feedback.hasNews)
    }

    /// Packets lost between two reports' arrivals (1005 and 1006: after the first report's last
    /// arrival, before the second's first) are reported missing: a report begins after the last
    /// one covered, so the sender's controller sees a loss at a report's edge. One far behind
    /// (a sender's restart, 1,000 numbers on) starts a report of its own at its first arrival.
    @Test func aLossAtAReportsEdgeIsReportedMissing() throws {
        var feedback = ReceiverFeedback(ssrc: 9, cname: "r")
        var tracker = RTPSequenceTracker()
        func report(_ sequences: ClosedRange<UInt16>) -> [RTCPCongestionControlFeedback.StreamReport] {
            for sequence in sequences {
                _ = tracker.record(sequence: sequence, rtpTimestamp: 0, arrival: 0)
                feedback.record(sequence: sequence, arrival: 1_000_000, ecn: 0, marker: false)
            }
            return feedback.makeReports(now: 2_000_000, mediaSSRC: 7, tracker: &tracker)
                .flatMap { RTCPPacket.parseCompound($0).packets }
                .flatMap { packet -> [RTCPCongestionControlFeedback.StreamReport] in
                    if case .congestionControlFeedback(let ccfb) = packet { return ccfb.reports } else { return [] }
                }
        }
        let first = report(1000...1004)
        #expect(first.map(\.beginSequence) == [1000] && first[0].metrics.allSatisfy(\.received))
        let second = report(1007...1009)
        #expect(second.map(\.beginSequence) == [1005])
        #expect(second.first?.metrics.map(\.received) == [false, false, true, true, true])
        let third = report(2010...2011)
        #expect(third.map(\.beginSequence) == [2010] && third[0].metrics.count == 2)
    }

    /// `reportDue`: a frame's end (a packet with the marker bit) makes the report due an interval
    /// after the last one; packets of a frame not yet ended wait until an interval after the
    /// first of them, a sender report to answer three intervals after it arrived, whichever
    /// comes first; a PLI is due an interval after the last report, and so is everything when an
    /// arrival carries no kernel timestamp.
    @Test func aReportIsDueAtAFramesEndOrAnIntervalAfterTheFirstNews() {
        let millisecond: Int64 = 1_000_000
        let interval = 20 * millisecond
        var tracker = RTPSequenceTracker()
        var feedback = ReceiverFeedback(ssrc: 9, cname: "r")
        let first: Int64 = 1_800_000_000_000_000_000
        feedback.record(sequence: 1, arrival: first + 3 * millisecond, ecn: 0, marker: false)
        feedback.record(sequence: 2, arrival: first + 4 * millisecond, ecn: 0, marker: false)
        #expect(feedback.reportDue(lastReport: first, interval: interval) == first + 23 * millisecond)
        feedback.record(sequence: 3, arrival: first + 5 * millisecond, ecn: 0, marker: true)
        #expect(feedback.reportDue(lastReport: first, interval: interval) == first + 20 * millisecond)
        let second = first + 25 * millisecond
        #expect(Self.reported(feedback.makeReports(now: second, mediaSSRC: 7, tracker: &tracker)[0]) == [1, 2, 3])
        #expect(!feedback.hasNews)
        feedback.noteSenderReport(ntpTimestamp: 1 << 32, arrival: second + 2 * millisecond)
        #expect(feedback.reportDue(lastReport: second, interval: interval) == second + 62 * millisecond)
        feedback.record(sequence: 4, arrival: second + 10 * millisecond, ecn: 0, marker: false)
        #expect(feedback.reportDue(lastReport: second, interval: interval) == second + 30 * millisecond)
        feedback.requestKeyframe()
        #expect(feedback.reportDue(lastReport: second, interval: interval) == second + 20 * millisecond)
        let third = second + 30 * millisecond
        _ = feedback.makeReports(now: third, mediaSSRC: 7, tracker: &tracker)
        feedback.record(sequence: 5, arrival: 0, ecn: 0, marker: false)
        #expect(feedback.reportDue(lastReport: third, interval: interval) == third + 20 * millisecond)
    }

    /// Each metric says when its packet arrived and with which ECN codepoint: a gap is "not
    /// received", a duplicate is reported as its first arrival, a packet that arrived longer ago
    /// than the offset's range saturates it; retransmissions are reported under the RTX SSRC in
    /// a stream report of their own. The offsets are worked out here in 1/1024 s.
    @Test func metricsCarryEachArrivalsTimeAndECN() throws {
        var feedback = ReceiverFeedback(ssrc: 9, cname: "r")
        var tracker = RTPSequenceTracker()
        let now: Int64 = 1_800_000_000_000_000_000
        let millisecond: Int64 = 1_000_000
        // (sequence, arrival before now, ECN) in arrival order: 3 never, 5 twice, 8 before 7, 9 long ago.
        let arrivals: [(sequence: UInt16, before: Int64, ecn: UInt8)] = [
            (1, 90 * millisecond, 2), (2, 80 * millisecond, 0), (4, 60 * millisecond, 1), (5, 50 * millisecond, 2),
            (5, 45 * millisecond, 3), (6, 30 * millisecond, 3), (8, 20 * millisecond, 2), (7, 10 * millisecond, 1),
            (9, 9_000 * millisecond, 0),
        ]
        for arrival in arrivals {
            _ = tracker.record(sequence: arrival.sequence, rtpTimestamp: 0, arrival: 0)
            feedback.record(sequence: arrival.sequence, arrival: now - arrival.before, ecn: arrival.ecn, marker: false)
        }
        feedback.recordRetransmission(sequence: 301, arrival: now - 5 * millisecond, ecn: 2)
        feedback.recordRetransmission(sequence: 300, arrival: now - 7 * millisecond, ecn: 0)
        let datagrams = feedback.makeReports(now: now, mediaSSRC: 7, rtxSSRC: 11, tracker: &tracker)
        #expect(datagrams.count == 1)
        let ccfbs = datagrams.flatMap { RTCPPacket.parseCompound($0).packets }.compactMap { packet -> RTCPCongestionControlFeedback? in
            if case .congestionControlFeedback(let ccfb) = packet { return ccfb } else { return nil }
        }
        #expect(ccfbs.count == 1)
        let ccfb = try #require(ccfbs.first)
        func metric(before: Int64, ecn: UInt8) -> RTCPCongestionControlFeedback.Metric {
            let offset = min(before * 1024 / 1_000_000_000, 0x1FFE)
            return .init(received: true, ecn: ecn, arrivalTimeOffset: UInt16(offset))
        }
        let media: [RTCPCongestionControlFeedback.Metric] = [
            metric(before: 90 * millisecond, ecn: 2), metric(before: 80 * millisecond, ecn: 0), .notReceived,
            metric(before: 60 * millisecond, ecn: 1), metric(before: 50 * millisecond, ecn: 2), metric(before: 30 * millisecond, ecn: 3),
            metric(before: 10 * millisecond, ecn: 1), metric(before: 20 * millisecond, ecn: 2), metric(before: 9_000 * millisecond, ecn: 0),
        ]
        #expect(media[8].arrivalTimeOffset == 0x1FFE && media[0].arrivalTimeOffset == 92)
        #expect(ccfb.senderSSRC == 9)
        #expect(ccfb.reports == [
            .init(mediaSSRC: 7, beginSequence: 1, metrics: media),
            .init(mediaSSRC: 11, beginSequence: 300, metrics: [metric(before: 7 * millisecond, ecn: 0), metric(before: 5 * millisecond, ecn: 2)]),
        ])
        #expect(!feedback.hasNews)
    }
}
