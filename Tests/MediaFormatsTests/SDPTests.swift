import Testing
@testable import MediaFormats

@Suite("Base64")
struct SDPBase64Tests {
    @Test func rfc4648Vectors() throws {
        let vectors = ["": "", "f": "Zg==", "fo": "Zm8=", "foo": "Zm9v", "foob": "Zm9vYg==", "fooba": "Zm9vYmE=", "foobar": "Zm9vYmFy"]
        for (plain, encoded) in vectors {
            #expect(Base64.encode(Array(plain.utf8)) == encoded)
            #expect(try Base64.decode(encoded) == Array(plain.utf8))
        }
        let all = (0...255).map { UInt8($0) }
        #expect(try Base64.decode(Base64.encode(all)) == all)
        #expect(Base64.encode([0xFB, 0xFF]) == "+/8=")
    }

    @Test func rejectsBadInput() {
        func failure(_ text: String) -> Base64.DecodingError? {
            do { _ = try Base64.decode(text) } catch { return error }
            return nil
        }
        #expect(failure("Zm9") == .badLength(3))
        #expect(failure("Zm9v YmFy") == .badLength(9))
        #expect(failure("Zm9*") == .badCharacter(offset: 3))
        #expect(failure("Z===") == .badCharacter(offset: 1))
        #expect(failure("Zg==Zm8=") == .badCharacter(offset: 2))
        #expect(failure("Zm=v") == .badPadding)
        #expect(failure("Zh==") == .badPadding)  // leftover bits not zero
        #expect(failure("Zm9=") == .badPadding)
    }
}

@Suite("SDP")
struct SDPTests {
    static let vps: [UInt8] = [0x40, 0x01, 0x0C, 0x01, 0xFF, 0xFF]
    static let sps: [UInt8] = [0x42, 0x01, 0x01, 0x01, 0x60]
    static let pps: [UInt8] = [0x44, 0x01, 0xC1, 0x72]

    @Test func goldenText() {
        let sdp = SDPSessionDescription(
            sessionID: 12345, sessionVersion: 1, sessionName: "streamer", originAddress: "192.0.2.1",
            connectionAddress: "192.0.2.10", port: 5004, vps: [Self.vps], sps: [Self.sps], pps: [Self.pps],
            rtcpPort: 5005, frameRate: (30000, 1001))
        let expected =
            "v=0\r\n" + "o=- 12345 1 IN IP4 192.0.2.1\r\n" + "s=streamer\r\n" + "c=IN IP4 192.0.2.10\r\n" + "t=0 0\r\n"
            + "m=video 5004 RTP/AVP 96\r\n" + "a=rtpmap:96 H265/90000\r\n"
            + "a=fmtp:96 sprop-vps=QAEMAf//;sprop-sps=QgEBAWA=;sprop-pps=RAHBcg==\r\n" + "a=rtcp:5005\r\n"
            + "a=framerate:29.97\r\n"
        #expect(sdp.text == expected)
    }

