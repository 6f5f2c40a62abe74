/// Size limits for RTSP requests read from a client. A request past any of them is rejected
/// (and the connection closed by the server), so a client cannot make the server hold
/// unbounded memory.
public struct RTSPLimits: Sendable, Equatable {
    /// The request line and the headers, with their line ends and the blank line.
    public var maxHeaderBytes = 16 * 1024
    /// One line (request line or header), without its line end.
    public var maxLineLength = 4096
    /// Header lines in one request.
    public var maxHeaderCount = 64
    /// The body (`Content-Length`).
    public var maxBodyBytes = 4096

    /// The defaults: 16 KB of headers, 4 KB lines, 64 headers, 4 KB body.
    public init() {}
}

/// Why a request was rejected: the status code to answer with, and a one-line reason.
public struct RTSPRequestError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The RTSP status code for the response (400, 413, 431, 505...).
    public var status: Int
    /// What was wrong, e.g. `header line 3 has no ':'`.
    public var reason: String
    /// The request's CSeq when it could be read (to echo in the error response).
    public var cseq: Int?

    /// Makes an error.
    public init(status: Int, _ reason: String, cseq: Int? = nil) {
        self.status = status
        self.reason = reason
        self.cseq = cseq
    }

    public var description: String { "rtsp: \(status) \(RTSPResponse.reasonPhrase(status)): \(reason)" }
}

/// An RTSP/1.0 request (RFC 2326): request line, headers, body.
public struct RTSPRequest: Sendable, Equatable {
    /// The method as sent (`OPTIONS`, `DESCRIBE`, `SETUP`, ...); methods are case-sensitive.
    public var method: String
    /// The request URI as sent (`rtsp://host:port/stream`, or `*`).
    public var uri: String
    /// Headers in order, names as sent.
    public var headers: [(name: String, value: String)]
    /// The body (`Content-Length` bytes).
    public var body: [UInt8]
    /// The CSeq header's value (every request carries one).
    public var cseq: Int

