internal import CLibURing
import Glibc

/// One entry of a socket's error queue (`IP_RECVERR` / `IPV6_RECVERR`): an ICMP error
/// the kernel matched to this socket, or a local error such as EMSGSIZE.
public struct SocketErrorReport: Sendable, Equatable {
    /// Where the error came from (`ee_origin`).
    public enum Origin: Sendable, Equatable {
        /// The local stack (e.g. EMSGSIZE on a send above the MTU).
        case local
        /// An ICMPv4 message.
        case icmp
        /// An ICMPv6 message.
        case icmp6
        /// Something else (timestamping, zerocopy notifications...): the raw `ee_origin`.
        case other(UInt8)
    }

    /// The errno the error stands for (`ee_errno`), e.g. EMSGSIZE or ECONNREFUSED.
    public var errno: Int32
    /// Where it came from.
    public var origin: Origin
    /// The ICMP type (`ee_type`).
    public var icmpType: UInt8
    /// The ICMP code (`ee_code`).
    public var icmpCode: UInt8
    /// `ee_info`: the next-hop MTU for "fragmentation needed" / "packet too big".
    public var info: UInt32
    /// The host that sent the ICMP message (`SO_EE_OFFENDER`), when the kernel gave one.
    public var offender: SocketAddress?

    /// Makes a report (what `drainErrorQueue` builds from `sock_extended_err`).
    public init(errno: Int32, origin: Origin, icmpType: UInt8, icmpCode: UInt8, info: UInt32,
                offender: SocketAddress? = nil) {
        self.errno = errno
        self.origin = origin
        self.icmpType = icmpType
        self.icmpCode = icmpCode
        self.info = info
        self.offender = offender
    }

    /// The path MTU this report announces: ICMP "fragmentation needed" (type 3, code 4),
    /// ICMPv6 "packet too big" (type 2), or a local EMSGSIZE (`ee_info` is the MTU then).
    /// Nil for every other error.
    public var pathMTU: Int? {
        let announces: Bool
        switch origin {
        case .icmp: announces = icmpType == 3 && icmpCode == 4
        case .icmp6: announces = icmpType == 2
        case .local: announces = errno == EMSGSIZE
        case .other: announces = false
        }
        return announces && info > 0 ? Int(info) : nil
    }
}

extension UDPSocket {
    /// Queues ICMP errors for this socket on its error queue (`IP_RECVERR`, and
    /// `IPV6_RECVERR` on IPv6). Read them with `drainErrorQueue`: a queue never drained
    /// keeps the socket readable-for-error forever.
    public func enableReceiveErrors() throws(SystemError) {
        if family == .ipv6 {
            try setOption(Int32(IPPROTO_IPV6), IPV6_RECVERR, 1, name: "IPV6_RECVERR")
            // IPv4-mapped peers on a dual-stack socket report through IP_RECVERR.
            try? setOption(Int32(IPPROTO_IP), IP_RECVERR, 1, name: "IP_RECVERR")
        } else {
            try setOption(Int32(IPPROTO_IP), IP_RECVERR, 1, name: "IP_RECVERR")
        }
    }

