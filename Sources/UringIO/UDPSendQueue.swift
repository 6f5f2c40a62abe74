internal import CLibURing
import Glibc

/// What became of one send slot, reported once per slot when all its sends completed.
public struct SendReport: Sendable {
    /// The tag the owner gave the slot.
    public var tag: UInt64
    /// Datagrams the kernel accepted.
    public var sentDatagrams: Int
    /// Payload bytes the kernel accepted.
    public var sentBytes: Int
    /// Datagrams that failed for good (not retried): counted by the owner, never silent.
    public var failedDatagrams: Int
    /// The errno of the first failure (positive), or 0.
    public var errno: Int32

    /// The first failure, typed; nil when every datagram went.
    public var error: Errno? { errno == 0 ? nil : Errno(errno) }
}

/// Counters of one send queue.
public struct SendQueueCounters: Sendable, Equatable {
    /// Datagrams accepted by the kernel.
    public var datagrams = 0
    /// Payload bytes accepted by the kernel.
    public var bytes = 0
    /// send SQEs prepared (a GSO group counts once).
    public var sendCalls = 0
    /// Of those, plain sends (IORING_OP_SEND: one datagram, connected peer, the socket's own mark).
    public var plainSends = 0
    /// sendmsg SQEs that carried a TOS / traffic class cmsg: a mark other than the socket's own.
    /// The others take the socket's mark, and to its connected peer the kernel then sends on the
    /// socket's cached route (a cmsg other than `UDP_SEGMENT` makes it look the route up per send).
    public var markCmsgs = 0
    /// sendmsg SQEs that carried several segments (UDP GSO).
    public var gsoSends = 0
    /// Submissions (calls of `submitReady` that queued anything).
    public var batches = 0
    /// Times GSO failed on a socket and was turned off for it (EIO, EINVAL, EOPNOTSUPP).
    public var gsoFallbacks = 0
    /// Sends resubmitted (cancelled by a failed link, EAGAIN/ENOBUFS, or a first EMSGSIZE).
    public var retries = 0
    /// Datagrams that failed for good.
    public var failedDatagrams = 0
    /// Failures by errno.
    public var errors: [Errno: Int] = [:]
    /// The most send slots in flight at once.
    public var peakSlotsInFlight = 0
}

/// Batched UDP sends through io_uring: fixed send slots, each owning its `msghdr`s,
/// `iovec`s, cmsg space, destination address and payload until its completions arrive.
///
/// A slot holds up to 64 datagrams laid out back to back. When a run of equal-size
/// datagrams (the last may be shorter) fits one GSO send, it goes out as one `sendmsg`
/// with a `UDP_SEGMENT` cmsg; otherwise each datagram is its own send. A `sendmsg` whose
/// mark is not the socket's own (`setTrafficMark`) carries the whole TOS byte in an `IP_TOS`
/// cmsg (an IPv6 socket: an `IPV6_TCLASS` one too, each path reads its own); one with the
/// socket's own mark carries none, so to the connected
/// peer the kernel sends on the socket's cached route instead of looking it up per send
/// (Linux's `udp_sendmsg` treats any cmsg but `UDP_SEGMENT` as unconnected). A single
/// datagram to the connected peer with the socket's own mark goes as a plain send
/// (IORING_OP_SEND), which the kernel handles like `send(2)`.
///
/// With `zeroCopy`, every send is a zero-copy `sendmsg` (IORING_OP_SENDMSG_ZC): the kernel
/// sends from the slot's own pages, and the slot is released only by the notification
/// completion (`IORING_CQE_F_NOTIF`) that says the kernel let go of them, never by the
/// send's result alone.
///
/// The sends of one submission are linked (`IOSQE_IO_LINK`) when `ordered` is set, so
/// the wire order is the submission order even when a socket buffer fills; a send
/// cancelled by a failed link is resubmitted, and a GSO send the device rejects
/// turns GSO off for that socket and goes again segment by segment. Nothing is
/// dropped without being reported in a `SendReport`.
public final class UDPSendQueue {
    /// Most datagrams in one slot (and in one GSO send: the kernel's limit).
    public static let maxDatagramsPerSlot = 64
    /// Largest payload of one GSO send.
    public static let maxGSOBytes = 65_507
    /// Resubmissions of one slot (ENOBUFS, cancelled links) before its datagrams count as failed.
    static let maxRetries = 10_000

