import UringIO

/// A receive loop on its own ring: a multishot `recvmsg` on a buffer ring, with io_uring
/// timeouts to check for a stop request. Runs on the thread that calls `run`.
public final class DatagramReceiveLoop {
    /// The ring.
    public let ring: Ring
    /// The multishot receiver.
    public let receiver: UDPMultishotReceiver

    /// Sets up the loop for `socket` (already bound, with the options the caller wants).
    /// `maxPayload` must cover 64 segments when GRO is on.
    public init(socket: UDPSocket, bufferCount: Int = 256, maxPayload: Int = 65_536) throws(SystemError) {
        ring = try Ring(entries: 64)
        receiver = try UDPMultishotReceiver(ring: ring, socket: socket, groupID: 1, bufferCount: bufferCount,
                                            maxPayload: maxPayload)
    }

    /// Receives until `shouldStop` returns true (checked after each wake-up, at least every
    /// `checkInterval` nanoseconds), passing every datagram to `handle`.
    public func run(checkInterval: Int64 = 20_000_000, shouldStop: () -> Bool,
                    handle: (ReceivedDatagram) -> Void) throws(SystemError) {
        try receiver.arm()
        var failure: SystemError?
        while !shouldStop() {
            try ring.armTimer(nanoseconds: checkInterval)
            try ring.submit(waitingFor: 1)
            _ = ring.reap { completion in
                guard completion.tag.kind == CompletionTag.receiveKind else { return }
                do throws(SystemError) { try receiver.handle(completion, deliver: handle) } catch { failure = error }
            }
            if let failure { throw failure }
        }
    }
}

@available(*, unavailable, message: "a receive loop is owned by one thread")
extension DatagramReceiveLoop: Sendable {}
