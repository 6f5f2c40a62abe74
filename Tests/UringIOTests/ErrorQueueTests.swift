import Glibc
import Testing
import UringIO

/// The error queue (`IP_RECVERR`): ICMP errors come back as parsed reports, and draining
/// empties the queue.
struct ErrorQueueTests {
    /// A datagram to a loopback port nobody listens on draws an ICMP port unreachable,
    /// which the error queue reports with its origin, type, code and offender.
    @Test(arguments: [SocketAddress.Family.ipv4, .ipv6])
    func portUnreachableIsReadFromTheErrorQueue(family: SocketAddress.Family) throws {
        let loopback = family == .ipv4 ? "127.0.0.1" : "::1"
        // A port that was free a moment ago: bind, read it, close.
        let port: UInt16 = try {
            let probe = try UDPSocket(family: family)
            try probe.bind(SocketAddress(ip: loopback, port: 0)!)
            return try probe.localAddress().port
        }()
        let socket = try UDPSocket(family: family)
        try socket.connect(SocketAddress(ip: loopback, port: port)!)
        try socket.setPathMTUDiscovery(.probe)
        try socket.enableReceiveErrors()
        let payload = [UInt8](repeating: 7, count: 100)
        _ = payload.withUnsafeBytes { try? PlainUDP.sendTo(socket, $0) }
        let reports = socket.drainErrorQueue()
        try #require(reports.count == 1, "reports: \(reports)")
        let report = reports[0]
        #expect(report.errno == ECONNREFUSED)
        #expect(report.origin == (family == .ipv4 ? .icmp : .icmp6))
        // ICMP destination unreachable / port unreachable (v4 3/3, v6 1/4).
        #expect(report.icmpType == (family == .ipv4 ? 3 : 1))
        #expect(report.icmpCode == (family == .ipv4 ? 3 : 4))
        #expect(report.pathMTU == nil)
        #expect(report.offender?.host == loopback)
        #expect(socket.drainErrorQueue().isEmpty, "drained")
    }

    /// The error watch (a POLLERR poll through the ring) stays quiet while the error queue is
    /// empty, completes with its tag once an ICMP error is queued, and, armed again after the
    /// drain, is quiet again.
    @Test(.enabled(if: Ring.isAvailable, "io_uring is disabled on this kernel"))
    func theErrorWatchFiresOnlyWhenAnErrorIsQueued() throws {
        let ring = try Ring(entries: 8)
        let port: UInt16 = try {
            let probe = try UDPSocket(family: .ipv4)
            try probe.bind(SocketAddress(ip: "127.0.0.1", port: 0)!)
            return try probe.localAddress().port
        }()
        let socket = try UDPSocket(family: .ipv4)
        try socket.connect(SocketAddress(ip: "127.0.0.1", port: port)!)
        try socket.enableReceiveErrors()
        func watchCompletions() -> [Completion] {
            var completions: [Completion] = []
            _ = ring.reap { completions.append($0) }
            return completions
        }
        try socket.armErrorWatch(on: ring, payload: 9)
        try ring.submit()
        #expect(watchCompletions().isEmpty, "nothing queued: the watch waits")
        let payload = [UInt8](repeating: 7, count: 100)
        _ = payload.withUnsafeBytes { try? PlainUDP.sendTo(socket, $0) }
        try ring.submit(waitingFor: 1, timeoutNanoseconds: 5_000_000_000)
        let fired = watchCompletions()
        try #require(fired.count == 1, "completions: \(fired)")
        #expect(fired[0].tag == CompletionTag(kind: CompletionTag.errorWatchKind, payload: 9))
        #expect(fired[0].result & Int32(POLLERR) != 0)
        #expect(socket.drainErrorQueue().count == 1)
        try socket.armErrorWatch(on: ring, payload: 9)
        try ring.submit()
        #expect(watchCompletions().isEmpty, "drained: quiet again")
    }

    /// Frag-needed, packet-too-big and local EMSGSIZE announce a path MTU; nothing else does.
    @Test func onlyMTUErrorsAnnounceAPathMTU() {
        #expect(SocketErrorReport(errno: EMSGSIZE, origin: .icmp, icmpType: 3, icmpCode: 4, info: 1400).pathMTU == 1400)
        #expect(SocketErrorReport(errno: EMSGSIZE, origin: .icmp6, icmpType: 2, icmpCode: 0, info: 1280).pathMTU == 1280)
        #expect(SocketErrorReport(errno: EMSGSIZE, origin: .local, icmpType: 0, icmpCode: 0, info: 1500).pathMTU == 1500)
        #expect(SocketErrorReport(errno: ECONNREFUSED, origin: .icmp, icmpType: 3, icmpCode: 3, info: 0).pathMTU == nil)
        #expect(SocketErrorReport(errno: EMSGSIZE, origin: .icmp, icmpType: 3, icmpCode: 4, info: 0).pathMTU == nil)
    }

    /// The loopback interface's MTU is found from a socket connected over it.
    @Test func localInterfaceMTUOfLoopback() throws {
        let socket = try UDPSocket(family: .ipv4)
        try socket.connect(SocketAddress(ip: "127.0.0.1", port: 9)!)
        let mtu = try #require(socket.localInterfaceMTU())
        // IP_MTU caps at the largest IP packet (65535); the interface itself says 65536.
        #expect(mtu == 65_536)
        #expect(socket.kernelPathMTU() == 65_535)
    }
}
