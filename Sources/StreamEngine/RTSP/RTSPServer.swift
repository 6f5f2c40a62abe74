import Dispatch
import Glibc
import MediaFormats
import Synchronization
import UringIO

/// Configuration of an RTSP server for one live stream.
public struct RTSPServerConfig: Sendable {
    /// Where to listen for RTSP clients (TCP).
    public var listen: SocketAddress
    /// The sender of the stream; `destination` and `localPort` are set per client at PLAY.
    public var sender: MediaSenderConfig
    /// The stream's path: clients open `rtsp://host:port/<path>`.
    public var path = "stream"
    /// Access units sent to the client, counted from PLAY (nil: until the source ends).
    public var frameLimit: Int?
    /// Frame rate written in the SDP (a=framerate).
    public var frameRate: Int?
    /// Bounds on each request.
    public var limits = RTSPLimits()
    /// A request that has begun must be complete within this (milliseconds), or 408.
    public var requestTimeoutMilliseconds: Int32 = 10_000
    /// A connection that sends nothing this long before PLAY is closed (milliseconds).
    public var idleTimeoutMilliseconds: Int32 = 60_000
    /// The session timeout announced in the Session header (seconds).
    public var sessionTimeoutSeconds = 60

    /// Makes a configuration with the defaults.
    public init(listen: SocketAddress, sender: MediaSenderConfig) {
        self.listen = listen
        self.sender = sender
    }
}

/// Serves one live HEVC stream over RTSP/1.0 (RFC 2326) with RTP over UDP unicast.
///
/// Clients are served one at a time: OPTIONS, DESCRIBE (SDP with the parameter sets),
/// SETUP (`RTP/AVP;unicast;client_port=a-b`; TCP interleaving is refused with 461),
/// PLAY, GET_PARAMETER (keepalive), TEARDOWN. At PLAY a `MediaSender` starts toward the
/// client's RTP port from the server ports announced in SETUP, so the client's RTCP
/// receiver reports reach the sender's feedback socket. The first client that plays is
/// the last: when its session ends (TEARDOWN, connection closed, or the stream finished)
/// `run` returns. A client that leaves before PLAY, or sends a malformed request (answered
/// 4xx, then disconnected), makes room for the next.
///
/// `run` owns the listener and runs on one thread; other threads talk to it through `gate`.
public final class RTSPServer {
    /// The configuration.
    public let config: RTSPServerConfig
    /// Where the source hands its access units (any thread).
    public let gate: RTSPMediaGate
    private let listener: TCPListener
    private let wake: WakeEvent

    /// Listens on `config.listen`. `socket(2)`, `bind(2)`, `listen(2)`.
    public init(config: RTSPServerConfig) throws(SystemError) {
        self.config = config
        listener = try TCPListener(config.listen)
        wake = try WakeEvent()
        gate = RTSPMediaGate(frameLimit: config.frameLimit, wake: wake)
    }

    /// The address listened on (with the port the kernel chose when it was 0).
    public func localAddress() throws(SystemError) -> SocketAddress { try listener.localAddress() }

    /// Serves clients until one has played and its session ended, or the gate finishes with
    /// no client playing. `parameterSets` are the stream's VPS, SPS and PPS (for the SDP);
    /// `onPlay` gets each sender as it starts, `onEvent` one line per notable event.
    /// Throws when the listener fails or the sender cannot start (its ports taken).
    public func run(parameterSets: [[UInt8]], onPlay: (MediaSender) -> Void = { _ in },
                    onEvent: (String) -> Void = { _ in }) throws {
        while !gate.isDone {
            guard let connection = try listener.accept(timeoutMilliseconds: -1, wake: wake) else { continue }
            gate.updateStats { $0.connections += 1 }
            var session = RTSPSession(server: self, connection: connection, parameterSets: parameterSets)
            let played = try session.serve(onPlay: onPlay, onEvent: onEvent)
            if played { return }
        }
        gate.updateStats { $0.ended = $0.ended ?? "finished" }
    }

    fileprivate var wakeEvent: WakeEvent { wake }
}

/// One client connection and its session, served on the server's thread.
private struct RTSPSession {
    let server: RTSPServer
    let connection: TCPConnection
    let parameterSets: [[UInt8]]
    var buffer: [UInt8] = []
    /// When the incomplete request in `buffer` began (monotonic nanoseconds).
    var requestStarted: Int64?
    var sessionID: String?
    var clientPort: UInt16?
    /// The server port pair announced in SETUP, held bound for the session so nothing takes it
    /// (the sender takes the ports over at PLAY while this still holds them).
    var reservation: (rtp: UDPSocket, rtcp: UDPSocket, port: UInt16)?
    var playing: PlayingSender?
    /// Set when the connection must close after the current response.
    var closing = false

