import Foundation
import Glibc
import MediaFormats
import SecureRTP
import StreamEngine
import Testing
import UringIO

/// The engine with SRTP on: everything on the wire protected, and only what authenticates
/// reaches the receive session or the sender's feedback logic.
@Suite(.enabled(if: uringAvailable, "io_uring is disabled on this kernel"))
struct SRTPEngineTests {
    static let suites = SRTPSuite.allCases.filter { $0 != .aeadAES256GCM && SRTPSession.isSupported($0) }

    /// Frames byte-identical through SRTP, the datagrams (tag included) within the MTU,
    /// every packet confirmed through SRTCP feedback, sender reports through both ways.
    @Test(arguments: suites)
    func streamArrivesByteIdenticalAndConfirmedThroughSRTP(suite: SRTPSuite) throws {
        let units = try encodeSynthetic(count: 90, width: 320, height: 180, bitrateKbps: 1500)
        let key = SRTPMasterKey.random(suite: suite)
        let result = try sendThroughEngine(units, mtu: .fixed(1280)) { sender, receiver in
            sender.srtp = key
            receiver.srtp = key
        }
        #expect(result.received.map(\.annexB) == units.map(\.annexB))
        #expect(result.receiver.framesComplete == units.count)
        #expect(result.receiver.lost == 0)
        #expect(result.sender.datagramSize <= 1280 - 28)
        #expect(result.sender.datagramSize >= 1280 - 28 - 10)  // large frames fill the MTU, tag included
        #expect(result.sender.clamped == 0)
        let sent = try #require(result.sender.srtp)
        let got = try #require(result.receiver.srtp)
        #expect(sent.suite == suite && got.suite == suite)
        #expect(sent.rtpProtected == result.sender.packetsSent)
        #expect(got.rtpUnprotected == result.receiver.received)
        #expect(got.rejected.isEmpty && sent.rejected.isEmpty && sent.protectFailed == 0)
        // Feedback and sender reports authenticated both ways.
        #expect(result.sender.packetsConfirmed == result.receiver.received)
        #expect(sent.rtcpUnprotected == result.sender.feedbackReports && sent.rtcpUnprotected > 0)
        #expect(got.rtcpProtected == result.receiver.feedbackSent)
        #expect(got.rtcpUnprotected == result.receiver.senderReports)
    }

    /// With rtcp-mux (RFC 5761) SRTCP and SRTP share the ports: the receiver tells them apart by
    /// the packet type in the clear header and authenticates each as what it is.
    @Test func rtcpMuxedThroughSRTP() throws {
        let units = try encodeSynthetic(count: 30, width: 320, height: 180, bitrateKbps: 1500)
        let key = SRTPMasterKey.random()
        // Paced slowly enough (about half a second) for sender reports to go out meanwhile.
        let bytes = units.reduce(0) { $0 + $1.byteCount }
        let result = try sendThroughEngine(units, mtu: .fixed(1500), pace: Double(bytes * 8) * 2) { sender, receiver in
            sender.srtp = key
            sender.rtcpMux = true
            receiver.srtp = key
            receiver.rtcpMux = true
        }
        #expect(result.received.map(\.annexB) == units.map(\.annexB))
        #expect(result.sender.packetsConfirmed == result.receiver.received)
        #expect(result.receiver.senderReports > 0 && result.receiver.srtp?.rtcpUnprotected == result.receiver.senderReports)
        #expect(result.receiver.srtp?.rejected.isEmpty == true && result.sender.srtp?.rejected.isEmpty == true)
    }

    /// With `mtu` auto and SRTP no probe goes out (its sequence number would reuse an SRTP
    /// packet index); the flow is sized from the kernel's view, tag included.
    @Test func noPathMTUProbesWithSRTP() throws {
        let units = try encodeSynthetic(count: 30, width: 320, height: 180, bitrateKbps: 1500)
        let key = SRTPMasterKey.random()
        let result = try sendThroughEngine(units, mtu: .auto) { sender, receiver in
            sender.srtp = key
            receiver.srtp = key
        }
        #expect(result.received.map(\.annexB) == units.map(\.annexB))
        #expect(result.sender.probesSent == 0 && result.receiver.probesReceived == 0)
        #expect(result.sender.datagramSize <= result.sender.pathMTU - 28)
        #expect(result.receiver.srtp?.rejected.isEmpty == true && result.sender.srtp?.protectFailed == 0)
    }

