import Glibc
import UringIO

/// A datagram waiting to be sent: where it goes, how big it is, and the owner's tag.
public struct PendingDatagram: Sendable {
    /// The route (from `PacedSender.addRoute`).
    public var route: Int
    /// Payload bytes.
    public var size: Int
    /// The owner's tag; a slot reports the tag of its first datagram.
    public var tag: UInt64

    /// Makes a pending datagram.
    public init(route: Int, size: Int, tag: UInt64) {
        self.route = route
        self.size = size
        self.tag = tag
    }
}

/// Something that has datagrams to send: the sender peeks at the next one, and when
/// the pacer and the completion window allow, has it written straight into a send slot.
public protocol DatagramProducer: AnyObject {
    /// The next datagram waiting, without taking it; nil when none is ready now.
    func peekDatagram() -> PendingDatagram?
    /// Writes the datagram last peeked (exactly its size) into `buffer`, and takes it.
    func writeDatagram(into buffer: UnsafeMutableRawBufferPointer)
    /// About how many bytes are ready to go (at least the next datagram's size when there is
    /// one); `Int.max` when unknown. A paced sender starts a batch only once its budget
    /// covers this much (up to a quantum), so a backlog leaves many datagrams per
    /// submission instead of one each time a datagram's worth of budget trickles in.
    var pendingBytes: Int { get }
    /// When `peekDatagram` has nothing although datagrams wait (held back by a rate cap of
    /// the producer's own), the nanoseconds until one may go; nil otherwise. The sender
    /// wakes then instead of treating the producer as idle.
    func readyIn(now: Int64) -> Int64?
}

extension DatagramProducer {
    /// Unknown: batches wait for a full quantum of budget when paced.
    public var pendingBytes: Int { .max }
    /// No caps of its own: nothing waits that `peekDatagram` does not show.
    public func readyIn(now: Int64) -> Int64? { nil }
}

/// Configuration of a paced sender.
public struct PacedSenderConfig: Sendable {
    /// Pacing rate in bits per second; nil sends as fast as the window allows.
    public var rateBitsPerSecond: Double?
    /// Largest burst in bytes; nil for the default (2 ms of the rate, at least one slot of datagrams).
    public var burstQuantum: Int?
    /// At most this many submissions may be in flight (submitted, not all completed).
    public var completionWindow: Int = 2
    /// A submission (one `io_uring_enter`) starts send slots until it holds this many datagrams.
    /// With GSO the slot under way then finishes its run (up to 63 datagrams past the limit),
    /// so the limit never cuts a GSO run in two sends.
    public var maxDatagramsPerSubmission: Int = 64
    /// Use UDP GSO where the kernel takes it.
    public var useGSO: Bool = true
    /// Send slots (each holds up to 64 datagrams).
    public var slots: Int = 64
    /// Payload bytes per slot.
    public var slotCapacity: Int = 65_536
    /// Link the sends of a submission so they leave in order even when a socket buffer fills.
    /// Off by default: linking costs about 0.15 x sendto's CPU per datagram (bench
    /// `uring-linked`), and without it datagrams of one submission can only overtake one
    /// another while the socket buffer is full, within one submission (at most 64) — UDP
    /// receivers reorder that much anyway (ours count it in `reordered`).
    public var ordered: Bool = false

    /// Makes a configuration with the defaults.
    public init(rateBitsPerSecond: Double? = nil, burstQuantum: Int? = nil) {
        self.rateBitsPerSecond = rateBitsPerSecond
        self.burstQuantum = burstQuantum
    }
}

/// Why `PacedSender.pump` stopped filling.
public enum PumpState: Sendable, Equatable {
    /// The producer has nothing more right now.
    case idle
    /// The completion window is full: completions will release the next batch.
    case windowFull
    /// No free send slot: completions will free some.
    case slotsExhausted
    /// The pacer holds the next datagram for this many nanoseconds.
    case paced(nanoseconds: Int64)
    /// The submission reached its datagram limit; more can go at once.
    case batchFull
}

/// Puts datagrams on the wire through io_uring: many per submission, released by the
/// completions of earlier submissions (the completion window) and by a token-bucket
/// rate budget. Waits carry their own timeout (the pacer's next release) in the same
/// `io_uring_enter` that submits.
///
/// Owned by one engine thread, like its ring.
public final class PacedSender {
    private struct Route {
        var socketIndex: Int
        var destination: SocketAddress?
        var mark: TrafficMark
    }

    /// The ring the sends go through.
    let ring: Ring
    /// The send slots.
    let queue: UDPSendQueue
    // `@exclusivity(unchecked)` on the state touched per datagram: see UDPSendQueue.
    /// The rate budget.
    @exclusivity(unchecked) var pacer: Pacer
    /// The configuration.
    @exclusivity(unchecked) public private(set) var config: PacedSenderConfig
    @exclusivity(unchecked) private var routes: [Route] = []
    /// What the send slots counted: datagrams, bytes, send calls, GSO sends, failures.
    public var counters: SendQueueCounters { queue.counters }
    /// Datagrams handed to the ring.
    @exclusivity(unchecked) public private(set) var datagramsQueued = 0
    /// Submissions made by `pump` (each one `io_uring_enter` in `wait` or `flush`).
    @exclusivity(unchecked) public private(set) var submissions = 0

