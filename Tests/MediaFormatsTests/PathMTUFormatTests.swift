import MediaFormats
import Testing

/// Bytes from hex pairs separated by spaces.
private func wire(_ text: String) -> [UInt8] { text.split(separator: " ").map { UInt8($0, radix: 16)! } }

@Suite("RTCP APP and path-MTU probes")
struct PathMTUFormatTests {
    @Test func applicationPacketRoundTrips() {
        let packet = RTCPApplicationDefined(subtype: 5, ssrc: 0x0102_0304, name: "TEST", data: [1, 2, 3, 4, 5, 6, 7, 8])
        let bytes = RTCPCompoundBuilder.build([.application(packet)])
        #expect(bytes == wire("85 CC 00 04 01 02 03 04 54 45 53 54 01 02 03 04 05 06 07 08"))
        let parsed = RTCPPacket.parseCompound(bytes)
        #expect(parsed.isClean)
        #expect(parsed.packets == [.application(packet)])
        #expect(packet.nameString == "TEST")
    }

    @Test func shortApplicationPacketIsRejected() {
        #expect(RTCPPacket.parseCompound(wire("80 CC 00 01 00 00 00 01")).errors.map(\.reason) == ["tooShort"])
    }

    @Test func confirmationRoundTripsThroughAPP() throws {
        let confirmation = RTCPPathMTUConfirmation(senderSSRC: 9, entries: [.init(probeID: 7, size: 1372),
                                                                             .init(probeID: 8, size: 8972)])
        let bytes = RTCPCompoundBuilder.build([.application(confirmation.applicationPacket)])
        #expect(bytes.count == 12 + 16)
        let parsed = RTCPPacket.parseCompound(bytes)
        guard case .application(let app) = try #require(parsed.packets.first) else {
            Issue.record("not an APP packet: \(parsed)")
            return
        }
        #expect(RTCPPathMTUConfirmation(app) == confirmation)
        // Other APP packets are not confirmations.
        #expect(RTCPPathMTUConfirmation(RTCPApplicationDefined(ssrc: 9, name: "XYZW", data: [])) == nil)
        #expect(RTCPPathMTUConfirmation(RTCPApplicationDefined(ssrc: 9, name: "PMTU", data: [0, 0, 0, 1])) == nil)
    }

    @Test func probeRoundTrips() throws {
        let probe = PathMTUProbe(probeID: 0x0001_0203, size: 1372, ssrc: 0xCAFE_F00D)
        let bytes = probe.bytes
        #expect(bytes.count == 1372)
        #expect(bytes[1] == 127)
        #expect(bytes[12..<24] == wire("50 4D 54 55 00 01 02 03 00 00 05 5C")[...])
        #expect(bytes[24...].allSatisfy { $0 == 0 })
        try bytes.withUnsafeBytes { raw in
            let parsed = try RTPHeader.parse(raw)
            let payload = UnsafeRawBufferPointer(rebasing: raw[parsed.payloadRange])
            #expect(PathMTUProbe(header: parsed.header, payload: payload, datagramSize: bytes.count) == probe)
            // A copy whose size differs from the one it claims is not a probe.
            #expect(PathMTUProbe(header: parsed.header, payload: payload, datagramSize: 1000) == nil)
        }
    }
}
