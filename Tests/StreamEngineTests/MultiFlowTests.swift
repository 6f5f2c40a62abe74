import Foundation
import MediaFormats
import SecureRTP
import StreamEngine
import Synchronization
import Testing
import TestSupport
import UringIO

/// A `MediaReceiver` on loopback running on its own thread, collecting what it emits.
final class BackgroundReceiver: Sendable {
    let receiver: MediaReceiver
    let collected = Mutex<[DepacketizedAccessUnit]>([])
    private let done = DispatchSemaphore(value: 0)

    init(frameLimit: Int?, feedback: Bool = true, srtp: SRTPMasterKey? = nil) throws {
        var config = MediaReceiverConfig(listen: SocketAddress(ip: "127.0.0.1", port: 0)!)
        config.feedback = feedback
        config.srtp = srtp
        receiver = try MediaReceiver(config: config)
        Thread { [self] in
            try? receiver.run(frameLimit: frameLimit) { unit in collected.withLock { $0.append(unit) } }
            done.signal()
        }.start()
    }

    /// Waits for the receiver to end (stopping it after `seconds`); returns what it got.
    func finish(within seconds: Double) -> [DepacketizedAccessUnit] {
        if done.wait(timeout: .now() + seconds) == .timedOut {
            receiver.stop()
            done.wait()
        }
        return collected.withLock { $0 }
    }
}

@Suite(.enabled(if: uringAvailable, "io_uring is disabled on this kernel"))
struct MultiFlowTests {
    /// Three flows in one engine, each to its own receiver with its own service class and
    /// ECN codepoint: every receiver gets every frame byte for byte, marked as its flow
    /// asked, from its own SSRC; each flow's counters are its own, and submissions carried
    /// datagrams of several flows at once.
    @Test func threeFlowsShareOneRingAndKeepTheirOwnMarksAndCounters() throws {
        let units = try encodeSynthetic(count: 120, width: 640, height: 360, bitrateKbps: 2000)
        try #require(units.count == 120)
        let marks: [(ServiceClass, ECNCodepoint, dscp: Int)] = [(.video, .ect0, 34), (.realtime, .ect1, 46), (.background, .notECT, 8)]
        let receivers = try marks.map { _ in try BackgroundReceiver(frameLimit: units.count) }
        let configs = zip(receivers, marks).map { receiver, mark in
            var config = MediaSenderConfig(destination: receiver.receiver.localAddress)
            config.serviceClass = mark.0
            config.ecn = mark.1
            config.mtu = .fixed(1500)
            config.paceBitsPerSecond = 30_000_000
            config.maxQueuedFrames = units.count
            return config
        }
        let sender = try MediaSender(flows: configs)
        #expect(sender.flowCount == 3)
        for unit in units { sender.send(unit) }
        sender.finish()
        try sender.run()

        let stats = sender.allStats
        #expect(Set(stats.map(\.ssrc)).count == 3)
        for (index, receiver) in receivers.enumerated() {
            let received = receiver.finish(within: 20)
            let got = receiver.receiver.stats
            let sent = stats[index]
            #expect(received.map(\.annexB) == units.map(\.annexB), "flow \(index)")
            #expect(got.framesComplete == 120 && got.lost == 0, "flow \(index): \(got)")
            #expect(got.ssrc == sent.ssrc)
            #expect(sent.flowIndex == index && sent.flows == 3)
            #expect(sent.framesSent == 120 && sent.packetsSent == got.received)
            #expect(sent.packetsConfirmed == sent.packetsSent, "flow \(index): final feedback confirms every packet")
            #expect(sent.packetsLost == 0 && sent.packetsUnconfirmed == 0)
            #expect(sent.dscp == UInt8(marks[index].dscp))
            #expect(got.dscp[marks[index].dscp] == got.received, "flow \(index): every datagram in its class")
            #expect(got.ecn[Int(marks[index].1.rawValue)] == got.received, "flow \(index): its ECN codepoint")
            #expect(sent.rttSmoothed != nil)
        }
        // One engine: the same ring and submissions, so the engine-wide counters agree, and
        // some submissions held datagrams of more than one flow.
        #expect(Set(stats.map(\.enterCalls)).count == 1)
        #expect(stats[0].mixedSubmissions > 0)
        #expect(stats[0].batches < stats.map(\.packetsSent).reduce(0, +) / 4)
    }

