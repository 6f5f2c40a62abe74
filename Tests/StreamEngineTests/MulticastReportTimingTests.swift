import MediaFormats
import Testing
import UringIO
@testable import StreamEngine

/// A multicast receiver's reports: receiver reports at the RFC 3550 interval for the group's
/// size (from the sender's RSI), no per-packet feedback, a last report at the end.
@Suite struct MulticastReportTimingTests {
    static let group = SocketAddress(ip: "239.1.2.3", port: 5004)!
    static let millisecond = ReceiveSessionTests.millisecond

    /// A session fed `frames` at 30 fps (a frame every 33 ms), its timeouts run every ms;
    /// `rtcpAt(frameIndex)` gives RTCP from the sender to deliver before that frame.
    struct Run {
        var session: ReceiveSession
        var now = ReceiveSessionTests.start
        var reports: [(time: Int64, packets: [RTCPPacket])] = []

        init(listen: SocketAddress) {
            session = ReceiveSession(config: MediaReceiverConfig(listen: listen), ssrc: 0xFEED, cname: "test")
        }

        mutating func drain() {
            while let output = session.pollOutput() {
                if case .transmit(let transmit) = output {
                    reports.append((now, RTCPPacket.parseCompound(transmit.bytes).packets))
                    session.recordFeedbackSend(succeeded: true)
                }
            }
        }

        mutating func play(_ frames: [ReceiveSessionTests.Frame], rtcpAt: (Int) -> [UInt8]? = { _ in nil }) {
            for (index, frame) in frames.enumerated() {
                if let rtcp = rtcpAt(index) {
                    session.handleDatagram(rtcp, from: SocketAddress(ip: "10.0.0.2", port: 5005)!, arrival: now,
                                           port: .rtcp, now: now)
                    drain()
                }
                for datagram in frame.datagrams {
                    session.handleDatagram(datagram, from: ReceiveSessionTests.sender, arrival: now, now: now)
                    drain()
                }
                for _ in 0..<33 {
                    now += MulticastReportTimingTests.millisecond
                    if let deadline = session.nextDeadline, now >= deadline {
                        session.handleTimeout(now: now)
                        drain()
                    }
                }
            }
        }
    }

    func senderReport(groupSize: UInt32?) -> [UInt8] {
        var packets: [RTCPPacket] = [.senderReport(RTCPSenderReport(ssrc: ReceiveSessionTests.ssrc, ntpTimestamp: 1 << 32,
                                                                     rtpTimestamp: 0, packetCount: 0, octetCount: 0))]
        if let groupSize {
            packets.append(.receiverSummary(RTCPReceiverSummary(
                ssrc: ReceiveSessionTests.ssrc, summarizedSSRC: ReceiveSessionTests.ssrc, ntpTimestamp: 1 << 32,
                subReports: [.groupAndAveragePacketSize(groupSize: groupSize, averagePacketSize: 100)])))
        }
        return RTCPCompoundBuilder.build(packets)
    }

    /// 10 s of a ~1 Mbit/s stream: a unicast receiver reports every 20 ms with per-packet
    /// feedback; a receiver of a group of two (itself and the sender) sends receiver reports
    /// only, at the reduced minimum (360 / ~1,000 kbit/s, about 0.35 s), so about 30 of them.
    @Test func aGroupReceiverReportsAtTheRFC3550Interval() {
        let frames = ReceiveSessionTests.stream(frames: 300)
        var unicast = Run(listen: SocketAddress(ip: "0.0.0.0", port: 5004)!)
        unicast.play(frames)
        var multicast = Run(listen: Self.group)
        multicast.play(frames)
        #expect(unicast.reports.count > 250)
        #expect(multicast.reports.count >= 10 && multicast.reports.count <= 60, "\(multicast.reports.count)")
        let kinds = multicast.reports.flatMap(\.packets)
        #expect(!kinds.contains { if case .congestionControlFeedback = $0 { return true } else { return false } })
        #expect(multicast.reports.allSatisfy { if case .receiverReport = $0.packets.first { return true } else { return false } })
        let stats = multicast.session.stats
        #expect(stats.rtcpMembers == 2)
        #expect((stats.rtcpIntervalSeconds ?? 0) > 0.1 && (stats.rtcpIntervalSeconds ?? 9) < 1)
        #expect(unicast.session.stats.rtcpMembers == nil && unicast.session.stats.rtcpIntervalSeconds == nil)
        // The end of the stream is reported at once.
        let before = multicast.reports.count
        multicast.session.finish(now: multicast.now)
        multicast.drain()
        #expect(multicast.reports.count == before + 1)
    }

    /// The sender's RSI says the group has 999 receivers: the interval grows to ~30 s (999 x
    /// ~128 octets over 75 % of 5 % of ~1 Mbit/s), and the reports stop for the rest of the 10 s.
    @Test func theSendersGroupSizeStretchesTheInterval() {
        let frames = ReceiveSessionTests.stream(frames: 300)
        var run = Run(listen: Self.group)
        run.play(frames) { $0 == 60 ? senderReport(groupSize: 999) : nil }  // at 2 s
        let stats = run.session.stats
        #expect(stats.rtcpMembers == 1000)
        #expect((stats.rtcpIntervalSeconds ?? 0) > 10, "\(String(describing: stats.rtcpIntervalSeconds))")
        let afterSummary = run.reports.filter { $0.time > ReceiveSessionTests.start + 2_100 * Self.millisecond }
        #expect(afterSummary.count <= 1, "\(afterSummary.map(\.time))")
        #expect(run.reports.count >= 2)  // before the summary, a group of two
    }

    /// A sender that knows no receiver yet (group size 0): still this receiver and the sender.
    @Test func anEmptyGroupIsStillTwoMembers() {
        var run = Run(listen: Self.group)
        run.play(ReceiveSessionTests.stream(frames: 30)) { $0 == 5 ? senderReport(groupSize: 0) : nil }
        #expect(run.session.stats.rtcpMembers == 2)
    }
}
