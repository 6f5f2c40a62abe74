import MediaFormats
import StreamEngine
import Testing
import TestSupport
import UringIO

/// A sender that ends and starts again (a new SSRC, sequence and clock, from its address or
/// another): the receiver follows the new stream once the old one said BYE or fell silent for
/// `ReceiveSession.streamTimeout`, with the counts adding up over both; never while the old
/// one is alive, never on stray packets, never from elsewhere than a pinned address.
extension ReceiveSessionTests {
    static let restartedSSRC: UInt32 = 0x0BAD_CAFE
    /// The sender started again: the same host, another port.
    static let restarted = SocketAddress(ip: "10.0.0.2", port: 40_002)!

    /// The restarted sender's stream: another SSRC, sequence numbers and clock.
    static func restartedStream(frames: Int) -> [Frame] {
        stream(frames: frames, firstSequence: 60_000, firstTimestamp: 3_000_000_000, ssrc: restartedSSRC, seed: 2)
    }

    static func bye(_ ssrc: UInt32 = ReceiveSessionTests.ssrc) -> [UInt8] {
        RTCPCompoundBuilder.build([.goodbye(RTCPGoodbye(ssrcs: [ssrc]))])
    }

    static var senderRTCP: SocketAddress {
        var address = sender
        address.port += 1
        return address
    }

    @Test func aSenderStartedAgainAfterItsByeIsFollowed() {
        let first = Self.stream(frames: 12)
        let second = Self.restartedStream(frames: 15)
        var harness = Harness()
        harness.deliver(first)
        harness.deliver(Self.bye(), from: Self.senderRTCP, port: .rtcp)
        let transmitsBefore = harness.transmits.count
        for datagram in second.flatMap(\.datagrams) { harness.deliver(datagram, from: Self.restarted) }
        harness.finish()
        let stats = harness.session.stats
        #expect(Self.same(harness.units, first + second))
        #expect(harness.units.allSatisfy { $0.isComplete })
        #expect(stats.streamChanges == 1 && stats.byeReceived == 1)
        #expect(stats.received == Self.packetCount(first + second) && stats.lost == 0 && stats.late == 0)
        #expect(stats.bytesReceived == Self.byteCount(first + second))
        #expect(stats.framesComplete == 27 && stats.framesIncomplete == 0 && stats.framesMissing == 0)
        #expect(stats.keyframes == 4 && stats.framesUndecodable == 0)
        #expect(stats.rejected.isEmpty, "\(stats.rejected)")
        #expect(stats.ssrc == Self.restartedSSRC && stats.source == Self.restarted.description)
        // The feedback follows the new stream: to its address, about its SSRC.
        let after = harness.transmits.dropFirst(transmitsBefore)
        #expect(!after.isEmpty && after.allSatisfy { $0.destination.port == Self.restarted.port + 1 })
        let reportedSSRCs = after.flatMap { transmit in
            transmit.bytes.withUnsafeBytes { RTCPPacket.parseCompound($0).packets }.compactMap { packet -> UInt32? in
                if case .congestionControlFeedback(let report) = packet { return report.reports.first?.mediaSSRC }
                return nil
            }
        }
        #expect(!reportedSSRCs.isEmpty && reportedSSRCs.allSatisfy { $0 == Self.restartedSSRC })

        // The counts are those of two sessions, one per stream.
        var alone = Harness()
        alone.deliver(first)
        alone.deliver(Self.bye(), from: Self.senderRTCP, port: .rtcp)
        alone.finish()
        var secondAlone = Harness()
        for datagram in second.flatMap(\.datagrams) { secondAlone.deliver(datagram, from: Self.restarted) }
        secondAlone.finish()
        let a = alone.session.stats, b = secondAlone.session.stats
        #expect(stats.ecn == zip(a.ecn, b.ecn).map(+) && stats.feedbackSent > a.feedbackSent)
        #expect(stats.framesComplete == a.framesComplete + b.framesComplete && stats.keyframes == a.keyframes + b.keyframes)
    }

