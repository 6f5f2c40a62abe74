import UringIO

/// Why datagrams of a flow did not go out: the key of `SenderStats.errors`.
///
/// Its description is the text the stats JSON has always used as the key: the C library's
/// text for a send's errno (`Connection refused`), or `redirect: ` / `rebind: ` and the failed call.
public enum SendFailure: Hashable, Sendable, CustomStringConvertible {
    /// The kernel refused sends with this errno (counted per datagram).
    case send(Errno)
    /// Pointing the flow at a new destination failed (`MediaSender.redirect`; counted per attempt).
    case redirect(SystemError)
    /// Connecting the flow's sockets again to take a new source address failed (counted per attempt).
    case rebind(SystemError)

    /// The stats key: the errno's text, or `redirect: ` / `rebind: ` and the failed call.
    public var description: String {
        switch self {
        case .send(let code): return code.description
        case .redirect(let error): return "redirect: \(error)"
        case .rebind(let error): return "rebind: \(error)"
        }
    }
}
