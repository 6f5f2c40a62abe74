import Glibc
import SecureRTP
import UringIO

/// One end's SRTP: an outbound session (what it sends, RTP or RTCP) and an inbound one
/// (what it receives), both under the stream's master key. Owned by the engine thread.
final class SRTPEndpoint {
    let outbound: SRTPSession
    let inbound: SRTPSession

    /// Both sessions for `key`; a failure is a one-line `SystemError` (no key material in it)
    /// so that the engine's typed throws carry it.
    init(key: SRTPMasterKey) throws(SystemError) {
        do {
            outbound = try SRTPSession(key: key, direction: .outbound)
            inbound = try SRTPSession(key: key, direction: .inbound)
        } catch {
            throw SystemError("cannot start SRTP", errno: EPROTONOSUPPORT, context: error.description)
        }
    }

    var suite: SRTPSuite { outbound.suite }

    /// Both directions' counters.
    var stats: SRTPStats {
        var total = outbound.stats
        total.add(inbound.stats)
        return total
    }

    /// A protected copy of an RTCP compound packet, nil when it cannot be (counted).
    func protectRTCP(_ packet: [UInt8]) -> [UInt8]? { outbound.protect(packet, kind: .rtcp) }
}

@available(*, unavailable, message: "owned by the engine thread")
extension SRTPEndpoint: Sendable {}

/// A sender's datagrams through SRTP: each datagram the inner producer writes (RTP media or
/// a path-MTU probe) is protected in place in its send slot. The inner producer plans for
/// the tag (its budget is the path's less `overhead`); this adds the tag to every size.
final class SRTPProtectingProducer: DatagramProducer {
    private let inner: DatagramProducer
    private let session: SRTPSession
    private let overhead: Int

    init(_ inner: DatagramProducer, session: SRTPSession) {
        self.inner = inner
        self.session = session
        overhead = session.overhead(.rtp)
    }

    func peekDatagram() -> PendingDatagram? {
        guard var datagram = inner.peekDatagram() else { return nil }
        datagram.size += overhead
        return datagram
    }

    func writeDatagram(into buffer: UnsafeMutableRawBufferPointer) {
        let length = buffer.count - overhead
        inner.writeDatagram(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<length]))
        if session.protect(buffer, length: length, kind: .rtp) == nil {
            // Never expected (libsrtp2 refuses only past 2^48 packets): the slot must not
            // carry the plaintext, so it goes out as zeros, which no receiver authenticates.
            buffer.initializeMemory(as: UInt8.self, repeating: 0)
        }
    }

    var pendingBytes: Int {
        let bytes = inner.pendingBytes
        return bytes == .max ? .max : bytes + overhead
    }

    func readyIn(now: Int64) -> Int64? { inner.readyIn(now: now) }
}

@available(*, unavailable, message: "owned by the sender's engine thread")
extension SRTPProtectingProducer: Sendable {}
