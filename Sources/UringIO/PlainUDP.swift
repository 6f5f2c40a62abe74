internal import CLibURing
import Glibc

/// Plain socket calls, one system call each, for the paths that do not go through
/// io_uring (baselines and the plain receivers). Errors carry the call's name; EINTR is
/// retried and EAGAIN / EWOULDBLOCK returns nil (`retryingEINTRUnlessWouldBlock`).
public enum PlainUDP {
    /// Sends one datagram on a connected socket (`destination` nil) or to `destination`.
    /// Returns the bytes sent; `nil` when a non-blocking socket would block. `sendto(2)`.
    @inline(__always)
    public static func sendTo(_ socket: UDPSocket, _ bytes: UnsafeRawBufferPointer,
                              destination: SocketAddress? = nil) throws(SystemError) -> Int? {
        try retryingEINTRUnlessWouldBlock("sendto", context: destination?.description) {
            if let destination {
                return destination.withSockAddr { sendto(socket.fd, bytes.baseAddress, bytes.count, 0, $0, $1) }
            }
            return sendto(socket.fd, bytes.baseAddress, bytes.count, 0, nil, 0)
        }
    }

    /// Sends up to `count` prepared messages with one call. Returns how many went
    /// (at least one on success); `nil` when a non-blocking socket would block. `sendmmsg(2)`.
    @inline(__always)
    public static func sendMessages(_ socket: UDPSocket, _ messages: UnsafeMutablePointer<MultiMessageHeader>,
                                    count: Int) throws(SystemError) -> Int? {
        try retryingEINTRUnlessWouldBlock("sendmmsg", context: "\(count) messages") {
            cu_sendmmsg(socket.fd, messages, UInt32(count), 0)
        }.map(Int.init)
    }

    /// Receives one datagram into `buffer`. Returns its length; `nil` on a receive
    /// timeout (`SO_RCVTIMEO`) or when a non-blocking socket has nothing. `recvfrom(2)`.
    @inline(__always)
    public static func receiveFrom(_ socket: UDPSocket, into buffer: UnsafeMutableRawBufferPointer,
                                   flags: Int32 = 0) throws(SystemError) -> Int? {
        try retryingEINTRUnlessWouldBlock("recvfrom") { recvfrom(socket.fd, buffer.baseAddress, buffer.count, flags, nil, nil) }
    }

    /// Receives up to `count` datagrams with one call, waiting only for the first
    /// (`MSG_WAITFORONE`). Returns how many arrived; `nil` on a receive timeout. `recvmmsg(2)`.
    @inline(__always)
    public static func receiveMessages(_ socket: UDPSocket, _ messages: UnsafeMutablePointer<MultiMessageHeader>,
                                       count: Int) throws(SystemError) -> Int? {
        try retryingEINTRUnlessWouldBlock("recvmmsg", context: "\(count) messages") {
            cu_recvmmsg(socket.fd, messages, UInt32(count), Int32(MSG_WAITFORONE))
        }.map(Int.init)
    }

    /// Makes blocking receives on `socket` give up after `nanoseconds` (`SO_RCVTIMEO`),
    /// so a plain receive loop can check for a stop request.
    public static func setReceiveTimeout(_ socket: UDPSocket, nanoseconds: Int64) throws(SystemError) {
        var value = timeval(tv_sec: Int(nanoseconds / 1_000_000_000), tv_usec: Int(nanoseconds % 1_000_000_000 / 1000))
        _ = try retryingEINTR("setsockopt", context: "SO_RCVTIMEO") {
            setsockopt(socket.fd, SOL_SOCKET, SO_RCVTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
        }
    }
}
