import Foundation
import MediaFormats
import Synchronization
import Testing
import UringIO
@testable import StreamEngine

/// `StreamRateMeter`: the rate of access units on their own timeline.
@Suite struct StreamRateMeterTests {
    @Test func evenFramesGiveTheirRateExactly() {
        var meter = StreamRateMeter()
        #expect(meter.bitsPerSecond == nil)
        meter.add(byteCount: 21_000, at: 0)
        #expect(meter.bitsPerSecond == nil)  // one unit spans no time
        // 240 frames per second of 21,000 B: 40.32 Mbit/s, whatever the first unit's size.
        for index in 1..<100 { meter.add(byteCount: 21_000, at: Int64(index) * 1_000_000_000 / 240) }
        let rate = try! #require(meter.bitsPerSecond)
        #expect(abs(rate - 40_320_000) < 1)
    }

    @Test func theWindowForgetsWhatIsOlderThanASecond() {
        var meter = StreamRateMeter()
        // A second of 100 kB frames at 10 per second, then 10 kB ones: once a second of the small
        // ones has come, the large ones are forgotten.
        for index in 0..<10 { meter.add(byteCount: 100_000, at: Int64(index) * 100_000_000) }
        #expect(abs(meter.bitsPerSecond! - 8_000_000) < 1)
        for index in 10..<21 { meter.add(byteCount: 10_000, at: Int64(index) * 100_000_000) }
        #expect(abs(meter.bitsPerSecond! - 800_000) < 1)
    }

    @Test func atCapacityTheNewestUnitsCount() {
        var meter = StreamRateMeter(window: 1_000_000_000, capacity: 4)
        // 1,000 per second of 1 kB: 4 remembered, 3 intervals of 1 ms: 8 Mbit/s all the same.
        for index in 0..<50 { meter.add(byteCount: index < 46 ? 5_000 : 1_000, at: Int64(index) * 1_000_000) }
        #expect(abs(meter.bitsPerSecond! - 8_000_000) < 1)
    }

    @Test func aTimeBeforeTheNewestCountsAsTheNewest() {
        var meter = StreamRateMeter()
        meter.add(byteCount: 1_000, at: 1_000_000_000)
        meter.add(byteCount: 1_000, at: 0)  // no negative span, no crash
        #expect(meter.bitsPerSecond == nil)
        meter.add(byteCount: 1_000, at: 1_010_000_000)
        #expect(abs(meter.bitsPerSecond! - 2 * 1_000 * 8 / 0.01) < 1)
    }
}

/// `SenderFlow.steppedPace`: the followed pace moves in steps, not with every frame.
@Suite struct SteppedPaceTests {
    @Test func thePaceMovesInStepsAndHoldsWhileTheStreamHovers() {
        let least = 6_000_000.0
        // Below the least pace: the least (nil).
        #expect(SenderFlow.steppedPace(asked: 5_000_000, now: nil, least: least) == nil)
        // Above it: 10 % over what is asked.
        let raised = SenderFlow.steppedPace(asked: 10_000_000, now: nil, least: least)
        #expect(raised == 1.1 * 10_000_000)
        // Within 80 - 100 % of the pace: held, whichever way the stream moves.
        for asked in [10_500_000.0, 9_000_000, 11_000_000, 8_900_000] {
            #expect(SenderFlow.steppedPace(asked: asked, now: raised, least: least) == raised)
        }
        // Above it: up again; under 80 % of it: down, to the least when 1.1 x falls under it.
        #expect(SenderFlow.steppedPace(asked: 12_000_000, now: raised, least: least) == 1.1 * 12_000_000)
        #expect(SenderFlow.steppedPace(asked: 8_000_000, now: raised, least: least) == 1.1 * 8_000_000)
        #expect(SenderFlow.steppedPace(asked: 5_400_000, now: raised, least: least) == nil)
        // A stream hovering at the least pace (±1 %) moves the pace once, not at every frame.
        var pace: Double? = nil
        var changes = 0
        for index in 0..<100 {
            let next = SenderFlow.steppedPace(asked: least * (index % 2 == 0 ? 1.01 : 0.99), now: pace, least: least)
            if next != pace { changes += 1 }
            pace = next
        }
        #expect(changes == 1 && pace == 1.1 * (least * 1.01))
    }
}

