// Fuzz oracle of the `srtp` target: Fuzz/Targets/srtp.swift runs it under libFuzzer, and
// Fuzz/Tests/FuzzCorpusReplayTests.swift replays Tests/FuzzCorpus/srtp through it in `swift test`.
//
// SRTPSession.unprotect (SecureRTP over libsrtp2) on hostile SRTP and SRTCP: malformed,
// truncated, wrong tags, replays, many SSRCs. The input is a suite byte, then chunks of
// [flags][length][bytes]: flags bit 0 RTCP, bit 1 "protect the bytes first with the right key"
// (a genuine packet, as far as libsrtp2 takes it), bit 2 "then flip the byte at `length`",
// bit 3 "send it twice".
//
// Checks: nothing crashes or reads out of bounds (ASan); every call is counted once, as
// plaintext or as one rejection; a plaintext is the wire size less the suite's overhead and
// keeps the wire's header; a genuine packet comes back as exactly what was protected (unless
// its SSRC is one too many, its index was seen, or it is not version 2), and a second copy
// of it is a replay; a changed genuine packet never authenticates.
//
// An SRTP receiver guesses each packet's rollover counter from the highest index it has
// accepted of that SSRC (RFC 3711 section 3.3.1), the sender from the highest it has
// protected. Once the receiver has refused a genuine RTP packet of an SSRC (not version 2, one
// SSRC too many, or changed on the way), their guesses may differ by a rollover after a jump
// of 2^15 sequence numbers, and a genuine packet of that SSRC may then fail its
// authentication: allowed for that SSRC only. SRTCP carries its index, so that never applies
// to RTCP.

#if canImport(SecureRTP)  // in the test target (Fuzz/Tests); tools/fuzz compiles SecureRTP into the same module
import SecureRTP
#endif

/// The fixed master key and salt of the fuzz sessions (the longest suite's length).
private let fuzzKeyMaterial: [UInt8] = (0..<44).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }

/// The suites this libsrtp2 build has (asked once: each question makes a session).
private let fuzzSuites = SRTPSuite.allCases.filter { SRTPSession.isSupported($0) }

/// The srtp target's checks on one input; a violated invariant goes to `fuzzCheck`.
func fuzzSRTP(_ input: UnsafeRawBufferPointer) {
    guard let first = input.first else { return }
    let suite = fuzzSuites[Int(first) % fuzzSuites.count]
    guard let key = try? SRTPMasterKey(suite: suite, keyAndSalt: Array(fuzzKeyMaterial.prefix(suite.masterLength))),
          let outbound = try? SRTPSession(key: key, direction: .outbound),
          let inbound = try? SRTPSession(key: key, direction: .inbound) else {
        fuzzCheck(false, "sessions for \(suite) could not be made")
        return
    }
    var calls = 0
    var diverged: Set<[UInt8]> = []  // SSRCs of RTP whose receiver missed a genuine packet
    var offset = 1
    while offset + 2 <= input.count {
        let flags = input[offset]
        let length = min(Int(input[offset + 1]) * 8, input.count - offset - 2)
        let bytes = [UInt8](input[(offset + 2)..<(offset + 2 + length)])
        offset += 2 + length
        let kind: SRTPPacketKind = flags & 1 == 0 ? .rtp : .rtcp
        var wire = bytes
        var genuine = false
        if flags & 2 != 0, let protected = outbound.protect(bytes, kind: kind) {
            fuzzCheck(protected.count == bytes.count + outbound.overhead(kind), "protected \(bytes.count) to \(protected.count)")
            wire = protected
            genuine = true
        }
        var changed = false
        if flags & 4 != 0, !wire.isEmpty {
            wire[Int(input[offset - length - 1]) % wire.count] ^= 0x20
            changed = true
        }
        var firstAccepted = false
        let ssrc = kind == .rtp && bytes.count >= 12 ? Array(bytes[8..<12]) : nil
        for copy in 0..<(flags & 8 != 0 ? 2 : 1) {
            calls += 1
            let result = inbound.unprotect(wire, kind: kind)
            switch result {
            case .success(let plaintext):
                fuzzCheck(plaintext.count == wire.count - inbound.overhead(kind),
                          "\(wire.count) bytes of \(kind) unprotected to \(plaintext.count)")
                let header = kind == .rtp ? 12 : 8
                fuzzCheck(plaintext.prefix(header) == wire.prefix(header), "the header changed")
                fuzzCheck(!changed, "a changed packet authenticated")
                fuzzCheck(copy == 0, "a replay authenticated")
                if genuine { fuzzCheck(plaintext == bytes, "a genuine packet came back different") }
                firstAccepted = true
            case .failure(let reason):
                guard genuine else { break }
                if !changed {
                    // Our own check refuses what is not version 2, whatever protect took; a packet
                    // of an SSRC too many is refused each time; a second copy is a replay.
                    let versionTwo = bytes.first.map { $0 >> 6 == 2 } ?? false
                    let rolloverMayDiffer = reason == .authFailed && ssrc.map { diverged.contains($0) } == true
                    fuzzCheck(reason == .tooManySources || reason == .replayed || (!versionTwo && reason == .malformed)
                                  || rolloverMayDiffer,
                              "a genuine \(kind) packet of \(bytes.count) bytes (copy \(copy)) was refused: \(reason)")
                    if copy == 1 && firstAccepted { fuzzCheck(reason == .replayed, "the copy of an accepted packet was \(reason)") }
                }
                // The sender protected it, the receiver refused it (changed on the way or not):
                // its index moved the sender's guess of the rollover counter only.
                if copy == 0, let ssrc { diverged.insert(ssrc) }
            }
        }
    }
    let stats = inbound.stats
    fuzzCheck(stats.rtpUnprotected + stats.rtcpUnprotected + stats.rejectedTotal == calls,
              "\(calls) calls, counted \(stats)")
    _ = stats.suite.description
}
