/// Why an SDP text was rejected.
public struct SDPError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What was wrong, one line: `sdp: line 5: bad m= line "m=video"`.
    public var description: String

    /// Makes an error with its message.
    public init(_ description: String) { self.description = description }
}

/// An SDP session description (RFC 8866) for one H.265 RTP stream (RFC 7798), in the
/// shape ffmpeg/ffplay, VLC and GStreamer open. `text` writes it; `init(parsing:)`
/// reads the fields back from such a description.
public struct SDPSessionDescription: Sendable, Hashable {
    /// Session id on the o= line.
    public var sessionID: UInt64
    /// Session version on the o= line.
    public var sessionVersion: UInt64
    /// The s= line (CR and LF are replaced by spaces when written; empty becomes "-").
    public var sessionName: String
    /// Address on the o= line; IP6 when it contains a colon.
    public var originAddress: String
    /// Address on the c= line (where to receive the media); IP6 when it contains a colon.
    public var connectionAddress: String
    /// RTP port on the m= line.
    public var port: UInt16
    /// Dynamic RTP payload type.
    public var payloadType: UInt8
    /// Encoding name on the rtpmap line.
    public var encodingName: String
    /// RTP clock rate on the rtpmap line.
    public var clockRate: UInt32
    /// sprop-vps: VPS NAL units, each with its 2-byte NAL unit header.
    public var vps: [[UInt8]]
    /// sprop-sps: SPS NAL units, each with its 2-byte NAL unit header.
    public var sps: [[UInt8]]
    /// sprop-pps: PPS NAL units, each with its 2-byte NAL unit header.
    public var pps: [[UInt8]]
    /// a=rtcp:<port>, when RTCP does not use RTP port + 1.
    public var rtcpPort: UInt16?
    /// a=rtcp-mux: RTCP shares the RTP port.
    public var rtcpMux: Bool
    /// a=framerate as numerator/denominator (e.g. 30000/1001), when known.
    public var frameRate: (numerator: Int, denominator: Int)?
    /// a=control: the media's URL for RTSP SETUP, absolute or relative to the Content-Base.
    public var control: String?
    /// a=crypto (RFC 4568 SDES, the first one read): the stream is SRTP, and the m= line's
    /// profile is written as RTP/SAVP. It holds the key: an SDP with one is a secret.
    public var crypto: SDPCrypto?
    /// The TTL written after an IPv4 multicast connection address (`c=IN IP4 239.1.2.3/TTL`,
    /// RFC 8866 5.7); nil for unicast. IPv6 c= lines carry none: it is not written for them.
    public var multicastTTL: Int?
    /// For source-specific multicast, the one source address the group is received from
    /// (`a=source-filter: incl IN IP4 GROUP SOURCE`, RFC 4570); nil: any source.
    public var sourceFilter: String?
    /// Loss recovery offered: RTP/AVPF with generic NACK feedback (RFC 4585), and RFC 4588
    /// retransmissions on a payload type of their own when that has one. nil: plain RTP/AVP.
    public var retransmission: Retransmission?

    /// Retransmission as an SDP offers it.
    public struct Retransmission: Sendable, Hashable {
        /// The RTX payload type (`a=rtpmap:<pt> rtx/<clock>`, `a=fmtp:<pt> apt=<media pt>`);
        /// nil: the original packets are resent on the media SSRC (`nack` feedback only).
        public var payloadType: UInt8?
        /// `rtx-time`: how long (milliseconds) the sender keeps packets to retransmit.
        public var rtxTime: Int
        /// The media and RTX SSRCs of `a=ssrc-group:FID` (both, when known).
        public var mediaSSRC: UInt32?
        /// See `mediaSSRC`.
        public var rtxSSRC: UInt32?
        /// The CNAME of both SSRCs (`a=ssrc:<ssrc> cname:<cname>`, RFC 5576), written with the
        /// `ssrc-group` only.
        public var cname: String?

        /// Makes a retransmission offer.
        public init(payloadType: UInt8? = 97, rtxTime: Int = 500, mediaSSRC: UInt32? = nil, rtxSSRC: UInt32? = nil,
                    cname: String? = nil) {
            self.payloadType = payloadType
            self.rtxTime = rtxTime
            self.mediaSSRC = mediaSSRC
            self.rtxSSRC = rtxSSRC
            self.cname = cname
        }
    }

