import Foundation
import MediaFormats
import Synchronization
import Testing
import UringIO
@testable import StreamEngine

/// Access units handed over ahead of their time (`MediaSender.send(_:at:)`): none starts
/// before its due time, the engine's wait ends when the next one is due, and the wait a frame
/// may spend queued counts from its due time.
@Suite struct DueTimeTests {
    /// An access unit of `bytes` NAL bytes (FU fragments above the datagram size).
    private func frame(_ bytes: Int, timestamp: UInt32, keyframe: Bool = false) -> AccessUnit {
        AccessUnit(nalUnits: [[keyframe ? 0x26 : 0x02, 0x01] + [UInt8](repeating: 0xAB, count: bytes - 2)],
                   timestamp: timestamp, isKeyframe: keyframe)
    }

    /// Writes every datagram the flow has ready; returns how many.
    private func drain(_ flow: MediaFlow) -> Int {
        var count = 0
        var buffer = [UInt8](repeating: 0, count: 2048)
        while flow.peekDatagram() != nil {
            buffer.withUnsafeMutableBytes { flow.writeDatagram(into: $0) }
            count += 1
        }
        return count
    }

    @Test func aFrameDoesNotStartBeforeItsDueTime() throws {
        let flow = try MediaFlow(route: 0, maxDatagramSize: 1200, tracksPackets: false)
        flow.now = 0
        flow.enqueue(frame(3000, timestamp: 0), due: 1_000_000)
        #expect(flow.peekDatagram() == nil)
        #expect(flow.dueIn(now: 0) == 1_000_000)
        #expect(flow.pendingBytes == 0)  // not due: no batch waits for it
        #expect(!flow.isEmpty)
        flow.now = 999_999
        #expect(flow.peekDatagram() == nil && !flow.dueWaiting)
        flow.now = 1_000_000
        #expect(flow.dueWaiting)
        #expect(flow.pendingBytes >= 3000)
        #expect(drain(flow) == 3)
        #expect(flow.lastMediaWrite == 1_000_000)
        #expect(flow.isEmpty && flow.dueIn(now: 1_000_000) == nil)
    }

    @Test func framesWithoutADueTimeGoAtOnceAndFramesAheadWaitBehindThem() throws {
        let flow = try MediaFlow(route: 0, maxDatagramSize: 1200, tracksPackets: false)
        flow.now = 5_000
        flow.enqueue(frame(500, timestamp: 0))
        flow.enqueue(frame(500, timestamp: 3000), due: 4_000)  // late already: at once
        flow.enqueue(frame(500, timestamp: 6000), due: 20_000)
        #expect(drain(flow) == 2)
        #expect(flow.framesWritten == 2)
        #expect(flow.dueIn(now: 5_000) == 15_000)
        // A unit that came due after the flow's clock last moved: 0, not nil (the wait ends at once).
        #expect(flow.dueIn(now: 25_000) == 0)
        flow.now = 20_000
        #expect(drain(flow) == 1)
        #expect(flow.framesWritten == 3)
    }

    @Test func maxFrameWaitCountsFromTheDueTime() throws {
        let flow = try MediaFlow(route: 0, maxDatagramSize: 1200, tracksPackets: false)
        flow.congestionActive = true
        flow.maxFrameWait = 500_000_000
        flow.now = 0
        // Handed over 1 s ahead: 1.2 s after the hand-off it has waited 0.2 s, and stays.
        flow.enqueue(frame(500, timestamp: 0, keyframe: true), due: 1_000_000_000)
        flow.now = 1_200_000_000
        flow.dropFramesWaitingTooLong()
        #expect(flow.framesDroppedCongestion == 0)
        flow.now = 1_600_000_000
        flow.dropFramesWaitingTooLong()
        #expect(flow.framesDroppedCongestion == 1)
        #expect(flow.keyframeWanted)
    }

