internal import CSRTP
import Glibc

/// libsrtp2's srtp_init, run once per process before the first session.
private let libraryStatus: Int32 = csrtp_init()

/// Which way a session's packets go.
public enum SRTPDirection: Sendable, Hashable {
    /// Packets this end sends: `protect`.
    case outbound
    /// Packets this end receives: `unprotect`.
    case inbound
}

/// Whether a packet is RTP (SRTP) or an RTCP compound packet (SRTCP).
public enum SRTPPacketKind: Sendable, Hashable {
    /// An RTP packet.
    case rtp
    /// An RTCP compound packet.
    case rtcp
}

/// One end's SRTP state for one direction (libsrtp2 `srtp_t` with a wildcard SSRC policy):
/// every SSRC going that way shares the master key; each gets its own keystream, rollover
/// counter and replay window. Owned by one thread.
///
/// An inbound session keeps state only for SSRCs whose packets authenticated, and for at
/// most `maxSources` of them: memory stays bounded whatever arrives. A new one takes the place
/// of the one unused longest if that has been unused for `idleBeforeReplaced` (a sender started
/// again, with the key and a new SSRC, after earlier ones ended); otherwise it is refused.
public final class SRTPSession {
    /// The most SSRCs an inbound session keeps state for.
    public static let maxSources = 16
    /// How long an SSRC's state must have gone unused before a new SSRC may take its place
    /// (nanoseconds): a live stream uses its state at every packet and sender report.
    public static let idleBeforeReplaced: Int64 = 10_000_000_000
    /// Packets of reordering the replay check tolerates (libsrtp2's window).
    public static let replayWindow = 1024
    /// The largest packet `unprotect` takes (a UDP payload).
    public static let maxPacketSize = 65_536

    /// The suite.
    public let suite: SRTPSuite
    /// The direction.
    public let direction: SRTPDirection
    /// What this session did so far.
    public private(set) var stats: SRTPStats
    private let session: srtp_t
    /// Decrypted copies of received packets are made here (the receive buffers stay read-only).
    private let scratch: UnsafeMutableRawBufferPointer
    /// SSRCs with state in an inbound session (at most `maxSources`).
    private var sources: [UInt32] = []
    /// When each of `sources` last authenticated a packet (`CLOCK_MONOTONIC_COARSE` nanoseconds).
    private var lastUsed: [Int64] = []
    /// Added to the clock, for tests: time passing without waiting for it.
    var clockAdvance: Int64 = 0

    /// Makes a session with `key`. Throws when libsrtp2 cannot be initialised or refuses the
    /// suite (the AEAD suites need a libsrtp2 built with a crypto library that has GCM).
    public init(key: SRTPMasterKey, direction: SRTPDirection) throws(SRTPError) {
        guard libraryStatus == 0 else {
            throw SRTPError(libraryStatus == -1
                ? "SRTP: \(String(cString: csrtp_library_name())) could not be loaded"
                : "SRTP: libsrtp2 failed to initialise (status \(libraryStatus))")
        }
        var created: srtp_t?
        let status = key.material.withUnsafeBufferPointer {
            csrtp_create(&created, key.suite.shimNumber, $0.baseAddress, direction == .inbound ? 1 : 0,
                         UInt(Self.replayWindow))
        }
        guard status == 0, let created else {
            throw SRTPError("SRTP: libsrtp2 refused suite \(key.suite) (status \(status))")
        }
        suite = key.suite
        self.direction = direction
        session = created
        stats = SRTPStats(suite: key.suite)
        scratch = direction == .inbound
            ? .allocate(byteCount: Self.maxPacketSize + Int(SRTP_MAX_TRAILER_LEN), alignment: 16)
            : UnsafeMutableRawBufferPointer(start: nil, count: 0)
    }

    deinit {
        _ = csrtp_dealloc(session)
        scratch.deallocate()
    }

    /// Whether this libsrtp2 build can make sessions of `suite` (Debian's links NSS; GCM is
    /// checked, not assumed).
    public static func isSupported(_ suite: SRTPSuite) -> Bool {
        (try? SRTPSession(key: .random(suite: suite), direction: .outbound)) != nil
    }

    /// Bytes `protect` adds to a packet of `kind`.
    public func overhead(_ kind: SRTPPacketKind) -> Int { kind == .rtp ? suite.rtpOverhead : suite.rtcpOverhead }

    // MARK: - Outbound

    /// Protects the `length`-byte packet at the start of `buffer` in place, and returns its
    /// protected length (`length + overhead(kind)`), or nil (counted in `protectFailed`) when
    /// libsrtp2 refuses it or `buffer` has no room for the overhead.
    public func protect(_ buffer: UnsafeMutableRawBufferPointer, length: Int, kind: SRTPPacketKind) -> Int? {
        precondition(direction == .outbound, "protect on an inbound SRTP session")
        guard let base = buffer.baseAddress, length >= 12, buffer.count >= length + overhead(kind) else {
            stats.protectFailed += 1
            return nil
        }
        var size = Int32(length)
        let status = kind == .rtp ? csrtp_protect(session, base, &size) : csrtp_protect_rtcp(session, base, &size)
        guard status == 0, Int(size) <= buffer.count else {
            stats.protectFailed += 1
            return nil
        }
        if kind == .rtp { stats.rtpProtected += 1 } else { stats.rtcpProtected += 1 }
        return Int(size)
    }