    /// Makes a description; H265/90000 on payload type ``RTPHeader/defaultHEVCPayloadType``
    /// unless told otherwise.
    public init(
        sessionID: UInt64 = 0, sessionVersion: UInt64 = 0, sessionName: String = "streamer",
        originAddress: String = "127.0.0.1", connectionAddress: String, port: UInt16,
        payloadType: UInt8 = RTPHeader.defaultHEVCPayloadType, encodingName: String = "H265", clockRate: UInt32 = 90_000,
        vps: [[UInt8]] = [], sps: [[UInt8]] = [], pps: [[UInt8]] = [],
        rtcpPort: UInt16? = nil, rtcpMux: Bool = false, frameRate: (numerator: Int, denominator: Int)? = nil,
        control: String? = nil, crypto: SDPCrypto? = nil
    ) {
        self.sessionID = sessionID
        self.sessionVersion = sessionVersion
        self.sessionName = sessionName
        self.originAddress = originAddress
        self.connectionAddress = connectionAddress
        self.port = port
        self.payloadType = payloadType
        self.encodingName = encodingName
        self.clockRate = clockRate
        self.vps = vps
        self.sps = sps
        self.pps = pps
        self.rtcpPort = rtcpPort
        self.rtcpMux = rtcpMux
        self.frameRate = frameRate
        self.control = control
        self.crypto = crypto
    }

    /// A description of an H.265/90000 stream whose sprop-vps, sprop-sps and sprop-pps are
    /// the VPS, SPS and PPS NAL units among `parameterSets` (each with its NAL unit header, in
    /// any order; other NAL units are left out), in the order they come. The other
    /// parameters are those of ``init(sessionID:sessionVersion:sessionName:originAddress:connectionAddress:port:payloadType:encodingName:clockRate:vps:sps:pps:rtcpPort:rtcpMux:frameRate:control:)``.
    public static func hevc(
        parameterSets: [[UInt8]], sessionID: UInt64 = 0, sessionVersion: UInt64 = 0, sessionName: String = "streamer",
        originAddress: String = "127.0.0.1", connectionAddress: String, port: UInt16,
        payloadType: UInt8 = RTPHeader.defaultHEVCPayloadType, rtcpPort: UInt16? = nil, rtcpMux: Bool = false,
        frameRate: (numerator: Int, denominator: Int)? = nil, control: String? = nil, crypto: SDPCrypto? = nil,
        retransmission: Retransmission? = nil
    ) -> SDPSessionDescription {
        func units(_ type: HEVCNALUnitType) -> [[UInt8]] {
            parameterSets.filter { HEVCNALUnitType(nalUnit: $0) == type }
        }
        var description = SDPSessionDescription(
            sessionID: sessionID, sessionVersion: sessionVersion, sessionName: sessionName,
            originAddress: originAddress, connectionAddress: connectionAddress, port: port, payloadType: payloadType,
            vps: units(.vps), sps: units(.sps), pps: units(.pps), rtcpPort: rtcpPort, rtcpMux: rtcpMux,
            frameRate: frameRate, control: control, crypto: crypto)
        description.retransmission = retransmission
        return description
    }

    /// Equal when every field is.
    public static func == (lhs: SDPSessionDescription, rhs: SDPSessionDescription) -> Bool {
        lhs.sessionID == rhs.sessionID && lhs.sessionVersion == rhs.sessionVersion && lhs.sessionName == rhs.sessionName
            && lhs.originAddress == rhs.originAddress && lhs.connectionAddress == rhs.connectionAddress
            && lhs.port == rhs.port && lhs.payloadType == rhs.payloadType && lhs.encodingName == rhs.encodingName
            && lhs.clockRate == rhs.clockRate && lhs.vps == rhs.vps && lhs.sps == rhs.sps && lhs.pps == rhs.pps
            && lhs.rtcpPort == rhs.rtcpPort && lhs.rtcpMux == rhs.rtcpMux
            && lhs.frameRate?.numerator == rhs.frameRate?.numerator
            && lhs.frameRate?.denominator == rhs.frameRate?.denominator && lhs.control == rhs.control
            && lhs.crypto == rhs.crypto && lhs.multicastTTL == rhs.multicastTTL && lhs.sourceFilter == rhs.sourceFilter
            && lhs.retransmission == rhs.retransmission
    }