    /// The first header of that name (case-insensitive), its value trimmed.
    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.name.lowercased() == wanted }?.value
    }

    /// Equal when method, URI, headers, body and CSeq are.
    public static func == (lhs: RTSPRequest, rhs: RTSPRequest) -> Bool {
        lhs.method == rhs.method && lhs.uri == rhs.uri && lhs.body == rhs.body && lhs.cseq == rhs.cseq
            && lhs.headers.map(\.name) == rhs.headers.map(\.name) && lhs.headers.map(\.value) == rhs.headers.map(\.value)
    }

    /// Reads one request from the start of `bytes` (what a client sent so far).
    ///
    /// - Returns: the request and how many bytes it took, or nil when more bytes are needed
    ///   (and the limits still allow them).
    /// - Throws: `RTSPRequestError` for a malformed request or one past `limits`; the
    ///   connection cannot be trusted to resynchronize after it.
    public static func parse(_ bytes: ArraySlice<UInt8>, limits: RTSPLimits = RTSPLimits())
        throws(RTSPRequestError) -> (request: RTSPRequest, consumed: Int)?
    {
        // Find the end of the header block, checking line lengths as we go: a client must
        // not be able to make us wait on (and buffer) an endless line.
        var lines: [ArraySlice<UInt8>] = []
        var lineStart = bytes.startIndex
        var index = bytes.startIndex
        var headerEnd: Int?
        while index < bytes.endIndex {
            if index - bytes.startIndex >= limits.maxHeaderBytes {
                throw RTSPRequestError(status: 431, "headers longer than \(limits.maxHeaderBytes) bytes")
            }
            if bytes[index] == 0x0A {  // LF; a CR before it is dropped
                var line = bytes[lineStart..<index]
                if line.last == 0x0D { line = line.dropLast() }
                index += 1
                lineStart = index
                if line.isEmpty {
                    if lines.isEmpty { continue }  // RFC 2326 lets a client send CRLF between requests
                    headerEnd = index
                    break
                }
                lines.append(line)
                if lines.count > limits.maxHeaderCount + 1 {
                    throw RTSPRequestError(status: 431, "more than \(limits.maxHeaderCount) header lines")
                }
                continue
            }
            if index - lineStart >= limits.maxLineLength {
                throw RTSPRequestError(status: lines.isEmpty ? 414 : 431, "a line longer than \(limits.maxLineLength) bytes")
            }
            index += 1
        }
        guard let headerEnd else {
            if bytes.count >= limits.maxHeaderBytes {
                throw RTSPRequestError(status: 431, "headers longer than \(limits.maxHeaderBytes) bytes")
            }
            return nil
        }

        let requestLine = try text(lines[0], what: "request line")
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty else {
            throw RTSPRequestError(status: 400, "request line is not 'METHOD URI RTSP/1.0'")
        }
        guard parts[0].utf8.allSatisfy(isTokenCharacter) else {
            throw RTSPRequestError(status: 400, "method '\(parts[0].prefix(32))' is not a token")
        }
        var headers: [(name: String, value: String)] = []
        for (number, line) in lines.dropFirst().enumerated() {
            let header = try text(line, what: "header line \(number + 1)")
            guard let colon = header.firstIndex(of: ":") else {
                throw RTSPRequestError(status: 400, "header line \(number + 1) has no ':'")
            }
            let name = header[..<colon]
            // Leading white space would be an obsolete folded continuation line: not accepted.
            guard !name.isEmpty, name.utf8.allSatisfy(isTokenCharacter) else {
                throw RTSPRequestError(status: 400, "header line \(number + 1) has a bad name")
            }
            headers.append((String(name), trimmed(header[header.index(after: colon)...])))
        }
        let cseqTexts = headers.filter { $0.name.lowercased() == "cseq" }.map(\.value)
        let cseq = cseqTexts.count == 1 ? Int(cseqTexts[0]).flatMap { $0 >= 0 && $0 <= Int(UInt32.max) ? $0 : nil } : nil
        guard parts[2] == "RTSP/1.0" else {
            let status = parts[2].hasPrefix("RTSP/") ? 505 : 400
            throw RTSPRequestError(status: status, "version '\(parts[2].prefix(16))' is not RTSP/1.0", cseq: cseq)
        }
        guard let cseq else {
            throw RTSPRequestError(status: 400, cseqTexts.isEmpty ? "no CSeq header" : "bad or repeated CSeq header")
        }

        var bodyLength = 0
        let lengths = headers.filter { $0.name.lowercased() == "content-length" }.map(\.value)
        if !lengths.isEmpty {
            guard lengths.count == 1, let length = Int(lengths[0]), length >= 0 else {
                throw RTSPRequestError(status: 400, "bad Content-Length", cseq: cseq)
            }
            guard length <= limits.maxBodyBytes else {
                throw RTSPRequestError(status: 413, "body of \(length) bytes (at most \(limits.maxBodyBytes))", cseq: cseq)
            }
            bodyLength = length
        }
        guard bytes.endIndex - headerEnd >= bodyLength else { return nil }
        let request = RTSPRequest(method: String(parts[0]), uri: String(parts[1]), headers: headers,
                                  body: Array(bytes[headerEnd..<headerEnd + bodyLength]), cseq: cseq)
        return (request, headerEnd + bodyLength - bytes.startIndex)
    }

    /// A line as text: UTF-8 without control characters other than tab.
    private static func text(_ line: ArraySlice<UInt8>, what: String) throws(RTSPRequestError) -> String {
        guard line.allSatisfy({ $0 >= 0x20 && $0 != 0x7F || $0 == 0x09 }),
              let text = String(validating: line, as: UTF8.self) else {
            throw RTSPRequestError(status: 400, "\(what) has control characters or is not UTF-8")
        }
        return text
    }

    /// RFC 2616 token characters: visible ASCII except separators.
    private static func isTokenCharacter(_ byte: UInt8) -> Bool {
        byte > 0x20 && byte < 0x7F && !"()<>@,;:\\\"/[]?={}".utf8.contains(byte)
    }
}

/// An RTSP/1.0 response: status, headers (CSeq first), optional body.
public struct RTSPResponse: Sendable, Equatable {
    /// The status code.
    public var status: Int
    /// The CSeq echoed from the request (nil when the request had none that could be read).
    public var cseq: Int?
    /// Further headers in order. CR and LF in names or values are replaced by spaces when written.
    public var headers: [(name: String, value: String)]
    /// The body; `Content-Length` is added when it is not empty.
    public var body: [UInt8]

    /// Makes a response.
    public init(status: Int, cseq: Int?, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.cseq = cseq
        self.headers = headers
        self.body = body
    }

    /// Equal when status, CSeq, headers and body are.
    public static func == (lhs: RTSPResponse, rhs: RTSPResponse) -> Bool {
        lhs.status == rhs.status && lhs.cseq == rhs.cseq && lhs.body == rhs.body
            && lhs.headers.map(\.name) == rhs.headers.map(\.name) && lhs.headers.map(\.value) == rhs.headers.map(\.value)
    }

    /// The response as bytes on the wire.
    public var bytes: [UInt8] {
        var text = "RTSP/1.0 \(status) \(Self.reasonPhrase(status))\r\n"
        if let cseq { text += "CSeq: \(cseq)\r\n" }
        for header in headers { text += "\(Self.clean(header.name)): \(Self.clean(header.value))\r\n" }
        if !body.isEmpty { text += "Content-Length: \(body.count)\r\n" }
        text += "\r\n"
        return Array(text.utf8) + body
    }