    init(server: RTSPServer, connection: TCPConnection, parameterSets: [[UInt8]]) {
        self.server = server
        self.connection = connection
        self.parameterSets = parameterSets
    }

    var config: RTSPServerConfig { server.config }
    var gate: RTSPMediaGate { server.gate }

    /// Serves requests until the connection closes or the session ends. Returns whether a
    /// sender was started (then the server is done).
    mutating func serve(onPlay: (MediaSender) -> Void, onEvent: (String) -> Void) throws -> Bool {
        onEvent("RTSP client \(connection.peer) connected")
        while true {
            if let playing, playing.isDone { end("finished"); break }
            if gate.isDone && playing == nil { end("stopped"); break }
            let now = monotonicNanoseconds()
            var timeout = playing == nil ? config.idleTimeoutMilliseconds : -1
            if let requestStarted {
                let left = Int64(config.requestTimeoutMilliseconds) - (now - requestStarted) / 1_000_000
                timeout = Int32(clamping: max(0, left))
            }
            let result: TCPConnection.ReadResult
            do { result = try connection.read(maxBytes: 4096, timeoutMilliseconds: timeout, wake: server.wakeEvent) }
            catch { onEvent("RTSP client \(connection.peer): \(error)"); end("closed"); break }
            switch result {
            case .woken:
                continue
            case .closed:
                onEvent("RTSP client \(connection.peer) closed the connection")
                end("closed")
            case .timedOut:
                if requestStarted != nil {
                    reject(RTSPRequestError(status: 408, "request not complete within \(config.requestTimeoutMilliseconds) ms"),
                           onEvent: onEvent)
                } else {
                    onEvent("RTSP client \(connection.peer) idle, disconnected")
                }
                end("closed")
            case .data(let bytes):
                if requestStarted == nil { requestStarted = now }
                buffer += bytes
                handleBuffered(onPlay: onPlay, onEvent: onEvent)
            }
            if closing { break }
        }
        if let playing {
            playing.stopAndWait()
            if let failure = playing.failure { throw failure }
            return true
        }
        return false
    }

    /// Records why the session ended (once) and closes after the current response.
    mutating func end(_ reason: String) {
        closing = true
        if playing != nil { gate.updateStats { $0.ended = $0.ended ?? reason } }
    }

    /// Answers every complete request in the buffer.
    mutating func handleBuffered(onPlay: (MediaSender) -> Void, onEvent: (String) -> Void) {
        while !closing {
            let parsed: (request: RTSPRequest, consumed: Int)?
            do { parsed = try RTSPRequest.parse(buffer[...], limits: config.limits) } catch {
                reject(error, onEvent: onEvent)
                end("closed")
                return
            }
            guard let (request, consumed) = parsed else { return }
            buffer.removeFirst(consumed)
            requestStarted = buffer.isEmpty ? nil : monotonicNanoseconds()
            gate.updateStats { $0.requests += 1 }
            let response = respond(to: request, onPlay: onPlay, onEvent: onEvent)
            if response.status >= 400 {
                gate.updateStats { $0.rejected += 1 }
                onEvent("RTSP \(request.method) from \(connection.peer): \(response.status) \(RTSPResponse.reasonPhrase(response.status))")
            }
            send(response)
        }
    }

    /// Answers a request that could not be parsed, then the connection closes.
    mutating func reject(_ error: RTSPRequestError, onEvent: (String) -> Void) {
        gate.updateStats { $0.rejected += 1 }
        onEvent("RTSP client \(connection.peer): \(error); disconnected")
        send(RTSPResponse(status: error.status, cseq: error.cseq))
        // Closing with unread input would reset the connection and could destroy the answer
        // before the client reads it: say FIN, then discard input briefly (bounded) first.
        connection.shutdownWrite()
        var discarded = 0
        while discarded < 256 * 1024, case .data(let bytes)? = try? connection.read(maxBytes: 16_384, timeoutMilliseconds: 500) {
            discarded += bytes.count
        }
    }

    mutating func send(_ response: RTSPResponse) {
        do { try connection.write(response.bytes) } catch { end("closed") }
    }