    @Test func ipv6MuxAndNoSprops() {
        let sdp = SDPSessionDescription(
            sessionName: "", originAddress: "::1", connectionAddress: "fe80::1", port: 6000, rtcpMux: true,
            frameRate: (25, 1))
        #expect(
            sdp.text
                == "v=0\r\no=- 0 0 IN IP6 ::1\r\ns=-\r\nc=IN IP6 fe80::1\r\nt=0 0\r\nm=video 6000 RTP/AVP 96\r\n"
                + "a=rtpmap:96 H265/90000\r\na=rtcp-mux\r\na=framerate:25\r\n")
    }

    @Test func roundTrip() throws {
        let sdp = SDPSessionDescription(
            sessionID: 99, sessionVersion: 3, sessionName: "cam", originAddress: "10.0.0.1", connectionAddress: "10.0.0.2",
            port: 7000, payloadType: 97, vps: [Self.vps], sps: [Self.sps, Self.sps + [0]], pps: [Self.pps],
            rtcpPort: 7001, rtcpMux: true, frameRate: (2997, 100))
        #expect(try SDPSessionDescription(parsing: sdp.text) == sdp)
    }

    @Test func retransmissionIsOfferedWithAVPFAndRTX() throws {
        var sdp = SDPSessionDescription.hevc(parameterSets: [], connectionAddress: "10.0.0.2", port: 5004,
                                             retransmission: .init(payloadType: 97, rtxTime: 300, mediaSSRC: 11, rtxSSRC: 22))
        #expect(sdp.text == "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=streamer\r\nc=IN IP4 10.0.0.2\r\nt=0 0\r\n"
            + "m=video 5004 RTP/AVPF 96 97\r\na=rtpmap:96 H265/90000\r\n"
            + "a=rtcp-fb:96 nack\r\na=rtcp-fb:96 nack pli\r\na=rtpmap:97 rtx/90000\r\n"
            + "a=fmtp:97 apt=96;rtx-time=300\r\na=ssrc-group:FID 11 22\r\n")
        #expect(try SDPSessionDescription(parsing: sdp.text) == sdp)
        // Originals resent on the media SSRC (for ffmpeg): AVPF and NACK feedback, one payload type.
        sdp.retransmission = .init(payloadType: nil)
        #expect(sdp.text.contains("m=video 5004 RTP/AVPF 96\r\n") && !sdp.text.contains("rtx"))
        #expect(sdp.text.contains("a=rtcp-fb:96 nack\r\n"))
        #expect(try SDPSessionDescription(parsing: sdp.text) == sdp)
    }

    @Test func theRTXGroupNamesBothSSRCsWithTheirCNAME() throws {
        let offer = SDPSessionDescription.Retransmission(payloadType: 97, rtxTime: 500, mediaSSRC: 11, rtxSSRC: 22,
                                                         cname: "cam@host")
        let sdp = SDPSessionDescription.hevc(parameterSets: [], connectionAddress: "10.0.0.2", port: 5004, retransmission: offer)
        #expect(sdp.text.hasSuffix("a=fmtp:97 apt=96;rtx-time=500\r\na=ssrc-group:FID 11 22\r\n"
            + "a=ssrc:11 cname:cam@host\r\na=ssrc:22 cname:cam@host\r\n"))
        #expect(try SDPSessionDescription(parsing: sdp.text) == sdp)
        // The a=ssrc lines before the group (either order is RFC 5576), other source attributes ignored.
        let reordered = sdp.text.replacingOccurrences(of: "a=ssrc-group:FID 11 22\r\n", with: "")
            .replacingOccurrences(of: "a=ssrc:11 cname", with: "a=ssrc:11 msid:x\r\na=ssrc:11 cname") + "a=ssrc-group:FID 11 22\r\n"
        #expect(try SDPSessionDescription(parsing: reordered).retransmission == offer)
        // Without an RTX group (or an RTX payload type) the CNAME is not written, so not kept either.
        let ungrouped = sdp.text.replacingOccurrences(of: "a=ssrc-group:FID 11 22\r\n", with: "")
        #expect(try SDPSessionDescription(parsing: ungrouped).retransmission?.cname == nil)
        var sameSSRC = sdp
        sameSSRC.retransmission?.payloadType = nil
        #expect(!sameSSRC.text.contains("a=ssrc"))
    }

    @Test func parsesFFmpegStyleSDP() throws {
        // As ffmpeg writes it (LF endings, session-level c= with TTL, extra lines).
        let text = """
            v=0
            o=- 0 0 IN IP4 127.0.0.1
            s=No Name
            c=IN IP4 239.0.0.1/127
            t=0 0
            a=tool:libavformat 60.16.100
            m=audio 5000 RTP/AVP 97
            a=rtpmap:97 opus/48000/2
            m=video 5004 RTP/AVP 96
            b=AS:2000
            a=rtpmap:96 H265/90000
            a=fmtp:96 sprop-vps=QAEMAf//; sprop-sps=QgEBAWA=; sprop-pps=RAHBcg==

            """
        let sdp = try SDPSessionDescription(parsing: text)
        #expect(sdp.connectionAddress == "239.0.0.1")
        #expect(sdp.port == 5004 && sdp.payloadType == 96)
        #expect(sdp.encodingName == "H265" && sdp.clockRate == 90_000)
        #expect(sdp.vps == [Self.vps] && sdp.sps == [Self.sps] && sdp.pps == [Self.pps])
        #expect(sdp.sessionName == "No Name")
    }

    @Test func rejectsBrokenSDP() {
        func failure(_ text: String) -> String? {
            do { _ = try SDPSessionDescription(parsing: text) } catch { return error.description }
            return nil
        }
        #expect(failure("v=0\nc=IN IP4 1.2.3.4\n") == "sdp: no m=video line")
        #expect(failure("v=0\nm=video 5004 RTP/AVP 96\n") == "sdp: no c= line")
        #expect(failure("v=0\nc=IN IP4 1.2.3.4\nm=video x RTP/AVP 96\n") == "sdp: line 3: bad m= line")
        #expect(failure("v=0\ngarbage\n") == "sdp: line 2: not a type=value line")
        #expect(
            failure("v=0\nc=IN IP4 1.2.3.4\nm=video 1 RTP/AVP 96\na=fmtp:96 sprop-sps=QgE*\n")
                == "sdp: line 4: sprop-sps: base64: invalid character at offset 3")
    }

    /// The one place that builds an SDP from parameter sets: each set goes to its sprop by its
    /// NAL unit type, in the order given; slices, SEI and empty units are left out.
    @Test func hevcSortsParameterSetsByType() throws {
        let slice: [UInt8] = [0x26, 0x01, 0xAF]
        let sei: [UInt8] = [0x4E, 0x01, 0x05]
        let secondSPS = Self.sps + [0x80]
        let sdp = SDPSessionDescription.hevc(
            parameterSets: [Self.pps, slice, Self.sps, [], sei, Self.vps, secondSPS], sessionID: 7, sessionVersion: 1,
            originAddress: "192.0.2.1", connectionAddress: "192.0.2.10", port: 5004, rtcpMux: true, frameRate: (30, 1),
            control: "track1")
        #expect(sdp.vps == [Self.vps] && sdp.sps == [Self.sps, secondSPS] && sdp.pps == [Self.pps])
        #expect(sdp.payloadType == RTPHeader.defaultHEVCPayloadType && RTPHeader.defaultHEVCPayloadType == 96)
        #expect(sdp.encodingName == "H265" && sdp.clockRate == 90_000)
        #expect(sdp == SDPSessionDescription(
            sessionID: 7, sessionVersion: 1, originAddress: "192.0.2.1", connectionAddress: "192.0.2.10", port: 5004,
            vps: [Self.vps], sps: [Self.sps, secondSPS], pps: [Self.pps], rtcpMux: true, frameRate: (30, 1),
            control: "track1"))
        #expect(try SDPSessionDescription(parsing: sdp.text) == sdp)

        let other = SDPSessionDescription.hevc(parameterSets: [Self.vps], connectionAddress: "::", port: 0, payloadType: 102)
        #expect(other.text.contains("m=video 0 RTP/AVP 102\r\na=rtpmap:102 H265/90000\r\na=fmtp:102 sprop-vps=QAEMAf//\r\n"))
        #expect(other.sps.isEmpty && other.pps.isEmpty)
    }

    @Test func nalUnitTypesOfParameterSets() {
        #expect(HEVCNALUnitType(nalUnit: Self.vps) == .vps)
        #expect(HEVCNALUnitType(nalUnit: Self.sps[...]) == .sps)
        #expect(HEVCNALUnitType(nalUnit: [UInt8]()) == nil)
        #expect([Self.vps, Self.sps, Self.pps].allSatisfy { HEVCNALUnitType(nalUnit: $0)?.isParameterSet == true })
        #expect(![HEVCNALUnitType.idrWithRADL, .accessUnitDelimiter, .prefixSEI, .trailR].contains { $0.isParameterSet })
        let unit = AccessUnit(nalUnits: [Self.vps, Self.sps, Self.pps, [0x26, 0x01, 0xAF]], timestamp: 0, isKeyframe: true)
        #expect(unit.parameterSets == [Self.vps, Self.sps, Self.pps])
    }

    @Test func linesCannotBeInjected() throws {
        let sdp = SDPSessionDescription(sessionName: "evil\r\na=rtcp-mux", connectionAddress: "1.2.3.4", port: 1)
        #expect(!sdp.text.contains("\r\na=rtcp-mux"))
        #expect(try SDPSessionDescription(parsing: sdp.text).rtcpMux == false)
    }
}

