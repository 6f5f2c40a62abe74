import Foundation
import StreamEngine
import Synchronization
import UringIO

/// A bad command line: printed as one line, exit 2.
struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ text: String) { description = text }
}

/// Walks `--name value` arguments.
struct ArgumentReader {
    private var arguments: [String]
    private var index = 0
    init(_ arguments: [String]) { self.arguments = arguments }

    mutating func next() -> String? {
        guard index < arguments.count else { return nil }
        defer { index += 1 }
        return arguments[index]
    }

    mutating func value(for option: String) throws -> String {
        guard let value = next() else { throw UsageError("\(option) needs a value") }
        return value
    }
}

/// Parses `4M`, `500k`, `1.5G`, `2000000` into bits per second.
func parseRate(_ text: String, option: String) throws -> Double {
    let multipliers: [Character: Double] = ["k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6, "g": 1e9, "G": 1e9]
    var number = Substring(text)
    var multiplier = 1.0
    if let last = number.last, let factor = multipliers[last] {
        multiplier = factor
        number = number.dropLast()
    }
    guard let value = Double(number), value > 0, value.isFinite else {
        throw UsageError("\(option): '\(text)' is not a rate (e.g. 4M, 500k)")
    }
    return value * multiplier
}

func parsePositiveInt(_ text: String, option: String, range: ClosedRange<Int> = 1...Int.max) throws -> Int {
    guard let value = Int(text), range.contains(value) else {
        throw UsageError("\(option): '\(text)' must be a whole number in \(range.lowerBound)...\(range.upperBound)")
    }
    return value
}

func parseSeconds(_ text: String, option: String) throws -> Double {
    guard let value = Double(text), value > 0, value.isFinite else {
        throw UsageError("\(option): '\(text)' must be a positive number of seconds")
    }
    return value
}

func parseAddress(_ text: String, option: String, defaultHost: String? = nil) throws -> SocketAddress {
    do { return try SocketAddress.parse(text, defaultHost: defaultHost) } catch { throw UsageError("\(option): \(error)") }
}

/// Prints a line to stderr.
func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

/// Writes `object` as JSON to a path or `-` (stdout).
func writeJSON(_ object: [String: Any], to path: String) throws {
    let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
    if path == "-" {
        FileHandle.standardOutput.write(data)
        FileHandle.standardOutput.write(Data("\n".utf8))
    } else {
        try data.write(to: URL(fileURLWithPath: path))
    }
}

/// SIGINT/SIGTERM: the first asks for a clean stop, the second exits at once.
final class SignalTrap {
    private let sources: [DispatchSourceSignal]
    init(onFirst: @escaping @Sendable () -> Void) {
        let count = Atomic<Int>(0)
        var made: [DispatchSourceSignal] = []
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler {
                if count.add(1, ordering: .relaxed).newValue == 1 { onFirst() } else { exit(130) }
            }
            source.resume()
            made.append(source)
        }
        sources = made
    }
}

/// SIGHUP: runs `action` each time (on a dispatch queue, never in the signal handler).
final class HangupTrap {
    private let source: DispatchSourceSignal
    init(action: @escaping @Sendable () -> Void) {
        signal(SIGHUP, SIG_IGN)
        source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global())
        source.setEventHandler(handler: action)
        source.resume()
    }
}

/// Rewrites a stats JSON file every `interval` seconds (atomically: temp file, rename),
/// so a script can sample a running stream.
final class StatsWriter: Sendable {
    private let running = MutexBox<Bool>(true)
    private let finished = DispatchSemaphore(value: 0)
    private let started: Bool
    init(path: String?, interval: Double?, snapshot: @escaping @Sendable () -> [String: Any]) {
        guard let path, let interval, path != "-" else { started = false; return }
        started = true
        let running = self.running
        let finished = self.finished
        Thread {
            defer { finished.signal() }
            while running.get() {
                usleep(useconds_t(interval * 1_000_000))
                guard running.get(),
                      let data = try? JSONSerialization.data(withJSONObject: snapshot(), options: [.sortedKeys])
                else { continue }
                let temporary = path + ".tmp"
                if FileManager.default.createFile(atPath: temporary, contents: data) { rename(temporary, path) }
            }
        }.start()
    }
    /// Stops the writer and waits for it, so no periodic write can land after the final one.
    func stop() {
        running.set(false)
        if started { finished.wait() }
    }
}
