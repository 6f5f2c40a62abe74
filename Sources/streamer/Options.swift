import Dispatch
import Glibc
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
    // A switch, not a `[Character: Double]` literal: the dictionary's generic type was made at
    // run time at the first parse, ~0.2 ms of CPU per process (results/profile.md section 24).
    var number = Substring(text)
    var multiplier = 1.0
    let factor: Double? = switch number.utf8.last {
    case UInt8(ascii: "k"), UInt8(ascii: "K"): 1e3
    case UInt8(ascii: "m"), UInt8(ascii: "M"): 1e6
    case UInt8(ascii: "g"), UInt8(ascii: "G"): 1e9
    default: nil
    }
    if let factor {
        multiplier = factor
        number = number.dropLast()
    }
    guard let value = Double(number), value > 0, value.isFinite else {
        throw UsageError("\(option): '\(text)' is not a rate (e.g. 4M, 500k)")
    }
    return value * multiplier
}

/// A rate in bits per second as the options spell it: `4M`, `1.5M`, `500k`, `900`.
func formatRate(_ bitsPerSecond: Double) -> String {
    for (factor, suffix) in [(1e9, "G"), (1e6, "M"), (1e3, "k")] where bitsPerSecond >= factor {
        let value = (bitsPerSecond / factor * 1000).rounded() / 1000
        return (value == value.rounded() ? String(Int(value)) : String(value)) + suffix
    }
    return String(Int(bitsPerSecond.rounded()))
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

/// Writes `bytes` and a newline to `descriptor` (``writeAll(_:_:)``): the errno of a failure, or nil.
func writeLine(_ descriptor: Int32, _ bytes: [UInt8]) -> Int32? {
    var line = bytes
    line.append(UInt8(ascii: "\n"))
    return line.withUnsafeBytes { writeAll(descriptor, $0) }
}

/// Writes `object` as JSON, pretty-printed with sorted keys (``StatsJSON``), to a path or `-`
/// (stdout). A file is replaced whole (see ``replaceFile(_:with:)``): a reader never sees half of it.
func writeJSON(_ object: [String: Any], to path: String) throws {
    let data = try StatsJSON.data(object, pretty: true)
    if path == "-" {
        if let failure = writeLine(STDOUT_FILENO, data) {
            throw FileWriteError(description: "cannot write the stats to stdout: \(String(cString: strerror(failure)))")
        }
    } else {
        try replaceFile(path, with: data)
    }
}

private let temporaryNameCounter = Atomic<Int>(0)

/// Writes `data` to a temporary name in `path`'s directory and renames it over `path`, so
/// the file is always either the old version or the new one, complete. Each write has a
/// name of its own, so the periodic writer and the final write never share one.
func replaceFile(_ path: String, with data: [UInt8]) throws {
    // A device, a pipe or a terminal (`/dev/stdout`, a FIFO) is written in place: a rename over it
    // would replace the node itself with a regular file (as root, even one in /dev).
    var status = stat()
    if stat(path, &status) == 0 && status.st_mode & S_IFMT != S_IFREG {
        try writeFile(path, data, flags: O_WRONLY | O_CLOEXEC, naming: path)
        return
    }
    let serial = temporaryNameCounter.add(1, ordering: .relaxed).newValue
    let temporary = "\(path).\(getpid())-\(serial).tmp"
    try writeFile(temporary, data, flags: O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, naming: path)
    guard rename(temporary, path) == 0 else {
        let reason = String(cString: strerror(errno))
        unlink(temporary)
        throw UsageError("cannot write '\(path)': \(reason)")
    }
}

/// A file that could not be written: its path and the C library's reason (exit status 1).
struct FileWriteError: Error, CustomStringConvertible {
    let description: String
}

/// Opens `path` with `flags` and writes `data` to it with write(2); a failure names `name`,
/// the file the caller means (a file this call created is removed). Not Foundation's `Data.write(to:)`, which also syncs the file to disk
/// (fsync), which readers of a stats file replaced by a rename do not need, and cost the final
/// stats more than the JSON itself (results/profile.md section 21).
private func writeFile(_ path: String, _ data: [UInt8], flags: Int32, naming name: String) throws {
    let descriptor = open(path, flags, 0o666)
    guard descriptor >= 0 else { throw FileWriteError(description: "cannot write '\(name)': \(String(cString: strerror(errno)))") }
    defer { close(descriptor) }
    let failure = data.withUnsafeBytes { writeAll(descriptor, $0) }
    if let failure {
        if flags & O_CREAT != 0 { unlink(path) }
        throw FileWriteError(description: "cannot write '\(name)': \(String(cString: strerror(failure)))")
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
    /// Signalled by `stop`, so the writer does not sleep out the rest of its interval.
    private let wake = DispatchSemaphore(value: 0)
    private let started: Bool
    init(path: String?, interval: Double?, snapshot: @escaping @Sendable () -> [String: Any]) {
        guard let path, let interval, path != "-" else { started = false; return }
        started = true
        let running = self.running
        let finished = self.finished
        let wake = self.wake
        startDetachedThread {
            defer { finished.signal() }
            while running.get() {
                _ = wake.wait(timeout: .now() + interval)
                guard running.get(),
                      let data = try? StatsJSON.data(snapshot(), pretty: false)
                else { continue }
                try? replaceFile(path, with: data)
            }
        }
    }
    /// Stops the writer and waits for it, so no periodic write can land after the final one.
    /// Safe to call more than once, from any thread.
    func stop() {
        running.set(false)
        wake.signal()
        if started { finished.wait(); finished.signal() }
    }
}
