import Foundation
import Glibc
import MediaFormats
import StreamEngine
import Testing
import UringIO

/// A blocking RTSP client on loopback for the tests: one request, one parsed response.
private final class RTSPTestClient {
    struct Response {
        var status: Int
        var headers: [String: String]
        var body: String
    }

    let fd: Int32
    private var buffer: [UInt8] = []

    init(port: UInt16) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(connected == 0, "connect: errno \(errno)")
    }

    deinit { close(fd) }

    /// Sends `method uri` with CSeq `cseq` and `headers`; returns the response.
    func request(_ method: String, _ uri: String, cseq: Int, _ headers: [String] = []) throws -> Response {
        try send(([ "\(method) \(uri) RTSP/1.0", "CSeq: \(cseq)"] + headers).joined(separator: "\r\n") + "\r\n\r\n")
        return try response()
    }

    func send(_ text: String) throws {
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        try #require(written == bytes.count)
    }

    /// The next response (status line, headers, a Content-Length body).
    func response() throws -> Response {
        let end: Int = try readUntil { buffer in
            buffer.indices.dropLast(3).first { Array(buffer[$0..<($0 + 4)]) == Array("\r\n\r\n".utf8) }.map { $0 + 4 }
        }
        let head = String(decoding: buffer[..<end], as: UTF8.self)
        var lines = head.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        let statusLine = lines.removeFirst().split(separator: " ")
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[String(line[..<colon]).lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let length = Int(headers["content-length"] ?? "0") ?? 0
        _ = try readUntil { $0.count >= end + length ? end + length : nil }
        let body = String(decoding: buffer[end..<(end + length)], as: UTF8.self)
        buffer.removeFirst(end + length)
        return Response(status: Int(statusLine.count > 1 ? statusLine[1] : "") ?? -1, headers: headers, body: body)
    }

    /// Whether the server closed the connection (a read returns end of file).
    func isClosedByServer() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(fd, &chunk, chunk.count)
            if count == 0 { return true }
            if count < 0 { return false }  // timed out: still open
        }
    }

    private func readUntil(_ done: ([UInt8]) -> Int?) throws -> Int {
        while true {
            if let result = done(buffer) { return result }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = read(fd, &chunk, chunk.count)
            if count < 0 && errno == EINTR { continue }
            try #require(count > 0, "connection closed or failed (errno \(errno)) with \(buffer.count) bytes unanswered")
            buffer += chunk[..<count]
        }
    }
}

/// VPS, SPS, PPS (types 32, 33, 34) and an IDR slice (19), with made-up payloads: what the
/// server puts in its SDP and sends, not something a decoder could use.
private let parameterSets: [[UInt8]] = [[0x40, 0x01, 0x0C, 0x01], [0x42, 0x01, 0x01, 0x60], [0x44, 0x01, 0xC1, 0x72]]
private let keyframe = AccessUnit(nalUnits: parameterSets + [[0x26, 0x01, 0xAF, 0x05, 0x11]], timestamp: 0, isKeyframe: true)

/// Binds a UDP socket on 127.0.0.1 to an even port whose next port is free too: a client's
/// RTP port for SETUP. Returns the descriptor and the port.
private func clientRTPSocket() throws -> (fd: Int32, port: UInt16) {
    for _ in 0..<64 {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length); return getsockname(fd, $0, &length) }
        }
        let port = UInt16(bigEndian: address.sin_port)
        if port % 2 == 0 && port < 65_534 {
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            return (fd, port)
        }
        close(fd)
    }
    throw CocoaError(.featureUnsupported)
}

