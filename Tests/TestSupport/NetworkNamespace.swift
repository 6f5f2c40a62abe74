import CNetworkNamespace
import Foundation
import Glibc
import Synchronization

/// Network namespaces made with `ip netns add NAME` (the lab's hosts).
public enum NetworkNamespace {
    /// A failed `open` or `setns`: which call, on what, and the C library's text for its errno.
    public struct Failure: Error, CustomStringConvertible {
        /// The one-line description, e.g. `setns lab-a: Operation not permitted`.
        public let description: String
    }

    /// Moves the calling thread into the named namespace; its new sockets live there.
    /// `setns(2)` on `/var/run/netns/NAME`. Needs CAP_SYS_ADMIN.
    public static func enter(_ name: String) throws {
        let path = "/var/run/netns/\(name)"
        let fd = try retryingEINTR("open \(path)") { open(path, O_RDONLY | O_CLOEXEC) }
        defer { close(fd) }
        _ = try retryingEINTR("setns \(name)") { cnn_setns_net(fd) }
    }

    private static func retryingEINTR(_ operation: @autoclosure () -> String, _ call: () -> Int32) throws -> Int32 {
        while true {
            let result = call()
            if result >= 0 { return result }
            let code = errno
            if code != EINTR { throw Failure(description: "\(operation()): \(String(cString: strerror(code)))") }
        }
    }
}

/// Runs `body` on a fresh thread (optionally inside a network namespace: `setns` moves only the
/// calling thread, and sockets made there stay in it) and waits for it.
public func onThread<T: Sendable>(namespace: String? = nil, _ body: @escaping @Sendable () throws -> T) throws -> T {
    let result = Mutex<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        let outcome: Result<T, any Error>
        do {
            if let namespace { try NetworkNamespace.enter(namespace) }
            outcome = .success(try body())
        } catch {
            outcome = .failure(error)
        }
        result.withLock { $0 = outcome }
        done.signal()
    }
    thread.stackSize = 8 << 20
    thread.start()
    done.wait()
    return try result.withLock { $0! }.get()
}
