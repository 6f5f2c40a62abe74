import Glibc
import UringIO

/// A configuration the engine cannot work with: what is set, and what is wrong with it.
///
/// Apart from `SystemError` (a C call that failed): nothing was called, the values do not
/// fit. The description is one line, e.g. `flows 0 flows (1 to 255): Invalid argument`.
public struct ConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What is configured, e.g. `flows`, `packetizer`, `send slot`.
    public let setting: String
    /// What is wrong with it, e.g. `MTU 40 is too small`.
    public let problem: String
    /// The class of the problem, as an errno names it: `EINVAL` for a value out of range,
    /// `EMSGSIZE` for a datagram too large.
    public let code: Errno

    /// Makes an error for `setting` whose value has `problem` (an invalid value unless `code` says otherwise).
    public init(_ setting: String, _ problem: String, code: Errno = Errno(EINVAL)) {
        self.setting = setting
        self.problem = problem
        self.code = code
    }

    /// Worded like a `SystemError` of the same errno, so the one-line messages read as they always have.
    public var description: String { SystemError(setting, errno: code.rawValue, context: problem).description }
}
