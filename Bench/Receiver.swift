import Dispatch
import Foundation
import Glibc
import SecureRTP
import StreamEngine
import Synchronization
import UringIO

/// The receive paths the bench measures.
enum ReceivePath: String, CaseIterable {
    /// One `recvfrom` per datagram.
    case recvfrom
    /// `recvmmsg` of up to a batch of datagrams per call.
    case recvmmsg
    /// The engine's multishot `recvmsg` on a buffer ring (`DatagramReceiveLoop`).
    case uring
    /// The same with `UDP_GRO` on the socket: one completion may carry many segments.
    case uringGRO = "uring-gro"
    /// Multishot `recvmsg` with kernel receive timestamps (`SO_TIMESTAMPNS`), no GRO: the
    /// pacing rounds' receiver, never one of the CPU comparisons.
    case uringTimestamps = "uring-ts"

    /// The receive paths whose CPU the bench compares (all but `uring-ts`).
    static let measured: [ReceivePath] = [.recvfrom, .recvmmsg, .uring, .uringGRO]
}

/// What a round sends, so the receiver knows how to check it.
enum RoundKind: String {
    /// Bench datagrams (`BenchDatagram`), checked one by one.
    case bench
    /// An RTP stream from `MediaSender` (`RTPTally`).
    case rtp
    /// Bench datagrams, paced; the receiver also measures rate and bursts from kernel timestamps.
    case pace
}

/// The receiving half: one socket per receive path, rounds started and stopped over the
/// control channel. Each round counts and checks every datagram, reports progress every
/// `step` datagrams (the sender's flow window), and ends with the round's counts and
/// this process's CPU time.
final class BenchReceiver {
    private struct Endpoint {
        let path: ReceivePath
        let socket: UDPSocket
        let port: UInt16
        var loop: DatagramReceiveLoop?
    }

    private var endpoints: [Endpoint] = []
    private let control: ControlChannel
    private let batch: Int
    private let inbox = CommandInbox()

    init(listen: SocketAddress, paths: [ReceivePath], batch: Int, control: ControlChannel,
         receiveBuffer: Int) throws {
        self.control = control
        self.batch = batch
        for (index, path) in paths.enumerated() {
            var address = listen
            if listen.port != 0 { address.port = listen.port &+ UInt16(index) }
            let socket = try UDPSocket(family: listen.family)
            try socket.bind(address)
            socket.setReceiveBufferSize(receiveBuffer)
            try socket.enableDropCounter()
            var loop: DatagramReceiveLoop?
            switch path {
            case .recvfrom, .recvmmsg:
                try PlainUDP.setReceiveTimeout(socket, nanoseconds: 20_000_000)
            case .uring:
                loop = try DatagramReceiveLoop(socket: socket, bufferCount: 256, maxPayload: 65_536)
            case .uringTimestamps:
                try socket.enableReceiveTimestamps()
                loop = try DatagramReceiveLoop(socket: socket, bufferCount: 256, maxPayload: 65_536)
            case .uringGRO:
                try socket.enableGRO()
                loop = try DatagramReceiveLoop(socket: socket, bufferCount: 256, maxPayload: 65_536)
            }
            endpoints.append(Endpoint(path: path, socket: socket, port: try socket.localAddress().port, loop: loop))
        }
    }

    /// Announces the ports, then serves rounds until `quit` or the channel closes.
    /// `commandReader` is the channel the control thread reads from.
    func serve(commandReader: ControlChannel) throws {
        let ports = endpoints.map { "\($0.path.rawValue)=\($0.port)" }.joined(separator: " ")
        try control.send("ready \(ports)")
        let reader = SendableBox(commandReader)
        let inbox = self.inbox
        let thread = Thread {
            while true {
                let message: ControlMessage?
                do { message = try reader.value.receive(timeoutMilliseconds: -1) } catch { message = nil }
                guard let message else {
                    // The sender is gone: end the round in progress too.
                    inbox.stopRound.store(CommandInbox.everyRound, ordering: .relaxed)
                    inbox.post(ControlMessage("quit"))
                    return
                }
                if message.verb == "stop" {
                    inbox.stopRound.store(UInt32(message.int("id")), ordering: .relaxed)
                    continue
                }
                inbox.post(message)
                if message.verb == "quit" { return }
            }
        }
        thread.start()
        while true {
            inbox.signal.wait()
            guard let message = inbox.messages.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { continue }
            switch message.verb {
            case "quit":
                return
            case "round":
                do {
                    try runRound(message)
                } catch {
                    try control.send("error text=\(String(describing: error).replacingOccurrences(of: " ", with: "_"))")
                }
            default:
                try control.send("error text=unknown_command_\(message.verb)")
            }
        }
    }

