import Glibc
import MediaFormats
import StreamEngine
import Testing
import UringIO

/// The sender's end of a stream on loopback, seen by plain sockets: its last RTCP is a sender
/// report counting every media packet, then a BYE for each SSRC it used (RFC 3550 6.1, 6.6).
@Suite(.enabled(if: uringAvailable, "io_uring is disabled on this kernel"))
struct SenderGoodbyeTests {
    /// An RTP socket on an even port of 127.0.0.1 and an RTCP socket on the next.
    static func portPair() throws -> (rtp: UDPSocket, rtcp: UDPSocket, address: SocketAddress) {
        for _ in 0..<64 {
            let port = UInt16.random(in: 20_000...30_000) * 2
            let rtp = try UDPSocket(family: .ipv4)
            let rtcp = try UDPSocket(family: .ipv4)
            guard (try? rtp.bind(SocketAddress(ip: "127.0.0.1", port: port)!)) != nil,
                  (try? rtcp.bind(SocketAddress(ip: "127.0.0.1", port: port + 1)!)) != nil else { continue }
            return (rtp, rtcp, SocketAddress(ip: "127.0.0.1", port: port)!)
        }
        throw SystemError("cannot bind", errno: EADDRINUSE, context: "a port pair for the test")
    }

    /// Every datagram waiting on `socket` (it waits 100 ms for each).
    static func drain(_ socket: UDPSocket) throws -> [[UInt8]] {
        try PlainUDP.setReceiveTimeout(socket, nanoseconds: 100_000_000)
        var datagrams: [[UInt8]] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while let count = try buffer.withUnsafeMutableBytes({ try PlainUDP.receiveFrom(socket, into: $0) }) {
            datagrams.append(Array(buffer[0..<count]))
        }
        return datagrams
    }

    @Test(arguments: [false, true]) func theSenderEndsWithAByeAfterItsLastReport(retransmission: Bool) throws {
        let (rtp, rtcp, address) = try Self.portPair()
        var config = MediaSenderConfig(destination: address)
        config.mtu = .fixed(1500)
        config.retransmission = retransmission
        // No receiver answers: the linger ends at this wait.
        config.finalFeedbackWait = .milliseconds(300)
        let sender = try MediaSender(config: config)
        for index in 0..<5 {
            let nal: [UInt8] = [1 << 1, 1] + [UInt8](repeating: 0x42, count: 3000)
            sender.send(AccessUnit(nalUnits: [nal], timestamp: UInt32(index) * 3000, isKeyframe: false))
        }
        sender.finish()
        try sender.run()
        let stats = sender.stats
        let media = try Self.drain(rtp)
        let reports = try Self.drain(rtcp).map { $0.withUnsafeBytes { RTCPPacket.parseCompound($0) } }
        #expect(media.count == stats.packetsSent && stats.packetsSent == 15)
        #expect(stats.byeSent == 1 && reports.count == stats.senderReports + 1)
        #expect(reports.allSatisfy { $0.errors.isEmpty })
        let last = try #require(reports.last).packets
        try #require(last.count == 3)
        guard case .senderReport(let report) = last[0], case .sourceDescription = last[1],
              case .goodbye(let bye) = last[2] else {
            Issue.record("not SR, SDES, BYE: \(last)")
            return
        }
        #expect(report.ssrc == stats.ssrc && report.packetCount == UInt32(media.count))
        #expect(bye.ssrcs == [stats.ssrc] + (retransmission ? [try #require(stats.rtxSSRC)] : []))
        // Nothing else says goodbye.
        #expect(reports.dropLast().allSatisfy { !$0.packets.contains { if case .goodbye = $0 { true } else { false } } })
    }
}