    /// Makes a sender on `ring`.
    public init(ring: Ring, config: PacedSenderConfig) {
        self.ring = ring
        self.config = config
        self.queue = UDPSendQueue(ring: ring, slots: config.slots, slotCapacity: config.slotCapacity, ordered: config.ordered)
        let quantum = config.burstQuantum
            ?? config.rateBitsPerSecond.map { Pacer.defaultQuantum(rateBitsPerSecond: $0, minimum: 1500) }
            ?? 65_536
        self.pacer = Pacer(rateBitsPerSecond: config.rateBitsPerSecond, burstQuantum: quantum,
                           now: monotonicNanoseconds())
    }

    /// Adds a route: a socket, a destination (nil for the socket's connected peer) and a mark.
    public func addRoute(socket: UDPSocket, destination: SocketAddress?, mark: TrafficMark) -> Int {
        if !config.useGSO { socket.gsoEnabled = false }
        let index = queue.register(socket)
        routes.append(Route(socketIndex: index, destination: destination, mark: mark))
        return routes.count - 1
    }

    /// Changes a route's mark (for datagrams not yet written).
    public func setMark(_ mark: TrafficMark, route: Int) { routes[route].mark = mark }

    /// Changes the pacing rate from now on.
    public func setRate(_ rateBitsPerSecond: Double?, burstQuantum: Int? = nil) {
        let quantum = burstQuantum
            ?? rateBitsPerSecond.map { Pacer.defaultQuantum(rateBitsPerSecond: $0, minimum: 1500) } ?? 65_536
        pacer.setRate(rateBitsPerSecond, burstQuantum: quantum, now: monotonicNanoseconds())
        config.rateBitsPerSecond = rateBitsPerSecond
    }

    /// True when nothing is queued, ready or in flight.
    public var isDrained: Bool { queue.slotsInFlight == 0 && queue.readySlots == 0 }

    /// Fills send slots from `producer` while the window, the slots and the pacer allow,
    /// and prepares them as one submission (submitted by the next `Ring.submit`). Throws a
    /// `SystemError` when the ring fails, a `ConfigurationError` for a datagram that cannot
    /// fit an empty send slot (empty, or larger than `slotCapacity`).
    /// Generic, not `any DatagramProducer`: specialized for the engine's scheduler, the calls per
    /// datagram are direct (no witness table, no existential box retained around them).
    public func pump<Producer: DatagramProducer>(_ producer: Producer) throws -> PumpState {
        if queue.readySlots > 0 {
            // Retries left over from completions go first, in their own submission.
            try queue.submitReady()
            submissions += 1
        }
        guard queue.batchesInFlight < config.completionWindow else { return .windowFull }
        var datagramsThisSubmission = 0
        var state = PumpState.idle
        var now = monotonicNanoseconds()
        fill: while let first = producer.peekDatagram() {
            guard datagramsThisSubmission < config.maxDatagramsPerSubmission else { state = .batchFull; break }
            // A submission starts only with a batch's worth of budget (half a quantum, or what
            // is waiting if that is less); within it, each further slot needs only its own.
            // Half, not all: the bucket holds at most a quantum, and budget that would pile up
            // above it while the timer's wake-up is late would be lost (waiting for a full
            // bucket ran 1 Gbit/s 5 % slow).
            let batch = datagramsThisSubmission == 0 ? min(producer.pendingBytes, pacer.burstQuantum / 2) : 0
            let wait = pacer.delay(for: max(first.size, batch), now: now)
            if wait > 0 {
                // The wait is for the next submission's batch, which the next fill demands, not
                // for this datagram alone: waiting for the datagram woke the thread once more per
                // batch for nothing whenever half a quantum is more than a datagram.
                if datagramsThisSubmission == 0 {
                    state = .paced(nanoseconds: wait)
                } else {
                    let next = min(producer.pendingBytes, pacer.burstQuantum / 2)
                    state = .paced(nanoseconds: pacer.delay(for: max(first.size, next), now: now))
                }
                break
            }
            guard let slot = queue.acquire() else { state = .slotsExhausted; break }
            let budget = min(pacer.available(now: now), queue.slotCapacity)
            var slotBytes = 0
            var next: PendingDatagram? = first
            var firstSize = 0
            while let datagram = next, datagram.route == first.route,
                  datagramsThisSubmission < config.maxDatagramsPerSubmission || (config.useGSO && firstSize > 0),
                  queue.datagramCount(slot) < UDPSendQueue.maxDatagramsPerSlot {
                // A slot is one GSO group when it can be: equal sizes, the last may be shorter.
                if firstSize > 0 && datagram.size > firstSize { break }
                if slotBytes > 0 && slotBytes + datagram.size > budget { break }
                guard let buffer = queue.appendDatagram(slot, length: datagram.size) else { break }
                producer.writeDatagram(into: buffer)
                datagramsThisSubmission += 1
                slotBytes += datagram.size
                if firstSize == 0 { firstSize = datagram.size } else if datagram.size < firstSize { break }
                next = producer.peekDatagram()
            }
            if slotBytes == 0 {
                queue.release(slot)
                throw ConfigurationError("send slot", "datagram of \(first.size) bytes", code: Errno(EMSGSIZE))
            }
            let route = routes[first.route]
            queue.commit(slot, socketIndex: route.socketIndex, destination: route.destination, mark: route.mark,
                         tag: first.tag)
            pacer.consume(slotBytes, now: now)
            now = monotonicNanoseconds()
        }
        if state == .idle, let wait = producer.readyIn(now: now) {
            state = .paced(nanoseconds: max(wait, 1_000))
        }
        if datagramsThisSubmission > 0 {
            try queue.submitReady()
            submissions += 1
            datagramsQueued += datagramsThisSubmission
        }
        return state
    }