    private struct SlotState {
        var datagramCount = 0
        var length = 0
        var socketIndex = 0
        var hasDestination = false
        var tos: UInt8 = 0
        var tag: UInt64 = 0
        var pendingSends = 0
        var sentMask: UInt64 = 0
        var failedMask: UInt64 = 0
        var cancelledMask: UInt64 = 0
        var firstErrno: Int32 = 0
        var retries = 0
        var batch = 0
        var inUse = false
    }

    private let ring: Ring
    /// Bytes of payload one slot holds.
    public let slotCapacity: Int
    /// Number of slots.
    public let slotCount: Int
    private let ordered: Bool
    /// Sends are zero-copy (IORING_OP_SENDMSG_ZC).
    public let zeroCopy: Bool

    // The state touched per datagram is `@exclusivity(unchecked)` (here, in `Ring` and in
    // `PacedSender`): the queue is owned by one thread and no method keeps an access to it
    // open across a call out (`onReport` runs after the slot's state is written), and the
    // runtime's dynamic checks (a `swift_beginAccess` / `swift_endAccess` pair per property
    // access) cost about 4 % of the sender's CPU per datagram. The static checks still apply.
    // The state written per datagram and per completion is in memory the queue allocates
    // (as its payloads and headers), not in arrays: an array written through a class property
    // is checked for a unique reference (a copy on write) at every write.
    /// One per slot.
    private let slots: UnsafeMutablePointer<SlotState>
    /// slotCount * 64.
    private let datagramLengths: UnsafeMutablePointer<Int32>
    /// Datagrams covered by the send starting at that datagram (slotCount * 64).
    private let runLengths: UnsafeMutablePointer<UInt8>
    /// Of each slot's destination.
    @exclusivity(unchecked) private var addressLength: [socklen_t]
    @exclusivity(unchecked) private var freeList: SlotList
    @exclusivity(unchecked) private var readyList: SlotList
    @exclusivity(unchecked) private var retryList: SlotList
    @exclusivity(unchecked) private var sockets: [UDPSocket] = []
    /// Each socket's index in the ring's registered file table, or -1 (sent by descriptor).
    @exclusivity(unchecked) private var fixedFiles: [Int32] = []

    private let payloads: UnsafeMutableRawPointer
    private let headers: UnsafeMutableRawPointer
    private static let msghdrSize = MemoryLayout<msghdr>.stride
    private static let iovecSize = MemoryLayout<iovec>.stride
    /// `IPV6_TCLASS`, `IP_TOS` (24 bytes each) and `UDP_SEGMENT` (24).
    private static let cmsgSpace = 72
    private static let addressSize = 128
    private static let headerBytesPerDatagram = msghdrSize + iovecSize + cmsgSpace
    private static let headerBytesPerSlot = headerBytesPerDatagram * maxDatagramsPerSlot + addressSize

    /// Slots currently handed to the kernel.
    @exclusivity(unchecked) public private(set) var slotsInFlight = 0
    /// Submissions some of whose sends have not completed yet (the completion window).
    @exclusivity(unchecked) public private(set) var batchesInFlight = 0
    @exclusivity(unchecked) private var batchNumber = 0
    /// Slots outstanding per submission (by its number, modulo `batchRing`).
    private let batchOutstanding: UnsafeMutablePointer<Int32>
    private static let batchRing = 4096
    /// Counters.
    @exclusivity(unchecked) public private(set) var counters = SendQueueCounters()
    /// Called once per slot when all its sends completed (or failed for good).
    @exclusivity(unchecked) public var onReport: ((SendReport) -> Void)?

