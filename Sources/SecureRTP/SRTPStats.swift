/// Why a received SRTP or SRTCP packet was dropped before anything else saw it.
public enum SRTPRejection: String, Error, CaseIterable, Sendable, Hashable {
    /// The authentication tag did not match (no key, a wrong key, or a changed packet).
    case authFailed
    /// A packet index already seen, or too old for the replay window.
    case replayed
    /// Too short for its header and tag, not RTP version 2, or refused by libsrtp2 as malformed.
    case malformed
    /// An authenticated packet of a new SSRC while state is kept for `SRTPSession.maxSources`
    /// others, each used within `SRTPSession.idleBeforeReplaced`: its state is freed.
    case tooManySources
    /// Any other libsrtp2 failure.
    case failed
}

/// Counters of one end's SRTP work, both directions. No key material.
public struct SRTPStats: Sendable, Hashable {
    /// The suite in use.
    public var suite: SRTPSuite
    /// RTP packets protected.
    public var rtpProtected = 0
    /// RTCP compound packets protected.
    public var rtcpProtected = 0
    /// Packets that could not be protected (none expected; counted, not sent as plain RTP).
    public var protectFailed = 0
    /// RTP packets authenticated and decrypted.
    public var rtpUnprotected = 0
    /// RTCP compound packets authenticated and decrypted.
    public var rtcpUnprotected = 0
    /// Received packets dropped, by reason.
    public var rejected: [SRTPRejection: Int] = [:]
    /// SSRCs whose state was freed for a new one's, after `SRTPSession.idleBeforeReplaced` unused.
    public var sourcesReplaced = 0

    /// Zero counters for `suite`.
    public init(suite: SRTPSuite) { self.suite = suite }

    /// All rejected packets.
    public var rejectedTotal: Int { rejected.values.reduce(0, +) }

    /// Adds another session's counters (the two directions of one end).
    public mutating func add(_ other: SRTPStats) {
        rtpProtected += other.rtpProtected
        rtcpProtected += other.rtcpProtected
        protectFailed += other.protectFailed
        rtpUnprotected += other.rtpUnprotected
        rtcpUnprotected += other.rtcpUnprotected
        sourcesReplaced += other.sourcesReplaced
        for (reason, count) in other.rejected { rejected[reason, default: 0] += count }
    }
}
