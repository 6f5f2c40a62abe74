import UringIO

/// A receive loop on its own ring: a multishot `recvmsg` on a buffer ring per socket, with
/// a timeout on each wait to check for a stop request and to run periodic work. Runs on the
/// thread that calls `run`.
public final class DatagramReceiveLoop {
    /// The ring.
    let ring: Ring
    /// Calls to `io_uring_enter` so far.
    public var enterCalls: Int { ring.enterCalls }
    /// One multishot receiver per socket, in the order given.
    public let receivers: [UDPMultishotReceiver]
    /// The first socket's receiver.
    public var receiver: UDPMultishotReceiver { receivers[0] }
    /// Signalled by another thread to end the loop's wait at once (`run(_:)` keeps a read of
    /// it armed), so the loop need not wake on a timer to see a stop request.
    let wake: WakeEvent?

    /// Sets up the loop for one `socket` (already bound, with the options the caller wants).
    /// `maxPayload` must cover 64 segments when GRO is on.
    public convenience init(socket: UDPSocket, bufferCount: Int = 256, maxPayload: Int = 65_536) throws(SystemError) {
        try self.init(sockets: [(socket, bufferCount, maxPayload)])
    }

    /// Sets up the loop for several sockets, each with its own buffers. With `deferTaskRun`
    /// the kernel receives into the buffers only inside the loop's waits (`Ring`'s
    /// `deferTaskRun`): the loop must then be made on the thread that runs it. A `wake`
    /// event signalled from another thread ends `run(_:)`'s current wait at once.
    public init(sockets: [(socket: UDPSocket, bufferCount: Int, maxPayload: Int)], deferTaskRun: Bool = false,
                wake: WakeEvent? = nil) throws(SystemError)
    {
        self.wake = wake
        ring = try Ring(entries: 64, deferTaskRun: deferTaskRun)
        var made: [UDPMultishotReceiver] = []
        for (index, entry) in sockets.enumerated() {
            made.append(try UDPMultishotReceiver(ring: ring, socket: entry.socket, groupID: UInt16(index + 1),
                                                 bufferCount: entry.bufferCount, maxPayload: entry.maxPayload))
        }
        receivers = made
    }

    /// Receives until `shouldStop` returns true (checked after each wake-up, at least every
    /// `checkInterval` nanoseconds), passing every datagram to `handle`.
    public func run(checkInterval: Int64 = 20_000_000, shouldStop: () -> Bool,
                    handle: (ReceivedDatagram) -> Void) throws(SystemError) {
        for receiver in receivers { try receiver.arm() }
        while !shouldStop() {
            try receiveOnce(waitingAtMost: checkInterval) { _, segments in segments.forEach(handle) }
        }
    }

    /// Receives until `handler.shouldStop()` returns true, each wait at most
    /// `handler.nextWait()` nanoseconds (asked before each wait: a protocol core's next
    /// deadline), passing the datagrams of each completion to `handler.handle(socketIndex:segments:)`
    /// (by default each to `handler.handle(socketIndex:_:)`) with the index of its socket and
    /// calling `handler.tick()` after each wake-up. The state the four calls share is one value
    /// passed `inout`, which the compiler checks for exclusive access statically, where
    /// variables captured by several closures were checked by the runtime on every access,
    /// several times per datagram (results/profile.md section 15).
    /// With a `wake` event, a signal of it ends the current wait (then `shouldStop` is asked).
    public func run<Handler: DatagramHandler>(_ handler: inout Handler) throws(SystemError) {
        for receiver in receivers { try receiver.arm() }
        while !handler.shouldStop() {
            // Armed again after each signal's completion; submitted with the wait.
            if let wake { try ring.armWake(wake) }
            try receiveOnce(waitingAtMost: handler.nextWait()) { handler.handle(socketIndex: $0, segments: $1) }
            handler.tick()
        }
    }

    /// Waits for completions at most `nanoseconds` (at least 50 µs) and hands every datagram
    /// they carry to `handle`, a completion's together.
    private func receiveOnce(waitingAtMost nanoseconds: Int64, handle: (Int, ReceivedSegments) -> Void) throws(SystemError) {
        var failure: SystemError?
        try ring.submit(waitingFor: 1, timeoutNanoseconds: max(nanoseconds, 50_000))
        _ = ring.reap { completion in
            guard completion.tag.kind == CompletionTag.receiveKind else { return }
            let index = Int(completion.tag.payload) - 1
            guard receivers.indices.contains(index) else { return }
            do throws(SystemError) {
                try receivers[index].handleSegments(of: completion) { handle(index, $0) }
            } catch { failure = error }
        }
        if let failure { throw failure }
    }
}

/// What `DatagramReceiveLoop.run(_:)` drives: the loop's state and its four calls in one value.
public protocol DatagramHandler {
    /// The longest wait before the next wake-up, in nanoseconds (asked before each wait).
    mutating func nextWait() -> Int64
    /// Whether the loop returns now (asked before each wait).
    mutating func shouldStop() -> Bool
    /// Called after each wake-up, once its datagrams were handled.
    mutating func tick()
    /// A datagram arrived on the socket at `socketIndex` (in the order given to the loop).
    mutating func handle(socketIndex: Int, _ datagram: ReceivedDatagram)
    /// The datagrams of one completion arrived on the socket at `socketIndex` (by default each
    /// goes to `handle(socketIndex:_:)`): a handler that can take a run of datagrams at once
    /// takes them here.
    mutating func handle(socketIndex: Int, segments: ReceivedSegments)
}

extension DatagramHandler {
    /// Each datagram to `handle(socketIndex:_:)`, in order.
    public mutating func handle(socketIndex: Int, segments: ReceivedSegments) {
        segments.forEach { handle(socketIndex: socketIndex, $0) }
    }
}

@available(*, unavailable, message: "a receive loop is owned by one thread")
extension DatagramReceiveLoop: Sendable {}