    private func runRound(_ message: ControlMessage) throws {
        let round = UInt32(message.int("id"))
        guard let pathName = message.fields["path"], let path = ReceivePath(rawValue: pathName),
              let index = endpoints.firstIndex(where: { $0.path == path }) else {
            throw BenchError.runtime("receive path \(message.fields["path"] ?? "?") not served here")
        }
        let count = message.int("count")
        let step = max(1, message.int("step"))
        let kind = RoundKind(rawValue: message.fields["kind"] ?? "bench") ?? .bench
        var tally = RoundTally(round: round, expected: count, size: message.int("size"))
        var rtp = RTPTally(expected: kind == .rtp ? count : 0, maxSize: message.int("size"))
        // An SRTP stream round: each packet is unprotected (a copy) before it is checked.
        let srtp = try message.fields["srtp"].map { name throws -> SRTPSession in
            guard let suite = SRTPSuite(rawValue: name) else { throw BenchError.runtime("unknown SRTP suite \(name)") }
            return try SRTPSession(key: BenchSRTP.key(suite), direction: .inbound)
        }
        let rate = Double(message.fields["rate"] ?? "") ?? 0
        var pace = PaceTally(rateBitsPerSecond: rate)
        // A paced RTP round (the video rows): also the rate, bursts and frame spreads.
        let timesRTP = kind == .rtp && rate > 0
        var frameTimes = FrameTimes()
        let endpoint = endpoints[index]
        // The socket's own drop count at both ends of the round (a datagram carries the count of
        // its arrival only: drops after the last one would be missed).
        endpoint.loop?.receiver.refreshKernelDrops()
        let dropsBefore = endpoint.loop?.receiver.counters.kernelDrops ?? 0
        let enterBefore = endpoint.loop?.enterCalls ?? 0
        let completionsBefore = endpoint.loop?.receiver.counters.completions ?? 0
        let truncatedBefore = endpoint.loop?.receiver.counters.truncated ?? 0
        var syscalls = 0
        var nextProgress = step
        let control = self.control
        let stopRound = inbox
        let cpuBefore = ProcessCPUTime.now()
        try control.send("started id=\(round)")
        var firstArrival: Int64 = 0
        var lastArrival: Int64 = 0

        func shouldStop() -> Bool {
            if kind == .rtp ? rtp.isComplete : tally.isComplete { return true }
            let stop = stopRound.stopRound.load(ordering: .relaxed)
            return stop == round || stop == CommandInbox.everyRound
        }
        func record(_ payload: UnsafeRawBufferPointer, timestamp: Int64 = 0) {
            let received: Int
            switch kind {
            case .bench:
                tally.record(payload)
                received = tally.received
            case .rtp:
                if let srtp {
                    if case .failure = srtp.unprotect(payload, kind: .rtp, { rtp.record($0) }) { rtp.recordUnauthenticated() }
                } else {
                    rtp.record(payload)
                }
                received = rtp.received
                if timesRTP {
                    pace.record(length: payload.count, timestamp: timestamp)
                    frameTimes.record(payload, timestamp: timestamp)
                }
            case .pace:
                tally.record(payload)
                pace.record(length: payload.count, timestamp: timestamp)
                received = tally.received
            }
            if received >= nextProgress {
                nextProgress += step
                try? control.send("progress id=\(round) n=\(received)")
            }
        }

        switch path {
        case .recvfrom:
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65_536, alignment: 64)
            defer { buffer.deallocate() }
            while !shouldStop() {
                syscalls += 1
                guard let length = try PlainUDP.receiveFrom(endpoint.socket, into: buffer) else { continue }
                if firstArrival == 0 { firstArrival = monotonicNanoseconds() }
                record(UnsafeRawBufferPointer(rebasing: buffer[0..<length]))
            }
        case .recvmmsg:
            let slotSize = 65_536
            let buffers = UnsafeMutableRawPointer.allocate(byteCount: batch * slotSize, alignment: 64)
            let vectors = UnsafeMutablePointer<iovec>.allocate(capacity: batch)
            let messages = UnsafeMutablePointer<MultiMessageHeader>.allocate(capacity: batch)
            defer { buffers.deallocate(); vectors.deallocate(); messages.deallocate() }
            for i in 0..<batch {
                vectors[i] = iovec(iov_base: buffers + i * slotSize, iov_len: slotSize)
                messages[i] = MultiMessageHeader()
                messages[i].header.msg_iov = vectors + i
                messages[i].header.msg_iovlen = 1
            }
            while !shouldStop() {
                syscalls += 1
                guard let received = try PlainUDP.receiveMessages(endpoint.socket, messages, count: batch) else {
                    continue
                }
                if firstArrival == 0 { firstArrival = monotonicNanoseconds() }
                for i in 0..<received {
                    record(UnsafeRawBufferPointer(start: buffers + i * slotSize, count: Int(messages[i].length)))
                    messages[i].header.msg_flags = 0
                }
            }
        case .uring, .uringGRO, .uringTimestamps:
            guard let loop = endpoint.loop else { break }
            try loop.run(checkInterval: 20_000_000, shouldStop: shouldStop) { datagram in
                if firstArrival == 0 { firstArrival = monotonicNanoseconds() }
                record(datagram.payload, timestamp: datagram.timestampNanoseconds)
            }
            syscalls = loop.enterCalls - enterBefore
        }
        lastArrival = monotonicNanoseconds()
        let cpu = ProcessCPUTime.now() - cpuBefore
        endpoint.loop?.receiver.refreshKernelDrops()
        let counters = endpoint.loop?.receiver.counters
        var fields = ["id=\(round)"]
        if kind == .rtp {
            // The aggregate checks: bytes, bytes by position, one marker per access unit.
            var failed: [String] = []
            if let want = message.fields["bytes"].flatMap(Int.init), want != rtp.bytes { failed.append("bytes") }
            if let want = message.fields["wsum"].flatMap(UInt64.init), want != rtp.positionWeightedBytes {
                failed.append("lengths")
            }
            if let want = message.fields["frames"].flatMap(Int.init), want != rtp.markers { failed.append("markers") }
            fields += ["delivered=\(rtp.delivered)", "received=\(rtp.received)",
                       "corrupt=\(rtp.corrupt + (failed.isEmpty ? 0 : 1))", "duplicates=\(rtp.duplicates)",
                       "stale=\(rtp.stale)", "bytes=\(rtp.bytes)", "markers=\(rtp.markers)",
                       "checks=\(failed.isEmpty ? "ok" : failed.joined(separator: ","))"]
        } else {
            fields += ["delivered=\(tally.delivered)", "received=\(tally.received)", "corrupt=\(tally.corrupt)",
                       "duplicates=\(tally.duplicates)", "stale=\(tally.stale)", "bytes=\(tally.bytes)"]
        }
        if timesRTP {
            let frames = frameTimes.summary(rateBitsPerSecond: rate, quantum: message.int("quantum"))
            fields += ["framesTimed=\(frames.frames)", "frameSpreadNs=\(frames.spread)", "frameNeedNs=\(frames.need)",
                       "frameExcessP95Ns=\(frames.excessP95)"]
        }
        if kind == .pace || timesRTP {
            fields += ["achievedBps=\(Int(pace.achievedBitsPerSecond))", "burst=\(Int(pace.largestBurst.rounded()))",
                       "spanNs=\(pace.last - pace.first)", "timestamped=\(pace.datagrams)",
                       "noTimestamp=\(pace.missingTimestamps)"]
        }
        fields += ["userNs=\(cpu.userNanoseconds)", "systemNs=\(cpu.systemNanoseconds)", "syscalls=\(syscalls)",
                   "activeNs=\(firstArrival > 0 ? lastArrival - firstArrival : 0)"]
        if let counters {
            fields.append("completions=\(counters.completions - completionsBefore)")
            fields.append("truncated=\(counters.truncated - truncatedBefore)")
            fields.append("kernelDrops=\(Int(counters.kernelDrops) - Int(dropsBefore))")
        }
        try control.send("done " + fields.joined(separator: " "))
    }
}

/// Commands the control thread read, for the receiving thread; and the round to stop.
final class CommandInbox: Sendable {
    let messages = Mutex<[ControlMessage]>([])
    let signal = DispatchSemaphore(value: 0)
    /// The round id the sender asked to stop (0: none; `everyRound`: the channel closed).
    let stopRound = Atomic<UInt32>(0)
    static let everyRound = UInt32.max

    func post(_ message: ControlMessage) {
        messages.withLock { $0.append(message) }
        signal.signal()
    }
}

/// Hands a non-Sendable value to exactly one other thread, which becomes its only user.
final class SendableBox<Value>: @unchecked Sendable {  // @unchecked: ownership moves, it is never shared
    let value: Value
    init(_ value: Value) { self.value = value }
}

@available(*, unavailable, message: "a receiver is driven by its own threads")
extension BenchReceiver: Sendable {}
