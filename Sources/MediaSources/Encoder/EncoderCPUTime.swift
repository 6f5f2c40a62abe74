import Glibc
import Synchronization
import UringIO

/// The CPU time x265 takes in this process, apart from everything else: the time of the
/// threads that call `x265_encoder_open`, `x265_encoder_encode` and `x265_encoder_close`, inside
/// those calls (`CLOCK_THREAD_CPUTIME_ID` before and after), plus x265's own threads (its frame encoder, worker pool and lookahead), which it
/// starts itself in `x265_encoder_open`.
///
/// x265 3.5 does not account its CPU, and its threads are not ours to name; but a Linux thread
/// starts with its creator's name. So the thread that opens an encoder is named `x265-enc-N`
/// for the duration of `x265_encoder_open` (then named back): every thread x265 starts there
/// carries that name, which `ps -L -o tid,comm,time -p PID` shows, and their time is read from
/// `/proc/self/task/*/schedstat` (nanoseconds run; `stat`'s clock ticks where that is missing).
/// When an encoder closes, its threads' time is kept before they exit. x265 3.5 starts no thread
/// after `x265_encoder_open` (checked in `/proc/PID/task/*/comm` during a run).
public enum EncoderCPUTime {
    /// Nanoseconds of closed encoders' threads and of every encode call so far.
    private static let settled = Mutex<Int64>(0)
    /// Numbers the encoders, for their threads' names.
    private static let opened = Atomic<Int>(0)
    /// The prefix of the name x265's threads carry.
    static let threadNamePrefix = "x265-enc-"

    /// x265's CPU time in this process so far, in seconds (user + system): encode calls on the
    /// calling threads, and x265's own threads, of open and of closed encoders.
    public static var seconds: Double {
        settled.withLock { Double($0 + threadNanoseconds(named: { $0.hasPrefix(threadNamePrefix) })) / 1e9 }
    }

    /// Runs `open` (`x265_encoder_open`) with the calling thread named for the encoder, so the
    /// threads x265 starts carry that name, and counts the call's time; returns what `open`
    /// made and the name.
    static func opening<T>(_ open: () -> T) -> (T, threadName: String) {
        let name = threadNamePrefix + String(opened.wrappingAdd(1, ordering: .relaxed).newValue)
        // pthread_setname_np needs _GNU_SOURCE, which Glibc's module does not define: the same
        // through /proc/thread-self/comm.
        let path = "/proc/thread-self/comm"
        let previous = contents(ofFile: path).map { name in
            String(name[..<(name.firstIndex(of: "\n") ?? name.endIndex)])
        }
        let named = previous != nil && setThreadName(name, path: path)
        let result = measuring(open)
        if named, let previous { _ = setThreadName(previous, path: path) }
        return (result, name)
    }

    /// Writes the calling thread's name (at most 15 bytes) into its `comm` file.
    private static func setThreadName(_ name: String, path: String) -> Bool {
        let file = Glibc.open(path, O_WRONLY | O_CLOEXEC)
        guard file >= 0 else { return false }
        defer { close(file) }
        let bytes = Array(name.utf8.prefix(15))
        return write(file, bytes, bytes.count) == bytes.count
    }

    /// Runs `close` (`x265_encoder_close`, which ends the encoder's threads) after keeping the
    /// time of the threads named `threadName`, and counts the call's time.
    static func closing(threadName: String, _ close: () -> Void) {
        settled.withLock { total in
            let before = threadCPUNanoseconds()
            total += threadNanoseconds(named: { $0 == threadName })
            close()
            total += threadCPUNanoseconds() - before
        }
    }

    /// Runs one encode call (`x265_encoder_encode`) and adds the calling thread's CPU time in it.
    static func measuring<T>(_ call: () -> T) -> T {
        let before = threadCPUNanoseconds()
        let result = call()
        let spent = threadCPUNanoseconds() - before
        settled.withLock { $0 += spent }
        return result
    }

    /// The calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`).
    private static func threadCPUNanoseconds() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    /// CPU time of this process's threads whose name passes `matches`: the nanoseconds the
    /// scheduler ran each (`/proc/self/task/TID/schedstat`, first field), else user + system
    /// from `/proc/self/task/TID/stat` (fields 14 and 15 after the name in parentheses), in
    /// clock ticks of 10 ms: truncated per thread, that lost up to 30 ms of x265's three
    /// threads in a run (6 µs per packet of a 10 s stream at 30 fps), which then counted as
    /// "everything but the encoder".
    static func threadNanoseconds(named matches: (String) -> Bool) -> Int64 {
        let ticksPerSecond = Int64(max(sysconf(Int32(_SC_CLK_TCK)), 1))
        var nanoseconds: Int64 = 0
        for task in entries(ofDirectory: "/proc/self/task") {
            guard let stat = contents(ofFile: "/proc/self/task/\(task)/stat"),
                  let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")") else { continue }
            guard matches(String(stat[stat.index(after: open)..<close])) else { continue }
            if let schedstat = contents(ofFile: "/proc/self/task/\(task)/schedstat"),
               let runtime = schedstat.split(separator: " ").first.flatMap({ Int64($0) }) {
                nanoseconds += runtime
                continue
            }
            // After the name: state (field 3), ..., utime (14), stime (15).
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 12, let user = Int64(fields[11]), let system = Int64(fields[12]) else { continue }
            nanoseconds += (user + system) * 1_000_000_000 / ticksPerSecond
        }
        return nanoseconds
    }

    /// A /proc file's text (nil when it cannot be read).
    private static func contents(ofFile path: String) -> String? {
        contentsOfFile(atPath: path, limit: 4096).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The names in a directory, `.` and `..` left out (empty when it cannot be opened).
    private static func entries(ofDirectory path: String) -> [String] {
        guard let directory = opendir(path) else { return [] }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}