    /// Reads every entry waiting on the error queue, without blocking, up to `limit`.
    /// `recvmsg(MSG_ERRQUEUE | MSG_DONTWAIT)`.
    public func drainErrorQueue(limit: Int = 256) -> [SocketErrorReport] {
        var reports: [SocketErrorReport] = []
        var name = sockaddr_storage()
        // Buffers on the stack: the sender drains at every wake-up of its ring, and two heap
        // arrays per call were 2.5 % of `streamer send`'s CPU at 240 fps (results/profile.md).
        withUnsafeTemporaryAllocation(byteCount: 128 + 512, alignment: 16) { buffer in
            // The offending datagram's head (unused), then the control messages.
            let payloadBytes = UnsafeMutableRawBufferPointer(rebasing: buffer[..<128])
            let controlBytes = UnsafeMutableRawBufferPointer(rebasing: buffer[128...])
            while reports.count < limit {
                let received: Int = withUnsafeMutablePointer(to: &name) { namePointer in
                    var vector = iovec(iov_base: payloadBytes.baseAddress, iov_len: payloadBytes.count)
                    return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                        var message = msghdr()
                        message.msg_name = UnsafeMutableRawPointer(namePointer)
                        message.msg_namelen = socklen_t(MemoryLayout<sockaddr_storage>.size)
                        message.msg_iov = vectorPointer
                        message.msg_iovlen = 1
                        message.msg_control = controlBytes.baseAddress
                        message.msg_controllen = controlBytes.count
                        let read = valueOrErrno { recvmsg(fd, &message, Int32(MSG_ERRQUEUE) | Int32(MSG_DONTWAIT)) }
                        guard case .success(let result) = read else { return -1 }
                        Self.parseErrorMessages(&message, into: &reports)
                        return result
                    }
                }
                if received < 0 { break }  // EAGAIN: drained (any other errno: nothing more to read either)
            }
        }
        return reports
    }

    /// Watches for errors through `ring`: a one-shot poll for `POLLERR`, whose completion (tag
    /// kind `CompletionTag.errorWatchKind`, `payload`) arrives when an ICMP or local error is
    /// queued (at once if one waits already). Drain, then arm it again: an owner that drains
    /// only after it fired makes no `recvmsg` per wake-up. `IORING_OP_POLL_ADD`.
    public func armErrorWatch(on ring: Ring, payload: UInt64) throws(SystemError) {
        let sqe = try ring.nextEntry()
        io_uring_prep_poll_add(sqe, fd, UInt32(POLLERR))
        io_uring_sqe_set_data64(sqe, CompletionTag(kind: CompletionTag.errorWatchKind, payload: payload).userData)
    }

    /// Takes (and so clears) the socket's pending error, if any: an error the kernel could
    /// not queue (error queue full) leaves only this, and keeps `POLLERR` raised until it is
    /// read. `getsockopt(SO_ERROR)`.
    @discardableResult
    public func takePendingError() -> Int32 {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &value, &length) == 0 else { return 0 }
        return value
    }

    /// Walks the control messages of one error-queue message for `sock_extended_err`.
    private static func parseErrorMessages(_ message: inout msghdr, into reports: inout [SocketErrorReport]) {
        var cmsg = cu_cmsg_firsthdr(&message)
        while let header = cmsg {
            let level = header.pointee.cmsg_level
            let type = header.pointee.cmsg_type
            if (level == Int32(IPPROTO_IP) && type == IP_RECVERR) || (level == Int32(IPPROTO_IPV6) && type == IPV6_RECVERR) {
                let data = UnsafeRawPointer(cu_cmsg_data(header))!
                let dataLength = Int(header.pointee.cmsg_len) - Int(cu_cmsg_len(0))
                let errorSize = MemoryLayout<sock_extended_err>.size
                if dataLength >= errorSize {
                    let error = data.loadUnaligned(as: sock_extended_err.self)
                    let origin: SocketErrorReport.Origin
                    switch Int32(error.ee_origin) {
                    case cu_so_ee_origin_local: origin = .local
                    case cu_so_ee_origin_icmp: origin = .icmp
                    case cu_so_ee_origin_icmp6: origin = .icmp6
                    default: origin = .other(error.ee_origin)
                    }
                    // SO_EE_OFFENDER: the sender of the ICMP message follows the struct.
                    let offender = dataLength > errorSize
                        ? SocketAddress(data + errorSize, length: dataLength - errorSize) : nil
                    reports.append(SocketErrorReport(errno: Int32(error.ee_errno), origin: origin,
                                                     icmpType: error.ee_type, icmpCode: error.ee_code,
                                                     info: error.ee_info, offender: offender))
                }
            }
            cmsg = cu_cmsg_nxthdr(&message, header)
        }
    }

    /// The MTU of the local interface this socket sends from (after `connect`: the one
    /// toward the peer), or nil when it cannot be found. `getifaddrs(3)` + `SIOCGIFMTU`.
    public func localInterfaceMTU() -> Int? {
        let mtu = cu_local_interface_mtu(fd)
        return mtu > 0 ? Int(mtu) : nil
    }
}
