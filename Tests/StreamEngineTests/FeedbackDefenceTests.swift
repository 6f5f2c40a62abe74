import Foundation
import Glibc
import MediaFormats
import SecureRTP
import StreamEngine
import Synchronization
import Testing
import UringIO

/// Feedback is not a weapon: forged confirmations are rejected and counted, and a flood of
/// keyframe requests forces at most one keyframe per interval.
@Suite(.enabled(if: uringAvailable, "io_uring is disabled on this kernel"))
struct FeedbackDefenceTests {
    @Test func forgedConfirmationsAndPLIFloodsAreContained() throws {
        let (sender, done, rtcp, header, senderRTCP) = try startSenderToHandMadeReceiver(srtp: nil)
        let (forged, pli) = forgedFeedback(ssrc: header.ssrc, sequence: header.sequenceNumber)
        _ = try forged.withUnsafeBytes { try PlainUDP.sendTo(rtcp, $0, destination: senderRTCP) }
        // 1000 keyframe requests at once.
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
        // What the sender sent back on RTCP: sender reports on its own clock and its BYE at the
        // end, no more.
        var answers = 0
        var buffer = [UInt8](repeating: 0, count: 65_536)
        try PlainUDP.setReceiveTimeout(rtcp, nanoseconds: 10_000_000)
        while let count = try buffer.withUnsafeMutableBytes({ raw throws(SystemError) in
            try PlainUDP.receiveFrom(rtcp, into: raw)
        }), count > 0 {
            answers += 1
        }
        #expect(answers <= stats.senderReports + stats.byeSent && stats.byeSent == 1)
        #expect(stats.senderReports < 100)
    }

    /// A PLI within the 500 ms after a forced keyframe is kept, not dropped (the receiver may
    /// have lost that very keyframe, and sends its PLI once): the first such one forces a
    /// keyframe when the 500 ms have passed; the others meanwhile are ignored.
    @Test func aPLIWithinTheIntervalIsDeferredNotDropped() throws {
        let (sender, done, rtcp, header, senderRTCP) = try startSenderToHandMadeReceiver(srtp: nil)
        let (_, pli) = forgedFeedback(ssrc: header.ssrc, sequence: header.sequenceNumber)
        for _ in 0..<5 { _ = try pli.withUnsafeBytes { try PlainUDP.sendTo(rtcp, $0, destination: senderRTCP) } }
        // The engine keeps running (idle: the frames are sent); wait for the deferred keyframe.
        let deadline = Date().addingTimeInterval(10)
        while sender.stats.keyframeRequests < 2 && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        sender.finish()
        done.wait()
        let stats = sender.stats
        #expect(stats.keyframeRequestsDeferred == 1)
        #expect(stats.keyframeRequests >= 2)
        #expect(stats.keyframeRequestsIgnored + stats.feedbackKernelDrops == 3)
    }
}

/// A hand-made receiver's sockets: RTP on an even port of 127.0.0.1, RTCP on the next.
func bindRTPPair() throws -> (rtp: UDPSocket, rtcp: UDPSocket) {
    while true {
        let rtp = try UDPSocket(family: .ipv4)
        try rtp.bind(SocketAddress(ip: "127.0.0.1", port: 0)!)
        var next = try rtp.localAddress()
        next.port += 1
        let rtcp = try UDPSocket(family: .ipv4)
        if (try? rtcp.bind(next)) != nil { return (rtp, rtcp) }
    }
}

/// Waits (20 s at most: it returns with the first packet, and the suite's parallel load has
/// kept a sender's first packet from a 2 s wait) for the first RTP packet on `rtp`: its header
/// (readable under SRTP too) and the sender's RTCP address (its RTP port + 1).
func learnStream(_ rtp: UDPSocket) throws -> (header: RTPHeader, senderRTCP: SocketAddress) {
    var buffer = [UInt8](repeating: 0, count: 65_536)
    try PlainUDP.setReceiveTimeout(rtp, nanoseconds: 20_000_000_000)
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
    return (header, senderRTCP)
}

/// Forged feedback for the stream of `ssrc`: confirmations (CE-marked) of 400 sequence numbers
/// far ahead of `sequence`, and one keyframe request.
func forgedFeedback(ssrc: UInt32, sequence: UInt16) -> (confirmations: [UInt8], pli: [UInt8]) {
    let confirmations = RTCPCompoundBuilder.build([
        .congestionControlFeedback(RTCPCongestionControlFeedback(
            senderSSRC: 99, reports: [.init(mediaSSRC: ssrc, beginSequence: sequence &+ 20_000,
                                            metrics: Array(repeating: .init(received: true, ecn: 3, arrivalTimeOffset: 1),
                                                           count: 400))],
            reportTimestamp: 1)),
    ])
    let pli = RTCPCompoundBuilder.build([.pictureLossIndication(RTCPPictureLossIndication(senderSSRC: 99, mediaSSRC: ssrc))])
    return (confirmations, pli)
}

/// A sender of 90 small frames at 2 Mbit/s (no final feedback wait) to a hand-made receiver,
/// started on a thread of its own (`done` is signalled when `run` returns), and what the
/// receiver learnt from its first packet.
func startSenderToHandMadeReceiver(srtp: SRTPMasterKey?) throws
    -> (sender: MediaSender, done: DispatchSemaphore, rtcp: UDPSocket, header: RTPHeader, senderRTCP: SocketAddress)
{
    let (rtp, rtcp) = try bindRTPPair()
    let units = try encodeSynthetic(count: 90, width: 160, height: 120, bitrateKbps: 300)
    var config = MediaSenderConfig(destination: try rtp.localAddress())
    config.paceBitsPerSecond = 2_000_000
    config.maxQueuedFrames = units.count
    config.finalFeedbackWait = .zero
    config.srtp = srtp
    let sender = try MediaSender(config: config)
    let done = DispatchSemaphore(value: 0)
    let failure = Mutex<(any Error)?>(nil)
    Thread {
        do { try sender.run() } catch { failure.withLock { $0 = error } }
        done.signal()
    }.start()
    for unit in units { sender.send(unit) }
    do {
        let (header, senderRTCP) = try learnStream(rtp)
        return (sender, done, rtcp, header, senderRTCP)
    } catch {
        let run = failure.withLock { $0.map { "\($0)" } } ?? "no error (still running)"
        Issue.record("no RTP packet from the sender; its run: \(run)")
        throw error
    }
}
