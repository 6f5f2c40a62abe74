import MediaFormats
@testable import SecureRTP
import Testing

/// libsrtp2's own reference packets (test/srtp_driver.c, `srtp_validate` and
/// `srtp_validate_gcm`): the RFC 3711 key derivation and transforms, through our shim.
private enum Vectors {
    static let aesCMKey: [UInt8] = [
        0xe1, 0xf9, 0x7a, 0x0d, 0x3e, 0x01, 0x8b, 0xe0, 0xd6, 0x4f, 0xa3, 0x2c, 0x06, 0xde, 0x41, 0x39,
        0x0e, 0xc6, 0x75, 0xad, 0x49, 0x8a, 0xfe, 0xeb, 0xb6, 0x96, 0x0b, 0x3a, 0xab, 0xe6,
    ]
    static let gcmKey: [UInt8] = [
        0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
        0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab,
    ]
    /// SSRC 0xcafebabe, sequence 0x1234, 16 bytes of 0xab.
    static let rtp: [UInt8] = [0x80, 0x0f, 0x12, 0x34, 0xde, 0xca, 0xfb, 0xad, 0xca, 0xfe, 0xba, 0xbe]
        + [UInt8](repeating: 0xab, count: 16)
    /// A sender report header of SSRC 0xcafebabe and 16 bytes of 0xab.
    static let rtcp: [UInt8] = [0x81, 0xc8, 0x00, 0x0b, 0xca, 0xfe, 0xba, 0xbe] + [UInt8](repeating: 0xab, count: 16)
    static let srtp80: [UInt8] = Array(rtp[0..<12]) + [
        0x4e, 0x55, 0xdc, 0x4c, 0xe7, 0x99, 0x78, 0xd8, 0x8c, 0xa4, 0xd2, 0x15, 0x94, 0x9d, 0x24, 0x02,
        0xb7, 0x8d, 0x6a, 0xcc, 0x99, 0xea, 0x17, 0x9b, 0x8d, 0xbb,
    ]
    static let srtcp80: [UInt8] = Array(rtcp[0..<8]) + [
        0x71, 0x28, 0x03, 0x5b, 0xe4, 0x87, 0xb9, 0xbd, 0xbe, 0xf8, 0x90, 0x41, 0xf9, 0x77, 0xa5, 0xa8,
        0x80, 0x00, 0x00, 0x01, 0x99, 0x3e, 0x08, 0xcd, 0x54, 0xd6, 0xc1, 0x23, 0x07, 0x98,
    ]
    static let srtpGCM: [UInt8] = Array(rtp[0..<12]) + [
        0xc5, 0x00, 0x2e, 0xde, 0x04, 0xcf, 0xdd, 0x2e, 0xb9, 0x11, 0x59, 0xe0, 0x88, 0x0a, 0xa0, 0x6e,
        0xd2, 0x97, 0x68, 0x26, 0xf7, 0x96, 0xb2, 0x01, 0xdf, 0x31, 0x31, 0xa1, 0x27, 0xe8, 0xa3, 0x92,
    ]
    static let srtcpGCM: [UInt8] = Array(rtcp[0..<8]) + [
        0xc9, 0x8b, 0x8b, 0x5d, 0xf0, 0x39, 0x2a, 0x55, 0x85, 0x2b, 0x6c, 0x21, 0xac, 0x8e, 0x70, 0x25,
        0xc5, 0x2c, 0x6f, 0xbe, 0xa2, 0xb3, 0xb4, 0x46, 0xea, 0x31, 0x12, 0x3b, 0xa8, 0x8c, 0xe6, 0x1e,
        0x80, 0x00, 0x00, 0x01,
    ]
}

private func sessions(_ suite: SRTPSuite, _ bytes: [UInt8]) throws -> (SRTPSession, SRTPSession) {
    let key = try SRTPMasterKey(suite: suite, keyAndSalt: bytes)
    return (try SRTPSession(key: key, direction: .outbound), try SRTPSession(key: key, direction: .inbound))
}

