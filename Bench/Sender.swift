import Glibc
import SecureRTP
import StreamEngine
import UringIO

/// The send paths the bench measures.
enum SendPath: String, CaseIterable {
    /// One `sendto` per datagram: the baseline.
    case sendto
    /// `sendmmsg` of a batch of datagrams per call.
    case sendmmsg
    /// The engine's io_uring path without GSO: one `sendmsg` SQE per datagram, a batch per submission.
    case uring
    /// The engine's io_uring path with GSO: one `sendmsg` SQE per run of equal datagrams (`UDP_SEGMENT`).
    case uringGSO = "uring-gso"
    /// Zero-copy `sendmsg` (IORING_OP_SENDMSG_ZC) of GSO runs: `UDPSendQueue`'s zero-copy mode.
    case uringGSOZC = "uring-gso-zc"
    /// `uring` with `PacedSenderConfig.ordered = true`: the SQEs of a submission linked, so
    /// they leave in order even when the socket buffer fills. Beside `uring` (the engine's
    /// default, unlinked) to show what the order costs.
    case uringLinked = "uring-linked"
    /// The whole media path through the public API: pre-encoded HEVC access units handed to an
    /// unpaced `MediaSender` (RFC 7798 packetizer, flow, pacer, send slots, ring), its
    /// datagram size set by the MTU (`--size` + 28 bytes of IPv4 and UDP headers).
    case stream
    /// `stream` with SRTP (AES_CM_128_HMAC_SHA1_80, the default suite): every packet protected
    /// in its send slot. The receiver unprotects before it checks.
    case streamSRTP = "stream-srtp"
    /// `stream` with SRTP AEAD_AES_128_GCM.
    case streamSRTPGCM = "stream-srtp-gcm"

    /// The media paths (pre-encoded access units through a `MediaSender`).
    var isStream: Bool { self == .stream || srtpSuite != nil }

    /// The SRTP suite of an SRTP stream path.
    var srtpSuite: SRTPSuite? {
        switch self {
        case .streamSRTP: .aesCM128HMACSHA1_80
        case .streamSRTPGCM: .aeadAES128GCM
        default: nil
        }
    }

    /// The paths of the main comparison (`stream` runs in its own group, at its own size).
    static let rawPaths: [SendPath] = [.sendto, .sendmmsg, .uring, .uringGSO, .uringGSOZC, .uringLinked]
}

/// The sender's bound on datagrams sent but not yet seen by the receiver: UDP has no flow
/// control, so without it a fast sender would overflow the receiver's socket buffer and
/// the loss would make the faster path look faster. The receiver reports its count every
/// `step` datagrams over the control channel; the sender blocks (in `poll`, costing no CPU)
/// only when the window is full.
final class FlowWindow {
    let control: ControlChannel
    let round: UInt32
    let limit: Int
    /// Datagrams the receiver has reported.
    private(set) var acknowledged = 0
    /// Control-channel reads made while waiting (harness cost, counted apart from the path's syscalls).
    private(set) var waits = 0
    /// Set when the receiver made no progress for `stallMilliseconds`: the round is abandoned.
    private(set) var stalled = false
    static let stallMilliseconds: Int32 = 3000

    init(control: ControlChannel, round: UInt32, limit: Int) {
        self.control = control
        self.round = round
        self.limit = limit
    }

    /// Datagrams that may be sent now, given `sent` so far.
    @inline(__always)
    func room(sent: Int) -> Int { stalled ? 0 : max(0, limit - (sent - acknowledged)) }

    /// Blocks until the window has room for `needed` more datagrams (or the receiver stalls).
    func waitForRoom(sent: Int, needed: Int) throws(BenchError) {
        while !stalled && room(sent: sent) < min(needed, limit) { try waitForProgress() }
    }