    /// Each flow has its own bound: when one receiver goes away mid-stream, its flow stops at
    /// its bound, drops frames and reports the receiver gone, while the other flow in the
    /// same engine delivers every frame complete. The event stream says so once, for that
    /// flow only: the receiver gone, the bound reached.
    @Test func oneFlowsDeadReceiverDoesNotTouchTheOther() async throws {
        let frameCount = 90  // 3 s at 30 fps
        let units = try encodeSynthetic(count: frameCount, width: 640, height: 360, bitrateKbps: 2000)
        let live = try BackgroundReceiver(frameLimit: frameCount)
        let dying = try BackgroundReceiver(frameLimit: nil)
        let bound = 100_000
        let configs = [live, dying].map { receiver in
            var config = MediaSenderConfig(destination: receiver.receiver.localAddress)
            config.mtu = .fixed(1500)
            config.paceBitsPerSecond = 20_000_000
            config.maxUnconfirmedBytes = bound
            config.finalFeedbackWait = .seconds(1)
            return config
        }
        let sender = try MediaSender(flows: configs)
        let events = sender.events()
        let feeder = Thread {
            let start = Date()
            for (index, unit) in units.enumerated() {
                Thread.sleep(until: start.addingTimeInterval(Double(index) / 30))
                if index == 15 { dying.receiver.stop() }  // gone after half a second
                sender.send(unit)
            }
            sender.finish()
        }
        feeder.start()
        try sender.run()
        _ = dying.finish(within: 1)
        let received = live.finish(within: 10)

        let liveStats = sender.stats(flow: 0)
        let dyingStats = sender.stats(flow: 1)
        #expect(received.count == frameCount && received.allSatisfy(\.isComplete))
        #expect(live.receiver.stats.framesComplete == frameCount && live.receiver.stats.lost == 0)
        #expect(liveStats.framesSent == frameCount && liveStats.framesDroppedUnconfirmed == 0)
        #expect(liveStats.packetsConfirmed == liveStats.packetsSent && !liveStats.receiverGone)
        #expect(dyingStats.receiverGone && dyingStats.receiverGoneEvents == 1)
        #expect(dyingStats.framesDroppedUnconfirmed > 0)
        #expect(dyingStats.peakUnconfirmedBytes <= bound, "peak \(dyingStats.peakUnconfirmedBytes)")
        #expect(dyingStats.framesSent < frameCount)

        var seen: [SenderEvent] = []
        for await event in events { seen.append(event) }  // ended when run returned
        #expect(seen.allSatisfy { $0.flow == 1 }, "\(seen)")
        let gone = seen.filter { if case .receiverGone = $0 { true } else { false } }
        #expect(gone.count == dyingStats.receiverGoneEvents, "\(seen)")
        let atBound = seen.compactMap { event -> Int? in
            if case .boundReached(_, let unconfirmed, let limit) = event, limit == bound { unconfirmed } else { nil }
        }
        #expect(!atBound.isEmpty && atBound.allSatisfy { $0 <= bound }, "\(seen)")
        #expect(!seen.contains { if case .receiverBack = $0 { true } else { false } })
    }