/// An RTP packet of `ssrc` with sequence `sequence` and `payload` bytes of a pattern.
private func rtpPacket(ssrc: UInt32 = 0x1234_5678, sequence: UInt16, payload: Int = 100) -> [UInt8] {
    var bytes: [UInt8] = [0x80, 96, UInt8(sequence >> 8), UInt8(sequence & 0xff), 0, 0, 0x10, 0]
    bytes += withUnsafeBytes(of: ssrc.bigEndian) { Array($0) }
    bytes += (0..<payload).map { UInt8(truncatingIfNeeded: $0 &* 7) }
    return bytes
}

@Suite struct SRTPSessionTests {
    @Test func aesCM80MatchesTheReferencePacketsBothWays() throws {
        let (outbound, inbound) = try sessions(.aesCM128HMACSHA1_80, Vectors.aesCMKey)
        #expect(outbound.protect(Vectors.rtp, kind: .rtp) == Vectors.srtp80)
        #expect(outbound.protect(Vectors.rtcp, kind: .rtcp) == Vectors.srtcp80)
        #expect(try inbound.unprotect(Vectors.srtp80, kind: .rtp).get() == Vectors.rtp)
        #expect(try inbound.unprotect(Vectors.srtcp80, kind: .rtcp).get() == Vectors.rtcp)
        #expect(outbound.stats.rtpProtected == 1 && outbound.stats.rtcpProtected == 1)
        #expect(inbound.stats.rtpUnprotected == 1 && inbound.stats.rtcpUnprotected == 1)
    }

    @Test func aesCM32TruncatesTheRTPTagAndKeepsSRTCPs() throws {
        let (outbound, inbound) = try sessions(.aesCM128HMACSHA1_32, Vectors.aesCMKey)
        // The same keystream; the tag is the first 4 bytes of the 80-bit one.
        #expect(outbound.protect(Vectors.rtp, kind: .rtp) == Array(Vectors.srtp80[0..<32]))
        #expect(outbound.protect(Vectors.rtcp, kind: .rtcp) == Vectors.srtcp80)
        #expect(try inbound.unprotect(Array(Vectors.srtp80[0..<32]), kind: .rtp).get() == Vectors.rtp)
    }

    @Test(.enabled(if: SRTPSession.isSupported(.aeadAES128GCM), "this libsrtp2 build has no AES-GCM"))
    func gcmMatchesTheReferencePackets() throws {
        let (outbound, inbound) = try sessions(.aeadAES128GCM, Vectors.gcmKey)
        #expect(outbound.protect(Vectors.rtp, kind: .rtp) == Vectors.srtpGCM)
        #expect(outbound.protect(Vectors.rtcp, kind: .rtcp) == Vectors.srtcpGCM)
        #expect(try inbound.unprotect(Vectors.srtpGCM, kind: .rtp).get() == Vectors.rtp)
        #expect(try inbound.unprotect(Vectors.srtcpGCM, kind: .rtcp).get() == Vectors.rtcp)
    }

    @Test(arguments: SRTPSuite.allCases.filter(SRTPSession.isSupported))
    func everySuiteRoundTripsAndRejectsTamperingAndReplays(suite: SRTPSuite) throws {
        let key = SRTPMasterKey.random(suite: suite)
        let outbound = try SRTPSession(key: key, direction: .outbound)
        let inbound = try SRTPSession(key: key, direction: .inbound)
        var protected: [[UInt8]] = []
        for sequence in UInt16(65_530)...65_535 {
            let packet = rtpPacket(sequence: sequence)
            let wire = try #require(outbound.protect(packet, kind: .rtp))
            #expect(wire.count == packet.count + suite.rtpOverhead)
            #expect(wire[12...] != packet[12...] || suite.rtpOverhead == 0, "payload encrypted")
            protected.append(wire)
        }
        // Across the sequence wrap (the rollover counter moves) and in another order.
        for wire in protected.reversed() {
            #expect(try inbound.unprotect(wire, kind: .rtp).get().count == wire.count - suite.rtpOverhead)
        }
        #expect(inbound.unprotect(protected[2], kind: .rtp) == .failure(.replayed))
        var tampered = try #require(outbound.protect(rtpPacket(sequence: 7), kind: .rtp))
        tampered[20] ^= 1
        #expect(inbound.unprotect(tampered, kind: .rtp) == .failure(.authFailed))
        let rtcp = try #require(outbound.protect(Vectors.rtcp, kind: .rtcp))
        #expect(rtcp.count == Vectors.rtcp.count + suite.rtcpOverhead)
        #expect(try inbound.unprotect(rtcp, kind: .rtcp).get() == Vectors.rtcp)
        #expect(inbound.unprotect(rtcp, kind: .rtcp) == .failure(.replayed))
        // The replay check comes first: a changed copy of a new packet (SRTCP index 2) fails the tag.
        var forged = try #require(outbound.protect(Vectors.rtcp, kind: .rtcp))
        forged[forged.count - 1] ^= 0x80
        #expect(inbound.unprotect(forged, kind: .rtcp) == .failure(.authFailed))
        #expect(inbound.stats.rtpUnprotected == 6 && inbound.stats.rtcpUnprotected == 1)
        #expect(inbound.stats.rejected == [.replayed: 2, .authFailed: 2])
    }

