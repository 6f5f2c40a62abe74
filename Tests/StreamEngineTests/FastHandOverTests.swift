import Foundation
import Glibc
import MediaFormats
import MediaSources
@testable import StreamEngine
import Synchronization
import Testing
import UringIO

/// Hands a `LiveSource`'s frames to a `MediaSender`, counting the frames handed over and not
/// finished by the engine's live count at each hand-over.
private final class BoundWatchingSink: AccessUnitSink {
    let sender: MediaSender
    /// Frames handed over so far, and the most of them not finished at a hand-over.
    let counts = Mutex((handed: 0, mostUnfinished: 0))

    init(_ sender: MediaSender) { self.sender = sender }

    func send(_ accessUnit: AccessUnit) -> Bool { send(accessUnit, at: 0) }
    func send(_ accessUnit: AccessUnit, at dueTime: Int64) -> Bool {
        counts.withLock {
            $0.handed += 1
            $0.mostUnfinished = max($0.mostUnfinished, $0.handed - sender.framesFinished)
        }
        return sender.send(accessUnit, at: dueTime)
    }
    func finish() { sender.finish() }
    func takeKeyframeRequest() -> Bool { false }
    var holdsUntilDue: Bool { true }
}

@Suite(.enabled(if: uringAvailable, "io_uring is disabled on this kernel"))
struct FastHandOverTests {
    /// A `.hevc` file through `LiveSource`'s fast hand-over (as `streamer send --fast` makes it,
    /// with a bound of 8 so that the source waits many times) into an unpaced sender: at every
    /// hand-over at most 8 frames are unfinished by `MediaSender.framesFinished`, every packet
    /// arrives (at a socket whose buffer holds the whole stream), in sequence, and the RTP
    /// timestamps count at the frame rate, not at the speed of the hand-over.
    @Test(.enabled(if: geteuid() == 0, "needs root (SO_RCVBUFFORCE: a receive buffer that holds the whole stream)"))
    func everyPacketArrivesAndTheBoundHolds() throws {
        let frames = 240
        let maxAhead = 8
        let units = try encodeSynthetic(count: frames, width: 320, height: 240, bitrateKbps: 600)
        try #require(units.count == frames)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("fast-\(UUID().uuidString).hevc").path
        try Data(units.flatMap(\.annexB)).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }

        let counter = try UDPSocket(family: .ipv4)
        try counter.bind(SocketAddress(ip: "127.0.0.1", port: 0)!)
        // Each datagram takes about its size plus an skb in the buffer: room for all of them
        // twice over, so nothing is dropped however late this thread drains it.
        let streamBytes = units.reduce(0) { $0 + $1.annexB.count } * 2 + frames * 16 * 1024
        counter.setReceiveBufferSize(streamBytes)
        let buffer = Int(try counter.option(SOL_SOCKET, SO_RCVBUF, name: "SO_RCVBUF"))
        try #require(buffer >= streamBytes,
                     "the receive buffer holds \(buffer) B, not \(streamBytes) B (SO_RCVBUFFORCE needs root)")

        var config = MediaSenderConfig(destination: try counter.localAddress())
        config.feedback = false
        config.paceBitsPerSecond = nil
        let sender = try MediaSender(config: config)
        let sink = BoundWatchingSink(sender)
        let live = LiveSource()
        live.start(.hevcFile(path: path), frameRate: 30,
                   handOver: .fast(maxAhead: maxAhead, finished: { sender.framesFinished },
                                   wait: { _ = sender.waitForFramesFinished($0, timeout: $1) }),
                   sink: sink)
        try sender.run()
        #expect(live.failure == nil)

        let received = try pendingDatagrams(at: counter).map { try RTPHeader.parse($0).header }
        let stats = sender.stats
        let counts = sink.counts.withLock { $0 }
        #expect(counts.handed == frames)
        #expect(counts.mostUnfinished <= maxAhead)
        #expect(stats.framesSent == frames && stats.framesDroppedQueueFull == 0)
        #expect(sender.framesFinished == frames)
        #expect(received.count == stats.packetsSent)
        guard let first = received.first else { return }
        #expect(received.indices.allSatisfy {
            received[$0].sequenceNumber == first.sequenceNumber &+ UInt16(truncatingIfNeeded: $0)
        })
        let timestamps = received.map { $0.timestamp &- first.timestamp }
            .reduce(into: [UInt32]()) { if $0.last != $1 { $0.append($1) } }
        #expect(timestamps == (0..<frames).map { UInt32($0 * 3000) })
    }
}

/// The engine's wake-up of a thread waiting for finished frames (`FinishedFramesSignal`), without
/// an engine: a lost wake-up would leave the waiter to its (minute-long) timeout.
@Suite struct FinishedFramesSignalTests {
    /// Counts reached below the target wake nobody; the target reached wakes the waiter, which
    /// returns the count; a target reached already returns at once.
    @Test func waiterWakesWhenTheCountReachesItsTarget() {
        let signal = FinishedFramesSignal()
        let finished = Atomic<Int>(0)
        let started = ContinuousClock.now
        let engine = Thread {
            for count in 1...50 {
                usleep(200)
                finished.store(count, ordering: .sequentiallyConsistent)
                signal.reached(count)
            }
        }
        engine.start()
        let count = { finished.load(ordering: .sequentiallyConsistent) }
        #expect(signal.wait(until: 50, timeout: .seconds(60), count: count) == 50)
        #expect(ContinuousClock.now - started < .seconds(30), "woken by the timeout, not by the count")
        #expect(signal.wait(until: 10, timeout: .seconds(60), count: count) == 50)
    }
}