    /// Another stream while the stream is alive stays foreign, however long it lasts; once the
    /// stream has been silent for `streamTimeout` (no BYE: a sender killed, or one that sends
    /// no RTCP), the other one is followed from its packets after the silence.
    @Test func anotherStreamTakesOverOnlyAfterTheStreamFellSilent() {
        let first = Self.stream(frames: 10)
        let second = Self.restartedStream(frames: 20)
        var harness = Harness()
        // Interleaved: a frame of each in turn; the second from another address.
        for index in 0..<10 {
            for datagram in first[index].datagrams { harness.deliver(datagram) }
            for datagram in second[index].datagrams { harness.deliver(datagram, from: Self.stranger) }
        }
        #expect(Self.same(harness.units, first))
        #expect(harness.session.stats.rejected == [.foreignSource: Self.packetCount(Array(second.prefix(10)))])
        // The first sender stops without a word; the second goes on, 1.9 s after the first's last packet...
        harness.deliver(second[10].datagrams[0], from: Self.stranger, step: 1_900 * Self.millisecond)
        for datagram in second[10].datagrams.dropFirst() { harness.deliver(datagram, from: Self.stranger) }
        #expect(harness.session.stats.streamChanges == 0)
        // ...and past the timeout: followed from there.
        harness.deliver(second[11].datagrams[0], from: Self.stranger, step: 200 * Self.millisecond)
        for datagram in second.dropFirst(11).flatMap(\.datagrams).dropFirst() { harness.deliver(datagram, from: Self.stranger) }
        harness.finish()
        let stats = harness.session.stats
        #expect(Self.same(harness.units, first + second.dropFirst(11)))
        #expect(stats.streamChanges == 1 && stats.byeReceived == 0)
        #expect(stats.rejected == [.foreignSource: Self.packetCount(Array(second.prefix(11)))], "\(stats.rejected)")
        #expect(stats.received == Self.packetCount(first + second.dropFirst(11)) && stats.lost == 0)
        // Frames 11 to 19 of the second: 11 to 19 are P frames before its next keyframe... none
        // comes (keyframes at 0 and 10), so all nine are undecodable, and counted complete.
        #expect(stats.framesComplete == 19 && stats.framesUndecodable == 9)
        #expect(stats.ssrc == Self.restartedSSRC && stats.source == Self.stranger.description)
    }

    /// After the BYE, stray packets (other SSRCs, none following another) never take the
    /// stream's place, nor packets from elsewhere than a pinned address; the sender started
    /// again at the pinned address is followed.
    @Test func strayPacketsAndOtherAddressesDoNotTakeTheStreamsPlace() {
        let first = Self.stream(frames: 5)
        let second = Self.restartedStream(frames: 10)
        var rng = SplitMix64(seed: 7)
        var strays: [[UInt8]] = []
        for _ in 0..<200 {
            var datagram = second[Int.random(in: 0..<10, using: &rng)].datagrams[0]
            let ssrc = UInt32.random(in: 1...UInt32.max, using: &rng)
            datagram.replaceSubrange(8..<12, with: [UInt8(ssrc >> 24), UInt8(ssrc >> 16 & 0xFF), UInt8(ssrc >> 8 & 0xFF), UInt8(ssrc & 0xFF)])
            strays.append(datagram)
        }
        for pinned in [nil, Self.sender] as [SocketAddress?] {
            var harness = Harness(from: pinned)
            harness.deliver(first)
            harness.deliver(Self.bye(), from: Self.senderRTCP, port: .rtcp)
            for (index, stray) in strays.enumerated() { harness.deliver(stray, from: index % 2 == 0 ? Self.sender : Self.stranger) }
            #expect(harness.session.stats.streamChanges == 0 && harness.units.count == 5)
            // The restarted stream from elsewhere: followed unless the sender's address is pinned.
            for datagram in second.flatMap(\.datagrams) { harness.deliver(datagram, from: Self.stranger) }
            let stats = harness.session.stats
            if pinned == nil {
                #expect(stats.streamChanges == 1 && Self.same(harness.units, first + second))
                #expect(stats.rejected == [.foreignSSRC: 100, .foreignSource: 100])
            } else {
                #expect(stats.streamChanges == 0 && harness.units.count == 5)
                #expect(stats.rejected == [.foreignSSRC: 100, .foreignSource: 100 + Self.packetCount(second)])
                // From the pinned address (the sender started again with the same port): followed.
                for datagram in second.flatMap(\.datagrams) { harness.deliver(datagram) }
                harness.finish()
                #expect(harness.session.stats.streamChanges == 1 && Self.same(harness.units, first + second))
            }
        }
    }
}
