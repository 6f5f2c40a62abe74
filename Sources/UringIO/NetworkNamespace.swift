import CLibURing
import Glibc

/// Network namespaces made with `ip netns add NAME` (the lab's hosts).
public enum NetworkNamespace {
    /// Moves the calling thread into the named namespace; its new sockets live there.
    /// `setns(2)` on `/var/run/netns/NAME`. Needs CAP_SYS_ADMIN.
    public static func enter(_ name: String) throws(SystemError) {
        let path = "/var/run/netns/\(name)"
        let fd = try retryingEINTR("open", context: path) { open(path, O_RDONLY | O_CLOEXEC) }
        defer { close(fd) }
        _ = try retryingEINTR("setns", context: name) { cu_setns_net(fd) }
    }
}
