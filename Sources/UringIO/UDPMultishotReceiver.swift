internal import CLibURing
import Glibc

/// One received datagram, valid only inside the callback that gets it.
public struct ReceivedDatagram {
    /// The payload (one segment when the kernel coalesced several with GRO).
    public var payload: UnsafeRawBufferPointer
    /// The TOS byte (IPv4) or traffic class (IPv6) it carried.
    public var tos: UInt8
    /// Kernel receive time (`SO_TIMESTAMPNS`, CLOCK_REALTIME), in nanoseconds; 0 if none.
    public var timestampNanoseconds: Int64
    /// Where it came from: the sockaddr in the receive buffer (`sourceLength` bytes), read
    /// into a `SocketAddress` only when asked (`source`). Passing a 132-byte address along
    /// with every datagram copied it three times per datagram (results/profile.md section 20).
    var sourceName: UnsafeRawPointer?
    var sourceLength: Int
    /// Where it came from.
    public var source: SocketAddress? { sourceName.flatMap { SocketAddress($0, length: sourceLength) } }
    /// The receiver's number of the completion it came in (`ReceiveCounters.completions` then):
    /// datagrams with the same number are GRO segments of one completion and share its source,
    /// TOS byte and time.
    public var completion: Int
}

/// The datagrams of one receive completion, valid only inside the callback that gets them: one
/// datagram, or the GRO segments the kernel coalesced (each `segmentSize` bytes, the last one
/// possibly shorter), which share their source, TOS byte and time. A caller that can take a run
/// of datagrams at once gets them together; `forEach` hands them out one by one.
public struct ReceivedSegments {
    /// Every segment's bytes back to back (`payload`), and what the segments share: TOS byte,
    /// kernel time, source and completion number.
    public var all: ReceivedDatagram
    /// The size of each segment but the last (which may be shorter); `all.payload.count` (at
    /// least 1) for a single datagram.
    public var segmentSize: Int

    /// Hands each datagram to `body`, in order.
    @inline(__always)
    public func forEach(_ body: (ReceivedDatagram) -> Void) {
        let bytes = all.payload
        var datagram = all
        var offset = 0
        repeat {
            let count = min(segmentSize, bytes.count - offset)
            datagram.payload = UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)])
            body(datagram)
            offset += count
        } while offset < bytes.count
    }
}

/// Counters of one receiver.
public struct ReceiveCounters: Sendable, Equatable {
    /// Datagrams delivered to the callback (GRO segments counted one by one).
    public var datagrams = 0
    /// Payload bytes delivered.
    public var bytes = 0
    /// Receive completions (one may carry many GRO segments).
    public var completions = 0
    /// Completions that carried more than one segment.
    public var groCompletions = 0
    /// Datagrams seen with each ECN codepoint, indexed by the two ECN bits.
    public var ecn: [Int] = [0, 0, 0, 0]
    /// Datagrams seen per DSCP value (index 0...63).
    public var dscp: [Int] = Array(repeating: 0, count: 64)
    /// Datagrams the kernel marked truncated (the buffer was too small): counted, never delivered.
    public var truncated = 0
    /// Times the multishot receive ran out of buffers and was re-armed.
    public var bufferExhausted = 0
    /// Times the multishot receive ended and was re-armed.
    public var rearms = 0
    /// Datagrams the kernel dropped because the socket's receive queue was full (`SO_RXQ_OVFL`).
    public var kernelDrops: UInt32 = 0
    /// Receive errors by errno.
    public var errors: [Errno: Int] = [:]

    /// Zeroed counters.
    public init() {}
}

/// A multishot `recvmsg` on a registered buffer ring: one SQE keeps delivering
/// datagrams, each into a kernel-picked buffer that goes back to the ring right after
/// the callback. Reads the TOS byte, a kernel timestamp, the GRO segment size and the
/// kernel's drop counter from each datagram's control messages.
public final class UDPMultishotReceiver {
    /// The socket received on.
    public let socket: UDPSocket
    private let ring: Ring
    private let groupID: UInt16
    private let bufferCount: Int
    /// Size of each buffer (header, address, control messages and payload).
    public let bufferSize: Int
    private let buffers: UnsafeMutableRawPointer
    private let bufferRing: UnsafeMutablePointer<io_uring_buf_ring>
    private let message: UnsafeMutablePointer<msghdr>
    private static let nameSpace = MemoryLayout<sockaddr_in6>.size
    private static let controlSpace = 256
    // `@exclusivity(unchecked)`: the receiver is owned by one thread (not Sendable), and a
    // dynamic check per completion cost a `swift_beginAccess` and its thread-local lookup
    // (results/profile.md section 20), as in `Ring` and `UDPSendQueue`.
    /// True while the multishot SQE is live.
    @exclusivity(unchecked) public private(set) var armed = false
    /// Counters.
    @exclusivity(unchecked) public private(set) var counters = ReceiveCounters()

