// Writes the seed corpus for the fuzz targets (run by tools/make-fuzz-corpus, which
// compiles this file together with Sources/MediaFormats). Packets and texts come from
// MediaFormats' own serializers; the HEVC stream given as the first argument (from x265
// via ffmpeg) supplies real VPS/SPS/PPS/IDR/slice NAL units.
//
//   corpus-generator <out-dir> <stream.hevc>

#if canImport(Glibc)
import Glibc
#endif

let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    print("usage: corpus-generator <out-dir> <stream.hevc>")
    exit(2)
}
let outDirectory = arguments[1]
let hevcPath = arguments[2]

func readFile(_ path: String) -> [UInt8] {
    guard let file = fopen(path, "rb") else { fatalError("cannot open \(path)") }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = fread(&chunk, 1, chunk.count, file)
        if count <= 0 { break }
        bytes += chunk[0..<count]
    }
    return bytes
}

var written = 0
@MainActor func write(_ target: String, _ name: String, _ bytes: [UInt8]) {
    let directory = "\(outDirectory)/\(target)"
    mkdir(outDirectory, 0o755)
    mkdir(directory, 0o755)
    guard let file = fopen("\(directory)/\(name)", "wb") else { fatalError("cannot write \(directory)/\(name)") }
    _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
    fclose(file)
    written += 1
}

func be16(_ value: Int) -> [UInt8] { [UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)] }
func be32(_ value: UInt32) -> [UInt8] { be16(Int(value >> 16)) + be16(Int(value & 0xFFFF)) }

// MARK: Real HEVC access units

let hevc = readFile(hevcPath)
var splitter = AnnexBAccessUnitSplitter()
let accessUnits = (splitter.append(hevc) + splitter.finish()).enumerated().map { index, unit in
    AccessUnit(nalUnits: unit.nalUnits, timestamp: UInt32(index) * 9000, isKeyframe: unit.isKeyframe)
}
precondition(accessUnits.count >= 3 && accessUnits[0].isKeyframe, "expected an IDR and at least 3 access units")
let parameterSets = accessUnits[0].nalUnits.filter { (32...34).contains(Int($0[0] >> 1)) }

// MARK: annexb: [limit byte (0x80: default limit)] [chunk seed, 4 bytes] [Annex B stream]

func annexBSeed(_ stream: [UInt8], limit: UInt8 = 0x80, extra: UInt8 = 0, seed: UInt32 = 0x1234_5677) -> [UInt8] {
    (limit & 0x80 != 0 ? [limit] : [limit, extra]) + be32(seed) + stream
}
// The whole file when it is small; else as many access units as fit in 16 KiB.
var prefix: [UInt8] = []
for unit in accessUnits where prefix.count + unit.annexB.count <= 16_000 { prefix += unit.annexB }
write("annexb", "x265-stream", annexBSeed(prefix))
write("annexb", "x265-idr-small-limit", annexBSeed(accessUnits[0].annexB, limit: 0x10, extra: 7))
write("annexb", "x265-p-frames-bytewise", annexBSeed(accessUnits[1].annexB + accessUnits[2].annexB, seed: 0x0000_0101))
let aud: [UInt8] = [0x46, 0x01, 0x50]
let prefixSEI: [UInt8] = [0x4E, 0x01, 0x05, 0x02, 0xAA, 0xBB, 0x80]
let suffixSEI: [UInt8] = [0x50, 0x01, 0x05, 0x02, 0xCC, 0xDD, 0x80]
var synthetic: [UInt8] = []
for nal in [aud] + parameterSets + [prefixSEI] + accessUnits[0].nalUnits.filter({ $0[0] >> 1 < 32 }) + [suffixSEI] {
    synthetic += [0, 0, 0, 1] + nal
}
for nal in [aud] + accessUnits[1].nalUnits { synthetic += [0, 0, 1] + nal + [0] }
write("annexb", "aud-sei-three-and-four-byte-start-codes", annexBSeed([0x55, 0x00] + synthetic))