@Suite("SDP crypto (RFC 4568)")
struct SDPCryptoTests {
    static let key = "4fl6DT4Bi+DWT6MsBt5BOQ7Gda1Jiv7rtpYLOqvm"

    @Test func writtenAsSAVPAndReadBack() throws {
        let sdp = SDPSessionDescription.hevc(parameterSets: [], connectionAddress: "127.0.0.1", port: 5004,
                                             crypto: SDPCrypto(suite: "AES_CM_128_HMAC_SHA1_80", inlineKey: Self.key))
        #expect(sdp.text.contains("m=video 5004 RTP/SAVP 96\r\n"))
        #expect(sdp.text.contains("a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:\(Self.key)\r\n"))
        let again = try SDPSessionDescription(parsing: sdp.text)
        #expect(again == sdp && again.crypto?.inlineKey == Self.key)
        #expect(SDPSessionDescription.hevc(parameterSets: [], connectionAddress: "127.0.0.1", port: 5004).text
            .contains("RTP/AVP 96"))
    }

    @Test func lifetimeMKIAndSessionParametersAreKeptAndTheFirstOfferTaken() throws {
        let text = "v=0\r\nc=IN IP4 1.2.3.4\r\nm=video 5004 RTP/SAVP 96\r\n"
            + "a=crypto:7 AES_CM_128_HMAC_SHA1_32 inline:\(Self.key)|2^20|1:4 UNENCRYPTED_SRTCP\r\n"
            + "a=crypto:8 AES_CM_128_HMAC_SHA1_80 inline:\(Self.key)\r\n"
        let crypto = try #require(try SDPSessionDescription(parsing: text).crypto)
        #expect(crypto.tag == 7 && crypto.suite == "AES_CM_128_HMAC_SHA1_32")
        #expect(crypto.inlineKey == Self.key && crypto.sessionParameters == ["UNENCRYPTED_SRTCP"])
        #expect(crypto.attributeValue == "7 AES_CM_128_HMAC_SHA1_32 inline:\(Self.key)|2^20|1:4 UNENCRYPTED_SRTCP")
    }

    @Test func badLinesAreOneLineErrorsWithoutTheKeyAndDescriptionsRedactIt() throws {
        for bad in ["a=crypto:1 AES_CM_128_HMAC_SHA1_80", "a=crypto:x AES_CM_128_HMAC_SHA1_80 inline:\(Self.key)",
                    "a=crypto:1 AES_CM_128_HMAC_SHA1_80 key:\(Self.key)"] {
            let text = "v=0\r\nc=IN IP4 1.2.3.4\r\nm=video 5004 RTP/SAVP 96\r\n\(bad)\r\n"
            do {
                _ = try SDPSessionDescription(parsing: text)
                Issue.record("accepted \(bad)")
            } catch {
                #expect(!error.description.contains(Self.key.prefix(8)) && !error.description.contains("\n"))
            }
        }
        let sdp = SDPSessionDescription(connectionAddress: "1.2.3.4", port: 1,
                                        crypto: SDPCrypto(suite: "AES_CM_128_HMAC_SHA1_80", inlineKey: Self.key))
        var dumped = ""
        dump(sdp, to: &dumped)
        for text in ["\(sdp)", String(reflecting: sdp), dumped, "\(sdp.crypto!)"] {
            #expect(!text.contains(Self.key.prefix(8)), "\(text)")
        }
    }
}

