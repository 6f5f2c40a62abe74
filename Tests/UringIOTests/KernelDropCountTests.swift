import Glibc
import Testing
import UringIO

/// The kernel's drop count of a receive socket, as `UDPMultishotReceiver` reports it.
@Suite(.enabled(if: uringAvailable, "io_uring is disabled here"))
struct KernelDropCountTests {
    /// A socket left unread fills, then the kernel drops what follows. Each datagram queued
    /// carries the drop count of its own arrival (`SO_RXQ_OVFL`: none, all came before the
    /// first drop), so only the socket's own count (`SO_MEMINFO`) shows the drops after the
    /// last datagram queued: a stream whose last packets met a full buffer.
    @Test func dropsAfterTheLastQueuedDatagramAreCounted() throws {
        let ring = try Ring(entries: 64)
        let socket = try UDPSocket(family: .ipv4)
        try socket.bind(SocketAddress(ip: "127.0.0.1", port: 0)!)
        try socket.enableDropCounter()
        socket.setReceiveBufferSize(4096)  // a few datagrams of 1,000 B (the kernel doubles it)
        let destination = try socket.localAddress()
        let sender = try UDPSocket(family: .ipv4)
        let total = 200
        let payload = [UInt8](repeating: 7, count: 1000)
        var sent = 0
        for _ in 0..<total {
            // Loopback delivers inside the send: into the queue, or dropped there.
            let result = try payload.withUnsafeBytes { bytes throws(SystemError) in
                try PlainUDP.sendTo(sender, bytes, destination: destination)
            }
            if result == payload.count { sent += 1 }
        }
        #expect(sent == total)

        let receiver = try UDPMultishotReceiver(ring: ring, socket: socket, groupID: 1, bufferCount: 64, maxPayload: 2048)
        try receiver.arm()
        var received = 0
        while true {
            let before = received
            try ring.submit(waitingFor: 1, timeoutNanoseconds: 100_000_000)
            var failure: SystemError?
            _ = ring.reap { completion in
                guard completion.tag.kind == CompletionTag.receiveKind else { return }
                do throws(SystemError) {
                    try receiver.handle(completion) { datagram in
                        if datagram.payload.count == payload.count { received += 1 }
                    }
                } catch { failure = error }
            }
            if let failure { throw failure }
            if received == before { break }  // a wait of 100 ms brought nothing: all read
        }
        #expect(received > 0 && received < total, "\(received) of \(total) queued: the buffer should hold a few")
        #expect(receiver.counters.kernelDrops == 0)
        receiver.refreshKernelDrops()
        #expect(Int(receiver.counters.kernelDrops) == total - received)
        #expect(Int(try socket.kernelDropCount()) == total - received)
    }
}