// MARK: rtp-depacketizer raw mode: [0x00] [reorder window] [max AU, 2 bytes] [(length, RTP packet)...]

func rtpPacket(_ payload: [UInt8], sequence: UInt16, timestamp: UInt32, marker: Bool, ssrc: UInt32 = 0x5EED,
               csrcs: Int = 0, extensionWords: Int = 0, padding: Int = 0) -> [UInt8] {
    var packet = RTPHeader(marker: marker, payloadType: 96, sequenceNumber: sequence, timestamp: timestamp, ssrc: ssrc).bytes
    packet[0] |= UInt8(csrcs)
    for index in 0..<csrcs { packet += be32(UInt32(0xC500 + index)) }
    if extensionWords > 0 {
        packet[0] |= 0x10
        packet += [0xBE, 0xDE] + be16(extensionWords) + [UInt8](repeating: 0x11, count: 4 * extensionWords)
    }
    packet += payload
    if padding > 0 {
        packet[0] |= 0x20
        packet += [UInt8](repeating: 0, count: padding - 1) + [UInt8(padding)]
    }
    return packet
}

func packetize(_ units: [AccessUnit], budget: Int, firstSequence: UInt16 = 1000) -> [[UInt8]] {
    let packetizer = try! HEVCPacketizer(maxPayloadSize: budget)
    var packets: [[UInt8]] = []
    var sequence = firstSequence
    for unit in units {
        for payload in packetizer.plan(unit) {
            packets.append(rtpPacket(packetizer.bytes(of: payload, of: unit), sequence: sequence,
                                     timestamp: unit.timestamp, marker: payload.marker))
            sequence &+= 1
        }
    }
    return packets
}

func depacketizerSeed(_ packets: [[UInt8]], window: UInt8 = 32, maxAU: Int = 0xFFFF) -> [UInt8] {
    var bytes: [UInt8] = [0x00, window] + be16(maxAU)
    for packet in packets where packet.count <= 0x7FF { bytes += be16(packet.count) + packet }
    return bytes
}

// Small budgets make FU start/middle/end; a large one makes APs of the parameter sets.
let fragmented = packetize(Array(accessUnits.prefix(2)), budget: 300)
write("rtp-depacketizer", "x265-fu-start-middle-end", depacketizerSeed(fragmented))
let aggregated = packetize(Array(accessUnits.prefix(3)), budget: 1400, firstSequence: 65530)
write("rtp-depacketizer", "x265-ap-single-wrap", depacketizerSeed(aggregated))
var reordered = fragmented
reordered.swapAt(2, 3)
reordered.swapAt(5, 7)
reordered.remove(at: 9)
reordered.insert(reordered[4], at: 6)
write("rtp-depacketizer", "x265-reorder-loss-duplicate", depacketizerSeed(reordered, window: 4))
write("rtp-depacketizer", "x265-small-window-small-limit", depacketizerSeed(fragmented, window: 0, maxAU: 600))
// Hand-made payloads: single NAL, AP, FU S/M/E, with CSRCs, an extension, padding; a new SSRC.
let vps = parameterSets.first ?? [0x40, 0x01, 0x0C]
let single = rtpPacket(vps, sequence: 7, timestamp: 0, marker: false, csrcs: 2)
let ap = rtpPacket([0x60, 0x01] + be16(3) + [0x42, 0x01, 0x01] + be16(4) + [0x44, 0x01, 0xC1, 0x72], sequence: 8,
                   timestamp: 0, marker: false, extensionWords: 1)