    /// Makes a queue of `slots` slots of `slotCapacity` payload bytes each on `ring`.
    /// With `ordered`, the sends of one submission are linked so they leave in order; with
    /// `zeroCopy`, they are zero-copy sends, each slot held until the kernel's notification.
    public init(ring: Ring, slots: Int, slotCapacity: Int, ordered: Bool = true, zeroCopy: Bool = false) {
        precondition(slots > 0 && slots < 1 << 24 && slotCapacity > 0)
        self.ring = ring
        self.slotCount = slots
        self.slotCapacity = slotCapacity
        self.ordered = ordered
        self.zeroCopy = zeroCopy
        self.slots = .allocate(capacity: slots)
        self.slots.initialize(repeating: SlotState(), count: slots)
        self.datagramLengths = .allocate(capacity: slots * Self.maxDatagramsPerSlot)
        self.datagramLengths.initialize(repeating: 0, count: slots * Self.maxDatagramsPerSlot)
        self.runLengths = .allocate(capacity: slots * Self.maxDatagramsPerSlot)
        self.runLengths.initialize(repeating: 0, count: slots * Self.maxDatagramsPerSlot)
        self.addressLength = Array(repeating: 0, count: slots)
        var free = SlotList(capacity: slots)
        for slot in (0..<Int32(slots)).reversed() { free.append(slot) }
        self.freeList = free
        self.readyList = SlotList(capacity: slots)
        self.retryList = SlotList(capacity: slots)
        self.batchOutstanding = .allocate(capacity: Self.batchRing)
        self.batchOutstanding.initialize(repeating: 0, count: Self.batchRing)
        self.payloads = .allocate(byteCount: slots * slotCapacity, alignment: 64)
        self.headers = Self.zeroedPages(byteCount: slots * Self.headerBytesPerSlot)
    }