    mutating func respond(to request: RTSPRequest, onPlay: (MediaSender) -> Void,
                          onEvent: (String) -> Void) -> RTSPResponse {
        let cseq = request.cseq
        if let given = request.header("Session"), request.method != "OPTIONS" {
            let id = String((given.split(separator: ";").first ?? "").filter { $0 != " " && $0 != "\t" })
            guard id == sessionID else { return RTSPResponse(status: 454, cseq: cseq) }
        }
        switch request.method {
        case "OPTIONS":
            return RTSPResponse(status: 200, cseq: cseq, headers: [("Public", "OPTIONS, DESCRIBE, SETUP, PLAY, TEARDOWN, GET_PARAMETER")])
        case "DESCRIBE":
            guard streamPath(of: request.uri).map(String.init) == [config.path] else { return RTSPResponse(status: 404, cseq: cseq) }
            return describe(cseq: cseq)
        case "SETUP":
            return setup(request, onEvent: onEvent)
        case "PLAY":
            return play(cseq: cseq, onPlay: onPlay, onEvent: onEvent)
        case "TEARDOWN":
            guard sessionID != nil else { return RTSPResponse(status: 454, cseq: cseq) }
            onEvent("RTSP client \(connection.peer) sent TEARDOWN")
            end("teardown")
            return RTSPResponse(status: 200, cseq: cseq, headers: sessionHeader)
        case "GET_PARAMETER":
            return RTSPResponse(status: 200, cseq: cseq, headers: sessionHeader)
        case "PAUSE", "ANNOUNCE", "RECORD", "SET_PARAMETER", "REDIRECT":
            return RTSPResponse(status: 405, cseq: cseq, headers: [("Allow", "OPTIONS, DESCRIBE, SETUP, PLAY, TEARDOWN, GET_PARAMETER")])
        default:
            return RTSPResponse(status: 501, cseq: cseq)
        }
    }

    var sessionHeader: [(name: String, value: String)] {
        sessionID.map { [("Session", "\($0);timeout=\(config.sessionTimeoutSeconds)")] } ?? []
    }

    /// The path components of an `rtsp://host[:port]/a/b` or `/a/b` URI.
    func streamPath(of uri: String) -> [Substring] {
        var rest = Substring(uri)
        if let scheme = rest.firstRange(of: "://") {
            rest = rest[scheme.upperBound...]
            rest = rest.firstIndex(of: "/").map { rest[$0...] } ?? ""
        }
        if let query = rest.firstIndex(of: "?") { rest = rest[..<query] }
        return rest.split(separator: "/")
    }

    func describe(cseq: Int) -> RTSPResponse {
        let local = (try? connection.localAddress()) ?? config.listen
        let sdp = SDPSessionDescription.hevc(
            parameterSets: parameterSets, sessionID: UInt64(realtimeNanoseconds() / 1_000_000_000), sessionVersion: 1,
            sessionName: "streamer", originAddress: local.host,
            connectionAddress: local.family == .ipv6 ? "::" : "0.0.0.0", port: 0, payloadType: config.sender.payloadType,
            frameRate: config.frameRate.map { ($0, 1) }, control: "track1", retransmission: config.sender.sdpRetransmission)
        let base = "rtsp://\(local)/\(config.path)/"
        return RTSPResponse(status: 200, cseq: cseq, headers: [("Content-Base", base), ("Content-Type", "application/sdp")],
                            body: Array(sdp.text.utf8))
    }

    mutating func setup(_ request: RTSPRequest, onEvent: (String) -> Void) -> RTSPResponse {
        let cseq = request.cseq
        guard playing == nil else { return RTSPResponse(status: 455, cseq: cseq) }
        let path = streamPath(of: request.uri)
        guard path.first.map(String.init) == config.path, path.count <= 2 else { return RTSPResponse(status: 404, cseq: cseq) }
        guard let header = request.header("Transport") else { return RTSPResponse(status: 461, cseq: cseq) }
        let offered: [RTSPTransport]
        do { offered = try RTSPTransport.parseList(header) } catch { return RTSPResponse(status: error.status, cseq: cseq) }
        // We send RTCP to the RTP port + 1, so only such a pair (or a lone RTP port) will do.
        guard let chosen = offered.first(where: {
            $0.lowerTransport == .udp && $0.unicast && !$0.interleaved && $0.profile == "RTP/AVP"
                && $0.clientPorts.map { $0.rtcp == nil || Int($0.rtcp!) == Int($0.rtp) + 1 } == true
        }), let ports = chosen.clientPorts, ports.rtp < 65_535 else {
            return RTSPResponse(status: 461, cseq: cseq)
        }
        reservation = nil
        guard let pair = Self.reservePortPair(family: connection.peer.family) else {
            onEvent("RTSP SETUP: no free UDP port pair")
            return RTSPResponse(status: 503, cseq: cseq)
        }
        reservation = pair
        clientPort = ports.rtp
        if sessionID == nil { sessionID = String(UInt64.random(in: 1...UInt64.max), radix: 16) }
        let transport = "RTP/AVP;unicast;client_port=\(ports.rtp)-\(Int(ports.rtp) + 1);server_port=\(pair.port)-\(Int(pair.port) + 1)"
        return RTSPResponse(status: 200, cseq: cseq, headers: [("Transport", transport)] + sessionHeader)
    }

