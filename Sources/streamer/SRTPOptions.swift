import Glibc
import MediaFormats
import SecureRTP
import UringIO

/// `--srtp`, `--srtp-key @FILE`, `--srtp-suite` (and, for `recv`, `--sdp FILE`): where the
/// SRTP master key comes from. Nothing here ever prints the key.
struct SRTPOptions {
    /// `--srtp`: a fresh random key.
    var fresh = false
    /// `--srtp-key @FILE`.
    var keyFile: String?
    /// `--srtp-suite`.
    var suite: SRTPSuite?
    /// `recv --sdp FILE`: the key and suite of its a=crypto line.
    var sdpFile: String?

    static let suiteNames = SRTPSuite.allCases.map(\.rawValue).joined(separator: ", ")

    /// Takes `argument` if it is one of the SRTP options (`sdp`: whether `--sdp` is one here).
    /// Returns false for any other option.
    mutating func parse(_ argument: String, _ reader: inout ArgumentReader, sdp: Bool) throws -> Bool {
        switch argument {
        case "--srtp": fresh = true
        case "--srtp-key":
            let value = try reader.value(for: argument)
            guard value.hasPrefix("@"), value.count > 1 else {
                throw UsageError("--srtp-key: give the key as @FILE (a key on the command line shows in ps)")
            }
            keyFile = String(value.dropFirst())
        case "--srtp-suite":
            let value = try reader.value(for: argument)
            guard let parsed = SRTPSuite(rawValue: value) else {
                throw UsageError("--srtp-suite: '\(value)' is not one of \(Self.suiteNames)")
            }
            suite = parsed
        case "--sdp" where sdp: sdpFile = try reader.value(for: argument)
        default: return false
        }
        return true
    }

    /// The key these options name (nil: no SRTP). Throws a one-line usage error without the key.
    func key() throws -> SRTPMasterKey? {
        guard [fresh, keyFile != nil, sdpFile != nil].filter({ $0 }).count <= 1 else {
            throw UsageError("--srtp, --srtp-key and --sdp: give the key one way only")
        }
        let suite = self.suite ?? .aesCM128HMACSHA1_80
        if let sdpFile, let sdp = try sessionDescription() {
            guard let crypto = sdp.crypto else { return nil }  // a plain RTP stream
            guard let named = SRTPSuite(rawValue: crypto.suite) else {
                throw UsageError("--sdp: '\(sdpFile)': crypto suite '\(crypto.suite)' is not one of \(Self.suiteNames)")
            }
            return try checked(SRTPMasterKey(suite: named, base64: crypto.inlineKey), suite: named)
        }
        if let keyFile { return try checked(SRTPMasterKey(suite: suite, base64: try Self.readKeyFile(keyFile)), suite: suite) }
        guard fresh || self.suite == nil else { throw UsageError("--srtp-suite: needs --srtp or --srtp-key") }
        return fresh ? try checked(.random(suite: suite), suite: suite) : nil
    }

    /// `recv --sdp FILE` parsed; nil without `--sdp`. Throws a one-line usage error.
    func sessionDescription() throws -> SDPSessionDescription? {
        guard let sdpFile else { return nil }
        guard let bytes = contentsOfFile(atPath: sdpFile), let text = String(validating: bytes, as: UTF8.self) else {
            throw UsageError("--sdp: cannot read '\(sdpFile)' as UTF-8 text")
        }
        do { return try SDPSessionDescription(parsing: text) } catch { throw UsageError("--sdp: '\(sdpFile)': \(error)") }
    }

    private func checked(_ make: @autoclosure () throws -> SRTPMasterKey, suite: SRTPSuite) throws -> SRTPMasterKey {
        guard SRTPSession.isSupported(suite) else {
            throw UsageError("SRTP suite \(suite) is not supported by this libsrtp2 build")
        }
        do { return try make() } catch let error as SRTPError { throw UsageError(error.description) }
    }

    /// The text of a key file only its owner can read; refused (one line, no key) otherwise.
    static func readKeyFile(_ path: String) throws -> String {
        var status = stat()
        guard stat(path, &status) == 0 else {
            throw UsageError("--srtp-key: cannot read '\(path)': \(String(cString: strerror(errno)))")
        }
        guard status.st_mode & 0o077 == 0 else {
            throw UsageError("--srtp-key: '\(path)' can be read or written by others (chmod 600 '\(path)')")
        }
        guard status.st_size <= 4096, let bytes = contentsOfFile(atPath: path, limit: 4096),
              let text = String(validating: bytes, as: UTF8.self) else {
            throw UsageError("--srtp-key: cannot read '\(path)' as a short text file")
        }
        return text
    }
}

/// Writes `text` to `path` readable by its owner only (it carries a key): a new file under a
/// temporary name, renamed over `path`.
func writeOwnerOnly(_ text: String, to path: String) throws {
    let temporary = "\(path).\(getpid()).tmp"
    let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_EXCL, 0o600)
    guard fd >= 0 else { throw UsageError("cannot write '\(path)': \(String(cString: strerror(errno)))") }
    let bytes = Array(text.utf8)
    let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
    guard written == bytes.count, rename(temporary, path) == 0 else {
        unlink(temporary)
        throw UsageError("cannot write '\(path)'")
    }
}

/// The `srtp` object of the stats JSON (null without SRTP): the suite, packets protected and
/// unprotected, and every rejection reason (0 when none).
func srtpStatsObject(_ stats: SRTPStats?) -> Any {
    guard let stats else { return StatsJSON.Null() }
    var object: [String: Any] = [
        "suite": stats.suite.rawValue, "protectFailed": stats.protectFailed, "sourcesReplaced": stats.sourcesReplaced,
        "protected": ["rtp": stats.rtpProtected, "rtcp": stats.rtcpProtected],
        "unprotected": ["rtp": stats.rtpUnprotected, "rtcp": stats.rtcpUnprotected],
    ]
    for reason in SRTPRejection.allCases { object[reason.rawValue] = stats.rejected[reason] ?? 0 }
    return object
}
