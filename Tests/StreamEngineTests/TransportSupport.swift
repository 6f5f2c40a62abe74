import Foundation
import Glibc
import StreamEngine
import Synchronization
import TestSupport
import UringIO

let uringAvailable = Ring.isAvailable
let isRoot = geteuid() == 0

/// The size of pattern datagram `index` in the mixed-size tests: runs of 20 equal sizes
/// (GSO groups), sizes from 1 byte to 8000, and an odd short datagram ending some runs.
@Sendable func mixedSize(_ index: Int) -> Int {
    let sizes = [1200, 1472, 200, 8000, 64, 1400, 9, 3000]
    let run = index / 20
    if index % 20 == 19 && run % 3 == 0 { return 100 + run % 50 }
    return sizes[run % sizes.count]
}

/// Fills `buffer` with the bytes of pattern datagram `index`.
@inline(__always)
func writePattern(index: Int, into buffer: UnsafeMutableRawBufferPointer) {
    for j in 0..<buffer.count { buffer[j] = UInt8(truncatingIfNeeded: index &* 31 &+ j) }
    withUnsafeBytes(of: UInt64(index).littleEndian) { raw in
        for j in 0..<min(8, buffer.count) { buffer[j] = raw[j] }
    }
}

/// Which pattern datagram this is, if its bytes are intact and its length is `size(index)`.
func checkPattern(_ payload: UnsafeRawBufferPointer, size: (Int) -> Int, limit: Int) -> Int? {
    guard payload.count >= 8 || payload.count == size(0) else { return nil }
    var index = 0
    if payload.count >= 8 {
        index = Int(truncatingIfNeeded: UInt64(littleEndian: payload.loadUnaligned(as: UInt64.self)))
    } else {
        // Datagrams shorter than 8 bytes carry only part of the index: accept by pattern.
        var raw = [UInt8](repeating: 0, count: 8)
        for j in 0..<payload.count { raw[j] = payload[j] }
        index = Int(truncatingIfNeeded: UInt64(littleEndian: raw.withUnsafeBytes { $0.load(as: UInt64.self) }))
    }
    guard index >= 0, index < limit, size(index) == payload.count else { return nil }
    for j in 8..<max(8, payload.count) where payload[j] != UInt8(truncatingIfNeeded: index &* 31 &+ j) { return nil }
    return index
}

/// Produces `count` pattern datagrams for one route, never more than `window` ahead of
/// what the receiver has counted (UDP has no flow control; this keeps the test lossless).
final class PatternProducer: DatagramProducer {
    let count: Int
    let route: Int
    let size: @Sendable (Int) -> Int
    let window: Int
    let receivedSoFar: () -> Int
    private(set) var next = 0

    init(count: Int, route: Int, window: Int = .max, size: @escaping @Sendable (Int) -> Int,
         receivedSoFar: @escaping () -> Int = { 0 }) {
        self.count = count
        self.route = route
        self.window = window
        self.size = size
        self.receivedSoFar = receivedSoFar
    }

    func peekDatagram() -> PendingDatagram? {
        guard next < count else { return nil }
        if window != .max && next - receivedSoFar() >= window { return nil }
        return PendingDatagram(route: route, size: size(next), tag: UInt64(next))
    }

    func writeDatagram(into buffer: UnsafeMutableRawBufferPointer) {
        writePattern(index: next, into: buffer)
        next += 1
    }
}

/// What a receiver thread saw.
struct Collected: Sendable {
    var received = 0
    var bytes = 0
    var corrupt = 0
    var duplicates = 0
    var seen: [Bool] = []
    var arrivals: [(timestamp: Int64, bytes: Int)] = []
    var counters = ReceiveCounters()
}

/// A receiver on its own thread (and its own ring), optionally inside a network namespace,
/// checking every datagram against the pattern; bound to loopback unless `bindAddress` says.
final class ThreadedReceiver: @unchecked Sendable {  // @unchecked: state is in Mutex/Atomic, the ring lives on the thread
    let collected = Mutex(Collected())
    let count = Atomic<Int>(0)
    private let stop = Atomic<Bool>(false)
    private let ready = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private let portBox = Mutex<(UInt16, String?)>((0, nil))