    /// Protects a copy of `packet`; nil when it cannot be (counted).
    public func protect(_ packet: [UInt8], kind: SRTPPacketKind) -> [UInt8]? {
        // libsrtp2 may write up to SRTP_MAX_TRAILER_LEN past the packet (tag, MKI).
        var bytes = packet + [UInt8](repeating: 0, count: Int(SRTP_MAX_TRAILER_LEN))
        let size = bytes.withUnsafeMutableBytes { protect($0, length: packet.count, kind: kind) }
        guard let size else { return nil }
        bytes.removeLast(bytes.count - size)
        return bytes
    }

    // MARK: - Inbound

    /// Authenticates and decrypts a copy of `datagram` and passes the plaintext (valid only
    /// inside `body`) to `body`. Returns `body`'s result, or the reason the packet was
    /// dropped (counted in `stats.rejected`).
    public func unprotect<Result>(_ datagram: UnsafeRawBufferPointer, kind: SRTPPacketKind,
                                  _ body: (UnsafeRawBufferPointer) -> Result) -> Swift.Result<Result, SRTPRejection> {
        precondition(direction == .inbound, "unprotect on an outbound SRTP session")
        switch unprotectIntoScratch(datagram, kind: kind) {
        case .success(let length):
            return .success(body(UnsafeRawBufferPointer(rebasing: scratch[0..<length])))
        case .failure(let reason):
            stats.rejected[reason, default: 0] += 1
            return .failure(reason)
        }
    }

    /// `unprotect` on an array: the plaintext, or why it was dropped (counted).
    public func unprotect(_ datagram: [UInt8], kind: SRTPPacketKind) -> Swift.Result<[UInt8], SRTPRejection> {
        datagram.withUnsafeBytes { unprotect($0, kind: kind) { [UInt8]($0) } }
    }

    private func unprotectIntoScratch(_ datagram: UnsafeRawBufferPointer, kind: SRTPPacketKind) -> Swift.Result<Int, SRTPRejection> {
        // libsrtp2 reads the header (and for RTCP the trailer) before it checks anything:
        // packets too short for those, or not version 2, never reach it.
        let minimum = (kind == .rtp ? 12 : 8) + overhead(kind)
        guard datagram.count >= minimum, datagram.count <= Self.maxPacketSize,
              datagram[0] >> 6 == 2, let source = datagram.baseAddress, let target = scratch.baseAddress else {
            return .failure(.malformed)
        }
        target.copyMemory(from: source, byteCount: datagram.count)
        var size = Int32(datagram.count)
        let status = kind == .rtp ? csrtp_unprotect(session, target, &size) : csrtp_unprotect_rtcp(session, target, &size)
        guard status == 0 else { return .failure(Self.rejection(status)) }
        let ssrcOffset = kind == .rtp ? 8 : 4
        let ssrc = UnsafeRawBufferPointer(scratch).loadUnaligned(fromByteOffset: ssrcOffset, as: UInt32.self).bigEndian
        let now = Self.coarseNow() + clockAdvance
        if let index = sources.firstIndex(of: ssrc) {
            lastUsed[index] = now
        } else if sources.count < Self.maxSources {
            sources.append(ssrc)
            lastUsed.append(now)
        } else if let oldest = lastUsed.indices.min(by: { lastUsed[$0] < lastUsed[$1] }),
                  now - lastUsed[oldest] >= Self.idleBeforeReplaced {
            _ = csrtp_remove_stream(session, sources[oldest])
            sources[oldest] = ssrc
            lastUsed[oldest] = now
            stats.sourcesReplaced += 1
        } else {
            _ = csrtp_remove_stream(session, ssrc)  // libsrtp2 made its state on success: freed again
            return .failure(.tooManySources)
        }
        if kind == .rtp { stats.rtpUnprotected += 1 } else { stats.rtcpUnprotected += 1 }
        return .success(Int(size))
    }

    /// `CLOCK_MONOTONIC_COARSE` in nanoseconds (a few nanoseconds through the vDSO; its
    /// resolution, a few milliseconds, is plenty for `idleBeforeReplaced`).
    private static func coarseNow() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC_COARSE, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    private static func rejection(_ status: Int32) -> SRTPRejection {
        switch UInt32(bitPattern: status) {
        case srtp_err_status_auth_fail.rawValue, srtp_err_status_cipher_fail.rawValue: return .authFailed
        case srtp_err_status_replay_fail.rawValue, srtp_err_status_replay_old.rawValue: return .replayed
        case srtp_err_status_bad_param.rawValue, srtp_err_status_parse_err.rawValue: return .malformed
        default: return .failed
        }
    }
}

@available(*, unavailable, message: "an SRTP session is owned by one thread")
extension SRTPSession: Sendable {}