/// Retransmissions spend a quarter of the pace in force, also when it follows the stream
/// (`Retransmitter.followPace`). Socket-free, as `RetransmissionBudgetTests`.
@Suite struct RetransmissionRateFollowsPaceTests {
    /// RFC 4588 packets answered at once to a NACK of 200 packets of 1,014 B (as RTX) from a
    /// history made for a 3.2 Mbit/s pace, after the pace moved to `pace` (nil: it did not).
    private func answered(afterPaceMovedTo pace: Double?) throws -> Int {
        let flow = try MediaFlow(route: 0, maxDatagramSize: 1200)
        let history = RetransmissionHistoryTests.history(count: 200, rate: Retransmitter.rate(ofPace: 3_200_000))
        let retransmitter = Retransmitter(inner: RetransmissionBudgetTests.Idle(), flow: flow, route: 1,
                                          history: history, clock: { 250 * RetransmissionHistoryTests.millisecond })
        if let pace { retransmitter.followPace(pace) }
        retransmitter.handle(RetransmissionHistoryTests.nack((0..<200).map { 65_530 &+ UInt16($0) }))
        return try RetransmissionBudgetTests.sendAll(retransmitter).count
    }

    @Test func aFasterPaceLetsMoreRetransmissionsGo() throws {
        // 3.2 Mbit/s: 100 KB/s for retransmissions, a burst of 64 KB (64 packets); 32 Mbit/s:
        // 1 MB/s, a burst of a tenth of a second, 100 KB (98 packets).
        #expect(try answered(afterPaceMovedTo: nil) == 64 * 1024 / 1014)
        #expect(try answered(afterPaceMovedTo: 32_000_000) == 100_000 / 1014)
    }
}

/// `MediaSenderConfig.paceStreamMultiple` through the engine and loopback: a stream far above
/// its configured pace (a recorded file's) is paced from its own rate, so every frame goes at
/// its time instead of piling up behind a pace it could never keep.
@Suite(.enabled(if: uringAvailable, "io_uring is disabled on this kernel"))
struct PaceFollowsStreamTests {
    @Test func aStreamAboveItsLeastPaceIsPacedFromItsOwnRate() throws {
        let frames = 200, frameBytes = 12_000, interval: Int64 = 5_000_000  // 19.2 Mbit/s of NAL bytes
        let sink = ThreadedReceiver(gro: false, expected: 0, size: { _ in 0 })  // counts datagrams and bytes
        #expect(sink.failure == nil)

        var config = MediaSenderConfig(destination: SocketAddress(ip: "127.0.0.1", port: sink.port)!)
        config.feedback = false
        config.mtu = .fixed(1228)
        config.paceBitsPerSecond = 1_000_000  // the whole stream would take 19 s at this pace
        config.paceStreamMultiple = 1.5
        config.maxQueuedFrames = frames       // every frame handed over ahead, none dropped for room
        let sender = try MediaSender(config: config)
        let start = monotonicNanoseconds() + 20_000_000
        for index in 0..<frames {
            let unit = AccessUnit(nalUnits: [[index == 0 ? 0x26 : 0x02, 0x01] + [UInt8](repeating: 0x5A, count: frameBytes - 2)],
                                  timestamp: UInt32(index * 450), isKeyframe: index == 0)
            #expect(sender.send(unit, at: start + Int64(index) * interval))
        }
        sender.finish()
        try sender.run()
        let returned = monotonicNanoseconds()
        let stats = sender.stats
        let collected = sink.finish(expected: stats.packetsSent, seconds: 10)

        #expect(stats.framesSent == frames && stats.framesDroppedQueueFull == 0)
        // 12,000 B in FU-A fragments of at most 1,200 B: 11 packets a frame.
        #expect(stats.packetsSent == frames * 11)
        #expect(collected.received == stats.packetsSent)
        #expect(collected.bytes == stats.bytesSent)
        // The pace from the stream: 1.5 x 19.2 Mbit/s, and at most 10 % above what was asked.
        #expect(stats.pacingRate >= 1.5 * 19_200_000 && stats.pacingRate <= 1.1 * 1.5 * 19_200_000 + 1,
                "pacing rate \(stats.pacingRate)")
        // At the least pace alone the bytes sent need ~19.9 s (bytes x 8 / 1 Mbit/s); the frames
        // are due over ~1 s. Finishing in under half that time needs at least twice the least
        // pace, whatever the machine's speed (paced from the stream's rate: ~1 s).
        let atLeastPace = Double(stats.bytesSent) * 8 / 1_000_000 * 1e9
        #expect(Double(returned - start) < atLeastPace / 2, "ran \(Double(returned - start) / 1e9) s")
    }
}