    /// Sets up `bufferCount` (a power of two) buffers able to hold `maxPayload` bytes each,
    /// registered with `ring` as group `groupID`. With GRO on the socket, `maxPayload` must
    /// cover 64 segments.
    public init(ring: Ring, socket: UDPSocket, groupID: UInt16, bufferCount: Int = 256, maxPayload: Int = 65_536)
        throws(SystemError)
    {
        precondition(bufferCount > 0 && bufferCount & (bufferCount - 1) == 0 && bufferCount <= 32_768)
        self.ring = ring
        self.socket = socket
        self.groupID = groupID
        self.bufferCount = bufferCount
        self.bufferSize = MemoryLayout<io_uring_recvmsg_out>.size + Self.nameSpace + Self.controlSpace + maxPayload
        var err: Int32 = 0
        guard let bufferRing = cu_buf_ring_setup(ring.raw, UInt32(bufferCount), Int32(groupID), &err) else {
            throw SystemError("io_uring_register_buf_ring", errno: -err, context: "\(bufferCount) buffers")
        }
        self.bufferRing = bufferRing
        buffers = Self.allocateBuffers(byteCount: bufferCount * bufferSize)
        for index in 0..<bufferCount {
            cu_buf_ring_add(bufferRing, buffers + index * bufferSize, UInt32(bufferSize), UInt16(index),
                            UInt32(bufferCount), Int32(index))
        }
        cu_buf_ring_advance(bufferRing, Int32(bufferCount))
        message = .allocate(capacity: 1)
        message.initialize(to: msghdr())
        message.pointee.msg_namelen = socklen_t(Self.nameSpace)
        message.pointee.msg_controllen = Self.controlSpace
    }

    /// The size of a transparent huge page on x86-64 and arm64 (4 KB base pages).
    static let hugePageSize = 2 << 20

    /// Memory for the buffers. A ring of 2 MB or more is aligned to 2 MB and asked to be backed
    /// by transparent huge pages (`MADV_HUGEPAGE`; the system's default is to ask): the kernel
    /// takes the buffers in turn, so with 4 KB pages each one's pages were faulted in on first
    /// use (64 buffers of 64 KB: ~400 page faults per run, 1,190 for a whole `streamer recv`
    /// against the floor receiver's 617), and each burst landed in pages missing from the TLB.
    /// Where the kernel has no huge page to give (or THP is off), it falls back to 4 KB pages:
    /// the advice is only that (results/profile.md section 23).
    private static func allocateBuffers(byteCount: Int) -> UnsafeMutableRawPointer {
        guard byteCount >= hugePageSize else { return .allocate(byteCount: byteCount, alignment: 64) }
        let rounded = (byteCount + hugePageSize - 1) / hugePageSize * hugePageSize
        let memory = UnsafeMutableRawPointer.allocate(byteCount: rounded, alignment: hugePageSize)
        _ = madvise(memory, rounded, MADV_HUGEPAGE)
        return memory
    }

    deinit {
        cu_buf_ring_free(ring.raw, bufferRing, UInt32(bufferCount), Int32(groupID))
        buffers.deallocate()
        message.deallocate()
    }

    /// Queues the multishot receive (submitted with the ring's next submit).
    public func arm() throws(SystemError) {
        guard !armed else { return }
        let sqe = try ring.nextEntry()
        io_uring_prep_recvmsg_multishot(sqe, socket.fd, message, 0)
        sqe.pointee.flags |= UInt8(cu_iosqe_buffer_select)
        sqe.pointee.buf_group = groupID
        io_uring_sqe_set_data64(sqe, CompletionTag(kind: CompletionTag.receiveKind, payload: UInt64(groupID)).userData)
        armed = true
    }

    /// Brings `counters.kernelDrops` up to the socket's own count now (`UDPSocket.kernelDropCount`):
    /// the count each datagram carries misses drops after the last datagram queued.
    public func refreshKernelDrops() {
        guard let count = try? socket.kernelDropCount() else { return }
        raiseKernelDrops(to: count)
    }

    /// The kernel's count only grows (modulo 2^32): a value older than the one held (a datagram
    /// queued before the last `refreshKernelDrops`) leaves it as it is.
    private func raiseKernelDrops(to count: UInt32) {
        if count &- counters.kernelDrops < 1 << 31 { counters.kernelDrops = count }
    }

    /// Handles a completion tagged `receiveKind` with this receiver's group: delivers each
    /// datagram (each GRO segment separately) to `deliver`, recycles the buffer, and re-arms
    /// when the kernel ended the multishot.
    @inline(__always)
    public func handle(_ completion: Completion, deliver: (ReceivedDatagram) -> Void) throws(SystemError) {
        try handleSegments(of: completion) { $0.forEach(deliver) }
    }