/// RTSP request handling of `RTSPServer` (Sources/StreamEngine/RTSP/RTSPServer.swift and
/// RTSPMediaGate.swift), driven by a TCP client on loopback: each method, each refusal, and
/// what the server counts. Asserts on the responses and on the RTP bytes that arrive.
@Suite(.enabled(if: uringAvailable, "io_uring is disabled on this kernel"))
struct RTSPRequestHandlingTests {
    /// Starts a server on 127.0.0.1 (any port) on its own thread; `done` is signalled when `run` returns.
    static func startServer(frameLimit: Int? = nil) throws -> (RTSPServer, UInt16, DispatchSemaphore) {
        var config = RTSPServerConfig(listen: SocketAddress(ip: "127.0.0.1", port: 0)!,
                                      sender: MediaSenderConfig(destination: SocketAddress(ip: "127.0.0.1", port: 9)!))
        config.frameLimit = frameLimit
        config.frameRate = 30
        let server = try RTSPServer(config: config)
        let port = try server.localAddress().port
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) let running = server  // run on its thread; the test only reads the gate's stats
        Thread {
            try? running.run(parameterSets: parameterSets)
            done.signal()
        }.start()
        return (server, port, done)
    }

    /// OPTIONS, DESCRIBE, SETUP, PLAY, GET_PARAMETER, TEARDOWN, with the refusals a client can
    /// meet on the way (404 unknown path, 461 TCP interleaving or no Transport, 455 PLAY before
    /// SETUP, 454 another session, 405 PAUSE, 501 an unknown method); after PLAY the stream's
    /// RTP reaches the client's port, and TEARDOWN ends the run.
    @Test func aWholeSessionAndItsRefusals() throws {
        let (server, port, done) = try Self.startServer()
        let client = try RTSPTestClient(port: port)
        let url = "rtsp://127.0.0.1:\(port)/stream"

        let options = try client.request("OPTIONS", "*", cseq: 1)
        #expect(options.status == 200 && options.headers["cseq"] == "1")
        #expect(options.headers["public"] == "OPTIONS, DESCRIBE, SETUP, PLAY, TEARDOWN, GET_PARAMETER")

        let describe = try client.request("DESCRIBE", url, cseq: 2, ["Accept: application/sdp"])
        #expect(describe.status == 200)
        #expect(describe.headers["content-type"] == "application/sdp")
        #expect(describe.headers["content-base"] == "\(url)/")
        let sdp = try SDPSessionDescription(parsing: describe.body)
        #expect(sdp.vps == [parameterSets[0]] && sdp.sps == [parameterSets[1]] && sdp.pps == [parameterSets[2]])
        #expect(sdp.payloadType == 96 && sdp.encodingName == "H265")
        #expect(try client.request("DESCRIBE", "rtsp://127.0.0.1:\(port)/other", cseq: 3).status == 404)

        let rtp = try clientRTPSocket()
        defer { close(rtp.fd) }
        let tcp = try client.request("SETUP", "\(url)/track1", cseq: 4, ["Transport: RTP/AVP/TCP;unicast;interleaved=0-1"])
        #expect(tcp.status == 461)
        #expect(try client.request("SETUP", "\(url)/track1", cseq: 5).status == 461)  // no Transport header
        #expect(try client.request("PLAY", url, cseq: 6).status == 455)  // no session yet

        let setup = try client.request("SETUP", "\(url)/track1", cseq: 7,
                                       ["Transport: RTP/AVP;unicast;client_port=\(rtp.port)-\(rtp.port + 1)"])
        #expect(setup.status == 200)
        let session = try #require(setup.headers["session"]?.split(separator: ";").first.map(String.init))
        #expect(setup.headers["session"] == "\(session);timeout=60")
        let transport = try #require(setup.headers["transport"])
        #expect(transport.hasPrefix("RTP/AVP;unicast;client_port=\(rtp.port)-\(rtp.port + 1);server_port="))

        #expect(try client.request("PLAY", url, cseq: 8, ["Session: 0123"]).status == 454)
        let pause = try client.request("PAUSE", url, cseq: 9, ["Session: \(session)"])
        #expect(pause.status == 405 && pause.headers["allow"] != nil)
        #expect(try client.request("RECORD-ME", url, cseq: 10).status == 501)

        let play = try client.request("PLAY", url, cseq: 11, ["Session: \(session)"])
        #expect(play.status == 200 && play.headers["range"] == "npt=0.000-")
        #expect(server.gate.serverStats.client == "127.0.0.1:\(rtp.port)")

        // The stream starts at a keyframe: its RTP arrives at the client's port, payload type 96,
        // carrying the keyframe's NAL units (an aggregation packet, or one packet each).
        server.gate.send(keyframe)
        var datagram = [UInt8](repeating: 0, count: 2048)
        var received = recv(rtp.fd, &datagram, datagram.count, 0)
        while received < 0 && errno == EINTR { received = recv(rtp.fd, &datagram, datagram.count, 0) }
        try #require(received > 12, "no RTP datagram at the client's port (errno \(errno))")
        #expect(datagram[0] >> 6 == 2 && datagram[1] & 0x7F == 96)
        #expect(try client.request("GET_PARAMETER", url, cseq: 12, ["Session: \(session)"]).status == 200)

        let teardown = try client.request("TEARDOWN", url, cseq: 13, ["Session: \(session)"])
        #expect(teardown.status == 200)
        #expect(done.wait(timeout: .now() + 10) == .success, "run returns after TEARDOWN")
        let stats = server.gate.serverStats
        #expect(stats.connections == 1 && stats.requests == 13)
        #expect(stats.rejected == 7)  // 404, 461 twice, 455, 454, 405, 501
        #expect(stats.ended == "teardown")
        #expect(server.gate.senderStats.framesSent == 1)
    }

    /// A request that does not parse is answered 4xx and the connection closed; the server then
    /// serves the next client, and a gate that finishes with nobody playing ends the run.
    @Test func aMalformedRequestIsAnsweredAndTheNextClientServed() throws {
        let (server, port, done) = try Self.startServer()
        let bad = try RTSPTestClient(port: port)
        try bad.send("HELLO\r\n\r\n")
        let answer = try bad.response()
        #expect((400...499).contains(answer.status), "status \(answer.status)")
        #expect(bad.isClosedByServer())

        let next = try RTSPTestClient(port: port)
        #expect(try next.request("OPTIONS", "*", cseq: 1).status == 200)
        // A SETUP for a path that is not the stream's.
        #expect(try next.request("SETUP", "rtsp://127.0.0.1:\(port)/elsewhere/track1", cseq: 2,
                                 ["Transport: RTP/AVP;unicast;client_port=5000-5001"]).status == 404)
        server.gate.finish()
        #expect(done.wait(timeout: .now() + 10) == .success, "run returns when the gate finishes")
        let stats = server.gate.serverStats
        #expect(stats.connections == 2 && stats.rejected == 2)
        #expect(stats.client == nil)
    }
}