    /// Starts the thread and waits until its socket is bound.
    init(family: SocketAddress.Family = .ipv4, gro: Bool, expected: Int, size: @escaping @Sendable (Int) -> Int,
         namespace: String? = nil, pauseBeforeReading: Double = 0, receiveBuffer: Int = 32 << 20,
         recordArrivals: Bool = false, bindAddress: String? = nil) {
        collected.withLock { $0.seen = Array(repeating: false, count: expected) }
        let thread = Thread { [self] in
            do {
                if let namespace { try NetworkNamespace.enter(namespace) }
                let socket = try UDPSocket(family: family)
                try socket.bind(SocketAddress(ip: bindAddress ?? (family == .ipv4 ? "127.0.0.1" : "::1"), port: 0)!)
                try socket.enableReceiveTrafficMark()
                try socket.enableReceiveTimestamps()
                try socket.enableDropCounter()
                if gro { try socket.enableGRO() }
                socket.setReceiveBufferSize(receiveBuffer)
                let port = try socket.localAddress().port
                portBox.withLock { $0 = (port, nil) }
                ready.signal()
                if pauseBeforeReading > 0 { Thread.sleep(forTimeInterval: pauseBeforeReading) }
                let loop = try DatagramReceiveLoop(socket: socket, bufferCount: 256, maxPayload: 65_536)
                try loop.run(shouldStop: { stop.load(ordering: .relaxed) }) { datagram in
                    let index = checkPattern(datagram.payload, size: size, limit: expected)
                    collected.withLock { state in
                        state.received += 1
                        state.bytes += datagram.payload.count
                        if recordArrivals {
                            state.arrivals.append((datagram.timestampNanoseconds, datagram.payload.count))
                        }
                        if let index {
                            if state.seen[index] { state.duplicates += 1 } else { state.seen[index] = true }
                        } else {
                            state.corrupt += 1
                        }
                    }
                    count.add(1, ordering: .relaxed)
                }
                let counters = loop.receiver.counters
                collected.withLock { $0.counters = counters }
            } catch {
                portBox.withLock { $0.1 = "\(error)" }
                ready.signal()
            }
            finished.signal()
        }
        thread.start()
        ready.wait()
    }

    /// The bound port (0 if the thread failed).
    var port: UInt16 { portBox.withLock { $0.0 } }
    /// The thread's error, if it failed.
    var failure: String? { portBox.withLock { $0.1 } }

    /// Waits until `expected` datagrams arrived or `seconds` passed, then stops the thread.
    func finish(expected: Int, seconds: Double) -> Collected {
        let deadline = Date().addingTimeInterval(seconds)
        while count.load(ordering: .relaxed) < expected && Date() < deadline && failure == nil {
            Thread.sleep(forTimeInterval: 0.005)
        }
        // A little longer, so duplicates or strays would be seen.
        Thread.sleep(forTimeInterval: 0.05)
        stop.store(true, ordering: .relaxed)
        finished.wait()
        return collected.withLock { $0 }
    }
}

/// Runs a command and returns its exit status.
@discardableResult
func shell(_ command: String) -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    process.arguments = ["-c", command]
    do { try process.run() } catch { return -1 }
    process.waitUntilExit()
    return process.terminationStatus
}

/// The largest burst above a rate line in arrivals sorted by time: max over i <= j of
/// bytes(i...j) - R/8 * (t_j - t_i), in one pass. A token bucket of depth Q at rate R
/// never lets it exceed Q.
func largestBurstAboveRate(_ arrivals: [(timestamp: Int64, bytes: Int)], rateBitsPerSecond rate: Double) -> Double {
    guard let origin = arrivals.first?.timestamp else { return 0 }
    var worstExcess = 0.0
    var bestStart = -Double.infinity  // max over i of (R/8 * t_i - bytesBefore(i))
    var cumulative = 0.0
    let bytesPerNanosecond = rate / 8e9
    for arrival in arrivals {
        let t = Double(arrival.timestamp - origin)
        bestStart = max(bestStart, bytesPerNanosecond * t - cumulative)
        cumulative += Double(arrival.bytes)
        worstExcess = max(worstExcess, cumulative - bytesPerNanosecond * t + bestStart)
    }
    return worstExcess
}
