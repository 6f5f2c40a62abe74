import Foundation
import Glibc
import Synchronization
import Testing
import UringIO
@testable import StreamEngine

/// The RTSP server names its RTP/RTCP ports to the client at SETUP and the sender binds them
/// when it runs (Sources/StreamEngine/RTSP/RTSPServer.swift). A reservation holds them from
/// SETUP on; the sender takes them over while the reservation still holds them, so no other
/// socket can take them in a gap (one did once, in a CI run with tests in parallel).
struct ReservedPortTakeOverTests {
    /// Two ports held as the RTSP server holds them: bound unshared, then shared.
    static func reserve() throws -> (rtp: UDPSocket, rtcp: UDPSocket, port: UInt16) {
        for _ in 0..<64 {
            let rtp = try UDPSocket(family: .ipv4)
            try rtp.bind(SocketAddress(ip: "0.0.0.0", port: 0)!)
            let port = try rtp.localAddress().port
            guard port % 2 == 0, port < 65_534 else { continue }
            let rtcp = try UDPSocket(family: .ipv4)
            guard (try? rtcp.bind(SocketAddress(ip: "0.0.0.0", port: port + 1)!)) != nil else { continue }
            try rtp.allowSharedPort()
            try rtcp.allowSharedPort()
            return (rtp, rtcp, port)
        }
        throw SystemError("no free port pair", errno: EADDRINUSE, context: "test")
    }

    /// The errno of binding a new socket (sharing or not) to `port`, 0 when it could.
    static func bindErrno(_ port: UInt16, shared: Bool) throws -> Int32 {
        let socket = try UDPSocket(family: .ipv4)
        if shared { try socket.allowSharedPort() }
        do { try socket.bind(SocketAddress(ip: "0.0.0.0", port: port)!) } catch { return error.errno }
        return 0
    }

    static func config(port: UInt16) -> MediaSenderConfig {
        var config = MediaSenderConfig(destination: SocketAddress(ip: "127.0.0.1", port: 9)!)
        config.localPort = port
        return config
    }

    @Test func withoutTheTakeOverTheReservedPortsAreBusy() throws {
        let reservation = try Self.reserve()
        let sender = try MediaSender(config: Self.config(port: reservation.port))
        sender.finish()
        #expect(throws: SystemError.self) { try sender.run() }
        withExtendedLifetime(reservation) {}
    }

    @Test func theSenderTakesTheReservedPortsWithNoGap() throws {
        var reservation: (rtp: UDPSocket, rtcp: UDPSocket, port: UInt16)? = try Self.reserve()
        let port = reservation!.port
        var config = Self.config(port: port)
        config.takesOverReservedPorts = true
        let sender = try MediaSender(config: config)
        let failure = Mutex<(any Error)?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            do { try sender.run() } catch { failure.withLock { $0 = error } }
            done.signal()
        }
        // While only the reservation holds the ports, a sharing socket may bind them; once the
        // sender has bound them (sharing with no one), none can.
        var taken = false
        for _ in 0..<500 where !taken {
            taken = try Self.bindErrno(port, shared: true) == EADDRINUSE && Self.bindErrno(port + 1, shared: true) == EADDRINUSE
            if !taken { usleep(10_000) }
        }
        #expect(taken, "the sender did not bind the reserved ports within 5 s")
        reservation = nil
        // The reservation closed: the sender alone holds the ports and shares them with no one.
        for candidate in [port, port + 1] {
            #expect(try Self.bindErrno(candidate, shared: false) == EADDRINUSE)
            #expect(try Self.bindErrno(candidate, shared: true) == EADDRINUSE)
        }
        sender.stop()
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(failure.withLock { $0 } == nil)
    }
}
