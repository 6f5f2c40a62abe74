internal import CLibURing
import Glibc

/// What a completion belongs to, packed with a slot index into `user_data`.
///
/// Layout: bits 56-63 the kind, bits 0-55 the owner's payload (slot index, generation).
public struct CompletionTag: Sendable, Equatable {
    /// The owner kind: which component handles the completion.
    public var kind: UInt8
    /// The owner's payload (a slot index, a group id).
    public var payload: UInt64

    /// Send slot completions.
    public static let sendKind: UInt8 = 1
    /// Multishot receive completions.
    public static let receiveKind: UInt8 = 2
    /// Timer (IORING_OP_TIMEOUT) completions.
    public static let timerKind: UInt8 = 3
    /// Wake-up (eventfd read) completions.
    public static let wakeKind: UInt8 = 4
    /// Route monitor (netlink receive) completions.
    public static let routeKind: UInt8 = 5
    /// Socket error watch (`UDPSocket.armErrorWatch`) completions.
    public static let errorWatchKind: UInt8 = 6

    /// Makes a tag; `payload` must fit 56 bits.
    @inline(__always)
    public init(kind: UInt8, payload: UInt64) {
        self.kind = kind
        self.payload = payload & 0x00ff_ffff_ffff_ffff
    }

    /// Unpacks a tag from `user_data`.
    @inline(__always)
    public init(userData: UInt64) {
        kind = UInt8(truncatingIfNeeded: userData >> 56)
        payload = userData & 0x00ff_ffff_ffff_ffff
    }

    /// The packed `user_data`.
    @inline(__always)
    public var userData: UInt64 { UInt64(kind) << 56 | payload }
}

/// One completion queue entry, copied out of the ring.
public struct Completion: Sendable {
    /// The tag from `user_data`.
    public var tag: CompletionTag
    /// The result: bytes or a negative errno.
    public var result: Int32
    /// `IORING_CQE_F_*` flags.
    public var flags: UInt32
}

/// An io_uring instance owned by one thread.
///
/// Not Sendable: created, submitted to and reaped by one engine thread. Other threads
/// reach the engine through its own synchronisation, never through the ring.
/// Counts every `io_uring_enter` it makes, so batching can be proven.
public final class Ring {
    let ring: UnsafeMutablePointer<io_uring>
    // `@exclusivity(unchecked)` on the state touched per datagram: see UDPSendQueue.
    /// Calls to `io_uring_enter` made by this ring.
    @exclusivity(unchecked) public private(set) var enterCalls = 0
    /// Submission queue entries handed to the kernel.
    @exclusivity(unchecked) public private(set) var submittedEntries = 0
    /// SQEs prepared since the last submit.
    @exclusivity(unchecked) public private(set) var pendingEntries = 0
    /// Completions reaped.
    @exclusivity(unchecked) public private(set) var completions = 0

    /// Two timers: 0 for waits (`armTimer`), 1 for an independent alarm (`armAlarm`).
    private var timerSpec: UnsafeMutablePointer<__kernel_timespec>
    let wakeBuffer = UnsafeMutablePointer<UInt64>.allocate(capacity: 1)
    /// True while a wake-up read is in flight.
    @exclusivity(unchecked) public internal(set) var wakeArmed = false
    /// True while a timer SQE is in flight.
    @exclusivity(unchecked) public private(set) var timerArmed = false
    /// True while the alarm's SQE is in flight.
    @exclusivity(unchecked) public private(set) var alarmArmed = false
    /// The kernel takes a timeout with each wait (IORING_FEAT_EXT_ARG).
    public let hasWaitTimeouts: Bool
    /// The ring's descriptor is registered with the opening thread (`deferTaskRun` or
    /// `threadBound` rings only: a registration belongs to one thread): its waits take no file
    /// reference to the ring (`fget`/`fput`) each.
    let ringDescriptorRegistered: Bool