    /// Reads control messages until one reports more progress; marks a stall after the timeout.
    func waitForProgress() throws(BenchError) {
        let before = acknowledged
        while acknowledged == before {
            waits += 1
            guard let message = try control.receive(timeoutMilliseconds: Self.stallMilliseconds) else {
                stalled = true
                return
            }
            if message.verb == "error" { throw BenchError.runtime("receiver: \(message.line)") }
            if message.verb == "progress" && message.int("id") == Int(round) {
                acknowledged = max(acknowledged, message.int("n"))
            }
            if message.verb == "done" { pendingDone = message; stalled = true; return }
        }
    }

    /// A `done` that arrived while waiting (the receiver ended the round early).
    var pendingDone: ControlMessage?
}

/// What the sending half measured in one round.
struct SenderMeasurement {
    var sent = 0
    var bytes = 0
    var failed = 0
    var syscalls = 0
    var sends = 0
    /// Sends that carried more than one segment (when the path tells).
    var gsoSends: Int?
    var submissions = 0
    /// Of `syscalls`, the eventfd writes that woke the engine (`stream`: `MediaSender.wakeSignals`).
    var handOffs = 0
    var userNanoseconds: Int64 = 0
    var systemNanoseconds: Int64 = 0
    var wallNanoseconds: Int64 = 0
    /// CPU time of the `ksoftirqd` threads during the sending loop (see `SoftirqThreads`).
    var softirqNanoseconds: Int64 = 0
    /// Machine-wide irq + softirq time during the sending loop (`/proc/stat`, 10 ms ticks).
    var interruptNanoseconds: Int64 = 0
    var note: String?
}

/// One round's parameters for the sender.
struct SendRound {
    let path: SendPath
    let round: UInt32
    let count: Int
    let size: Int
    let batch: Int
}

/// Runs the send paths. Each call opens a fresh socket connected to the receiver and
/// measures only the sending loop (CPU of this whole process, `getrusage`).
enum BenchSender {
    static func run(_ spec: SendRound, to destination: SocketAddress, window: FlowWindow) throws -> SenderMeasurement {
        let (socket, mark) = try markedSocket(connectedTo: destination)
        switch spec.path {
        case .sendto: return try sendTo(spec, socket: socket, window: window)
        case .sendmmsg: return try sendMessages(spec, socket: socket, window: window)
        case .uring: return try sendEngine(spec, socket: socket, gso: false, mark: mark, window: window)
        case .uringGSO: return try sendEngine(spec, socket: socket, gso: true, mark: mark, window: window)
        case .uringGSOZC: return try sendZeroCopy(spec, socket: socket, mark: mark, window: window)
        case .uringLinked:
            return try sendEngine(spec, socket: socket, gso: false, mark: mark, window: window, ordered: true)
        case .stream, .streamSRTP, .streamSRTPGCM: throw BenchError.runtime("stream rounds go through StreamRound.run")
        }
    }

    static func measured(_ body: (inout SenderMeasurement) throws -> Void) rethrows -> SenderMeasurement {
        var result = SenderMeasurement()
        let softirqBefore = SoftirqThreads.nanoseconds()
        let interruptBefore = SoftirqThreads.machineInterruptNanoseconds()
        let cpuBefore = ProcessCPUTime.now()
        let start = monotonicNanoseconds()
        try body(&result)
        result.wallNanoseconds = monotonicNanoseconds() - start
        let cpu = ProcessCPUTime.now() - cpuBefore
        result.softirqNanoseconds = SoftirqThreads.nanoseconds() - softirqBefore
        result.interruptNanoseconds = SoftirqThreads.machineInterruptNanoseconds() - interruptBefore
        result.userNanoseconds = cpu.userNanoseconds
        result.systemNanoseconds = cpu.systemNanoseconds
        return result
    }

    /// A fresh UDP socket connected to `destination`, with a 4 MiB send buffer and the mark
    /// every path sends with (video, ECT(0)).
    static func markedSocket(connectedTo destination: SocketAddress) throws -> (socket: UDPSocket, mark: TrafficMark) {
        let socket = try UDPSocket(family: destination.family)
        try socket.connect(destination)
        socket.setSendBufferSize(4 << 20)
        let mark = TrafficMark(.video, ecn: .ect0)
        try socket.setTrafficMark(mark)
        return (socket, mark)
    }

