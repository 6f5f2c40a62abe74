import Foundation
import Glibc
import MediaFormats
import Synchronization
import Testing
import UringIO
@testable import StreamEngine

/// Zero-copy packetization (`MediaFlow.writeDatagramHead`): the RTP and FU headers go into the
/// send slot, the NAL unit bytes are sent from the access unit. What arrives must be exactly
/// what the copying packetizer writes, and the access unit must live until its send completed.
@Suite(.enabled(if: uringAvailable, "io_uring is disabled on this kernel"))
struct ZeroCopyPacketizationTests {
    /// A NAL unit of `size` bytes with header bytes `type`, 1 and a body from `seed` (no two
    /// NAL units alike, so a misplaced byte shows).
    private func nal(type: UInt8, size: Int, seed: Int) -> [UInt8] {
        var state = UInt64(seed) &* 0x9E37_79B9_7F4A_7C15 | 1
        return [type << 1, 0x01] + (2..<size).map { _ in
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return UInt8(truncatingIfNeeded: state)
        }
    }

    /// Access units for a 1,200-byte datagram budget (1,188 payload bytes, 1,185 per FU):
    /// parameter sets in an AP; FU runs whose last fragment is short, and one whose last is
    /// full-size (2 + 2 x 1,185 bytes) so the GSO run goes on into the next NAL unit; single
    /// NAL unit packets of the full size inside such a run, and short ones.
    private func accessUnits(_ count: Int) -> [AccessUnit] {
        (0..<count).map { index in
            let seed = index * 16
            var nals: [[UInt8]]
            switch index % 4 {
            case 0:
                nals = [nal(type: 32, size: 24, seed: seed), nal(type: 33, size: 40, seed: seed + 1),
                        nal(type: 34, size: 8, seed: seed + 2), nal(type: 19, size: 5000, seed: seed + 3)]
            case 1:
                nals = [nal(type: 1, size: 2 + 2 * 1185, seed: seed), nal(type: 1, size: 1188, seed: seed + 1),
                        nal(type: 1, size: 7000, seed: seed + 2)]
            case 2:
                nals = [nal(type: 1, size: 600, seed: seed)]
            default:
                nals = [nal(type: 1, size: 1188, seed: seed), nal(type: 1, size: 3001, seed: seed + 1),
                        nal(type: 1, size: 100, seed: seed + 2), nal(type: 1, size: 150, seed: seed + 3)]
            }
            return AccessUnit(nalUnits: nals, timestamp: UInt32(index * 3000), isKeyframe: index % 4 == 0)
        }
    }