    /// Opens a ring with `entries` submission slots. `io_uring_queue_init_params`.
    ///
    /// With `deferTaskRun` (`IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN`) the
    /// kernel's work for the ring's requests (a multishot receive's copy, for one) runs only
    /// inside this thread's waits, batched, and a wait is woken once its completions are
    /// there, not through the task-work signal of each event. Then only the thread that
    /// opens the ring may submit to it or wait on it, and completions are seen only after a
    /// wait (`submit(waitingFor:)`), never by `reap` alone; that thread should release it too
    /// (its descriptor's registration is that thread's: released from another thread, the
    /// registration is not undone there and holds the ring open until the opening thread exits). Where the kernel has no
    /// DEFER_TASKRUN (before 6.1) the ring opens without it.
    ///
    /// With `threadBound` (implied by `deferTaskRun`) the descriptor is registered with the
    /// opening thread, so its enters take no reference to the ring's file; then, as above,
    /// only that thread may submit to the ring, wait on it or register with it, and it should
    /// release it.
    public init(entries: UInt32 = 256, deferTaskRun: Bool = false, threadBound: Bool = false) throws(SystemError) {
        ring = .allocate(capacity: 1)
        ring.initialize(to: io_uring())
        timerSpec = .allocate(capacity: 2)
        timerSpec.initialize(repeating: __kernel_timespec(), count: 2)
        var params = io_uring_params()
        params.flags = cu_setup_coop_taskrun | cu_setup_submit_all
        params.cq_entries = entries * 8
        params.flags |= IORING_SETUP_CQSIZE
        var rc: Int32 = -EINVAL
        if deferTaskRun {
            var deferred = params
            deferred.flags = cu_setup_submit_all | cu_setup_single_issuer | cu_setup_defer_taskrun | IORING_SETUP_CQSIZE
            rc = io_uring_queue_init_params(entries, ring, &deferred)
            if rc == 0 { params = deferred }
        }
        if rc == -EINVAL { rc = io_uring_queue_init_params(entries, ring, &params) }
        if rc == -EINVAL {
            // Older kernels: no COOP_TASKRUN / SUBMIT_ALL.
            params = io_uring_params()
            rc = io_uring_queue_init_params(entries, ring, &params)
        }
        if rc < 0 {
            ring.deallocate()
            timerSpec.deallocate()
            throw SystemError("io_uring_queue_init", errno: -rc, context: "\(entries) entries")
        }
        hasWaitTimeouts = params.features & IORING_FEAT_EXT_ARG != 0
        // liburing's own enters (`submit`) then use the registered index too.
        ringDescriptorRegistered = (threadBound || params.flags & cu_setup_defer_taskrun != 0)
            && io_uring_register_ring_fd(ring) == 1
    }

    deinit {
        io_uring_queue_exit(ring)
        ring.deallocate()
        timerSpec.deallocate()
        wakeBuffer.deallocate()
    }

    /// Whether io_uring can be used here (kernel support and `kernel.io_uring_disabled`).
    public static var isAvailable: Bool {
        var probe = io_uring()
        guard io_uring_queue_init(2, &probe, 0) == 0 else { return false }
        io_uring_queue_exit(&probe)
        return true
    }

    /// The ring's file descriptor.
    public var fd: Int32 { ring.pointee.ring_fd }

    /// The liburing ring, for components of this module that register resources.
    var raw: UnsafeMutablePointer<io_uring> { ring }

    /// Size of the registered file table, made on the first `registerFile`.
    static let fileTableSize: Int32 = 64
    /// Free indexes of the registered file table; nil until it exists.
    private var freeFileIndexes: [Int32]?
    /// The kernel refused a registered file table: every file goes by its descriptor.
    private var fileTableUnavailable = false

    /// Registers `fd` in the ring's file table (io_uring_register_files_update on a sparse
    /// table) and returns its index, for SQEs with IOSQE_FIXED_FILE: the kernel then takes no
    /// file reference per request. Nil when the table is full or the kernel has none (before
    /// 5.19): use the descriptor. The ring holds the file open until `unregisterFile`.
    func registerFile(_ fd: Int32) -> Int32? {
        guard !fileTableUnavailable else { return nil }
        if freeFileIndexes == nil {
            guard io_uring_register_files_sparse(ring, UInt32(Self.fileTableSize)) == 0 else {
                fileTableUnavailable = true
                return nil
            }
            freeFileIndexes = (0..<Self.fileTableSize).reversed()
        }
        guard let index = freeFileIndexes?.popLast() else { return nil }
        var file = fd
        guard io_uring_register_files_update(ring, UInt32(index), &file, 1) == 1 else {
            freeFileIndexes?.append(index)
            return nil
        }
        return index
    }

    /// Empties slot `index` of the file table (requests in flight keep their file).
    func unregisterFile(_ index: Int32) {
        var none: Int32 = -1
        if io_uring_register_files_update(ring, UInt32(index), &none, 1) == 1 { freeFileIndexes?.append(index) }
    }

    /// A free submission entry; submits what is queued first (one counted enter) when the queue is full.
    @inline(__always)
    func nextEntry() throws(SystemError) -> UnsafeMutablePointer<io_uring_sqe> {
        if let sqe = io_uring_get_sqe(ring) {
            pendingEntries += 1
            return sqe
        }
        try submit()
        guard let sqe = io_uring_get_sqe(ring) else { throw SystemError("io_uring_get_sqe", errno: EBUSY) }
        pendingEntries += 1
        return sqe
    }