    /// Hashes the identifying fields.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(sessionID)
        hasher.combine(connectionAddress)
        hasher.combine(port)
        hasher.combine(payloadType)
        hasher.combine(sps)
    }

    /// The description as SDP text with CRLF line endings.
    public var text: String {
        var lines = [String]()
        lines.append("v=0")
        lines.append("o=- \(sessionID) \(sessionVersion) IN \(Self.family(originAddress)) \(Self.clean(originAddress))")
        let name = Self.clean(sessionName)
        lines.append("s=\(name.isEmpty ? "-" : name)")
        let ttl = multicastTTL.map { Self.family(connectionAddress) == "IP4" ? "/\($0)" : "" } ?? ""
        lines.append("c=IN \(Self.family(connectionAddress)) \(Self.clean(connectionAddress))\(ttl)")
        lines.append("t=0 0")
        let rtxType = retransmission?.payloadType.map { " \($0)" } ?? ""
        // RTP/AVP; S for SRTP (RFC 3711), F for feedback (RFC 4585): RTP/SAVPF with both (RFC 5124).
        let profile = "RTP/" + (crypto == nil ? "" : "S") + "AVP" + (retransmission == nil ? "" : "F")
        lines.append("m=video \(port) \(profile) \(payloadType)\(rtxType)")
        lines.append("a=rtpmap:\(payloadType) \(Self.clean(encodingName))/\(clockRate)")
        var sprops = [String]()
        for (name, units) in [("sprop-vps", vps), ("sprop-sps", sps), ("sprop-pps", pps)] where !units.isEmpty {
            sprops.append("\(name)=" + units.map(Base64.encode).joined(separator: ","))
        }
        if !sprops.isEmpty { lines.append("a=fmtp:\(payloadType) " + sprops.joined(separator: ";")) }
        if let retransmission {
            lines.append("a=rtcp-fb:\(payloadType) nack")
            lines.append("a=rtcp-fb:\(payloadType) nack pli")
            if let rtx = retransmission.payloadType {
                lines.append("a=rtpmap:\(rtx) rtx/\(clockRate)")
                lines.append("a=fmtp:\(rtx) apt=\(payloadType);rtx-time=\(retransmission.rtxTime)")
                if let media = retransmission.mediaSSRC, let rtxSSRC = retransmission.rtxSSRC {
                    lines.append("a=ssrc-group:FID \(media) \(rtxSSRC)")
                    if let cname = retransmission.cname {
                        for ssrc in [media, rtxSSRC] { lines.append("a=ssrc:\(ssrc) cname:\(Self.clean(cname))") }
                    }
                }
            }
        }
        if let rtcpPort { lines.append("a=rtcp:\(rtcpPort)") }
        if rtcpMux { lines.append("a=rtcp-mux") }
        if let frameRate, let formatted = Self.format(frameRate) { lines.append("a=framerate:\(formatted)") }
        if let control { lines.append("a=control:\(Self.clean(control))") }
        if let crypto { lines.append("a=crypto:" + Self.clean(crypto.attributeValue)) }
        if let sourceFilter {
            lines.append("a=source-filter: incl IN \(Self.family(sourceFilter)) \(Self.clean(connectionAddress)) \(Self.clean(sourceFilter))")
        }
        return lines.map { $0 + "\r\n" }.joined()
    }

    /// Reads a description back: connection address (media-level c= over session-level),
    /// port and payload type of the first video m= line, its rtpmap and fmtp sprops,
    /// rtcp, rtcp-mux, framerate, control, the first crypto, a multicast TTL, an inclusive source-filter, and
    /// loss recovery (AVPF, the RTX payload type, rtx-time, the FID ssrc-group and its CNAME). Accepts LF or CRLF endings; ignores other lines.
    public init(parsing text: String) throws(SDPError) {
        self.init(connectionAddress: "", port: 0)
        var sessionConnection: String?
        var mediaConnection: String?
        // The TTL of each level's c= line (nil: none): the one of the connection that is kept.
        var sessionTTL: Int?
        var mediaTTL: Int?
        var sawMedia = false
        var sawVideo = false
        var inVideo = false
        for (index, rawLine) in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }).enumerated() {
            let line = rawLine.hasSuffix("\r") ? rawLine.dropLast() : rawLine[...]
            let number = index + 1
            // RFC 8866 text excludes CR: a bare one inside a line could not be written back.
            guard !line.contains("\r") else { throw SDPError("sdp: line \(number): CR inside a line") }
            guard line.count >= 2, line.dropFirst().first == "=" else {
                if line.isEmpty { continue }
                throw SDPError("sdp: line \(number): not a type=value line")
            }
            let value = String(line.dropFirst(2))
            switch line.first {
            case "o":
                let fields = value.split(separator: " ")
                guard fields.count == 6, let id = UInt64(fields[1]), let version = UInt64(fields[2]) else {
                    throw SDPError("sdp: line \(number): bad o= line")
                }
                sessionID = id
                sessionVersion = version
                originAddress = String(fields[5])
            case "s":
                sessionName = value
            case "c":
                let fields = value.split(separator: " ")
                guard fields.count == 3, fields[0] == "IN", fields[1] == "IP4" || fields[1] == "IP6" else {
                    throw SDPError("sdp: line \(number): bad c= line")
                }
                let parts = fields[2].split(separator: "/", omittingEmptySubsequences: false)
                let address = String(parts[0])
                guard !address.isEmpty else { throw SDPError("sdp: line \(number): c= line without an address") }
                var ttl: Int?
                // A TTL is kept for an IPv4 address only (written back only for one).
                if fields[1] == "IP4", parts.count >= 2, Self.family(address) == "IP4" {
                    guard let value = Int(parts[1]), (0...255).contains(value) else {
                        throw SDPError("sdp: line \(number): bad TTL in c= line")
                    }
                    ttl = value
                }
                if !sawMedia { (sessionConnection, sessionTTL) = (address, ttl) } else if inVideo { (mediaConnection, mediaTTL) = (address, ttl) }
            case "m":
                sawMedia = true
                let fields = value.split(separator: " ")
                inVideo = !sawVideo && fields.first == "video"
                guard inVideo else { continue }
                guard fields.count >= 4, let mediaPort = UInt16(fields[1]), let type = UInt8(fields[3]) else {
                    throw SDPError("sdp: line \(number): bad m= line")
                }
                sawVideo = true
                port = mediaPort
                payloadType = type
                if fields[2] == "RTP/AVPF" || fields[2] == "RTP/SAVPF" {
                    retransmission = Retransmission(payloadType: nil)
                }
            case "a" where inVideo || !sawMedia:
                try parseAttribute(value, line: number)
            default:
                continue
            }
        }
        guard sawVideo else { throw SDPError("sdp: no m=video line") }
        guard let address = mediaConnection ?? sessionConnection else { throw SDPError("sdp: no c= line") }
        multicastTTL = mediaConnection != nil ? mediaTTL : sessionTTL
        connectionAddress = address
        // A CNAME is written only with an RTX ssrc-group: without one it is not kept.
        if let offer = retransmission, offer.payloadType == nil || offer.mediaSSRC == nil || offer.rtxSSRC == nil {
            retransmission?.cname = nil
        }
    }

    private mutating func parseAttribute(_ value: String, line number: Int) throws(SDPError) {
        let (name, argument) = Self.splitOnce(value, at: ":")
        switch name {
        case "rtpmap":
            let (type, mapping) = Self.splitOnce(argument, at: " ")
            if retransmission != nil, mapping.lowercased().hasPrefix("rtx/"), let rtx = UInt8(type) {
                retransmission?.payloadType = rtx
                return
            }
            guard UInt8(type) == payloadType else { return }
            let parts = mapping.split(separator: "/")
            guard parts.count >= 2, let rate = UInt32(parts[1]) else {
                throw SDPError("sdp: line \(number): bad rtpmap")
            }
            encodingName = String(parts[0])
            clockRate = rate
        case "fmtp":
            let (type, parameters) = Self.splitOnce(argument, at: " ")
            if let rtx = retransmission?.payloadType, UInt8(type) == rtx {
                for parameter in parameters.split(separator: ";") {
                    let (key, rawValue) = Self.splitOnce(String(parameter), at: "=")
                    if key.trimmingSpaces == "rtx-time", let time = Int(rawValue.trimmingSpaces) { retransmission?.rtxTime = time }
                }
                return
            }
            guard UInt8(type) == payloadType else { return }
            for parameter in parameters.split(separator: ";") {
                let (key, rawValue) = Self.splitOnce(String(parameter), at: "=")
                let trimmedKey = key.trimmingSpaces
                guard ["sprop-vps", "sprop-sps", "sprop-pps"].contains(trimmedKey) else { continue }
                var units = [[UInt8]]()
                for encoded in rawValue.trimmingSpaces.split(separator: ",") {
                    do {
                        units.append(try Base64.decode(String(encoded)))
                    } catch {
                        throw SDPError("sdp: line \(number): \(trimmedKey): \(error)")
                    }
                }
                switch trimmedKey {
                case "sprop-vps": vps = units
                case "sprop-sps": sps = units
                default: pps = units
                }
            }
        case "rtcp":
            guard let rtcp = UInt16(Self.splitOnce(argument, at: " ").0) else {
                throw SDPError("sdp: line \(number): bad a=rtcp")
            }
            rtcpPort = rtcp
        case "rtcp-mux":
            rtcpMux = true
        case "ssrc-group":
            let fields = argument.split(separator: " ")
            guard fields.count == 3, fields[0] == "FID", retransmission != nil else { return }
            retransmission?.mediaSSRC = UInt32(fields[1])
            retransmission?.rtxSSRC = UInt32(fields[2])
        case "ssrc":
            // RFC 5576 `a=ssrc:<ssrc> cname:<cname>`: the first CNAME of the stream's SSRCs.
            let (ssrc, attribute) = Self.splitOnce(argument, at: " ")
            guard retransmission != nil, retransmission?.cname == nil, UInt32(ssrc) != nil,
                  attribute.hasPrefix("cname:") else { return }
            retransmission?.cname = String(attribute.dropFirst("cname:".count))
        case "framerate":
            frameRate = Self.parseRate(argument)
        case "control":
            control = argument  // the video's own (later) line overrides a session-level one
        case "source-filter":
            // RFC 4570: `incl IN IP4 DEST SRC...`; the first source of an inclusive filter is taken.
            let fields = argument.split(separator: " ")
            guard fields.count >= 5, fields[1] == "IN", fields[2] == "IP4" || fields[2] == "IP6" else {
                throw SDPError("sdp: line \(number): bad a=source-filter (want incl IN IP4 DEST SRC)")
            }
            if fields[0] == "incl" { sourceFilter = String(fields[4]) }
        case "crypto":
            guard crypto == nil else { return }  // the first offer is the one taken
            guard let parsed = SDPCrypto(parsing: argument) else {
                throw SDPError("sdp: line \(number): bad a=crypto (want <tag> <suite> inline:<key>)")
            }
            crypto = parsed
        default:
            return
        }
    }

    private static func splitOnce(_ text: String, at separator: Character) -> (String, String) {
        guard let index = text.firstIndex(of: separator) else { return (text, "") }
        return (String(text[..<index]), String(text[text.index(after: index)...]))
    }

    private static func family(_ address: String) -> String { address.contains(":") ? "IP6" : "IP4" }

    /// One SDP line may not contain CR or LF: replace them so a value cannot add lines.
    private static func clean(_ text: String) -> String {
        String(text.map { $0 == "\r" || $0 == "\n" || $0 == "\r\n" ? " " : $0 })
    }

    /// "30" for 30/1, "29.97" for 30000/1001 (two decimals, rounded); nil for a bad rate.
    ///
    /// The bounds are on the value as written (above 0, whole part at most 1,000,000: what
    /// `parseRate` reads back), not on the ratio's terms: `parseRate("29149.7")` is 291497/10,
    /// written "29149.70", read back as 2914970/100, which must be written again the same way
    /// (a bound of 1,000,000 on the numerator dropped it: the SDP fuzz target's
    /// Tests/FuzzCorpus/sdp/regress-unstable-framerate-render).
    static func format(_ rate: (numerator: Int, denominator: Int)) -> String? {
        guard rate.numerator > 0, rate.denominator > 0, rate.numerator <= 1_000_000_000_000_000,
              rate.denominator <= 1_000_000_000_000_000 else { return nil }  // no overflow below
        if rate.numerator % rate.denominator == 0 {
            let whole = rate.numerator / rate.denominator
            return whole <= 1_000_000 ? "\(whole)" : nil
        }
        let hundredths = (rate.numerator * 100 + rate.denominator / 2) / rate.denominator
        guard hundredths > 0, hundredths / 100 <= 1_000_000 else { return nil }
        let fraction = hundredths % 100
        // Rounded to a whole number (2.997 -> 3): written as one, so rendering is stable.
        if fraction == 0 { return "\(hundredths / 100)" }
        return "\(hundredths / 100)." + (fraction < 10 ? "0\(fraction)" : "\(fraction)")
    }

    /// Reads "30" or "29.97" (at most 6 decimals) back as a ratio.
    static func parseRate(_ text: String) -> (numerator: Int, denominator: Int)? {
        let parts = text.trimmingSpaces.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count <= 2, let whole = Int(parts[0]), whole >= 0, whole <= 1_000_000 else { return nil }
        guard parts.count == 2 else { return whole > 0 ? (whole, 1) : nil }
        let digits = parts[1]
        guard !digits.isEmpty, digits.count <= 6, let fraction = Int(digits), fraction >= 0 else { return nil }
        var denominator = 1
        for _ in 0..<digits.count { denominator *= 10 }
        let numerator = whole * denominator + fraction
        return numerator > 0 ? (numerator, denominator) : nil
    }
}

extension String {
    /// The string without leading and trailing spaces and tabs.
    var trimmingSpaces: String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { $0 != " " && $0 != "\t" }),
            let last = scalars.lastIndex(where: { $0 != " " && $0 != "\t" })
        else { return "" }
        return String(scalars[first...last])
    }
}