    @Test func aReceiverWithAnotherKeyAuthenticatesNothing() throws {
        let outbound = try SRTPSession(key: .random(), direction: .outbound)
        let stranger = try SRTPSession(key: .random(), direction: .inbound)
        for sequence in UInt16(0)..<50 {
            let wire = try #require(outbound.protect(rtpPacket(sequence: sequence), kind: .rtp))
            #expect(stranger.unprotect(wire, kind: .rtp) == .failure(.authFailed))
        }
        #expect(stranger.stats.rtpUnprotected == 0 && stranger.stats.rejected == [.authFailed: 50])
    }

    @Test func shortOrForeignPacketsAreMalformedAndNeverReachLibsrtp() throws {
        let (outbound, inbound) = try sessions(.aesCM128HMACSHA1_80, Vectors.aesCMKey)
        let wire = try #require(outbound.protect(Vectors.rtp, kind: .rtp))
        for length in 0..<(12 + 10) {
            #expect(inbound.unprotect(Array(wire[0..<length]), kind: .rtp) == .failure(.malformed))
        }
        var version1 = wire
        version1[0] = 0x40
        #expect(inbound.unprotect(version1, kind: .rtp) == .failure(.malformed))
        #expect(inbound.unprotect([UInt8](repeating: 0x80, count: 21), kind: .rtcp) == .failure(.malformed))
        #expect(try inbound.unprotect(wire, kind: .rtp).get() == Vectors.rtp)  // still fine after all that
    }

    @Test func stateIsKeptForAtMostMaxSourcesSSRCs() throws {
        let key = SRTPMasterKey.random()
        let outbound = try SRTPSession(key: key, direction: .outbound)
        let inbound = try SRTPSession(key: key, direction: .inbound)
        let sources = SRTPSession.maxSources + 5
        for ssrc in 1...UInt32(sources) {
            let wire = try #require(outbound.protect(rtpPacket(ssrc: ssrc, sequence: 1), kind: .rtp))
            _ = inbound.unprotect(wire, kind: .rtp)
        }
        #expect(inbound.stats.rtpUnprotected == SRTPSession.maxSources)
        #expect(inbound.stats.rejected == [.tooManySources: 5])
        // A known SSRC still passes.
        let again = try #require(outbound.protect(rtpPacket(ssrc: 1, sequence: 2), kind: .rtp))
        #expect((try? inbound.unprotect(again, kind: .rtp).get()) != nil)
    }

