import MediaFormats
import StreamEngine
import UringIO

/// The SDP file of flow `index`: `path` itself for the first, `NAME-<index>.EXT` for the others
/// (the extension: what follows the last dot of the last path component, unless that dot
/// begins it, as in `.hidden`).
func sdpFilePath(_ path: String, flow index: Int) -> String {
    guard index > 0 else { return path }
    let name = path.lastIndex(of: "/").map { path.index(after: $0) } ?? path.startIndex
    guard let dot = path[name...].lastIndex(of: "."), dot > name else { return "\(path)-\(index)" }
    return "\(path[..<dot])-\(index)\(path[dot...])"
}

/// Writes an SDP that ffplay, VLC and GStreamer open to receive the stream at `destination`.
/// With `crypto` (SRTP) the file holds the key: only its owner may read it.
/// A multicast `destination` gets its TTL on the c= line and, with `ssmSource`, an `a=source-filter`.
func writeSDP(to path: String, destination: SocketAddress, headers: [[UInt8]], fps: Int, payloadType: UInt8,
              rtcpMux: Bool, crypto: SDPCrypto? = nil, multicastTTL: Int = 1, ssmSource: String? = nil,
              retransmission: SDPSessionDescription.Retransmission? = nil) throws {
    var sdp = SDPSessionDescription.hevc(
        parameterSets: headers, sessionID: UInt64(realtimeNanoseconds() / 1_000_000_000), sessionVersion: 1,
        sessionName: "streamer", originAddress: destination.host, connectionAddress: destination.host,
        port: destination.port, payloadType: payloadType, rtcpMux: rtcpMux, frameRate: (fps, 1), crypto: crypto,
        retransmission: retransmission)
    if destination.isMulticast {
        sdp.multicastTTL = multicastTTL
        sdp.sourceFilter = ssmSource
        if let ssmSource { sdp.originAddress = ssmSource }
    }
    if crypto != nil {
        try writeOwnerOnly(sdp.text, to: path)
    } else {
        try replaceFile(path, with: Array(sdp.text.utf8))
    }
}

/// Writes one SDP per flow (the first at `path`, the others beside it: ``sdpFilePath(_:flow:)``)
/// for the stream with these parameter sets; `sender`, when given, names each flow's SSRCs.
func writeSDPFiles(_ path: String, flows: [MediaSenderConfig], parameterSets: [[UInt8]], frameRate: Int,
                   ssmSource: String? = nil, sender: MediaSender? = nil) throws {
    for (index, flow) in flows.enumerated() {
        try writeSDP(to: sdpFilePath(path, flow: index), destination: flow.destination, headers: parameterSets,
                     fps: frameRate, payloadType: flow.payloadType, rtcpMux: flow.rtcpMux,
                     crypto: flow.srtp.map { SDPCrypto(suite: $0.suite.rawValue, inlineKey: $0.inlineBase64) },
                     multicastTTL: flow.multicastTTL, ssmSource: ssmSource,
                     retransmission: sender.map { $0.sdpRetransmission(flow: index) } ?? flow.sdpRetransmission)
    }
}
