import CNetworkNamespace
import Glibc

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