    /// Every datagram of a GSO run of mixed FU and single NAL unit packets arrives with the
    /// bytes the copying packetizer writes, behind an RTP header in its place.
    @Test func receivedBytesEqualTheCopyingPacketizers() throws {
        let units = accessUnits(24)
        let packetizer = try HEVCPacketizer(maxPayloadSize: 1200 - RTPHeader.fixedSize)
        var expected: [(payload: [UInt8], marker: Bool, unit: Int)] = []
        for (index, unit) in units.enumerated() {
            for payload in packetizer.plan(unit) {
                expected.append((packetizer.bytes(of: payload, of: unit), payload.marker, index))
            }
        }
        let aggregations = units.reduce(0) { sum, unit in
            sum + packetizer.plan(unit).filter { if case .aggregation = $0.kind { true } else { false } }.count
        }

        let receiver = RawReceiver()
        try #require(receiver.port != 0)
        let sent = try onThread(namespace: nil) { () throws -> (SendQueueCounters, UInt16, UInt32) in
            let ring = try Ring(entries: 256)
            let sender = PacedSender(ring: ring, config: PacedSenderConfig())
            let socket = try UDPSocket(family: .ipv4)
            try socket.connect(SocketAddress(ip: "127.0.0.1", port: receiver.port)!)
            let route = sender.addRoute(socket: socket, destination: nil, mark: TrafficMark(.video, ecn: .ect0))
            let flow = try MediaFlow(route: route, maxDatagramSize: 1200, tracksPackets: false)
            let firstSequence = flow.nextSequence
            for unit in units { flow.enqueue(unit) }
            try sender.run(flow, isFinished: { flow.isEmpty })
            return (sender.counters, firstSequence, flow.ssrc)
        }
        let (counters, firstSequence, ssrc) = sent
        let got = receiver.finish(expected: expected.count, seconds: 20)

        #expect(counters.datagrams == expected.count)
        #expect(counters.failedDatagrams == 0)
        #expect(counters.tailDatagrams == expected.count - aggregations)
        if UDPSocket.kernelSupportsGSO { #expect(counters.gsoSends > 0) }
        try #require(got.count == expected.count)
        var byIndex = [[UInt8]?](repeating: nil, count: expected.count)
        for datagram in got {
            try #require(datagram.count >= RTPHeader.fixedSize)
            let sequence = UInt16(datagram[2]) << 8 | UInt16(datagram[3])
            let index = Int(sequence &- firstSequence)
            try #require(index < expected.count && byIndex[index] == nil)
            byIndex[index] = datagram
        }
        let firstTimestamp = try RTPHeader.parse(byIndex[0]!).header.timestamp
        var wrong = 0
        for (index, datagram) in byIndex.enumerated() {
            let bytes = datagram!
            let want = expected[index]
            let packet = try RTPHeader.parse(bytes)
            if Array(bytes[packet.payloadRange]) != want.payload || packet.payloadRange.lowerBound != RTPHeader.fixedSize
                || packet.header.marker != want.marker || packet.header.ssrc != ssrc
                || packet.header.timestamp &- firstTimestamp != units[want.unit].timestamp {
                wrong += 1
            }
        }
        #expect(wrong == 0)
    }

    /// The slot holds the access unit its datagram points into: with the flow (and so every
    /// other reference) gone before the ring's completion is handled, the access unit lives
    /// on, the bytes arrive whole, and it goes once the slot completed.
    @Test func theAccessUnitLivesUntilTheSendCompleted() throws {
        let receiver = try UDPSocket(family: .ipv4)
        try receiver.bind(SocketAddress(ip: "127.0.0.1", port: 0)!)
        let ring = try Ring(entries: 16)
        let queue = UDPSendQueue(ring: ring, slots: 2, slotCapacity: 65_536)
        let socket = try UDPSocket(family: .ipv4)
        try socket.connect(SocketAddress(ip: "127.0.0.1", port: try receiver.localAddress().port)!)
        let socketIndex = queue.register(socket)
        var reports: [SendReport] = []
        queue.onReport = { reports.append($0) }

        let body = nal(type: 1, size: 900, seed: 7)
        var flow: MediaFlow? = try MediaFlow(route: 0, maxDatagramSize: 1200, tracksPackets: false)
        flow!.enqueue(AccessUnit(nalUnits: [nal(type: 1, size: 900, seed: 7)], timestamp: 0, isKeyframe: false))
        let pending = try #require(flow!.peekDatagram())
        let slot = try #require(queue.acquire())
        let buffer = try #require(queue.appendDatagram(slot, length: pending.size))
        let tail = try #require(flow!.writeDatagramHead(into: buffer))
        queue.attachTail(slot, tail)
        #expect(tail.headLength == RTPHeader.fixedSize)
        weak let owner = tail.owner.takeUnretainedValue()
        flow = nil
        queue.commit(slot, socketIndex: socketIndex, destination: nil, mark: TrafficMark(.video, ecn: .ect0), tag: 1)
        try queue.submitReady()
        _ = try ring.submit()
        #expect(owner != nil)  // the send is submitted (it may be done), its completion not handled

        while queue.slotsInFlight > 0 {
            _ = try ring.submit(waitingFor: 1)
            _ = ring.reap { queue.handle($0) }
        }
        #expect(owner == nil)
        #expect(reports.count == 1 && reports.first?.sentDatagrams == 1)
        var received = [UInt8](repeating: 0, count: 2048)
        let count = received.withUnsafeMutableBytes { recv(receiver.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        #expect(count == RTPHeader.fixedSize + body.count)
        #expect(Array(received[RTPHeader.fixedSize..<max(RTPHeader.fixedSize, count)]) == body)
    }
}

/// A receiver thread that keeps every datagram's bytes, in arrival order.
private final class RawReceiver: @unchecked Sendable {  // @unchecked: state is in Mutex/Atomic, the ring lives on the thread
    private(set) var port: UInt16 = 0
    private let datagrams = Mutex<[[UInt8]]>([])
    private let stop = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)

    /// Starts the thread and waits until its socket is bound (`port` stays 0 if it could not be).
    init() {
        let bound = Mutex<UInt16>(0)
        let ready = DispatchSemaphore(value: 0)
        Thread { [self] in
            defer { done.signal() }
            guard let socket = try? UDPSocket(family: .ipv4),
                  (try? socket.bind(SocketAddress(ip: "127.0.0.1", port: 0)!)) != nil,
                  let port = try? socket.localAddress().port,
                  let loop = try? DatagramReceiveLoop(socket: socket, bufferCount: 256, maxPayload: 2048) else {
                ready.signal()
                return
            }
            socket.setReceiveBufferSize(8 << 20)
            bound.withLock { $0 = port }
            ready.signal()
            try? loop.run(checkInterval: 5_000_000, shouldStop: { stop.load(ordering: .relaxed) }) { datagram in
                let bytes = [UInt8](datagram.payload)
                datagrams.withLock { $0.append(bytes) }
            }
        }.start()
        ready.wait()
        port = bound.withLock { $0 }
    }

    /// Waits (up to `seconds`) for `expected` datagrams, stops, and returns what came.
    func finish(expected: Int, seconds: Double) -> [[UInt8]] {
        let deadline = Date().addingTimeInterval(seconds)
        while datagrams.withLock({ $0.count }) < expected && Date() < deadline { usleep(2_000) }
        stop.store(true, ordering: .relaxed)
        done.wait()
        return datagrams.withLock { $0 }
    }
}
