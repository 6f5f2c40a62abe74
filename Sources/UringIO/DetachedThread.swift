import Glibc

/// Starts an operating-system thread that runs `body` once and ends (pthread_create with
/// default attributes, detached): the threads of the sources, the stall watch, the stats
/// writers and the progress line of `MediaSources` and `streamer`, without Foundation's `Thread`
/// (`streamer` does not link Foundation: results/profile.md section 35).
///
/// ```swift
/// startDetachedThread { watchUntilStopped() }
/// ```
///
/// A thread the system cannot start (`pthread_create` fails: EAGAIN, out of threads or memory)
/// stops the process with the error: every caller's work depends on the thread running.
public func startDetachedThread(_ body: @escaping @Sendable () -> Void) {
    let context = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    var thread = pthread_t()
    let status = pthread_create(&thread, nil, { context in
        let body = Unmanaged<ThreadBody>.fromOpaque(context!).takeRetainedValue()
        body.run()
        return nil
    }, context)
    guard status == 0 else {
        Unmanaged<ThreadBody>.fromOpaque(context).release()
        fatalError("pthread_create: \(String(cString: strerror(status)))")
    }
    pthread_detach(thread)
}

/// The closure a new thread runs, boxed to cross pthread_create's `void *`.
private final class ThreadBody: Sendable {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}