    @Test func theSchedulersWaitEndsAtTheNextDueTime() throws {
        let flows = try (0..<2).map { _ in try MediaFlow(route: 0, maxDatagramSize: 1200, tracksPackets: false) }
        let time = Atomic<Int64>(0)
        let scheduler = FlowScheduler(flows, paces: [8e6, 8e6], burstQuanta: [nil, nil], quantum: 65_536,
                                      clock: { time.load(ordering: .relaxed) })
        scheduler.nextDueIn = { now in flows.compactMap { $0.dueIn(now: now) }.min() }
        #expect(scheduler.readyIn(now: 0) == nil)
        flows[0].enqueue(frame(500, timestamp: 0), due: 7_000_000)
        flows[1].enqueue(frame(500, timestamp: 0), due: 3_000_000)
        #expect(scheduler.peekDatagram() == nil)
        #expect(scheduler.readyIn(now: 1_000_000) == 2_000_000)
    }
}

/// The same through the engine and loopback: frames handed over at once, due over the next
/// 120 ms, arrive no earlier than their due times (the receiver's clock reading at arrival
/// is after the send), every packet arrives, and `run` returns only after the last was due.
@Suite(.enabled(if: uringAvailable, "io_uring is disabled on this kernel"))
struct DueTimeLoopbackTests {
    @Test func framesHandedAheadLeaveAtTheirTimes() throws {
        let arrivals = Mutex<[(timestamp: UInt32, at: Int64)]>([])
        let stop = Atomic<Bool>(false)
        let bound = Mutex<UInt16?>(nil)
        let ready = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        Thread {
            defer { done.signal() }
            guard let socket = try? UDPSocket(family: .ipv4),
                  (try? socket.bind(SocketAddress(ip: "127.0.0.1", port: 0)!)) != nil,
                  let port = try? socket.localAddress().port,
                  let loop = try? DatagramReceiveLoop(socket: socket, bufferCount: 64, maxPayload: 2048) else {
                ready.signal()
                return
            }
            bound.withLock { $0 = port }
            ready.signal()
            try? loop.run(checkInterval: 5_000_000, shouldStop: { stop.load(ordering: .relaxed) }) { datagram in
                let at = monotonicNanoseconds()
                let bytes = datagram.payload
                guard bytes.count >= 12 else { return }
                let timestamp = (UInt32(bytes[4]) << 24) | (UInt32(bytes[5]) << 16) | (UInt32(bytes[6]) << 8) | UInt32(bytes[7])
                arrivals.withLock { $0.append((timestamp, at)) }
            }
        }.start()
        ready.wait()
        let port = try #require(bound.withLock { $0 })

        var config = MediaSenderConfig(destination: SocketAddress(ip: "127.0.0.1", port: port)!)
        config.feedback = false
        config.mtu = .fixed(1228)
        config.paceBitsPerSecond = 100_000_000
        let sender = try MediaSender(config: config)
        #expect(sender.holdsUntilDue)
        let start = monotonicNanoseconds() + 30_000_000
        let dues = (0..<7).map { start + Int64($0) * 15_000_000 }
        for (index, due) in dues.enumerated() {
            #expect(sender.send(AccessUnit(nalUnits: [[0x02, 0x01] + [UInt8](repeating: 0x5A, count: 2500)],
                                           timestamp: UInt32(index * 3000), isKeyframe: false), at: due))
        }
        sender.finish()
        try sender.run()
        let returned = monotonicNanoseconds()
        let sent = sender.stats.packetsSent
        let deadline = Date().addingTimeInterval(10)
        while arrivals.withLock({ $0.count }) < sent && Date() < deadline { Thread.sleep(forTimeInterval: 0.005) }
        stop.store(true, ordering: .relaxed)
        done.wait()

        let got = arrivals.withLock { $0 }
        #expect(sent == 7 * 3)
        #expect(got.count == sent)
        #expect(returned >= dues.last!)
        // Frames in order of their RTP timestamps (a random offset, 3000 apart).
        let timestamps = Set(got.map(\.timestamp)).sorted { $0 &- got[0].timestamp < $1 &- got[0].timestamp }
        #expect(timestamps.count == 7)
        for (index, timestamp) in timestamps.enumerated() where index < dues.count {
            let first = got.filter { $0.timestamp == timestamp }.map(\.at).min()!
            #expect(first >= dues[index], "frame \(index) arrived \(dues[index] - first) ns before its due time")
        }
    }
}