    /// A receiver with another key takes nothing: no packet, no frame, no feedback that
    /// the sender believes; every datagram is counted as failing authentication.
    @Test func aReceiverWithAnotherKeyGetsNothing() throws {
        let background = try BackgroundReceiver(frameLimit: nil, srtp: .random())
        var config = MediaSenderConfig(destination: background.receiver.localAddress)
        config.srtp = .random()
        config.paceBitsPerSecond = 20_000_000
        config.finalFeedbackWait = .milliseconds(200)
        let units = try encodeSynthetic(count: 30, width: 320, height: 180, bitrateKbps: 1500)
        config.maxQueuedFrames = units.count
        let sender = try MediaSender(config: config)
        for unit in units { sender.send(unit) }
        sender.finish()
        try sender.run()
        let deadline = Date().addingTimeInterval(5)
        // Its last RTCP, the BYE compound, fails authentication too: dropped and counted.
        let expected = sender.stats.packetsSent + sender.stats.senderReports + sender.stats.byeSent
        while (background.receiver.stats.srtp?.rejectedTotal ?? 0) < expected && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.02)
        }
        let received = background.finish(within: 0)
        let stats = background.receiver.stats
        #expect(received.isEmpty)
        #expect(stats.received == 0 && stats.senderReports == 0 && stats.rejected.isEmpty)
        #expect(sender.stats.byeSent == 1 && stats.byeReceived == 0)
        #expect(stats.srtp?.rejected == [.authFailed: expected])
        #expect(stats.feedbackSent == 0)
        #expect(sender.stats.packetsConfirmed == 0 && sender.stats.feedbackReports == 0)
    }

    /// ReceiverDefenceTests with SRTP: an attacker that knows the address and port but not the
    /// key sends plain RTP and SRTP-shaped packets with made-up tags. Nothing moves but the
    /// SRTP rejection counters; the genuine stream that follows is taken whole.
    @Test func receiverTakesNothingUnauthenticated() throws {
        let key = SRTPMasterKey.random()
        let background = try BackgroundReceiver(frameLimit: nil, feedback: false, srtp: key)
        let receiver = background.receiver
        let socket = try UDPSocket(family: .ipv4)
        try socket.connect(receiver.localAddress)
        var generator = SystemRandomNumberGenerator()
        for index in 0..<50 {
            try sendStubFrame(socket, sequence: UInt16(100 + index), timestamp: UInt32(9000 * index))  // plain RTP
            var shaped = RTPHeader(marker: true, payloadType: 96, sequenceNumber: UInt16(200 + index),
                                   timestamp: UInt32(9000 * index), ssrc: 7).bytes
            shaped += (0..<40).map { _ in UInt8.random(in: 0...255, using: &generator) }  // payload and a "tag"
            _ = try shaped.withUnsafeBytes { try PlainUDP.sendTo(socket, $0) }
        }
        let deadline = Date().addingTimeInterval(5)
        while (receiver.stats.srtp?.rejectedTotal ?? 0) < 100 && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        var stats = receiver.stats
        #expect(stats.srtp?.rejected == [.malformed: 50, .authFailed: 50])  // stub frames are shorter than header + tag
        #expect(stats.received == 0 && stats.rejected.isEmpty && stats.framesComplete == 0)

        // The genuine stream, protected with the key: every frame.
        let outbound = try SRTPSession(key: key, direction: .outbound)
        for index in 0..<10 {
            var packet = RTPHeader(marker: true, payloadType: 96, sequenceNumber: UInt16(300 + index),
                                   timestamp: UInt32(9000 + 3000 * index), ssrc: 8).bytes
            packet += [19 << 1, 1, 0x80, 0x11, 0x22]
            let wire = try #require(outbound.protect(packet, kind: .rtp))
            _ = try wire.withUnsafeBytes { try PlainUDP.sendTo(socket, $0) }
        }
        while receiver.stats.received < 10 && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        Thread.sleep(forTimeInterval: 0.05)
        let received = background.finish(within: 0)
        stats = receiver.stats
        #expect(stats.received == 10 && stats.lost == 0 && stats.rejected.isEmpty)
        #expect(received.count == 10 && received.allSatisfy(\.isComplete))
        #expect(stats.srtp?.rtpUnprotected == 10 && stats.srtp?.rejectedTotal == 100)
    }

    /// FeedbackDefenceTests with SRTP: the attacker has the receiver's address and ports and
    /// sees the stream's SSRC, but not the key. Its forged confirmations and 1000 PLIs, plain
    /// and SRTCP-shaped (E flag, index, a made-up tag), move no counter but SRTP's rejections.
    @Test func forgedFeedbackWithoutTheKeyMovesOnlyRejectionCounters() throws {
        let (sender, done, rtcp, header, senderRTCP) = try startSenderToHandMadeReceiver(srtp: .random())
        let (forged, pli) = forgedFeedback(ssrc: header.ssrc, sequence: header.sequenceNumber)
        var generator = SystemRandomNumberGenerator()
        func shaped(_ packet: [UInt8], index: UInt32) -> [UInt8] {
            packet + withUnsafeBytes(of: (0x8000_0000 | index).bigEndian) { Array($0) }
                + (0..<10).map { _ in UInt8.random(in: 0...255, using: &generator) }
        }
        var datagrams = [forged, shaped(forged, index: 1)]
        for index in 0..<500 { datagrams += [pli, shaped(pli, index: UInt32(index + 2))] }
        // In bursts of 20, each sent once the last is counted: all of them reach the sender
        // (a flood past its socket buffer would be dropped by the kernel, and only counted
        // when a later datagram arrives), which runs on until then (its input is not finished).
        func counted() -> Int { (sender.stats.srtp?.rejectedTotal ?? 0) + sender.stats.feedbackKernelDrops }
        let deadline = Date().addingTimeInterval(20)
        for start in stride(from: 0, to: datagrams.count, by: 20) {
            for datagram in datagrams[start..<min(start + 20, datagrams.count)] {
                _ = try datagram.withUnsafeBytes { try PlainUDP.sendTo(rtcp, $0, destination: senderRTCP) }
            }
            while counted() < min(start + 20, datagrams.count) && Date() < deadline { Thread.sleep(forTimeInterval: 0.005) }
        }
        sender.finish()
        done.wait()
        let stats = sender.stats
        let srtp = try #require(stats.srtp)
        #expect(stats.feedbackRejected.isEmpty && stats.feedbackReports == 0)
        #expect(stats.packetsConfirmed == 0 && stats.ceReported == 0)
        #expect(stats.keyframeRequestsIgnored == 0, "a PLI reached the feedback logic")
        #expect(srtp.rtcpUnprotected == 0)
        // Each datagram rejected by SRTP or dropped by the kernel (a full buffer), counted.
        #expect(srtp.rejectedTotal + stats.feedbackKernelDrops == datagrams.count)
        #expect(srtp.rejected[.authFailed, default: 0] > 0)
        // A 12-byte PLI is shorter than an SRTCP header and trailer.
        #expect(Set(srtp.rejected.keys).isSubset(of: [.authFailed, .malformed]))
    }
}
