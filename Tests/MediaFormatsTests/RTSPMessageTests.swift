import Testing
@testable import MediaFormats

@Suite("RTSP messages")
struct RTSPMessageTests {
    private func parse(_ text: String, limits: RTSPLimits = RTSPLimits()) throws(RTSPRequestError) -> (request: RTSPRequest, consumed: Int)? {
        try RTSPRequest.parse(Array(text.utf8)[...], limits: limits)
    }

    private func failure(_ text: String, limits: RTSPLimits = RTSPLimits()) -> RTSPRequestError? {
        do { _ = try parse(text, limits: limits) } catch { return error }
        return nil
    }

    @Test func parsesWhatFFmpegSends() throws {
        let text = "SETUP rtsp://127.0.0.1:8554/stream/track1 RTSP/1.0\r\n"
            + "Transport: RTP/AVP/UDP;unicast;client_port=5000-5001\r\nCSeq: 3\r\n"
            + "User-Agent: Lavf59.27.100\r\n\r\n"
        let (request, consumed) = try #require(try parse(text))
        #expect(consumed == text.utf8.count)
        #expect(request.method == "SETUP")
        #expect(request.uri == "rtsp://127.0.0.1:8554/stream/track1")
        #expect(request.cseq == 3)
        #expect(request.header("transport") == "RTP/AVP/UDP;unicast;client_port=5000-5001")
        #expect(request.header("Session") == nil)
        #expect(request.body.isEmpty)
    }

    @Test func pipelinedRequestsBodiesAndBareLineFeeds() throws {
        let first = "GET_PARAMETER * RTSP/1.0\nCSeq:7\nContent-Length: 5\n\nhello"
        let text = "\r\n" + first + "OPTIONS * RTSP/1.0\r\nCSeq: 8\r\n\r\n"
        let (request, consumed) = try #require(try parse(text))
        #expect(request.cseq == 7)
        #expect(request.body == Array("hello".utf8))
        let rest = Array(text.utf8)[consumed...]
        let (second, _) = try #require(try RTSPRequest.parse(rest))
        #expect(second.method == "OPTIONS" && second.cseq == 8)
    }

    @Test func truncatedRequestsWaitForMore() throws {
        let text = "DESCRIBE rtsp://h/stream RTSP/1.0\r\nCSeq: 2\r\nContent-Length: 4\r\n\r\nab"
        for end in 0..<text.utf8.count {
            #expect(try RTSPRequest.parse(Array(text.utf8)[..<end]) == nil, "prefix of \(end) bytes")
        }
        #expect(try parse(text + "cd") != nil)
    }

    @Test func rejectsMalformedRequests() {
        #expect(failure("OPTIONS * RTSP/1.0\r\n\r\n")?.status == 400)                    // no CSeq
        #expect(failure("OPTIONS * RTSP/1.0\r\nCSeq: x\r\n\r\n")?.status == 400)
        #expect(failure("OPTIONS * RTSP/1.0\r\nCSeq: 1\r\nCSeq: 2\r\n\r\n")?.status == 400)
        #expect(failure("OPTIONS * RTSP/1.0\r\nCSeq: -1\r\n\r\n")?.status == 400)
        #expect(failure("OPTIONS *\r\nCSeq: 1\r\n\r\n")?.status == 400)
        #expect(failure("OPTIONS  * RTSP/1.0\r\nCSeq: 1\r\n\r\n")?.status == 400)
        #expect(failure("GET / HTTP/1.1\r\nCSeq: 1\r\n\r\n")?.status == 400)
        let version = failure("OPTIONS * RTSP/2.0\r\nCSeq: 4\r\n\r\n")
        #expect(version?.status == 505 && version?.cseq == 4)
        #expect(failure("OPT(ONS * RTSP/1.0\r\nCSeq: 1\r\n\r\n")?.status == 400)
        #expect(failure("OPTIONS * RTSP/1.0\r\nCSeq 1\r\n\r\n")?.status == 400)              // no colon
        #expect(failure("OPTIONS * RTSP/1.0\r\nCSeq: 1\r\n folded\r\n\r\n")?.status == 400)   // continuation line
        #expect(failure("OPTIONS * RTSP/1.0\r\nCSeq: 1\u{0}\r\n\r\n")?.status == 400)       // NUL
        #expect(failure("OPTIONS * RTSP/1.0\r\nCSeq: 1\r\nContent-Length: -3\r\n\r\n")?.cseq == 1)
        #expect(failure("\u{16}\u{3}\u{1}\u{2}\u{0}\u{1}\u{0}\u{1}\n\n")?.status == 400)   // TLS hello-ish
        let bytes = Array("OPTIONS * RTSP/1.0\r\nCSeq: 1\r\nX: ".utf8) + [0xFF, 0xFE] + Array("\r\n\r\n".utf8)
        #expect(throws: RTSPRequestError.self) { try RTSPRequest.parse(bytes[...]) }
        #expect(failure("$\u{0}\u{0}\u{4}ab\ncd\n\n")?.status == 400)  // interleaved binary data is no request
    }