    /// The reason phrase of a status code (RFC 2326 section 7.1.1).
    public static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 400: return "Bad Request"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 408: return "Request Timeout"
        case 413: return "Request Entity Too Large"
        case 414: return "Request-URI Too Large"
        case 431: return "Request Header Fields Too Large"
        case 454: return "Session Not Found"
        case 455: return "Method Not Valid in This State"
        case 459: return "Aggregate Operation Not Allowed"
        case 461: return "Unsupported Transport"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 503: return "Service Unavailable"
        case 505: return "RTSP Version Not Supported"
        default: return "Status \(status)"
        }
    }

    private static func clean(_ text: String) -> String {
        String(text.map { $0 == "\r" || $0 == "\n" || $0 == "\r\n" ? " " : $0 })
    }
}

/// One transport a client offers in a SETUP's `Transport` header (RFC 2326 section 12.39),
/// e.g. `RTP/AVP;unicast;client_port=5000-5001` or `RTP/AVP/TCP;interleaved=0-1`.
public struct RTSPTransport: Sendable, Equatable {
    /// The lower transport.
    public enum LowerTransport: Sendable, Equatable { case udp, tcp }

    /// `RTP/AVP` (or `RTP/AVPF`, `RTP/SAVP`...) as sent, without the lower transport.
    public var profile: String
    /// UDP unless the spec says `/TCP`.
    public var lowerTransport: LowerTransport
    /// False when the spec says `multicast`.
    public var unicast: Bool
    /// `client_port=a-b` (or `=a`, then b is nil).
    public var clientPorts: (rtp: UInt16, rtcp: UInt16?)?
    /// `interleaved=a-b` was present.
    public var interleaved: Bool

    /// Equal when every field is.
    public static func == (lhs: RTSPTransport, rhs: RTSPTransport) -> Bool {
        lhs.profile == rhs.profile && lhs.lowerTransport == rhs.lowerTransport && lhs.unicast == rhs.unicast
            && lhs.clientPorts?.rtp == rhs.clientPorts?.rtp && lhs.clientPorts?.rtcp == rhs.clientPorts?.rtcp
            && lhs.interleaved == rhs.interleaved
    }

    /// Reads a `Transport` header's value: one spec per comma-separated entry, in the
    /// client's order of preference. Parameters we do not use are skipped; a spec that is
    /// not RTP, or has a malformed port range, is an error.
    public static func parseList(_ value: String) throws(RTSPRequestError) -> [RTSPTransport] {
        var specs: [RTSPTransport] = []
        for entry in value.split(separator: ",") {
            let fields = entry.split(separator: ";").map { trimmed($0) }
            guard let protocolText = fields.first, !protocolText.isEmpty else {
                throw RTSPRequestError(status: 400, "empty transport spec")
            }
            let names = protocolText.uppercased().split(separator: "/", omittingEmptySubsequences: false)
            guard names.count == 2 || names.count == 3, names[0] == "RTP", !names[1].isEmpty else {
                throw RTSPRequestError(status: 461, "transport '\(protocolText.prefix(32))' is not RTP/AVP")
            }
            var spec = RTSPTransport(profile: "RTP/" + names[1], lowerTransport: .udp, unicast: true,
                                     clientPorts: nil, interleaved: false)
            if names.count == 3 {
                switch names[2] {
                case "UDP": spec.lowerTransport = .udp
                case "TCP": spec.lowerTransport = .tcp
                default: throw RTSPRequestError(status: 461, "lower transport '\(names[2].prefix(16))' is not UDP or TCP")
                }
            }
            for field in fields.dropFirst() where !field.isEmpty {
                let (name, argument) = splitParameter(field)
                switch name.lowercased() {
                case "unicast": spec.unicast = true
                case "multicast": spec.unicast = false
                case "interleaved": spec.interleaved = true
                case "client_port":
                    guard let argument, let ports = portRange(argument) else {
                        throw RTSPRequestError(status: 400, "bad client_port '\((argument ?? "").prefix(32))'")
                    }
                    spec.clientPorts = ports
                default: continue
                }
            }
            specs.append(spec)
        }
        guard !specs.isEmpty else { throw RTSPRequestError(status: 400, "empty Transport header") }
        return specs
    }

    /// `name=value` (value trimmed, quotes kept) or a bare `name`.
    private static func splitParameter(_ field: String) -> (String, String?) {
        guard let equals = field.firstIndex(of: "=") else { return (field, nil) }
        return (trimmed(field[..<equals]), trimmed(field[field.index(after: equals)...]))
    }

    /// `5000-5001` or `5000`; ports 1...65535, the second above the first.
    private static func portRange(_ text: String) -> (rtp: UInt16, rtcp: UInt16?)? {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 1 || parts.count == 2, let first = UInt16(trimmed(parts[0])), first > 0 else { return nil }
        guard parts.count == 2 else { return (first, nil) }
        guard let second = UInt16(trimmed(parts[1])), second > first else { return nil }
        return (first, second)
    }
}

/// The text without leading and trailing spaces and tabs.
private func trimmed(_ text: some StringProtocol) -> String { String(text).trimmingSpaces }
