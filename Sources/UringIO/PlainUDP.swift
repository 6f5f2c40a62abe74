import CLibURing
import Glibc

/// One entry of a `sendmmsg` / `recvmmsg` vector: a `msghdr` and the byte count the
/// kernel fills in. Lays out exactly like C's `struct mmsghdr`.
public struct MultiMessageHeader {
    /// The message.
    public var header: msghdr
    /// Bytes sent or received for this message (set by the kernel).
    public var length: UInt32

    /// An empty entry.
    public init() {
        header = msghdr()
        length = 0
    }
}

/// Plain socket calls, one system call each, for the paths that do not go through
/// io_uring (baselines and the plain receivers). Errors carry the call's name.
///
/// `sendmmsg` and `recvmmsg` need `_GNU_SOURCE`, which the Swift importer does not
/// set, so they are looked up once with `dlsym` instead of being imported.
public enum PlainUDP {
    private typealias MultiCall = @convention(c) (Int32, UnsafeMutableRawPointer?, UInt32, Int32) -> Int32
    private typealias ReceiveMultiCall = @convention(c) (Int32, UnsafeMutableRawPointer?, UInt32, Int32,
                                                         UnsafeMutableRawPointer?) -> Int32

    private static let sendMultiple: MultiCall? = lookUp("sendmmsg")
    private static let receiveMultiple: ReceiveMultiCall? = lookUp("recvmmsg")

    private static func lookUp<F>(_ name: String) -> F? {
        guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, name) else { return nil }
        return unsafeBitCast(symbol, to: F.self)
    }

    /// Whether `sendmmsg` and `recvmmsg` were found in the C library.
    public static var hasMultiMessageCalls: Bool { sendMultiple != nil && receiveMultiple != nil }

    /// Sends one datagram on a connected socket (`destination` nil) or to `destination`.
    /// Returns the bytes sent; `nil` when a non-blocking socket would block. `sendto(2)`.
    @inline(__always)
    public static func sendTo(_ socket: UDPSocket, _ bytes: UnsafeRawBufferPointer,
                              destination: SocketAddress? = nil) throws(SystemError) -> Int? {
        while true {
            let rc: Int
            if let destination {
                rc = destination.withSockAddr { sendto(socket.fd, bytes.baseAddress, bytes.count, 0, $0, $1) }
            } else {
                rc = sendto(socket.fd, bytes.baseAddress, bytes.count, 0, nil, 0)
            }
            if rc >= 0 { return rc }
            let code = Glibc.errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK { return nil }
            throw SystemError("sendto", errno: code, context: destination?.description)
        }
    }

    /// Sends up to `count` prepared messages with one call. Returns how many went
    /// (at least one on success); `nil` when a non-blocking socket would block. `sendmmsg(2)`.
    @inline(__always)
    public static func sendMessages(_ socket: UDPSocket, _ messages: UnsafeMutablePointer<MultiMessageHeader>,
                                    count: Int) throws(SystemError) -> Int? {
        guard let call = sendMultiple else { throw SystemError("sendmmsg", errno: ENOSYS) }
        while true {
            let rc = call(socket.fd, UnsafeMutableRawPointer(messages), UInt32(count), 0)
            if rc >= 0 { return Int(rc) }
            let code = Glibc.errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK { return nil }
            throw SystemError("sendmmsg", errno: code, context: "\(count) messages")
        }
    }

    /// Receives one datagram into `buffer`. Returns its length; `nil` on a receive
    /// timeout (`SO_RCVTIMEO`) or when a non-blocking socket has nothing. `recvfrom(2)`.
    @inline(__always)
    public static func receiveFrom(_ socket: UDPSocket, into buffer: UnsafeMutableRawBufferPointer,
                                   flags: Int32 = 0) throws(SystemError) -> Int? {
        while true {
            let rc = recvfrom(socket.fd, buffer.baseAddress, buffer.count, flags, nil, nil)
            if rc >= 0 { return rc }
            let code = Glibc.errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK { return nil }
            throw SystemError("recvfrom", errno: code)
        }
    }

    /// Receives up to `count` datagrams with one call, waiting only for the first
    /// (`MSG_WAITFORONE`). Returns how many arrived; `nil` on a receive timeout. `recvmmsg(2)`.
    @inline(__always)
    public static func receiveMessages(_ socket: UDPSocket, _ messages: UnsafeMutablePointer<MultiMessageHeader>,
                                       count: Int) throws(SystemError) -> Int? {
        guard let call = receiveMultiple else { throw SystemError("recvmmsg", errno: ENOSYS) }
        while true {
            let rc = call(socket.fd, UnsafeMutableRawPointer(messages), UInt32(count),
                          Int32(MSG_WAITFORONE), nil)
            if rc >= 0 { return Int(rc) }
            let code = Glibc.errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK { return nil }
            throw SystemError("recvmmsg", errno: code, context: "\(count) messages")
        }
    }

    /// Makes blocking receives on `socket` give up after `nanoseconds` (`SO_RCVTIMEO`),
    /// so a plain receive loop can check for a stop request.
    public static func setReceiveTimeout(_ socket: UDPSocket, nanoseconds: Int64) throws(SystemError) {
        var value = timeval(tv_sec: Int(nanoseconds / 1_000_000_000), tv_usec: Int(nanoseconds % 1_000_000_000 / 1000))
        let rc = setsockopt(socket.fd, SOL_SOCKET, SO_RCVTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
        if rc < 0 { throw SystemError("setsockopt", errno: Glibc.errno, context: "SO_RCVTIMEO") }
    }
}
