// Fuzz oracle of the `rtcp` target: Fuzz/Targets/rtcp.swift runs it under libFuzzer, and
// Fuzz/Tests/FuzzCorpusReplayTests.swift replays Tests/FuzzCorpus/rtcp through it in `swift test`.
//
// RTCPPacket.parseCompound (SR, RR, SDES, BYE, APP, PLI, Generic NACK, RFC 8888 CCFB, RFC 5760 RSI).
//
// Every decoded packet is serialized again and re-parsed: the parser must take back what
// the serializer writes, cleanly and as the same packet, alone and as one compound packet.
// `.unknown` packets have no body to write and are left out of the round trip.
//
// The round trip is strict: SDES CNAMEs and BYE reasons are kept as the bytes on the wire
// (`RTCPText`), valid UTF-8 or not, so what is written back is exactly what was read.

#if canImport(MediaFormats)  // in the test target (Fuzz/Tests); tools/fuzz compiles MediaFormats into the same module
@testable import MediaFormats
#endif

/// The rtcp target's checks on one input; a violated invariant goes to `fuzzCheck`.
func fuzzRTCP(_ input: UnsafeRawBufferPointer) {
    let result = RTCPPacket.parseCompound(input)
    for error in result.errors {
        fuzzCheck(error.offset >= 0 && error.offset < max(input.count, 1), "error offset \(error.offset) outside \(input.count) bytes")
        _ = error.description
    }
    var counters = RTCPParseCounters()
    counters.record(result)
    fuzzCheck(counters.packets == result.packets.count && counters.rejected == result.errors.count, "counters disagree")

    let known = result.packets.filter {
        if case .unknown = $0 { return false }
        return true
    }
    for packet in known {
        var bytes: [UInt8] = []
        packet.serialize(into: &bytes)
        fuzzCheck(bytes.count % 4 == 0 && bytes.count >= 4, "\(packet) serialized to \(bytes.count) bytes")
        let again = RTCPPacket.parseCompound(bytes)
        fuzzCheck(again.isClean, "\(packet) serialized to \(bytes) re-parses with errors \(again.errors)")
        fuzzCheck(again.packets == [packet], "\(packet) serialized to \(bytes) re-parses as \(again.packets)")
    }
    let compound = RTCPCompoundBuilder.build(result.packets)
    let again = RTCPPacket.parseCompound(compound)
    fuzzCheck(again.isClean || known.isEmpty, "compound re-parses with errors \(again.errors)")
    fuzzCheck(again.packets == known || (known.isEmpty && again.packets.isEmpty),
              "compound re-parses as \(again.packets), expected \(known)")
}
