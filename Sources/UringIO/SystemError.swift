import Glibc

/// A failed system or liburing call: which call, on what, and the errno it gave.
///
/// The description is one line meant for users, e.g.
/// `cannot bind 0.0.0.0:5004: Address already in use (another receiver running?)`.
public struct SystemError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The C call that failed, e.g. `sendmsg` or `io_uring_queue_init`.
    public let operation: String
    /// The errno value (positive).
    public let errno: Int32
    /// The errno, typed.
    public var code: Errno { Errno(errno) }
    /// What the call was applied to (an address, a socket option), if known.
    public let context: String?

    /// Makes an error for `operation` failing with the positive `errno`.
    public init(_ operation: String, errno: Int32, context: String? = nil) {
        self.operation = operation
        self.errno = errno
        self.context = context
    }

    /// The C library's text for the errno.
    public var reason: String { code.description }

    /// A hint for the errnos a user can act on.
    public var hint: String? {
        switch errno {
        case EADDRINUSE: return "another receiver running?"
        case EACCES, EPERM: return "needs more privileges"
        case ECONNREFUSED: return "nothing is listening there"
        case ENETUNREACH, EHOSTUNREACH: return "no route to that address"
        case ENOSYS: return "io_uring is not available in this kernel"
        case EMSGSIZE: return "datagram larger than the path allows"
        default: return nil
        }
    }

    public var description: String {
        var text = "\(operation)"
        if let context { text += " \(context)" }
        text += ": \(reason)"
        if let hint { text += " (\(hint))" }
        return text
    }
}

/// Runs a libc call that returns -1 and sets errno until it is not interrupted (EINTR):
/// its result, or the errno it failed with. The one EINTR loop of this module.
@inline(__always)
func valueOrErrno<T: BinaryInteger>(_ call: () -> T) -> Result<T, Errno> {
    while true {
        let result = call()
        if result >= 0 { return .success(result) }
        let code = Glibc.errno
        if code != EINTR { return .failure(Errno(code)) }
    }
}

/// Runs a libc call that returns -1 and sets errno, retrying on EINTR; any other errno
/// throws, named after `operation`.
@inline(__always)
func retryingEINTR<T: BinaryInteger>(
    _ operation: String, context: @autoclosure () -> String? = nil, _ call: () -> T
) throws(SystemError) -> T {
    switch valueOrErrno(call) {
    case .success(let result): return result
    case .failure(let code): throw SystemError(operation, errno: code.rawValue, context: context())
    }
}

/// Like `retryingEINTR`, but nil when the call would block (EAGAIN / EWOULDBLOCK: a
/// non-blocking socket with nothing to do, or a receive timeout).
@inline(__always)
func retryingEINTRUnlessWouldBlock<T: BinaryInteger>(
    _ operation: String, context: @autoclosure () -> String? = nil, _ call: () -> T
) throws(SystemError) -> T? {
    switch valueOrErrno(call) {
    case .success(let result): return result
    case .failure(let code) where code == .wouldBlock: return nil
    case .failure(let code): throw SystemError(operation, errno: code.rawValue, context: context())
    }
}

/// Turns liburing's negative-errno result into a typed error.
@inline(__always)
func checkLiburing(_ operation: String, _ result: Int32, context: String? = nil) throws(SystemError) -> Int32 {
    if result < 0 { throw SystemError(operation, errno: -result, context: context) }
    return result
}
