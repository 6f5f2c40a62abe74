import Glibc
import Testing
import UringIO

/// io_uring may be disabled (kernel.io_uring_disabled); such tests skip.
let uringAvailable = Ring.isAvailable

/// One ring with a sender socket and a multishot receiver on loopback, driven from the
/// test's thread: loopback delivery happens inside the send, so send then reap works.
final class LoopbackPair {
    let ring: Ring
    let queue: UDPSendQueue
    let sender: UDPSocket
    let receiverSocket: UDPSocket
    let receiver: UDPMultishotReceiver
    let destination: SocketAddress
    let senderIndex: Int
    var received: [(payload: [UInt8], tos: UInt8, timestamp: Int64)] = []
    var reports: [SendReport] = []

    /// `mappedSender`: the receiver on 127.0.0.1, the sender a dual-stack IPv6 socket connected
    /// to it as `::ffff:127.0.0.1` (`family` must be `.ipv4`).
    init(family: SocketAddress.Family = .ipv4, gro: Bool = false, slots: Int = 32, slotCapacity: Int = 65_536,
         zeroCopy: Bool = false, mappedSender: Bool = false) throws {
        ring = try Ring(entries: 256)
        let loopback = family == .ipv4 ? "127.0.0.1" : "::1"
        receiverSocket = try UDPSocket(family: family)
        try receiverSocket.bind(SocketAddress(ip: loopback, port: 0)!)
        try receiverSocket.enableReceiveTrafficMark()
        try receiverSocket.enableReceiveTimestamps()
        try receiverSocket.enableDropCounter()
        if gro { try receiverSocket.enableGRO() }
        receiverSocket.setReceiveBufferSize(8 << 20)
        destination = try receiverSocket.localAddress()
        receiver = try UDPMultishotReceiver(ring: ring, socket: receiverSocket, groupID: 7, bufferCount: 64,
                                            maxPayload: 65_536)
        try receiver.arm()
        if mappedSender {
            sender = try UDPSocket(family: .ipv6)
            try sender.bind(SocketAddress(ip: "::", port: 0)!)  // dual-stack
            try sender.connect(SocketAddress(ip: "::ffff:127.0.0.1", port: destination.port)!)
        } else {
            sender = try UDPSocket(family: family)
            try sender.connect(destination)
        }
        queue = UDPSendQueue(ring: ring, slots: slots, slotCapacity: slotCapacity, zeroCopy: zeroCopy)
        senderIndex = queue.register(sender)
        queue.onReport = { [unowned self] in self.reports.append($0) }
    }

    /// Puts `datagrams` in one slot, marked `mark`, and submits it (one enter).
    func send(_ datagrams: [[UInt8]], mark: TrafficMark, tag: UInt64 = 0) throws {
        let slot = try #require(queue.acquire())
        for datagram in datagrams {
            let ok = datagram.withUnsafeBytes { queue.appendDatagram(slot, copying: $0) }
            #expect(ok)
        }
        queue.commit(slot, socketIndex: senderIndex, destination: nil, mark: mark, tag: tag)
        try queue.submitReady()
        try ring.submit()
    }

    /// Reaps until `count` datagrams arrived and every send reported, or 5 s passed.
    func pump(until count: Int, reportsExpected: Int) throws {
        let deadline = monotonicNanoseconds() + 5_000_000_000
        while (received.count < count || reports.count < reportsExpected || queue.readySlots > 0),
              monotonicNanoseconds() < deadline {
            if queue.readySlots > 0 { try queue.submitReady() }
            try ring.armTimer(nanoseconds: 10_000_000)
            try ring.submit(waitingFor: 1)
            var failure: SystemError?
            _ = ring.reap { completion in
                switch completion.tag.kind {
                case CompletionTag.sendKind: queue.handle(completion)
                case CompletionTag.receiveKind:
                    do throws(SystemError) {
                        try receiver.handle(completion) { datagram in
                            received.append((Array(datagram.payload), datagram.tos, datagram.timestampNanoseconds))
                        }
                    } catch { failure = error }
                default: break
                }
            }
            if let failure { throw failure }
        }
    }
}

/// A datagram whose bytes say which it is: an 8-byte index, then a pattern from it.
func patternDatagram(index: Int, length: Int) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: length)
    for j in 0..<length { bytes[j] = UInt8(truncatingIfNeeded: index &* 31 &+ j) }
    withUnsafeBytes(of: UInt64(index).littleEndian) { raw in
        for j in 0..<min(8, length) { bytes[j] = raw[j] }
    }
    return bytes
}