    /// Submits what `pump` prepared and waits (in the same `io_uring_enter`) for a
    /// completion or until `timeoutNanoseconds` passes.
    public func submitAndWait(timeoutNanoseconds: Int64?) throws(SystemError) {
        try submitAndWait(timeoutNanoseconds: timeoutNanoseconds, sendsJustPrepared: 0)
    }

    /// Submits and waits; with a timeout, the `sendsJustPrepared` (whose completions the
    /// kernel posts during this very submission) do not end the wait: it lasts until the
    /// timeout or some other completion (feedback, a wake-up, a send that had to wait).
    /// So a paced sender enters the kernel once per batch, not once for the batch and once
    /// more for the wait that follows its completions.
    private func submitAndWait(timeoutNanoseconds: Int64?, sendsJustPrepared: Int) throws(SystemError) {
        if let timeoutNanoseconds {
            try ring.submit(waitingFor: UInt32(1 + sendsJustPrepared), timeoutNanoseconds: timeoutNanoseconds)
        } else {
            try ring.submit(waitingFor: 1)
        }
    }

    /// Handles a send completion (tag kind `sendKind`).
    @inline(__always)
    public func handle(_ completion: Completion) { queue.handle(completion) }

    /// Sends what `producer` has, paced, until it has nothing more, every send completed,
    /// and `isFinished` says so (while it says no, an idle producer is polled every
    /// `idlePoll` nanoseconds, read before each idle wait). `beforePump` runs before each fill (to take new work in);
    /// when it returns false the loop stops filling and returns once what is in flight
    /// has completed. `afterPump` runs after each fill. `beforeWait` runs before each wait with
    /// its timeout (nil: until a completion); when it returns false the loop submits without
    /// waiting and fills again. Completions of other kinds go to `other`.
    public func run<Producer: DatagramProducer>(_ producer: Producer, idlePoll: @autoclosure () -> Int64 = 200_000, isFinished: () -> Bool = { true },
                    beforePump: () throws(SystemError) -> Bool = { true }, afterPump: () -> Void = {},
                    beforeWait: (_ timeoutNanoseconds: Int64?) -> Bool = { _ in true },
                    other: (Completion) -> Void = { _ in }) throws {
        var sendsNotSubmitted = 0  // prepared by a fill whose submission went with the next one
        while try beforePump() {
            let sendsBefore = queue.counters.sendCalls
            let state = try pump(producer)
            afterPump()
            if state == .idle && isDrained && isFinished() { return }
            let sends = queue.counters.sendCalls - sendsBefore + sendsNotSubmitted
            sendsNotSubmitted = 0
            // With a deadline (the pacer's, or the idle poll) the wait is not ended by the
            // completions of the sends it submits; without one (window or slots full) those
            // completions are what it waits for.
            var timeout: Int64?
            if case .paced(let nanoseconds) = state { timeout = nanoseconds }
            if state == .idle { timeout = idlePoll() }
            if state == .batchFull && queue.batchesInFlight < config.completionWindow {
                // More may go at once: submit without waiting.
                try ring.submit()
            } else if !beforeWait(timeout) {
                // Something came in since the fill: fill again at once, and submit what this
                // fill prepared with that one (one enter, not one more).
                sendsNotSubmitted = sends
            } else {
                try submitAndWait(timeoutNanoseconds: timeout, sendsJustPrepared: sends)
            }
            reapCompletions(other: other)
        }
        // Stopped: let what is in flight complete, so every count is final.
        while !isDrained {
            if queue.readySlots > 0 { try queue.submitReady() }
            try submitAndWait(timeoutNanoseconds: 100_000_000, sendsJustPrepared: 0)
            reapCompletions(other: other)
        }
    }

    private func reapCompletions(other: (Completion) -> Void) {
        _ = ring.reap { completion in
            if completion.tag.kind == CompletionTag.sendKind { queue.handle(completion) } else { other(completion) }
        }
    }
}

@available(*, unavailable, message: "a sender is owned by one engine thread")
extension PacedSender: Sendable {}
