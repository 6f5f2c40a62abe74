import Foundation
import Glibc
import MediaFormats
@testable import StreamEngine
import Synchronization
import Testing
import UringIO

@Suite(.enabled(if: uringAvailable, "io_uring is disabled on this kernel"))
struct LiveWakeUpTests {
    /// A live source at 30 fps hands each frame over as it is made (`send(_:)`, as x265 does):
    /// the engine enters the kernel about once per frame (the frame's wake-up, whose enter
    /// also submits the frame's send), not once more for an idle poll between frames (with a
    /// 20 ms poll it took two per frame). The bound, 1.5 per frame plus a few for the start
    /// and the end, fails with a poll that ends inside most gaps between frames; a gap longer
    /// than the poll (50 ms: this thread 17 ms late) costs one enter more, so half the frames
    /// may be that late before it fails. Every packet arrives.
    @Test func aLiveFrameCostsOneEnter() throws {
        let frames = 30
        let (counter, config) = try Self.counterAndConfig(pace: 100_000_000)
        let sender = try MediaSender(config: config)
        // One datagram per frame (30 of about 1 KB: the socket's buffer holds them all).
        let source = Thread {
            for index in 0..<frames {
                usleep(33_333)
                sender.send(Self.smallFrame(index))
            }
            sender.finish()
        }
        source.start()
        try sender.run()

        let stats = sender.stats
        #expect(stats.framesSent == frames)
        #expect(stats.packetsSent == frames)
        #expect(Self.receivedFrames(counter).count == frames)
        #expect(stats.enterCalls <= frames * 3 / 2 + 4, "\(stats.enterCalls) io_uring_enter calls for \(frames) frames")
    }

    /// A source handing frames over back to back with `send(_:)` (as `bench stream`'s feeder does)
    /// to an unpaced sender busy sending the earlier ones: the engine reads them while it is awake
    /// or waits for its own sends' completions, so the source writes the eventfd only when the
    /// engine waits for a time (its idle poll: here the first frame, unless the loaded machine has
    /// not let the engine reach its wait yet, and whenever this thread falls behind the engine),
    /// not once per frame (120 writes for 120 frames before). The bound,
    /// a quarter of the frames, leaves room for this thread being descheduled on a loaded machine.
    /// Every packet arrives.
    @Test func framesHandedToABusySenderWakeItOnlyWhenItWaitsForATime() throws {
        let frames = 120
        // 40 KB access units of one NAL unit each: 28 datagrams at most 1,472 B.
        let units = (0..<frames).map { index in
            AccessUnit(nalUnits: [[0x02, 0x01] + [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 40_000)],
                       timestamp: UInt32(index * 3000), isKeyframe: false)
        }
        let receiver = ThreadedReceiver(gro: false, expected: frames * 28, size: { _ in 0 })
        try #require(receiver.failure == nil && receiver.port != 0)
        var config = MediaSenderConfig(destination: SocketAddress(ip: "127.0.0.1", port: receiver.port)!)
        config.feedback = false
        config.watchesPath = false
        config.mtu = .fixed(1500)
        config.maxQueuedFrames = frames
        let sender = try MediaSender(config: config)
        let source = Thread {
            usleep(100_000)  // the engine is in its idle wait: the first frame wakes it
            for unit in units { sender.send(unit) }
            sender.finish()
        }
        source.start()
        try sender.run()
        let stats = sender.stats
        let got = receiver.finish(expected: stats.packetsSent, seconds: 20)
        #expect(stats.framesSent == frames && stats.packetsSent == frames * 28)
        #expect(got.received == stats.packetsSent && got.bytes == stats.bytesSent)
        // `finish` writes one more.
        #expect(sender.wakeSignals <= frames / 4 + 1,
                "\(sender.wakeSignals) eventfd writes for \(frames) frames")
    }

    /// A source faster than the pace, against a queue of 4 frames: the flow takes from its
    /// inbox only what its queue has room for (`SenderFlow.takeInput`: all of it when it fits,
    /// the first ones otherwise, the rest left for a later wake-up), and the source, refused
    /// while the inbox is full, hands the same frame over again. Every frame goes out once, in
    /// the order handed over, and every refusal is counted. One datagram per frame, its payload
    /// the frame's index: at 1 Mbit/s a frame of ~930 B takes ~7.5 ms, so the source (a frame
    /// every 1 ms when accepted) keeps queue and inbox full for most of the run.
    @Test func framesBeyondTheQueuesRoomWaitInTheInboxInOrder() throws {
        let frames = 40
        let (counter, base) = try Self.counterAndConfig(pace: 1_000_000)
        var config = base
        config.maxQueuedFrames = 4
        let sender = try MediaSender(config: config)
        let refused = Mutex(0)
        let source = Thread {
            for index in 0..<frames {
                while !sender.send(Self.smallFrame(index)) {
                    refused.withLock { $0 += 1 }
                    usleep(1_000)
                }
                usleep(1_000)
            }
            sender.finish()
        }
        source.start()
        try sender.run()

        let stats = sender.stats
        #expect(Self.receivedFrames(counter) == Array(0..<frames))
        #expect(stats.framesSent == frames && stats.packetsSent == frames)
        #expect(stats.framesDroppedQueueFull == refused.withLock { $0 })
        #expect(refused.withLock { $0 } > 0, "the source was never refused: the queue never filled")
    }

    /// A socket on the loopback that counts what a sender sends it, and a sender's
    /// configuration for it: no feedback, no path watch, datagrams of at most 1,200 B, `pace`.
    static func counterAndConfig(pace: Double) throws -> (UDPSocket, MediaSenderConfig) {
        let counter = try UDPSocket(family: .ipv4)
        counter.setReceiveBufferSize(1 << 20)
        try counter.bind(SocketAddress(ip: "127.0.0.1", port: 0)!)
        var config = MediaSenderConfig(destination: try counter.localAddress())
        config.feedback = false
        config.watchesPath = false
        config.mtu = .fixed(1228)
        config.paceBitsPerSecond = pace
        return (counter, config)
    }

    /// Frame `index`: one NAL unit of 902 B, one datagram, its payload the index repeated.
    static func smallFrame(_ index: Int) -> AccessUnit {
        AccessUnit(nalUnits: [[0x02, 0x01] + [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 900)],
                   timestamp: UInt32(index * 3000), isKeyframe: false)
    }

    /// The indices of the `smallFrame`s waiting at `counter`, in the order they arrived.
    static func receivedFrames(_ counter: UDPSocket) -> [Int] {
        // RTP header (12 bytes), the NAL unit header (2), then the index repeated.
        pendingDatagrams(at: counter).map { $0.count > 14 ? Int($0[14]) : -1 }
    }
}