    /// Two flows paced at 8 Mbit/s each share a pacer at 16 Mbit/s. With the second flow
    /// idle, the first still leaves at its own 8 Mbit/s: its receiver's kernel timestamps
    /// never show a burst above that rate line beyond its own quantum (33.3 ms of its pace, a
    /// fixed pace's: `Pacer.fixedPaceQuantum`; without its own cap it would take all 16 Mbit/s:
    /// ~600 KB above the line over this 1.2 MB).
    /// Flows fed in turn (one flow's frames, then the next one's, the engine running all the
    /// while): a flow the engine found idle is served as soon as input reaches it, and every
    /// receiver gets its frames byte for byte, every packet confirmed by its feedback.
    @Test func flowsFedInTurnAreServedWhenTheirInputComes() throws {
        let units = try encodeSynthetic(count: 30, width: 320, height: 180, bitrateKbps: 800)
        try #require(units.count == 30)
        let receivers = try (0..<3).map { _ in try BackgroundReceiver(frameLimit: units.count) }
        let configs = receivers.map { receiver in
            var config = MediaSenderConfig(destination: receiver.receiver.localAddress)
            config.mtu = .fixed(1500)
            config.paceBitsPerSecond = 20_000_000
            return config
        }
        let sender = try MediaSender(flows: configs)
        let done = DispatchSemaphore(value: 0)
        let failure = Mutex<String?>(nil)
        Thread {
            do { try sender.run() } catch { failure.withLock { $0 = "\(error)" } }
            done.signal()
        }.start()
        for flow in 0..<3 {
            for unit in units {
                #expect(sender.send(unit, flow: flow))
                usleep(2_000)  // the others stay idle meanwhile
            }
            usleep(50_000)
        }
        sender.finish()
        done.wait()
        #expect(failure.withLock { $0 } == nil)
        for (index, receiver) in receivers.enumerated() {
            let received = receiver.finish(within: 20)
            let sent = sender.stats(flow: index)
            #expect(received.map(\.annexB) == units.map(\.annexB), "flow \(index)")
            #expect(sent.framesSent == 30 && sent.packetsConfirmed == sent.packetsSent, "flow \(index): \(sent)")
        }
    }

    @Test func aFlowKeepsToItsOwnPaceWhileAnotherIsIdle() throws {
        let pace = 8_000_000.0
        let receivers = (0..<2).map { _ in
            ThreadedReceiver(gro: false, expected: 2_000, size: { _ in 0 }, recordArrivals: true)
        }
        try #require(receivers.allSatisfy { $0.failure == nil && $0.port != 0 })
        let configs = receivers.map { receiver in
            var config = MediaSenderConfig(destination: SocketAddress(ip: "127.0.0.1", port: receiver.port)!)
            config.mtu = .fixed(1500)
            config.paceBitsPerSecond = pace
            config.feedback = false
            return config
        }
        let sender = try MediaSender(flows: configs)
        var random = SplitMix64(seed: 42)
        for index in 0..<20 {
            // 60 KB access units (one IDR NAL unit each): FU fragments of equal size.
            let nal = [0x26, 0x01] + (0..<60_000).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            #expect(sender.send(AccessUnit(nalUnits: [nal], timestamp: UInt32(index * 3000), isKeyframe: true), flow: 0))
        }
        sender.finish()
        try sender.run()
        let sent = sender.stats(flow: 0)
        let got = receivers[0].finish(expected: sent.packetsSent, seconds: 20)
        let idle = receivers[1].finish(expected: 1, seconds: 0.1)
        #expect(sent.framesSent == 20 && got.received == sent.packetsSent)
        #expect(idle.received == 0 && sender.stats(flow: 1).packetsSent == 0)
        // No feedback asked for: no packet is tracked, so none is confirmed or counted lost.
        #expect(sent.packetsLost == 0 && sent.packetsConfirmed == 0 && sent.packetsUnconfirmed == 0, "\(sent)")
        let arrivals = got.arrivals.sorted { $0.timestamp < $1.timestamp }
        try #require(arrivals.count == sent.packetsSent && arrivals.allSatisfy { $0.timestamp > 0 })
        let burst = largestBurstAboveRate(arrivals, rateBitsPerSecond: pace)
        // The cap's quantum (a fixed pace's: 33.3 ms of 8 Mbit/s, 33,333 B, fewer than
        // twenty-four datagrams), one datagram and 1 ms at the rate for receive-timestamp
        // jitter on a loaded machine.
        #expect(Pacer.fixedPaceQuantum(rateBitsPerSecond: pace, datagram: 1472) == 33_333)
        #expect(burst <= 33_333 + 1_500 + pace / 8 * 0.001, "burst of \(burst) bytes above 8 Mbit/s")
        let span = Double(arrivals.last!.timestamp - arrivals.first!.timestamp) / 1e9
        print("flow cap: \(got.bytes) B in \(span) s = \(Double(got.bytes) * 8 / span / 1e6) Mbit/s, largest burst \(burst) B")
    }
}
