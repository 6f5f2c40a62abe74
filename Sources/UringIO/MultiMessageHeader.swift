import Glibc

// No CLibURing here: the shim header includes <sys/socket.h> too, and a public type must
// come from Glibc, not from the internally imported shim.

/// One entry of a `sendmmsg` / `recvmmsg` vector: a `msghdr` and the byte count the
/// kernel fills in. Lays out exactly like C's `struct mmsghdr`.
public struct MultiMessageHeader {
    /// The message.
    public var header: msghdr
    /// Bytes sent or received for this message (set by the kernel).
    public var length: UInt32

    /// An empty entry.
    public init() {
        header = msghdr()
        length = 0
    }
}
