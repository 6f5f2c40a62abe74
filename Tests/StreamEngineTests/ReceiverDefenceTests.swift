import Foundation
import MediaFormats
import StreamEngine
import Synchronization
import Testing
import UringIO

/// What the receiver does with packets from its own stream's address that do not fit the stream.
@Suite(.enabled(if: uringAvailable, "io_uring is disabled on this kernel"))
struct ReceiverDefenceTests {
    @Test func outOfStreamPacketsAreCountedAndKeptOutOfFrames() throws {
        let background = try BackgroundReceiver(frameLimit: nil, feedback: false)
        let receiver = background.receiver
        let socket = try UDPSocket(family: .ipv4)
        try socket.connect(receiver.localAddress)
        func send(sequence: UInt16, timestamp: UInt32, payloadType: UInt8 = 96, ssrc: UInt32 = 7) throws {
            try sendStubFrame(socket, sequence: sequence, timestamp: timestamp, payloadType: payloadType, ssrc: ssrc)
        }
        // A stream of 10 frames, 3000 ticks apart.
        for index in 0..<10 { try send(sequence: UInt16(100 + index), timestamp: UInt32(9000 + 3000 * index)) }
        try send(sequence: 40_000, timestamp: 42_000)                   // sequence jump
        try send(sequence: 110, timestamp: 9000 + 3000 * 10 + 9_000_000)  // timestamp 100 s away
        try send(sequence: 111, timestamp: 42_000, payloadType: 97)      // another payload type
        try send(sequence: 112, timestamp: 42_000, ssrc: 8)              // another SSRC
        try send(sequence: 110, timestamp: 39_000)                       // the stream goes on
        let deadline = Date().addingTimeInterval(5)
        while receiver.stats.received < 11 && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        Thread.sleep(forTimeInterval: 0.1)
        let received = background.finish(within: 0)
        let stats = receiver.stats
        #expect(stats.rejected[.sequenceJump] == 1)
        #expect(stats.rejected[.timestampJump] == 1)
        #expect(stats.rejected[.unexpectedPayloadType] == 1)
        #expect(stats.rejected[.foreignSSRC] == 1)
        #expect(stats.received == 11)
        #expect(stats.lost == 0)
        #expect(received.count == 11)
        #expect(received.allSatisfy { $0.isComplete })
    }

    /// A sender that stamps by wall clock and paused for 100 s: its clock moved on. The first
    /// packet on the new clock is held aside (it could be a stray); the second one in sequence
    /// makes the receiver follow, and both are taken: nothing lost, every frame complete.
    @Test func aClockThatMovedOnIsFollowedAfterTwoPacketsInSequence() throws {
        let background = try BackgroundReceiver(frameLimit: nil, feedback: false)
        let receiver = background.receiver
        let socket = try UDPSocket(family: .ipv4)
        try socket.connect(receiver.localAddress)
        func send(sequence: UInt16, timestamp: UInt32) throws {
            try sendStubFrame(socket, sequence: sequence, timestamp: timestamp)
        }
        for index in 0..<10 { try send(sequence: UInt16(100 + index), timestamp: UInt32(9000 + 3000 * index)) }
        try send(sequence: 500, timestamp: 9_000_000)  // a stray far off in time and sequence: rejected
        for index in 10..<20 { try send(sequence: UInt16(100 + index), timestamp: UInt32(9000 + 3000 * index + 9_000_000)) }
        let deadline = Date().addingTimeInterval(5)
        while receiver.stats.received < 20 && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        Thread.sleep(forTimeInterval: 0.1)
        let received = background.finish(within: 0)
        let stats = receiver.stats
        #expect(stats.rejected[.timestampJump] == 1)  // the stray only
        #expect(stats.timestampRestarts == 1)
        #expect(stats.received == 20)
        #expect(stats.lost == 0)
        #expect(received.count == 20 && received.allSatisfy(\.isComplete))
        #expect(received.last?.timestamp == UInt32(9000 + 3000 * 19 + 9_000_000))
    }
}

/// Sends a one-packet frame: an IDR slice header stub (type 19) with its first-slice bit.
func sendStubFrame(_ socket: UDPSocket, sequence: UInt16, timestamp: UInt32, payloadType: UInt8 = 96, ssrc: UInt32 = 7) throws {
    var packet = RTPHeader(marker: true, payloadType: payloadType, sequenceNumber: sequence, timestamp: timestamp, ssrc: ssrc).bytes
    packet += [19 << 1, 1, 0x80, 0x11, 0x22]
    _ = try packet.withUnsafeBytes { try PlainUDP.sendTo(socket, $0) }
}
