import Glibc
import UringIO

/// A line-based control channel between the sending and the receiving half: over the
/// receiver child's stdin/stdout pipes when `bench` runs both, or over one TCP
/// connection when the halves run on different hosts.
///
/// Messages are one line each: a verb and `key=value` fields, e.g.
/// `round id=3 path=uring-gro count=200000 size=1200 step=2048`.
final class ControlChannel {
    private let readFD: Int32
    private let writeFD: Int32
    private var pending: [UInt8] = []

    init(readFD: Int32, writeFD: Int32) {
        self.readFD = readFD
        self.writeFD = writeFD
    }

    /// Writes one line.
    func send(_ line: String) throws(BenchError) {
        var bytes = Array((line + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let rc = bytes.withUnsafeMutableBytes { write(writeFD, $0.baseAddress! + offset, $0.count - offset) }
            if rc < 0 {
                if errno == EINTR { continue }
                throw BenchError.runtime("control channel write failed: \(String(cString: strerror(errno)))")
            }
            offset += rc
        }
        bytes.removeAll()
    }

    /// The next line, waiting at most `timeoutMilliseconds` (-1: forever); nil on timeout.
    /// Throws when the other side closed the channel.
    func receive(timeoutMilliseconds: Int32) throws(BenchError) -> ControlMessage? {
        let deadline = monotonicNanoseconds() + Int64(timeoutMilliseconds) * 1_000_000
        while true {
            if let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: pending[..<newline], as: UTF8.self)
                pending.removeSubrange(...newline)
                return ControlMessage(line)
            }
            var wait = timeoutMilliseconds
            if timeoutMilliseconds >= 0 {
                let left = deadline - monotonicNanoseconds()
                if left <= 0 { return nil }
                wait = Int32(max(1, left / 1_000_000))
            }
            var descriptor = pollfd(fd: readFD, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, wait)
            if ready < 0 && errno != EINTR {
                throw BenchError.runtime("control channel poll failed: \(String(cString: strerror(errno)))")
            }
            if ready <= 0 { continue }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = chunk.withUnsafeMutableBytes { read(readFD, $0.baseAddress!, $0.count) }
            if count < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw BenchError.runtime("control channel read failed: \(String(cString: strerror(errno)))")
            }
            if count == 0 { throw BenchError.runtime("control channel closed by the other side") }
            pending.append(contentsOf: chunk[..<count])
        }
    }

    /// Waits for a message with `verb` (others are passed to `other`, if given, or dropped).
    func expect(_ verb: String, timeoutMilliseconds: Int32,
                other: (ControlMessage) -> Void = { _ in }) throws(BenchError) -> ControlMessage {
        let deadline = monotonicNanoseconds() + Int64(timeoutMilliseconds) * 1_000_000
        while true {
            let left = Int32(max(0, (deadline - monotonicNanoseconds()) / 1_000_000))
            guard let message = try receive(timeoutMilliseconds: left) else {
                throw BenchError.runtime("no '\(verb)' from the receiver within \(timeoutMilliseconds) ms")
            }
            if message.verb == "error" {
                throw BenchError.runtime("receiver: \(message.fields["text"] ?? message.line)")
            }
            if message.verb == verb { return message }
            other(message)
        }
    }
}

@available(*, unavailable, message: "a control channel is used by one thread")
extension ControlChannel: Sendable {}

/// One control line: `verb key=value key=value`.
struct ControlMessage {
    let line: String
    let verb: String
    let fields: [String: String]

    init(_ line: String) {
        self.line = line
        let words = line.split(separator: " ")
        verb = words.first.map(String.init) ?? ""
        var fields: [String: String] = [:]
        for word in words.dropFirst() {
            guard let equals = word.firstIndex(of: "=") else { continue }
            fields[String(word[..<equals])] = String(word[word.index(after: equals)...])
        }
        self.fields = fields
    }

    func int(_ key: String) -> Int { fields[key].flatMap { Int($0) } ?? 0 }
}

/// A failure of the bench: a bad argument (exit 2) or a runtime problem (exit 1).
enum BenchError: Error, CustomStringConvertible {
    case usage(String)
    case runtime(String)

    var description: String {
        switch self {
        case .usage(let text), .runtime(let text): return text
        }
    }
}
