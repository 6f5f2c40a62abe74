import Glibc

/// An errno value with a readable description (the C library's `strerror` text), as
/// swift-system's `Errno`: the typed key of the send and receive error counters.
public struct Errno: RawRepresentable, Error, Hashable, Sendable, CustomStringConvertible {
    /// The errno value (positive).
    public let rawValue: Int32

    /// Wraps the positive errno `rawValue`.
    @inline(__always)
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// Wraps the positive errno `code`.
    @inline(__always)
    public init(_ code: Int32) { self.rawValue = code }

    /// The C library's text for it, e.g. `Connection refused`. `strerror(3)`.
    public var description: String { String(cString: strerror(rawValue)) }

    /// `EAGAIN` (`EWOULDBLOCK`): a non-blocking call found nothing to do, or a receive timed out.
    public static let wouldBlock = Errno(EAGAIN)
}
