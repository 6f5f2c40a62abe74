import Glibc

/// A file or pipe a source reads from: an open descriptor, closed when the last reference
/// goes (standard input is never closed). What ``MediaSource/y4m(_:frameRate:)`` reads.
///
/// ```swift
/// guard let file = InputFile(readingAtPath: "clip.y4m") else { throw ... }
/// source.start(.y4m(file, frameRate: nil), frameRate: 30, sink: sender)
/// ```
public final class InputFile: Sendable {
    /// The descriptor; valid while this object lives.
    public let descriptor: Int32
    private let closesOnDeinit: Bool

    /// Standard input (descriptor 0), left open.
    public static let standardInput = InputFile(descriptor: 0, closesOnDeinit: false)

    /// Opens `path` for reading (`O_RDONLY | O_CLOEXEC`); nil when it cannot be opened (no
    /// such file, no permission).
    public init?(readingAtPath path: String) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        self.descriptor = descriptor
        closesOnDeinit = true
    }

    /// Reads from `descriptor`, already open for reading (a pipe's end, a socket); with
    /// `closesOnDeinit` this object owns it and closes it when the last reference goes.
    public init(descriptor: Int32, closesOnDeinit: Bool) {
        self.descriptor = descriptor
        self.closesOnDeinit = closesOnDeinit
    }

    deinit {
        if closesOnDeinit { close(descriptor) }
    }

    /// read(2) of at most `buffer.count` bytes into `buffer`, retried on EINTR: the byte count,
    /// 0 at the end, -1 on an error (`errno` says which).
    func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        while true {
            let count = Glibc.read(descriptor, buffer.baseAddress, buffer.count)
            if count >= 0 || errno != EINTR { return count }
        }
    }
}
