import Foundation
import Glibc
import MediaFormats
import StreamEngine
import Synchronization
import Testing
import UringIO

/// Feedback is not a weapon: forged confirmations are rejected and counted, and a flood of
/// keyframe requests forces at most one keyframe per interval.
@Suite(.enabled(if: uringAvailable, "io_uring is disabled on this kernel"))
struct FeedbackDefenceTests {
    @Test func forgedConfirmationsAndPLIFloodsAreContained() throws {
        // A hand-made receiver: RTP on an even port, RTCP on the next.
        var rtp: UDPSocket
        var rtcp: UDPSocket
        repeat {
            rtp = try UDPSocket(family: .ipv4)
            try rtp.bind(SocketAddress(ip: "127.0.0.1", port: 0)!)
            var next = try rtp.localAddress()
            next.port += 1
            rtcp = try UDPSocket(family: .ipv4)
            if (try? rtcp.bind(next)) != nil { break }
        } while true
        let destination = try rtp.localAddress()
        let units = try encodeSynthetic(count: 90, width: 160, height: 120, bitrateKbps: 300)
        var config = MediaSenderConfig(destination: destination)
        config.paceBitsPerSecond = 2_000_000
        config.maxQueuedFrames = units.count
        config.finalFeedbackWait = .zero
        let sender = try MediaSender(config: config)
        let done = DispatchSemaphore(value: 0)
        Thread {
            try? sender.run()
            done.signal()
        }.start()
        for unit in units { sender.send(unit) }

        // Learn the stream (SSRC, sender's address), then answer it with forged feedback.
        var buffer = [UInt8](repeating: 0, count: 65_536)
        try PlainUDP.setReceiveTimeout(rtp, nanoseconds: 2_000_000_000)
        var storage = sockaddr_storage()
        var storageLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let length = buffer.withUnsafeMutableBytes { raw in
            withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    recvfrom(rtp.fd, raw.baseAddress, raw.count, 0, $0, &storageLength)
                }
            }
        }
        try #require(length >= 12)
        let from = withUnsafeBytes(of: &storage) { SocketAddress($0.baseAddress!, length: Int(storageLength)) }
        let header = try RTPHeader.parse(Array(buffer[0..<length])).header
        var senderRTCP = try #require(from)
        senderRTCP.port += 1
        // Confirmations of 400 sequence numbers far ahead of anything sent.
        let forged = RTCPCompoundBuilder.build([
            .congestionControlFeedback(RTCPCongestionControlFeedback(
                senderSSRC: 99, reports: [.init(mediaSSRC: header.ssrc, beginSequence: header.sequenceNumber &+ 20_000,
                                                metrics: Array(repeating: .init(received: true, ecn: 3, arrivalTimeOffset: 1),
                                                               count: 400))],
                reportTimestamp: 1)),
        ])
        _ = try forged.withUnsafeBytes { try PlainUDP.sendTo(rtcp, $0, destination: senderRTCP) }
        // 1000 keyframe requests at once.
        let pli = RTCPCompoundBuilder.build([.pictureLossIndication(RTCPPictureLossIndication(senderSSRC: 99,
                                                                                              mediaSSRC: header.ssrc))])
        for _ in 0..<1000 { _ = try pli.withUnsafeBytes { try PlainUDP.sendTo(rtcp, $0, destination: senderRTCP) } }
        sender.finish()
        done.wait()
        let stats = sender.stats
        #expect(stats.feedbackRejected[.confirmsUnsentPacket] == 400)
        #expect(stats.packetsConfirmed == 0)
        #expect(stats.ceReported == 0)
        #expect(stats.keyframeRequests <= 2, "forced \(stats.keyframeRequests) keyframes")
        // Every PLI is either handled (forced or ignored) or was dropped by the kernel, counted.
        #expect(stats.keyframeRequestsIgnored > 0)
        #expect(stats.keyframeRequests + stats.keyframeRequestsIgnored + stats.feedbackKernelDrops <= 1000)
        // What the sender sent back on RTCP: sender reports on its own clock, no more.
        var answers = 0
        try PlainUDP.setReceiveTimeout(rtcp, nanoseconds: 10_000_000)
        while let count = try buffer.withUnsafeMutableBytes({ raw throws(SystemError) in
            try PlainUDP.receiveFrom(rtcp, into: raw)
        }), count > 0 {
            answers += 1
        }
        #expect(answers <= stats.senderReports)
        #expect(stats.senderReports < 100)
    }
}