    /// Anonymous memory, zero until first written: the kernel supplies each page as it is first
    /// touched. Zeroing 64 slots' headers (565 kB) up front faulted in all of them at start
    /// (~0.4 ms of CPU per process), where a live stream uses a few slots
    /// (results/profile.md section 24).
    private static func zeroedPages(byteCount: Int) -> UnsafeMutableRawPointer {
        let pointer = mmap(nil, byteCount, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let pointer, pointer != MAP_FAILED else { fatalError("UDPSendQueue: mmap of \(byteCount) B failed: errno \(errno)") }
        return pointer
    }

    deinit {
        for index in fixedFiles where index >= 0 { ring.unregisterFile(index) }
        payloads.deallocate()
        munmap(headers, slotCount * Self.headerBytesPerSlot)
        slots.deinitialize(count: slotCount)
        slots.deallocate()
        datagramLengths.deallocate()
        runLengths.deallocate()
        batchOutstanding.deallocate()
        freeList.deallocate()
        readyList.deallocate()
        retryList.deallocate()
    }

    /// Registers a socket and returns its index for `commit`. The socket also goes into the
    /// ring's registered file table (while the queue lives), so its sends take no file
    /// reference each; when the table is full or missing, they name its descriptor.
    public func register(_ socket: UDPSocket) -> Int {
        sockets.append(socket)
        fixedFiles.append(ring.registerFile(socket.fd) ?? -1)
        return sockets.count - 1
    }

    /// The socket registered at `index`.
    public func socket(_ index: Int) -> UDPSocket { sockets[index] }

    /// Slots free to fill.
    public var freeSlots: Int { freeList.count }

    /// Slots filled and waiting for `submitReady`.
    public var readySlots: Int { readyList.count + retryList.count }

    /// Takes a free slot, or nil when all are filled or in flight.
    @inline(__always)
    public func acquire() -> Int? {
        guard let slot = freeList.popLast() else { return nil }
        slots[Int(slot)] = SlotState()
        slots[Int(slot)].inUse = true
        return Int(slot)
    }

    /// Datagrams in `slot` so far.
    public func datagramCount(_ slot: Int) -> Int { slots[slot].datagramCount }

    /// Payload bytes still free in `slot`.
    public func remainingCapacity(_ slot: Int) -> Int { slotCapacity - slots[slot].length }

    /// Reserves the next datagram of `length` bytes in `slot` and returns its memory
    /// to write, or nil when the slot has no room (64 datagrams or its capacity).
    @inline(__always)
    public func appendDatagram(_ slot: Int, length: Int) -> UnsafeMutableRawBufferPointer? {
        let state = slots[slot]
        guard state.datagramCount < Self.maxDatagramsPerSlot, state.length + length <= slotCapacity, length > 0 else {
            return nil
        }
        datagramLengths[slot * Self.maxDatagramsPerSlot + state.datagramCount] = Int32(length)
        slots[slot].datagramCount += 1
        slots[slot].length += length
        return UnsafeMutableRawBufferPointer(start: payloads + slot * slotCapacity + state.length, count: length)
    }

    /// Copies one datagram into `slot`; false when it has no room.
    @inline(__always)
    public func appendDatagram(_ slot: Int, copying bytes: UnsafeRawBufferPointer) -> Bool {
        guard let target = appendDatagram(slot, length: bytes.count) else { return false }
        target.copyMemory(from: bytes)
        return true
    }

    /// Readies a filled slot for the next submission: to `destination` (nil on a connected
    /// socket) through socket `socketIndex`, every datagram marked with `mark`. The owner's
    /// `tag` comes back in the slot's `SendReport`.
    public func commit(_ slot: Int, socketIndex: Int, destination: SocketAddress?, mark: TrafficMark, tag: UInt64) {
        precondition(slots[slot].inUse && slots[slot].datagramCount > 0, "commit of an empty or free slot")
        slots[slot].socketIndex = socketIndex
        slots[slot].tos = mark.tos
        slots[slot].tag = tag
        if let destination {
            slots[slot].hasDestination = true
            _ = destination.copy(to: addressPointer(slot))
            addressLength[slot] = destination.length
        } else {
            slots[slot].hasDestination = false
        }
        readyList.append(Int32(slot))
    }

    @inline(__always)
    private func addressPointer(_ slot: Int) -> UnsafeMutableRawPointer {
        headers + slot * Self.headerBytesPerSlot + Self.headerBytesPerDatagram * Self.maxDatagramsPerSlot
    }

    /// Turns every ready slot into SQEs in the ring (retries first, in their order).
    /// The caller submits with `Ring.submit`, so many sends go in one `io_uring_enter`.
    /// Returns the SQEs prepared.
    @discardableResult
    public func submitReady() throws(SystemError) -> Int {
        guard !retryList.isEmpty || !readyList.isEmpty else { return 0 }
        var prepared = 0
        var lastSQE: UnsafeMutablePointer<io_uring_sqe>?
        batchNumber += 1
        let batchIndex = batchNumber & (Self.batchRing - 1)
        for slot in retryList {
            prepared += try prepareSends(Int(slot), lastSQE: &lastSQE)
            slotsInFlight += 1
        }
        for slot in readyList {
            prepared += try prepareSends(Int(slot), lastSQE: &lastSQE)
            slotsInFlight += 1
            slots[Int(slot)].batch = batchIndex
            if batchOutstanding[batchIndex] == 0 { batchesInFlight += 1 }
            batchOutstanding[batchIndex] += 1
        }
        retryList.removeAll()
        readyList.removeAll()
        // The chain ends at the last send of this submission.
        if ordered, let lastSQE { lastSQE.pointee.flags &= ~UInt8(cu_iosqe_io_link) }
        counters.batches += 1
        counters.peakSlotsInFlight = max(counters.peakSlotsInFlight, slotsInFlight)
        return prepared
    }

    private func prepareSends(_ slot: Int, lastSQE: inout UnsafeMutablePointer<io_uring_sqe>?) throws(SystemError) -> Int {
        let state = slots[slot]
        let socket = sockets[state.socketIndex]
        let fixedFile = fixedFiles[state.socketIndex]
        let fd = fixedFile >= 0 ? fixedFile : socket.fd
        let sqeFlags = UInt8(fixedFile >= 0 ? cu_iosqe_fixed_file : 0) | UInt8(ordered ? cu_iosqe_io_link : 0)
        let gso = socket.gsoEnabled
        // The socket's own mark needs no cmsg (nil); another one does.
        let cmsgTOS: UInt8? = socket.defaultTOS == state.tos ? nil : state.tos
        let base = slot * Self.maxDatagramsPerSlot
        let skip = state.sentMask | state.failedMask
        var index = 0
        var offset = 0
        var sends = 0
        while index < state.datagramCount {
            let length = Int(datagramLengths[base + index])
            if skip & (1 << UInt64(index)) != 0 {
                offset += length
                index += 1
                continue
            }
            // A run: equal sizes, the last may be shorter, within the GSO limits.
            var run = 1
            var runBytes = length
            if gso {
                while index + run < state.datagramCount, run < Self.maxDatagramsPerSlot {
                    let next = Int(datagramLengths[base + index + run])
                    guard skip & (1 << UInt64(index + run)) == 0, next <= length,
                          runBytes + next <= Self.maxGSOBytes else { break }
                    run += 1
                    runBytes += next
                    if next < length { break }
                }
            }
            runLengths[base + index] = UInt8(run)
            let sqe = try ring.nextEntry()
            if !zeroCopy && run == 1 && !state.hasDestination && cmsgTOS == nil {
                // One datagram to the connected peer with the socket's own mark: a plain send
                // (IORING_OP_SEND), no msghdr for the kernel to copy and no cmsg to parse.
                io_uring_prep_send(sqe, fd, payloads + slot * slotCapacity + offset, runBytes, 0)
                counters.plainSends += 1
            } else {
                let msg = prepareMessage(slot: slot, datagram: index, offset: offset, bytes: runBytes,
                                         segmentSize: run > 1 ? length : 0, socket: socket, tos: cmsgTOS)
                if zeroCopy {
                    io_uring_prep_sendmsg_zc(sqe, fd, msg, 0)
                } else {
                    io_uring_prep_sendmsg(sqe, fd, msg, 0)
                }
            }
            io_uring_sqe_set_data64(sqe, CompletionTag(kind: CompletionTag.sendKind,
                                                       payload: UInt64(slot) << 8 | UInt64(index)).userData)
            sqe.pointee.flags |= sqeFlags
            lastSQE = sqe
            counters.sendCalls += 1
            if run > 1 { counters.gsoSends += 1 }
            sends += 1
            offset += runBytes
            index += run
        }
        slots[slot].pendingSends = sends
        return sends
    }

    @inline(__always)
    private func prepareMessage(slot: Int, datagram: Int, offset: Int, bytes: Int, segmentSize: Int,
                                socket: UDPSocket, tos: UInt8?) -> UnsafeMutablePointer<msghdr> {
        let block = headers + slot * Self.headerBytesPerSlot + datagram * Self.headerBytesPerDatagram
        let msg = block.assumingMemoryBound(to: msghdr.self)
        let iov = (block + Self.msghdrSize).assumingMemoryBound(to: iovec.self)
        let control = block + Self.msghdrSize + Self.iovecSize
        iov.pointee.iov_base = payloads + slot * slotCapacity + offset
        iov.pointee.iov_len = bytes
        msg.pointee.msg_iov = iov
        msg.pointee.msg_iovlen = 1
        if slots[slot].hasDestination {
            msg.pointee.msg_name = addressPointer(slot)
            msg.pointee.msg_namelen = addressLength[slot]
        } else {
            msg.pointee.msg_name = nil
            msg.pointee.msg_namelen = 0
        }
        msg.pointee.msg_flags = 0
        let header = control.assumingMemoryBound(to: cmsghdr.self)
        var used = 0
        if let tos {
            if socket.family == .ipv6 {
                used = cu_cmsg_put_int(header, Int32(IPPROTO_IPV6), IPV6_TCLASS, Int32(tos))
            }
            // IPv4 takes IP_TOS, and so does an IPv6 socket's IPv4-mapped destination (Linux
            // sends it by udp_sendmsg, which reads only SOL_IP cmsgs; the IPv6 path skips this one).
            let next = (control + used).assumingMemoryBound(to: cmsghdr.self)
            used += cu_cmsg_put_int(next, Int32(IPPROTO_IP), IP_TOS, Int32(tos))
            counters.markCmsgs += 1
        }
        if segmentSize > 0 {
            let next = (control + used).assumingMemoryBound(to: cmsghdr.self)
            used += cu_cmsg_put_u16(next, Int32(IPPROTO_UDP), cu_udp_segment, UInt16(segmentSize))
        }
        msg.pointee.msg_control = used > 0 ? control : nil
        msg.pointee.msg_controllen = used
        return msg
    }

    /// Handles a completion tagged `CompletionTag.sendKind`.
    public func handle(_ completion: Completion) {
        let slot = Int(completion.tag.payload >> 8)
        if completion.flags & cu_cqe_f_notif != 0 {
            // A zero-copy send's second completion: the kernel let go of the slot's pages.
            sendDone(slot)
            return
        }
        let first = Int(completion.tag.payload & 0xff)
        let base = slot * Self.maxDatagramsPerSlot
        let run = Int(runLengths[base + first])
        var mask: UInt64 = 0
        for i in first..<(first + run) { mask |= 1 << UInt64(i) }
        let result = completion.result
        if result >= 0 {
            slots[slot].sentMask |= mask
            var bytes = 0
            for i in first..<(first + run) { bytes += Int(datagramLengths[base + i]) }
            counters.datagrams += run
            counters.bytes += bytes
        } else {
            let code = -result
            let socket = sockets[slots[slot].socketIndex]
            let transient = code == ECANCELED || code == EAGAIN || code == ENOBUFS || code == EINTR
            let gsoRejected = run > 1 && (code == EIO || code == EINVAL || code == EOPNOTSUPP)
            switch code {
            case _ where transient && slots[slot].retries < Self.maxRetries:
                slots[slot].cancelledMask |= mask
            case EMSGSIZE where slots[slot].retries == 0:
                // Maybe not this send's size: an ICMP "fragmentation needed" for an earlier
                // datagram (with IP_RECVERR) is left as the socket's pending error, which the
                // next send takes whatever its size (and clears). Once more, then it counts: a
                // datagram above the path MTU fails again (Tests/StreamEngineTests/TransportTests.swift,
                // `PendingSocketErrorTests`).
                slots[slot].cancelledMask |= mask
            case _ where gsoRejected:
                // The device or route cannot take this GSO send: go segment by segment.
                if socket.gsoEnabled {
                    socket.gsoEnabled = false
                    counters.gsoFallbacks += 1
                }
                counters.errors[Errno(code), default: 0] += 1
                slots[slot].cancelledMask |= mask
            default:
                slots[slot].failedMask |= mask
                if slots[slot].firstErrno == 0 { slots[slot].firstErrno = code }
                counters.errors[Errno(code), default: 0] += 1
                counters.failedDatagrams += run
            }
        }
        // A zero-copy send that went (or failed late) still holds the pages: its
        // notification (IORING_CQE_F_MORE says one follows) ends it, not this result.
        if completion.flags & cu_cqe_f_more != 0 { return }
        sendDone(slot)
    }

    /// One send of `slot` is over, its buffer free again.
    @inline(__always)
    private func sendDone(_ slot: Int) {
        slots[slot].pendingSends -= 1
        if slots[slot].pendingSends == 0 { finish(slot) }
    }

    private func finish(_ slot: Int) {
        slotsInFlight -= 1
        let state = slots[slot]
        if state.cancelledMask != 0 {
            // Goes again, before anything not yet submitted, with only the unsent datagrams.
            counters.retries += state.cancelledMask.nonzeroBitCount
            slots[slot].cancelledMask = 0
            slots[slot].retries += 1
            retryList.append(Int32(slot))
            return
        }
        var sentBytes = 0
        let base = slot * Self.maxDatagramsPerSlot
        for i in 0..<state.datagramCount where state.sentMask & (1 << UInt64(i)) != 0 {
            sentBytes += Int(datagramLengths[base + i])
        }
        let report = SendReport(tag: state.tag, sentDatagrams: state.sentMask.nonzeroBitCount, sentBytes: sentBytes,
                                failedDatagrams: state.failedMask.nonzeroBitCount, errno: state.firstErrno)
        slots[slot].inUse = false
        freeList.append(Int32(slot))
        batchOutstanding[state.batch] -= 1
        if batchOutstanding[state.batch] == 0 { batchesInFlight -= 1 }
        onReport?(report)
    }

    /// Gives an acquired but uncommitted slot back.
    public func release(_ slot: Int) {
        precondition(slots[slot].inUse)
        slots[slot].inUse = false
        freeList.append(Int32(slot))
    }
}

@available(*, unavailable, message: "a send queue is owned by one engine thread")
extension UDPSendQueue: Sendable {}

/// Slot numbers in memory the send queue allocates (room for every slot): taken and given back
/// per slot with no uniqueness check (an array in a class property is checked at every write).
private struct SlotList: RandomAccessCollection {
    private let base: UnsafeMutablePointer<Int32>
    private let capacity: Int
    private(set) var endIndex = 0
    var startIndex: Int { 0 }

    init(capacity: Int) {
        base = .allocate(capacity: capacity)
        self.capacity = capacity
    }

    subscript(position: Int) -> Int32 { base[position] }

    /// Adds `slot` (the queue never holds more slots than it has: a slot given back twice
    /// stops here, not past the memory).
    mutating func append(_ slot: Int32) {
        precondition(endIndex < capacity, "slot \(slot) given back to a full slot list")
        base[endIndex] = slot
        endIndex += 1
    }

    /// Takes the last slot added, nil when none is left.
    mutating func popLast() -> Int32? {
        guard endIndex > 0 else { return nil }
        endIndex -= 1
        return base[endIndex]
    }

    mutating func removeAll() { endIndex = 0 }

    /// Frees the memory (the queue's deinit).
    func deallocate() { base.deallocate() }
}