    /// Submits every prepared entry and waits for `minimumCompletions`, with one `io_uring_enter`.
    /// Returns the number of entries submitted. A signal interrupting the wait is not an error.
    @discardableResult
    public func submit(waitingFor minimumCompletions: UInt32 = 0) throws(SystemError) -> Int {
        guard pendingEntries > 0 || minimumCompletions > 0 else { return 0 }
        return try entered(cu_submit_and_wait(ring, minimumCompletions))
    }

    /// Counts one `io_uring_enter` and what it submitted. A signal interrupting the wait, a
    /// full completion queue or the wait's own timeout is not an error.
    private func entered(_ rc: Int32) throws(SystemError) -> Int {
        enterCalls += 1
        if rc == -EINTR || rc == -EAGAIN || rc == -EBUSY || rc == -ETIME { return 0 }
        if rc < 0 { throw SystemError("io_uring_enter", errno: -rc) }
        submittedEntries += Int(rc)
        pendingEntries = max(0, pendingEntries - Int(rc))
        return Int(rc)
    }

    /// Submits every prepared entry and waits, in the same `io_uring_enter`, until
    /// `minimumCompletions` completions are ready or `timeoutNanoseconds` has passed.
    ///
    /// The timeout belongs to this one wait (IORING_ENTER_EXT_ARG): unlike a timer entry it
    /// cannot outlive the wait and hold back a shorter one, and it posts no completion.
    /// Completions of sends issued inline by this very submission count towards
    /// `minimumCompletions`, so a caller that waits for something else adds them. On kernels
    /// before 5.11 (no EXT_ARG) it falls back to `armTimer` and waits for one completion.
    /// Returns the number of entries submitted.
    @discardableResult
    public func submit(waitingFor minimumCompletions: UInt32, timeoutNanoseconds: Int64) throws(SystemError) -> Int {
        guard hasWaitTimeouts else {
            try armTimer(nanoseconds: timeoutNanoseconds)
            return try submit(waitingFor: 1)
        }
        return try entered(cu_submit_and_wait_timeout(ring, max(minimumCompletions, 1), max(timeoutNanoseconds, 1_000),
                                                      ringDescriptorRegistered))
    }

    /// Queues a timer that completes after `nanoseconds` (IORING_OP_TIMEOUT), unless one is armed.
    /// It stays armed across waits until it fires: for a bounded wait use
    /// `submit(waitingFor:timeoutNanoseconds:)`, whose timeout cannot outlive it.
    public func armTimer(nanoseconds: Int64) throws(SystemError) {
        guard !timerArmed else { return }
        try queueTimeout(slot: 0, nanoseconds: nanoseconds)
        timerArmed = true
    }

    /// The payload of the alarm's completion (tag kind `timerKind`); the wait timer's is 0.
    public static let alarmSlot: UInt64 = 1

    /// Queues an alarm that completes after `nanoseconds`, independent of `armTimer`'s waits
    /// (for periodic work that must not be tied to the pacer's wake-ups), unless one is armed.
    public func armAlarm(nanoseconds: Int64) throws(SystemError) {
        guard !alarmArmed else { return }
        try queueTimeout(slot: Int(Self.alarmSlot), nanoseconds: nanoseconds)
        alarmArmed = true
    }

    private func queueTimeout(slot: Int, nanoseconds: Int64) throws(SystemError) {
        let spec = timerSpec + slot
        spec.pointee.tv_sec = nanoseconds / 1_000_000_000
        spec.pointee.tv_nsec = nanoseconds % 1_000_000_000
        let sqe = try nextEntry()
        io_uring_prep_timeout(sqe, spec, 0, 0)
        io_uring_sqe_set_data64(sqe, CompletionTag(kind: CompletionTag.timerKind, payload: UInt64(slot)).userData)
    }

    /// Reaps every completion that is ready, without a system call. Timer completions
    /// disarm the timer and are passed on too.
    @inline(__always)
    public func reap(_ handle: (Completion) -> Void) -> Int {
        var count = 0
        var cqe: UnsafeMutablePointer<io_uring_cqe>?
        while cu_peek_cqe(ring, &cqe) == 0, let entry = cqe {
            let completion = Completion(
                tag: CompletionTag(userData: entry.pointee.user_data),
                result: entry.pointee.res,
                flags: entry.pointee.flags
            )
            io_uring_cqe_seen(ring, entry)
            count += 1
            if completion.tag.kind == CompletionTag.timerKind {
                if completion.tag.payload == Self.alarmSlot { alarmArmed = false } else { timerArmed = false }
            }
            if completion.tag.kind == CompletionTag.wakeKind { wakeArmed = false }
            handle(completion)
        }
        completions += count
        return count
    }
}

@available(*, unavailable, message: "a ring is owned by one engine thread")
extension Ring: Sendable {}