    /// Senders started again with the key and new SSRCs, more than `maxSources` over time: each
    /// new SSRC takes the place of the one unused longest once that has been unused for
    /// `idleBeforeReplaced`, never of one in use; memory stays bounded.
    @Test func aNewSourceTakesThePlaceOfOneUnusedLongEnough() throws {
        let key = SRTPMasterKey.random()
        let outbound = try SRTPSession(key: key, direction: .outbound)
        let inbound = try SRTPSession(key: key, direction: .inbound)
        func passes(_ ssrc: UInt32, _ sequence: UInt16) throws -> Bool {
            let wire = try #require(outbound.protect(rtpPacket(ssrc: ssrc, sequence: sequence), kind: .rtp))
            return (try? inbound.unprotect(wire, kind: .rtp).get()) != nil
        }
        for ssrc in 1...UInt32(SRTPSession.maxSources) { #expect(try passes(ssrc, 1)) }
        // Just short of the idle time: the 17th is refused.
        inbound.clockAdvance = SRTPSession.idleBeforeReplaced - 100_000_000
        #expect(try !passes(100, 1))
        #expect(inbound.stats.rejected == [.tooManySources: 1] && inbound.stats.sourcesReplaced == 0)
        // SSRC 1 stays in use; past the idle time the others may be replaced, the one unused
        // longest first (2), and SSRC 1, used just now, keeps its state: its replay window
        // still refuses its first packet again.
        #expect(try passes(1, 2))
        inbound.clockAdvance = SRTPSession.idleBeforeReplaced + 200_000_000
        for ssrc in 100...UInt32(114) { #expect(try passes(ssrc, 1)) }
        #expect(inbound.stats.sourcesReplaced == 15)
        let replayed = try #require(outbound.protect(rtpPacket(ssrc: 1, sequence: 2), kind: .rtp))
        #expect(inbound.unprotect(replayed, kind: .rtp) == .failure(.replayed))
        // All sixteen used within the idle time: a new one is refused again.
        #expect(try !passes(200, 1))
        #expect(inbound.stats.rejected == [.tooManySources: 2, .replayed: 1])
    }

    @Test func protectInPlaceNeedsRoomForTheTag() throws {
        let outbound = try SRTPSession(key: .random(), direction: .outbound)
        var buffer = rtpPacket(sequence: 1) + [UInt8](repeating: 0, count: 9)
        let length = buffer.count - 9
        #expect(buffer.withUnsafeMutableBytes { outbound.protect($0, length: length, kind: .rtp) } == nil)
        #expect(outbound.stats.protectFailed == 1)
        buffer.append(0)
        #expect(buffer.withUnsafeMutableBytes { outbound.protect($0, length: length, kind: .rtp) } == buffer.count)
    }
}

@Suite struct SRTPMasterKeyTests {
    @Test func keysNeverShowInDescriptionsOrMirrors() throws {
        let key = SRTPMasterKey.random()
        let secret = key.inlineBase64
        let hex = try Base64.decode(secret).map { String($0, radix: 16) }.joined()
        var dumped = ""
        dump(key, to: &dumped)
        for text in [key.description, key.debugDescription, "\(key)", String(reflecting: key), dumped] {
            #expect(!text.contains(secret) && !text.contains(hex) && !text.contains(String(secret.prefix(8))))
        }
        #expect(key.description.contains("redacted"))
    }

    @Test func base64TextRoundTripsAndBadTextIsOneLineWithoutTheText() throws {
        let key = try SRTPMasterKey(suite: .aesCM128HMACSHA1_80, base64: "  4fl6DT4Bi+DWT6MsBt5BOQ7Gda1Jiv7rtpYLOqvm\n")
        #expect(key == (try SRTPMasterKey(suite: .aesCM128HMACSHA1_80, keyAndSalt: Vectors.aesCMKey)))
        #expect(key.inlineBase64 == "4fl6DT4Bi+DWT6MsBt5BOQ7Gda1Jiv7rtpYLOqvm")
        for bad in ["4fl6DT4Bi+DWT6MsBt5BOQ7Gda1Jiv7rtpYLOqv!", "4fl6DT4Bi+DWT6MsBt5BOQ7Gda1Jiv7r", ""] {
            #expect(throws: SRTPError.self) { try SRTPMasterKey(suite: .aesCM128HMACSHA1_80, base64: bad) }
            do { _ = try SRTPMasterKey(suite: .aesCM128HMACSHA1_80, base64: bad) } catch {
                #expect(!error.description.contains("\n"))
                #expect(bad.isEmpty || !error.description.contains(bad.prefix(8)))
            }
        }
        // The GCM suites' keys are shorter (16 + 12), AES-256's longer (32 + 12).
        #expect(throws: SRTPError.self) { try SRTPMasterKey(suite: .aeadAES128GCM, keyAndSalt: Vectors.aesCMKey) }
        #expect(SRTPMasterKey.random(suite: .aeadAES256GCM).inlineBase64.count == 60)
    }
}
