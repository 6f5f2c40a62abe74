import Foundation
import Glibc
import UringIO

/// One measured combination: a send path against a receive path at a size and batch.
struct BenchCase: Hashable {
    let group: String
    let send: SendPath
    let receive: ReceivePath
    let size: Int
    let batch: Int
}

/// One round of one case: both halves' measurements.
struct RoundRecord {
    let planned: Int
    let sender: SenderMeasurement
    let receiver: ControlMessage
    let stalled: Bool

    var delivered: Int { receiver.int("delivered") }
    var intact: Bool {
        !stalled && sender.sent == planned && delivered == planned && sender.failed == 0
            && receiver.int("corrupt") == 0 && receiver.int("duplicates") == 0
    }
}

/// The sending side of a bench: drives rounds over the control channel, interleaving
/// the cases of each group (A B C A B C ...) after one warm-up round of each.
final class BenchDriver {
    let options: BenchOptions
    let control: ControlChannel
    let receiverHost: String
    private var ports: [ReceivePath: UInt16] = [:]
    private var nextRound: UInt32 = 0

    init(options: BenchOptions, control: ControlChannel, receiverHost: String) throws {
        self.options = options
        self.control = control
        self.receiverHost = receiverHost
        let ready = try control.expect("ready", timeoutMilliseconds: 15_000)
        for (name, port) in ready.fields {
            if let path = ReceivePath(rawValue: name), let number = UInt16(port) { ports[path] = number }
        }
    }

    /// The receive paths the receiver serves.
    var servedReceivePaths: [ReceivePath] { ReceivePath.allCases.filter { ports[$0] != nil } }

    /// The flow window for a size: half the receive buffer at about 1 KiB of kernel overhead per datagram.
    func windowLimit(size: Int, count: Int) -> Int {
        if let window = options.window { return window }
        return min(count, max(256, (options.receiveBuffer / 2) / (size + 1024)))
    }

    /// Runs one round of `benchCase` with `count` datagrams.
    func runRound(_ benchCase: BenchCase, count: Int) throws -> RoundRecord {
        nextRound += 1
        let round = nextRound
        guard let port = ports[benchCase.receive],
              let destination = SocketAddress(ip: receiverHost, port: port) else {
            throw BenchError.runtime("the receiver does not serve \(benchCase.receive.rawValue)")
        }
        let limit = windowLimit(size: benchCase.size, count: count)
        let step = max(32, limit / 8)
        try control.send("round id=\(round) path=\(benchCase.receive.rawValue) count=\(count) size=\(benchCase.size) step=\(step)")
        _ = try control.expect("started", timeoutMilliseconds: 10_000)
        let window = FlowWindow(control: control, round: round, limit: limit)
        let spec = SendRound(path: benchCase.send, round: round, count: count, size: benchCase.size, batch: benchCase.batch)
        let sender = try BenchSender.run(spec, to: destination, window: window)
        var done = window.pendingDone
        if done == nil {
            do {
                done = try control.expect("done", timeoutMilliseconds: FlowWindow.stallMilliseconds)
            } catch {
                // Datagrams are missing: stop the round and take what arrived.
                try control.send("stop id=\(round)")
                done = try control.expect("done", timeoutMilliseconds: 10_000)
            }
        }
        return RoundRecord(planned: count, sender: sender, receiver: done!, stalled: window.stalled)
    }

    /// Runs the cases of one group: a warm-up round each, then `repeats` interleaved passes.
    func runGroup(_ cases: [BenchCase], count: Int, repeats: Int, label: String) throws -> [BenchCase: [RoundRecord]] {
        var records: [BenchCase: [RoundRecord]] = [:]
        progress("[\(label)] warm-up: \(cases.count) cases x \(max(1000, count / 5)) datagrams")
        for benchCase in cases { _ = try runRound(benchCase, count: max(1000, count / 5)) }
        for pass in 1...repeats {
            progress("[\(label)] pass \(pass)/\(repeats): \(cases.count) cases x \(count) datagrams")
            for benchCase in cases {
                let record = try runRound(benchCase, count: count)
                if !record.intact {
                    progress("[\(label)] \(benchCase.send.rawValue) -> \(benchCase.receive.rawValue): NOT INTACT "
                             + "(sent \(record.sender.sent), delivered \(record.delivered) of \(count)) "
                             + (record.sender.note ?? ""))
                }
                records[benchCase, default: []].append(record)
            }
        }
        return records
    }

    func finish() { try? control.send("quit") }
}

@available(*, unavailable, message: "a driver is used by one thread")
extension BenchDriver: Sendable {}

/// A progress line on stderr.
func progress(_ text: String) {
    FileHandle.standardError.write(Data(("bench: " + text + "\n").utf8))
}