let fuStart = rtpPacket([0x62, 0x01, 0x80 | 19, 0xAF, 0x01, 0x02], sequence: 9, timestamp: 0, marker: false)
let fuMiddle = rtpPacket([0x62, 0x01, 19, 0x03, 0x04], sequence: 10, timestamp: 0, marker: false, padding: 4)
let fuEnd = rtpPacket([0x62, 0x01, 0x40 | 19, 0x05], sequence: 11, timestamp: 0, marker: true)
let otherSource = rtpPacket([0x02, 0x01, 0xD0, 0x11], sequence: 40000, timestamp: 3000, marker: true, ssrc: 0xBEEF)
write("rtp-depacketizer", "single-ap-fu-csrc-extension-padding-ssrc-change",
      depacketizerSeed([single, ap, fuStart, fuMiddle, fuEnd, otherSource], window: 8))
// Round-trip mode: [0x01] [window] [budget, 2] [first sequence, 2] [timestamp, 4] [unit count] [NAL specs...] [swap bits...]
var roundTrip: [UInt8] = [0x01, 4] + be16(60) + be16(65534) + be32(90000) + [3]
for (type, size) in [(32, 20), (33, 40), (19, 300)] as [(UInt8, Int)] {
    roundTrip += [1, type, 0] + be16(size) + (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
}
roundTrip += [0, 1, 0] + be16(120) + [UInt8](repeating: 0x5A, count: 120)
roundTrip += [0, 1, 0] + be16(10) + [UInt8](repeating: 0x33, count: 10)
roundTrip += [UInt8](repeating: 0x01, count: 4) + [UInt8](repeating: 0x00, count: 4) + [1, 0, 1]
write("rtp-depacketizer", "roundtrip-mode", roundTrip)

// MARK: rtcp: compound packets from the serializers

let block = RTCPReportBlock(ssrc: 0xA1, fractionLost: 25, cumulativeLost: -3, extendedHighestSequence: 0x1_0005,
                            jitter: 77, lastSR: 0x1234_5678, delaySinceLastSR: 65536)
let sr = RTCPPacket.senderReport(RTCPSenderReport(ssrc: 0x5EED, ntpTimestamp: 0xE9A3_0000_8000_0000, rtpTimestamp: 90000,
                                                  packetCount: 300, octetCount: 400_000, reportBlocks: [block]))
let rr = RTCPPacket.receiverReport(RTCPReceiverReport(ssrc: 0xA1, reportBlocks: [block, block]))
let rrEmpty = RTCPPacket.receiverReport(RTCPReceiverReport(ssrc: 0xA1))
let sdes = RTCPPacket.sourceDescription(RTCPSourceDescription(chunks: [
    .init(ssrc: 0x5EED, cname: "sender@streamer"), .init(ssrc: 0xA1, cname: nil), .init(ssrc: 0xA2, cname: "ü"),
]))
let bye = RTCPPacket.goodbye(RTCPGoodbye(ssrcs: [0x5EED, 0xA1], reason: "shutting down"))
let pli = RTCPPacket.pictureLossIndication(RTCPPictureLossIndication(senderSSRC: 0xA1, mediaSSRC: 0x5EED))
let nack = RTCPPacket.genericNACK(RTCPGenericNACK(senderSSRC: 0xA1, mediaSSRC: 0x5EED,
                                                  sequenceNumbers: [65534, 65535, 0, 3, 17, 40]))
let ccfb = RTCPPacket.congestionControlFeedback(RTCPCongestionControlFeedback(
    senderSSRC: 0xA1,
    reports: [
        .init(mediaSSRC: 0x5EED, beginSequence: 65533, metrics: [
            .init(received: true, ecn: 2, arrivalTimeOffset: 12), .notReceived,
            .init(received: true, ecn: 3, arrivalTimeOffset: 0x1FFE),
        ]),
        .init(mediaSSRC: 0x5EEE, beginSequence: 9, metrics: [.init(received: true, ecn: 1, arrivalTimeOffset: 1), .notReceived]),
    ],
    reportTimestamp: 0xABCD_1234))
for (name, packet) in [("sr", sr), ("rr", rr), ("rr-empty", rrEmpty), ("sdes", sdes), ("bye", bye), ("pli", pli),
                       ("nack", nack), ("ccfb", ccfb)] {
    write("rtcp", name, RTCPCompoundBuilder.build([packet]))
}
write("rtcp", "compound-sr-sdes-bye", RTCPCompoundBuilder.build([sr, sdes, bye]))
write("rtcp", "compound-rr-sdes-pli-nack-ccfb", RTCPCompoundBuilder.build([rr, sdes, pli, nack, ccfb]))
// Texts are bytes, not decoded UTF-8: CNAMEs and a BYE reason of 255 bytes of invalid UTF-8
// (which once came back as 765 bytes of U+FFFD and broke the round trip).
write("rtcp", "sdes-invalid-utf8-255", RTCPCompoundBuilder.build([
    .sourceDescription(RTCPSourceDescription(chunks: [
        .init(ssrc: 1, cname: RTCPText(bytes: [UInt8](repeating: 0xFF, count: 255))),
        .init(ssrc: 2, cname: RTCPText(bytes: [UInt8](repeating: 0x80, count: 255))),
    ])),
    .goodbye(RTCPGoodbye(ssrcs: [1], reason: RTCPText(bytes: (0..<255).map { $0 % 2 == 0 ? 0xC3 : 0x41 }))),
]))
// An APP packet (unknown type, skipped) and a padded RR, written by hand.
write("rtcp", "app-and-padded-rr", [0x80, 204, 0, 2] + be32(0xA1) + Array("name".utf8)
      + [0xA0, 201, 0, 2] + be32(0xA1) + [0, 0, 0, 4])

// MARK: y4m: [chunk seed, 4 bytes] [stream]

func y4m(_ header: String, frames: Int, frameLine: String = "FRAME", width: Int = 16, height: Int = 16) -> [UInt8] {
    var bytes = Array((header + "\n").utf8)
    for index in 0..<frames {
        bytes += Array((frameLine + "\n").utf8)
        bytes += (0..<(width * height * 3 / 2)).map { UInt8(truncatingIfNeeded: $0 &+ index) }
    }
    return bytes
}
write("y4m", "basic", be32(0x0BAD_5EED) + y4m("YUV4MPEG2 W16 H16 F30:1 Ip A1:1 C420jpeg", frames: 2))
write("y4m", "ffmpeg-style", be32(0x1111_1111) + y4m("YUV4MPEG2 W8 H6 F30000:1001 It A0:0 C420mpeg2 XYSCSS=420MPEG2",
                                                     frames: 3, frameLine: "FRAME Ib", width: 8, height: 6))
write("y4m", "minimal-truncated", be32(0x2222_2223) + Array(y4m("YUV4MPEG2 W2 H2 F1:1", frames: 3, width: 2, height: 2).dropLast(2)))
write("y4m", "bad-colorspace", be32(5) + Array("YUV4MPEG2 W16 H16 F25:1 C444\nFRAME\n".utf8))

// MARK: sdp: text from SDPSessionDescription.text, and an ffmpeg-style one

let description = SDPSessionDescription(
    sessionID: 42, sessionVersion: 1, sessionName: "streamer", originAddress: "10.77.1.2", connectionAddress: "10.77.2.2",
    port: 5004, vps: parameterSets.filter { $0[0] >> 1 == 32 }, sps: parameterSets.filter { $0[0] >> 1 == 33 },
    pps: parameterSets.filter { $0[0] >> 1 == 34 }, rtcpPort: 5005, frameRate: (30000, 1001))
write("sdp", "streamer", Array(description.text.utf8))
let ipv6 = SDPSessionDescription(connectionAddress: "fd77:2::2", port: 6000, payloadType: 97, rtcpMux: true, frameRate: (25, 1))
write("sdp", "ipv6-mux", Array(ipv6.text.utf8))
write("sdp", "ffmpeg-style", Array("""
v=0
o=- 0 0 IN IP4 127.0.0.1
s=No Name
c=IN IP4 239.1.1.1/64
t=0 0
a=tool:libavformat 61.7.100
m=audio 5002 RTP/AVP 97
a=rtpmap:97 opus/48000/2
m=video 5004 RTP/AVP 96
c=IN IP4 10.0.0.2
b=AS:200
a=rtpmap:96 H265/90000
a=fmtp:96 sprop-vps=QAEMAf//AWAAAAMAkAAAAwAAAwA/ugJA; sprop-sps=QgEBAWAAAAMAkAAAAwAAAwA/oAoIDxZbpKTC/AAAAwAEAAADAHg=; sprop-pps=RAHBcrRiQA==
a=framerate:29.97

""".utf8))

// MARK: rtsp: what ffmpeg's RTSP client sends, and some that must be refused

write("rtsp", "options", Array("OPTIONS rtsp://127.0.0.1:8554/stream RTSP/1.0\r\nCSeq: 1\r\nUser-Agent: Lavf59.27.100\r\n\r\n".utf8))
write("rtsp", "describe", Array("DESCRIBE rtsp://127.0.0.1:8554/stream RTSP/1.0\r\nAccept: application/sdp\r\nCSeq: 2\r\n\r\n".utf8))
write("rtsp", "setup-udp", Array("SETUP rtsp://127.0.0.1:8554/stream/trackID=0 RTSP/1.0\r\nTransport: RTP/AVP/UDP;unicast;client_port=40000-40001\r\nCSeq: 3\r\n\r\n".utf8))
write("rtsp", "setup-tcp-and-udp", Array("SETUP rtsp://h/stream RTSP/1.0\r\nCSeq: 3\r\nTransport: RTP/AVP/TCP;unicast;interleaved=0-1, RTP/AVP;unicast;client_port=5000-5001\r\n\r\n".utf8))
write("rtsp", "play", Array("PLAY rtsp://127.0.0.1:8554/stream RTSP/1.0\r\nRange: npt=0.000-\r\nCSeq: 4\r\nSession: 12345678\r\n\r\n".utf8))
write("rtsp", "get-parameter-body", Array("GET_PARAMETER rtsp://h/stream RTSP/1.0\r\nCSeq: 5\r\nSession: 12345678\r\nContent-Length: 10\r\n\r\npacket_los".utf8))
write("rtsp", "teardown-pipelined", Array("TEARDOWN rtsp://h/stream RTSP/1.0\r\nCSeq: 6\r\n\r\nOPTIONS * RTSP/1.0\r\nCSeq: 7\r\n\r\n".utf8))
write("rtsp", "bad-version", Array("OPTIONS * RTSP/2.0\r\nCSeq: 1\r\n\r\n".utf8))
write("rtsp", "no-cseq", Array("OPTIONS * RTSP/1.0\r\n\r\n".utf8))
write("rtsp", "bare-lf", Array("OPTIONS * RTSP/1.0\nCSeq: 1\n\n".utf8))

// MARK: sequence: [mode] ...; free mode: [0x00] [(sequence, step)...]; model mode: [0x01] [span, 2] [origin...] [offsets...]

var free: [UInt8] = [0x00]
for sequence in [100, 101, 103, 102, 102, 104, 5000, 5001, 5002, 99, 104 + 4096, 65535, 0, 1] {
    free += be16(sequence) + [0x31]
}
write("sequence", "free-gaps-reorder-duplicate-restart", free)
var wrap: [UInt8] = [0x00]
for sequence in (65500...65535).map({ $0 }) + (0..<40).map({ $0 }) where sequence % 7 != 3 { wrap += be16(sequence) + [0x22] }
write("sequence", "free-wrap-with-loss", wrap)
var model: [UInt8] = [0x01] + be16(199) + [0x01, 0x03]
for offset in [10, 11, 13, 12, 12, 40, 2, 150, 149, 198, 0] { model += be16(offset) }
write("sequence", "model-near-wrap", model)

print("corpus-generator: wrote \(written) files to \(outDirectory)")