    @Test func oversizedRequestsAreRejectedEarly() {
        var limits = RTSPLimits()
        limits.maxHeaderBytes = 1024
        limits.maxLineLength = 200
        limits.maxHeaderCount = 4
        // A line that never ends: rejected once it is past the line limit, not buffered on.
        #expect(failure("OPTIONS * RTSP/1.0\r\nX: " + String(repeating: "a", count: 300), limits: limits)?.status == 431)
        #expect(failure("OPTIONS /" + String(repeating: "a", count: 300), limits: limits)?.status == 414)
        // Many short lines past the header limit, with no blank line.
        let many = "OPTIONS * RTSP/1.0\r\n" + String(repeating: "A: b\r\n", count: 3) + String(repeating: "x", count: 150) + "\r\n"
        #expect(failure(many + many + many + many + many + many + many + many, limits: limits)?.status == 431)
        #expect(failure("OPTIONS * RTSP/1.0\r\nCSeq: 1\r\n" + String(repeating: "A: b\r\n", count: 5) + "\r\n", limits: limits)?.status == 431)
        #expect(failure("OPTIONS * RTSP/1.0\r\nCSeq: 1\r\nContent-Length: 5000\r\n\r\n")?.status == 413)
        #expect(failure("OPTIONS * RTSP/1.0\r\nCSeq: 1\r\nContent-Length: 99999999999999999999999\r\n\r\n")?.status == 400)
        // At the limits exactly: accepted.
        #expect((try? parse("OPTIONS * RTSP/1.0\r\nCSeq: 1\r\n" + String(repeating: "A: b\r\n", count: 3) + "\r\n", limits: limits)) != nil)
    }

    @Test func responsesEchoCSeqAndCountTheBody() {
        let response = RTSPResponse(status: 200, cseq: 9, headers: [("Content-Type", "application/sdp"), ("X", "a\r\nInjected: 1")],
                                    body: Array("v=0\r\n".utf8))
        let text = String(decoding: response.bytes, as: UTF8.self)
        #expect(text == "RTSP/1.0 200 OK\r\nCSeq: 9\r\nContent-Type: application/sdp\r\nX: a Injected: 1\r\nContent-Length: 5\r\n\r\nv=0\r\n")
        #expect(String(decoding: RTSPResponse(status: 461, cseq: nil).bytes, as: UTF8.self) == "RTSP/1.0 461 Unsupported Transport\r\n\r\n")
    }

    @Test func transportHeaders() throws {
        let udp = try RTSPTransport.parseList("RTP/AVP;unicast;client_port=5000-5001")
        #expect(udp == [RTSPTransport(profile: "RTP/AVP", lowerTransport: .udp, unicast: true, clientPorts: (5000, 5001), interleaved: false)])
        let ffmpeg = try RTSPTransport.parseList("RTP/AVP/UDP;unicast;client_port=5000-5001")
        #expect(ffmpeg[0].lowerTransport == .udp && ffmpeg[0].clientPorts?.rtp == 5000)
        let spaced = try RTSPTransport.parseList(" rtp/avp ; Unicast ; client_port = 6000 ; mode=\"PLAY\";ssrc=1234ABCD")
        #expect(spaced[0].profile == "RTP/AVP" && spaced[0].unicast && spaced[0].clientPorts?.rtp == 6000 && spaced[0].clientPorts?.rtcp == nil)
        let tcp = try RTSPTransport.parseList("RTP/AVP/TCP;unicast;interleaved=0-1")
        #expect(tcp[0].lowerTransport == .tcp && tcp[0].interleaved && tcp[0].clientPorts == nil)
        let list = try RTSPTransport.parseList("RTP/AVP/TCP;interleaved=0-1,RTP/AVP;multicast,RTP/AVP;unicast;client_port=7000-7001")
        #expect(list.map(\.lowerTransport) == [.tcp, .udp, .udp])
        #expect(list.map(\.unicast) == [true, false, true])

        func status(_ value: String) -> Int? {
            do { _ = try RTSPTransport.parseList(value) } catch { return error.status }
            return nil
        }
        #expect(status("") == 400)
        #expect(status(",") == 400)
        #expect(status("RAW/RAW/UDP;unicast") == 461)
        #expect(status("RTP/AVP/SCTP;unicast") == 461)
        #expect(status("RTP;unicast") == 461)
        #expect(status("RTP/AVP;client_port=0-1") == 400)
        #expect(status("RTP/AVP;client_port=5001-5000") == 400)
        #expect(status("RTP/AVP;client_port=70000-70001") == 400)
        #expect(status("RTP/AVP;client_port=a-b") == 400)
        #expect(status("RTP/AVP;client_port=1-2-3") == 400)
        #expect(status("RTP/AVP;client_port") == 400)
    }

    @Test func sdpControlAttributeRoundTrips() throws {
        let sdp = SDPSessionDescription(connectionAddress: "0.0.0.0", port: 0, control: "track1")
        #expect(sdp.text.contains("a=control:track1\r\n"))
        #expect(try SDPSessionDescription(parsing: sdp.text) == sdp)
        #expect(!SDPSessionDescription(connectionAddress: "0.0.0.0", port: 0).text.contains("a=control"))
    }
}