@Suite("SDP multicast")
struct SDPMulticastTests {
    @Test func ipv4GroupWithTTLAndSourceFilterRoundTrips() throws {
        var sdp = SDPSessionDescription(originAddress: "10.0.0.1", connectionAddress: "239.1.2.3", port: 5004)
        sdp.multicastTTL = 4
        sdp.sourceFilter = "10.0.0.1"
        let text = sdp.text
        #expect(text.contains("c=IN IP4 239.1.2.3/4\r\n"))
        #expect(text.contains("a=source-filter: incl IN IP4 239.1.2.3 10.0.0.1\r\n"))
        let parsed = try SDPSessionDescription(parsing: text)
        #expect(parsed.connectionAddress == "239.1.2.3")
        #expect(parsed.multicastTTL == 4)
        #expect(parsed.sourceFilter == "10.0.0.1")
        #expect(parsed == sdp)
    }

    @Test func ipv6GroupHasNoTTL() throws {
        var sdp = SDPSessionDescription(originAddress: "fd00::1", connectionAddress: "ff3e::1234", port: 5004)
        sdp.multicastTTL = 4
        #expect(sdp.text.contains("c=IN IP6 ff3e::1234\r\n"))
        let parsed = try SDPSessionDescription(parsing: sdp.text)
        #expect(parsed.connectionAddress == "ff3e::1234")
        #expect(parsed.multicastTTL == nil)
    }

    @Test func badTTLAndSourceFilterAreErrors() {
        let base = "v=0\r\no=- 1 1 IN IP4 10.0.0.1\r\ns=x\r\nt=0 0\r\nm=video 5004 RTP/AVP 96\r\n"
        #expect(throws: SDPError.self) { try SDPSessionDescription(parsing: base + "c=IN IP4 239.1.2.3/x\r\n") }
        #expect(throws: SDPError.self) { try SDPSessionDescription(parsing: base + "c=IN IP4 239.1.2.3/300\r\n") }
        #expect(throws: SDPError.self) {
            try SDPSessionDescription(parsing: base + "c=IN IP4 239.1.2.3\r\na=source-filter: incl IN IP4 239.1.2.3\r\n")
        }
        let excluded = try? SDPSessionDescription(parsing: base + "c=IN IP4 239.1.2.3\r\na=source-filter: excl IN IP4 239.1.2.3 10.0.0.9\r\n")
        #expect(excluded?.sourceFilter == nil)
    }
}
