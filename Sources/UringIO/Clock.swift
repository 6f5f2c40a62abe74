import Glibc

/// Monotonic time in nanoseconds (`CLOCK_MONOTONIC`).
@inline(__always)
public func monotonicNanoseconds() -> Int64 {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
}

/// Wall-clock time in nanoseconds since the Unix epoch (`CLOCK_REALTIME`), the clock of
/// kernel receive timestamps.
@inline(__always)
public func realtimeNanoseconds() -> Int64 {
    var spec = timespec()
    clock_gettime(CLOCK_REALTIME, &spec)
    return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
}

/// CPU time this process has used so far (`getrusage(RUSAGE_SELF)`), user and system apart.
public struct ProcessCPUTime: Sendable, Equatable {
    /// User-mode CPU time in nanoseconds.
    public var userNanoseconds: Int64
    /// Kernel-mode CPU time in nanoseconds.
    public var systemNanoseconds: Int64

    /// Reads the process's CPU time now.
    public static func now() -> ProcessCPUTime { reading(__rusage_who_t(RUSAGE_SELF.rawValue)) }

    /// Reads the calling thread's CPU time now (`getrusage(RUSAGE_THREAD)`; Glibc names the
    /// constant, 1, only under _GNU_SOURCE).
    public static func currentThread() -> ProcessCPUTime { reading(__rusage_who_t(1)) }

    private static func reading(_ who: __rusage_who_t) -> ProcessCPUTime {
        var usage = rusage()
        getrusage(who, &usage)
        return ProcessCPUTime(
            userNanoseconds: Int64(usage.ru_utime.tv_sec) * 1_000_000_000 + Int64(usage.ru_utime.tv_usec) * 1000,
            systemNanoseconds: Int64(usage.ru_stime.tv_sec) * 1_000_000_000 + Int64(usage.ru_stime.tv_usec) * 1000)
    }

    /// The CPU time between two readings.
    public static func - (lhs: ProcessCPUTime, rhs: ProcessCPUTime) -> ProcessCPUTime {
        ProcessCPUTime(userNanoseconds: lhs.userNanoseconds - rhs.userNanoseconds,
                       systemNanoseconds: lhs.systemNanoseconds - rhs.systemNanoseconds)
    }
}

extension Duration {
    /// The duration in whole nanoseconds (rounded toward zero, saturating at `Int64.min` and
    /// `Int64.max`), the unit of the ring's timeouts and of `monotonicNanoseconds()`.
    // From the 128-bit attoseconds Duration keeps: ~47 instructions, where `components` (a
    // division into seconds first) took ~200; the congestion-controlled sender converts several
    // times a packet (results/profile.md section 58).
    public var nanoseconds: Int64 {
        let nanoseconds = attoseconds / 1_000_000_000
        guard let exact = Int64(exactly: nanoseconds) else { return nanoseconds < 0 ? .min : .max }
        return exact
    }
}