    private static func sendTo(_ spec: SendRound, socket: UDPSocket, window: FlowWindow) throws -> SenderMeasurement {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: spec.size, alignment: 64)
        defer { buffer.deallocate() }
        buffer.initializeMemory(as: UInt8.self, repeating: 0x5a)
        return try measured { result in
            var sequence = 0
            while sequence < spec.count {
                if window.room(sent: sequence) == 0 {
                    try window.waitForRoom(sent: sequence, needed: spec.batch)
                    if window.stalled { break }
                }
                BenchDatagram.stamp(buffer, round: spec.round, sequence: UInt32(sequence))
                result.syscalls += 1
                guard try PlainUDP.sendTo(socket, UnsafeRawBufferPointer(buffer)) != nil else { continue }
                sequence += 1
                result.bytes += spec.size
            }
            result.sent = sequence
            result.sends = sequence
            result.submissions = sequence
        }
    }

    private static func sendMessages(_ spec: SendRound, socket: UDPSocket, window: FlowWindow) throws
        -> SenderMeasurement
    {
        precondition(MemoryLayout<MultiMessageHeader>.stride == 64, "MultiMessageHeader must match struct mmsghdr")
        let batch = spec.batch
        let buffers = UnsafeMutableRawPointer.allocate(byteCount: batch * spec.size, alignment: 64)
        buffers.initializeMemory(as: UInt8.self, repeating: 0x5a, count: batch * spec.size)
        let vectors = UnsafeMutablePointer<iovec>.allocate(capacity: batch)
        let messages = UnsafeMutablePointer<MultiMessageHeader>.allocate(capacity: batch)
        defer { buffers.deallocate(); vectors.deallocate(); messages.deallocate() }
        for i in 0..<batch {
            vectors[i] = iovec(iov_base: buffers + i * spec.size, iov_len: spec.size)
            messages[i] = MultiMessageHeader()
            messages[i].header.msg_iov = vectors + i
            messages[i].header.msg_iovlen = 1
        }
        return try measured { result in
            var sent = 0
            while sent < spec.count {
                var room = window.room(sent: sent)
                if room < min(batch, spec.count - sent) {
                    try window.waitForRoom(sent: sent, needed: min(batch, spec.count - sent))
                    if window.stalled { break }
                    room = window.room(sent: sent)
                }
                let take = min(batch, spec.count - sent, room)
                for i in 0..<take {
                    BenchDatagram.stamp(UnsafeMutableRawBufferPointer(start: buffers + i * spec.size, count: spec.size),
                                        round: spec.round, sequence: UInt32(sent + i))
                }
                var done = 0
                while done < take {
                    result.syscalls += 1
                    guard let went = try PlainUDP.sendMessages(socket, messages + done, count: take - done) else {
                        continue
                    }
                    done += went
                }
                result.submissions += 1
                sent += take
            }
            result.sent = sent
            result.sends = sent
            result.bytes = sent * spec.size
        }
    }

    /// The engine path: `PacedSender` (unpaced) over `UDPSendQueue`, the producer held
    /// back by the flow window.
    static func sendEngine(_ spec: SendRound, socket: UDPSocket, gso: Bool, mark: TrafficMark,
                           window: FlowWindow, ordered: Bool = false, rateBitsPerSecond: Double? = nil) throws
        -> SenderMeasurement
    {
        let ring = try Ring(entries: 1024)
        var config = PacedSenderConfig(rateBitsPerSecond: rateBitsPerSecond)
        config.useGSO = gso
        config.ordered = ordered
        config.maxDatagramsPerSubmission = spec.batch
        config.slots = max(64, 2 * ((spec.batch + 63) / 64) * 2)
        let sender = PacedSender(ring: ring, config: config)
        let route = sender.addRoute(socket: socket, destination: nil, mark: mark)
        let producer = WindowedProducer(spec: spec, route: route, window: window)
        let enterBefore = ring.enterCalls
        var result = try measured { result in
            var failure: BenchError?
            try sender.run(producer, isFinished: {
                if producer.next >= spec.count || window.stalled { return true }
                do throws(BenchError) { try window.waitForProgress() } catch { failure = error; return true }
                return false
            })
            if let failure { throw failure }
        }
        let counters = sender.counters
        result.sent = counters.datagrams
        result.bytes = counters.bytes
        result.failed = counters.failedDatagrams
        result.syscalls = ring.enterCalls - enterBefore
        result.sends = counters.sendCalls
        result.submissions = sender.submissions
        if counters.gsoFallbacks > 0 { result.note = "GSO turned off after \(counters.errors)" }
        if counters.failedDatagrams > 0 { result.note = "send errors \(counters.errors)" }
        return result
    }

    /// Zero-copy GSO sends: `UDPSendQueue` in its zero-copy mode, each slot one GSO run,
    /// written again only after the kernel's notification that it let go of the pages.
    private static func sendZeroCopy(_ spec: SendRound, socket: UDPSocket, mark: TrafficMark,
                                     window: FlowWindow) throws -> SenderMeasurement {
        let segmentsPerSend = max(1, min(UDPSendQueue.maxDatagramsPerSlot, UDPSendQueue.maxGSOBytes / spec.size,
                                         spec.batch))
        let sendsPerSubmission = max(1, spec.batch / segmentsPerSend)
        let ring = try Ring(entries: 1024)
        let queue = UDPSendQueue(ring: ring, slots: max(16, 4 * sendsPerSubmission),
                                 slotCapacity: segmentsPerSend * spec.size, ordered: false, zeroCopy: true)
        let socketIndex = queue.register(socket)
        let enterBefore = ring.enterCalls
        var result = try measured { result in
            var next = 0
            while next < spec.count || queue.slotsInFlight > 0 || queue.readySlots > 0 {
                var prepared = 0
                while prepared < sendsPerSubmission, next < spec.count, queue.freeSlots > 0 {
                    let count = min(segmentsPerSend, spec.count - next)
                    if window.room(sent: next) < count { break }
                    guard let slot = queue.acquire() else { break }
                    for i in 0..<count {
                        guard let buffer = queue.appendDatagram(slot, length: spec.size) else { break }
                        BenchDatagram.stamp(buffer, round: spec.round, sequence: UInt32(next + i))
                    }
                    queue.commit(slot, socketIndex: socketIndex, destination: nil, mark: mark, tag: UInt64(next))
                    next += count
                    prepared += 1
                }
                if prepared > 0 { result.submissions += 1 }
                if queue.slotsInFlight == 0 && queue.readySlots == 0 {
                    // Nothing in flight and nothing prepared: the window is full.
                    try window.waitForProgress()
                    if window.stalled { break }
                    continue
                }
                try queue.submitReady()
                try ring.submit(waitingFor: 1)
                _ = ring.reap { queue.handle($0) }
            }
        }
        let counters = queue.counters
        result.sent = counters.datagrams
        result.bytes = counters.bytes
        result.failed = counters.failedDatagrams
        result.sends = counters.sendCalls
        result.syscalls = ring.enterCalls - enterBefore
        if !counters.errors.isEmpty {
            result.note = "sendmsg_zc errors " + counters.errors.map { "\($0.key)x\($0.value)" }.joined(separator: ",")
        }
        return result
    }
}

/// Hands the engine datagrams `0..<count` of a round, never more than the flow window allows.
final class WindowedProducer: DatagramProducer {
    let spec: SendRound
    let route: Int
    let window: FlowWindow
    private(set) var next = 0

    init(spec: SendRound, route: Int, window: FlowWindow) {
        self.spec = spec
        self.route = route
        self.window = window
    }

    func peekDatagram() -> PendingDatagram? {
        guard next < spec.count, window.room(sent: next) > 0 else { return nil }
        return PendingDatagram(route: route, size: spec.size, tag: UInt64(next))
    }

    func writeDatagram(into buffer: UnsafeMutableRawBufferPointer) {
        BenchDatagram.stamp(buffer, round: spec.round, sequence: UInt32(next))
        next += 1
    }
}