    /// Handles a completion as `handle(_:deliver:)` does, delivering its datagrams together (all
    /// the GRO segments of the completion in one call) to `deliver`.
    @inline(__always)
    public func handleSegments(of completion: Completion, deliver: (ReceivedSegments) -> Void) throws(SystemError) {
        counters.completions += 1
        if completion.flags & cu_cqe_f_more == 0 {
            armed = false
            counters.rearms += 1
        }
        if completion.result < 0 {
            let code = -completion.result
            if code == ENOBUFS { counters.bufferExhausted += 1 } else { counters.errors[Errno(code), default: 0] += 1 }
            if !armed { try arm() }
            return
        }
        guard completion.flags & cu_cqe_f_buffer != 0 else {
            if !armed { try arm() }
            return
        }
        let bufferID = Int(completion.flags >> cu_cqe_buffer_shift)
        let buffer = buffers + bufferID * bufferSize
        process(buffer: buffer, length: Int(completion.result), deliver: deliver)
        cu_buf_ring_add(bufferRing, buffer, UInt32(bufferSize), UInt16(bufferID), UInt32(bufferCount), 0)
        cu_buf_ring_advance(bufferRing, 1)
        if !armed { try arm() }
    }

    @inline(__always)
    private func process(buffer: UnsafeMutableRawPointer, length: Int, deliver: (ReceivedSegments) -> Void) {
        guard let out = io_uring_recvmsg_validate(buffer, Int32(length), message) else {
            counters.errors[Errno(EBADMSG), default: 0] += 1
            return
        }
        if out.pointee.flags & UInt32(MSG_TRUNC) != 0 || out.pointee.flags & UInt32(MSG_CTRUNC) != 0 {
            counters.truncated += 1
            return
        }
        var tos: UInt8 = 0
        var timestamp: Int64 = 0
        var segmentSize = 0
        var cmsg = io_uring_recvmsg_cmsg_firsthdr(out, message)
        while let header = cmsg {
            let level = header.pointee.cmsg_level
            let type = header.pointee.cmsg_type
            let data = UnsafeRawPointer(cu_cmsg_data(header))!
            if level == Int32(IPPROTO_IP) && type == IP_TOS {
                tos = data.load(as: UInt8.self)
            } else if level == Int32(IPPROTO_IPV6) && type == IPV6_TCLASS {
                tos = UInt8(truncatingIfNeeded: data.loadUnaligned(as: Int32.self))
            } else if level == SOL_SOCKET && type == cu_scm_timestampns {
                let spec = data.loadUnaligned(as: timespec.self)
                timestamp = Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
            } else if level == Int32(IPPROTO_UDP) && type == cu_udp_gro {
                segmentSize = Int(data.loadUnaligned(as: Int32.self))
            } else if level == SOL_SOCKET && type == cu_so_rxq_ovfl {
                // The count when the datagram was queued.
                raiseKernelDrops(to: data.loadUnaligned(as: UInt32.self))
            }
            cmsg = io_uring_recvmsg_cmsg_nexthdr(out, message, header)
        }
        let sourceName = out.pointee.namelen > 0 ? UnsafeRawPointer(io_uring_recvmsg_name(out)) : nil
        let payloadLength = Int(io_uring_recvmsg_payload_length(out, Int32(length), message))
        let payload = UnsafeRawPointer(io_uring_recvmsg_payload(out, message))!
        let mark = TrafficMark(tos: tos)
        let step = segmentSize > 0 ? segmentSize : max(payloadLength, 1)
        if segmentSize > 0 && payloadLength > segmentSize { counters.groCompletions += 1 }
        // Every segment of a completion shares its control messages (TOS, time, source): the
        // counters move once per completion, by the number of segments, not once per datagram.
        let segments = max(1, (payloadLength + step - 1) / step)
        counters.datagrams += segments
        counters.bytes += payloadLength
        counters.ecn[Int(mark.ecn.rawValue)] += segments
        counters.dscp[Int(mark.dscp)] += segments
        let all = ReceivedDatagram(payload: UnsafeRawBufferPointer(start: payload, count: payloadLength), tos: tos,
                                   timestampNanoseconds: timestamp, sourceName: sourceName,
                                   sourceLength: Int(min(out.pointee.namelen, UInt32(Self.nameSpace))),
                                   completion: counters.completions)
        deliver(ReceivedSegments(all: all, segmentSize: step))
    }
}

@available(*, unavailable, message: "a receiver is owned by one engine thread")
extension UDPMultishotReceiver: Sendable {}
