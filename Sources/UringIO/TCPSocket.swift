internal import CLibURing
import Glibc

/// A listening TCP socket (IPv4 or IPv6), blocking, with waits bounded by `poll(2)`.
/// Owns the file descriptor. For control connections (RTSP), not for media.
public final class TCPListener {
    /// The file descriptor. Valid until the listener is deinitialized.
    public let fd: Int32

    /// Opens a socket on `address` (`SO_REUSEADDR`, so a restarted server can take its port
    /// back at once) and listens. `socket(2)`, `bind(2)`, `listen(2)`.
    public init(_ address: SocketAddress, backlog: Int32 = 4) throws(SystemError) {
        let domain = address.family == .ipv6 ? AF_INET6 : AF_INET
        fd = try retryingEINTR("socket", context: "TCP") {
            socket(domain, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), Int32(IPPROTO_TCP))
        }
        var on: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        do {
            _ = try retryingEINTR("cannot listen on", context: "TCP \(address)") {
                address.withSockAddr { Glibc.bind(fd, $0, $1) }
            }
            _ = try retryingEINTR("listen", context: "TCP \(address)") { listen(fd, backlog) }
        } catch {
            close(fd)
            throw error
        }
    }

    deinit { close(fd) }

    /// The address this socket is bound to. `getsockname(2)`.
    public func localAddress() throws(SystemError) -> SocketAddress { try socketAddress(of: fd, peer: false) }

    /// Waits up to `timeoutMilliseconds` (-1: no limit) for a client, or until `wake` is
    /// signalled. Returns nil on either. `poll(2)`, `accept4(2)`.
    public func accept(timeoutMilliseconds: Int32, wake: WakeEvent? = nil) throws(SystemError) -> TCPConnection? {
        guard try waitReadable(fd, timeoutMilliseconds: timeoutMilliseconds, wake: wake) == .readable else { return nil }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let client = try withUnsafeMutablePointer(to: &storage) { pointer throws(SystemError) in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address throws(SystemError) in
                try retryingEINTR("accept") { Glibc.accept(fd, address, &length) }
            }
        }
        _ = fcntl(client, F_SETFD, FD_CLOEXEC)  // accept4 needs _GNU_SOURCE, which Swift does not set
        let peer = withUnsafeBytes(of: &storage) { SocketAddress($0.baseAddress!, length: Int(length)) }
        guard let peer else {
            close(client)
            throw SystemError("accept", errno: EAFNOSUPPORT, context: "a client that is neither IPv4 nor IPv6")
        }
        return TCPConnection(fd: client, peer: peer)
    }
}

/// An accepted TCP connection: bounded-wait reads, whole writes. Owns the file descriptor.
public final class TCPConnection {
    /// What a read found.
    public enum ReadResult: Equatable {
        /// Bytes (at least one).
        case data([UInt8])
        /// The peer closed its side (or reset the connection).
        case closed
        /// Nothing arrived within the timeout.
        case timedOut
        /// The wake event was signalled.
        case woken
    }

    /// The file descriptor. Valid until the connection is deinitialized.
    public let fd: Int32
    /// The client's address.
    public let peer: SocketAddress

    init(fd: Int32, peer: SocketAddress) {
        self.fd = fd
        self.peer = peer
    }

    deinit { close(fd) }

    /// The local address the client reached (the server's address as the client sees it). `getsockname(2)`.
    public func localAddress() throws(SystemError) -> SocketAddress { try socketAddress(of: fd, peer: false) }

    /// Reads what is there, at most `maxBytes`, waiting up to `timeoutMilliseconds` (-1: no
    /// limit) or until `wake` is signalled. `poll(2)`, `recv(2)`.
    public func read(maxBytes: Int, timeoutMilliseconds: Int32, wake: WakeEvent? = nil) throws(SystemError) -> ReadResult {
        switch try waitReadable(fd, timeoutMilliseconds: timeoutMilliseconds, wake: wake) {
        case .timedOut: return .timedOut
        case .woken: return .woken
        case .readable: break
        }
        var buffer = [UInt8](repeating: 0, count: max(1, maxBytes))
        let received = buffer.withUnsafeMutableBytes { raw in valueOrErrno { recv(fd, raw.baseAddress, raw.count, 0) } }
        switch received {
        case .success(0), .failure(Errno(ECONNRESET)): return .closed
        case .success(let count): return .data(Array(buffer.prefix(count)))
        case .failure(let code): throw SystemError("recv", errno: code.rawValue, context: "TCP \(peer)")
        }
    }

    /// Sends FIN: the peer reads what was written, then end of stream. `shutdown(2)`.
    public func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

    /// Writes all of `bytes` (no SIGPIPE: a gone peer is an EPIPE error). `send(2)`.
    public func write(_ bytes: [UInt8]) throws(SystemError) {
        var offset = 0
        while offset < bytes.count {
            offset += try retryingEINTR("send", context: "TCP \(peer)") {
                bytes.withUnsafeBytes { raw in send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL)) }
            }
        }
    }
}

@available(*, unavailable, message: "a listener is owned by one thread")
extension TCPListener: Sendable {}

@available(*, unavailable, message: "a connection is owned by one thread")
extension TCPConnection: Sendable {}

private enum Readiness { case readable, timedOut, woken }

/// Waits until `fd` is readable (or has hung up), `wake` is signalled (drained), or the time
/// is up. `poll(2)`.
private func waitReadable(_ fd: Int32, timeoutMilliseconds: Int32, wake: WakeEvent?) throws(SystemError) -> Readiness {
    var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
               pollfd(fd: wake?.fd ?? -1, events: Int16(POLLIN), revents: 0)]  // -1: ignored by poll
    let ready = try retryingEINTR("poll") { poll(&fds, nfds_t(fds.count), timeoutMilliseconds) }
    if fds[1].revents != 0 {
        var counter: UInt64 = 0
        _ = Glibc.read(fds[1].fd, &counter, 8)
        return .woken
    }
    return ready == 0 ? .timedOut : .readable
}

/// The local (`getsockname(2)`) or peer (`getpeername(2)`) address of a socket.
func socketAddress(of fd: Int32, peer: Bool) throws(SystemError) -> SocketAddress {
    var storage = sockaddr_storage()
    var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
    _ = try withUnsafeMutablePointer(to: &storage) { pointer throws(SystemError) in
        try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address throws(SystemError) in
            try retryingEINTR(peer ? "getpeername" : "getsockname") {
                peer ? getpeername(fd, address, &length) : getsockname(fd, address, &length)
            }
        }
    }
    guard let address = withUnsafeBytes(of: &storage, { SocketAddress($0.baseAddress!, length: Int(length)) }) else {
        throw SystemError(peer ? "getpeername" : "getsockname", errno: EAFNOSUPPORT)
    }
    return address
}