    mutating func play(cseq: Int, onPlay: (MediaSender) -> Void, onEvent: (String) -> Void) -> RTSPResponse {
        guard sessionID != nil else { return RTSPResponse(status: 455, cseq: cseq) }
        if playing != nil { return RTSPResponse(status: 200, cseq: cseq, headers: sessionHeader) }
        guard let reserved = reservation, let clientPort else { return RTSPResponse(status: 455, cseq: cseq) }
        var senderConfig = config.sender
        senderConfig.destination = connection.peer
        senderConfig.destination.port = clientPort
        senderConfig.localPort = reserved.port
        senderConfig.takesOverReservedPorts = true
        // The sender binds the reserved ports when it runs, while the reservation still holds
        // them (both sockets let them be shared; the sender's, once bound, shares with no one),
        // and the reservation stays with the session: at no moment are the ports free for
        // another socket to take (a test run in parallel took one in such a gap once). The
        // sender's sockets, connected to the client, get the client's datagrams.
        let sender: MediaSender
        do { sender = try MediaSender(config: senderConfig) } catch {
            reservation = nil
            onEvent("RTSP PLAY: \(error)")
            return RTSPResponse(status: 500, cseq: cseq)
        }
        onPlay(sender)
        gate.updateStats { $0.client = senderConfig.destination.description }
        playing = PlayingSender(sender: sender, wake: server.wakeEvent)
        gate.play(sender)
        onEvent("RTSP client \(connection.peer) playing: RTP to \(senderConfig.destination) from port \(reserved.port)")
        return RTSPResponse(status: 200, cseq: cseq, headers: sessionHeader + [("Range", "npt=0.000-")])
    }

    /// Binds an even UDP port and the next one (on the wildcard address), so SETUP can
    /// announce a pair that is free. Nil when none was found in 64 tries.
    static func reservePortPair(family: SocketAddress.Family) -> (rtp: UDPSocket, rtcp: UDPSocket, port: UInt16)? {
        let wildcard = family == .ipv6 ? "::" : "0.0.0.0"
        for _ in 0..<64 {
            // Bound unshared (a port no one else holds), then shared for the sender's take-over.
            guard let rtp = try? UDPSocket(family: family), (try? rtp.bind(SocketAddress(ip: wildcard, port: 0)!)) != nil,
                  let port = try? rtp.localAddress().port, port % 2 == 0, port < 65_534,
                  let rtcp = try? UDPSocket(family: family),
                  (try? rtcp.bind(SocketAddress(ip: wildcard, port: port + 1)!)) != nil,
                  (try? rtp.allowSharedPort()) != nil, (try? rtcp.allowSharedPort()) != nil else { continue }
            return (rtp, rtcp, port)
        }
        return nil
    }
}

/// A `MediaSender` running on a thread of its own.
private final class PlayingSender: Sendable {
    let sender: MediaSender
    private let done = DispatchSemaphore(value: 0)
    private let state = Mutex<(finished: Bool, failure: (any Error)?)>((false, nil))

    init(sender: MediaSender, wake: WakeEvent) {
        self.sender = sender
        DispatchQueue.global().async { [self] in
            var failure: (any Error)?
            do { try sender.run() } catch { failure = error }
            state.withLock { $0 = (true, failure) }
            done.signal()
            wake.signal()
        }
    }

    /// The sender's run returned.
    var isDone: Bool { state.withLock { $0.finished } }
    /// What the sender's run threw, if anything.
    var failure: (any Error)? { state.withLock { $0.failure } }

    /// Stops the sender (what is in flight completes) and waits for its run to return.
    func stopAndWait() {
        if !isDone { sender.stop() }
        done.wait()
        done.signal()  // later waits return at once
    }
}
