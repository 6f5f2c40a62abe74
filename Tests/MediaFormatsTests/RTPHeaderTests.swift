import Testing
import TestSupport
import MediaFormats

@Suite struct RTPHeaderTests {
    @Test func roundTrip() throws {
        let header = RTPHeader(marker: true, payloadType: 96, sequenceNumber: 0xBEEF, timestamp: 0x0102_0304, ssrc: 0xA1B2_C3D4)
        var packet = header.bytes
        #expect(packet == [0x80, 0xE0, 0xBE, 0xEF, 0x01, 0x02, 0x03, 0x04, 0xA1, 0xB2, 0xC3, 0xD4])
        packet += [9, 8, 7]
        let parsed = try RTPHeader.parse(packet)
        #expect(parsed.header == header)
        #expect(parsed.payloadRange == 12..<15)
        #expect(parsed.csrcCount == 0 && !parsed.hasExtension)

        let plain = RTPHeader(marker: false, payloadType: 127, sequenceNumber: 0, timestamp: 0, ssrc: 0)
        #expect(try RTPHeader.parse(plain.bytes).header == plain)
        #expect(try RTPHeader.parse(plain.bytes).payloadRange == 12..<12)
    }

    @Test func csrcExtensionAndPaddingAreSkipped() throws {
        // V=2 P=1 X=1 CC=2, marker, PT 96.
        var packet: [UInt8] = [0xB2, 0xE0, 0x00, 0x07, 0, 0, 0, 9, 0, 0, 0, 1]
        packet += [1, 1, 1, 1, 2, 2, 2, 2]             // two CSRCs
        packet += [0xBE, 0xDE, 0x00, 0x01, 5, 5, 5, 5]  // extension, one word
        packet += [0x42, 0x43]                          // payload
        packet += [0, 0, 3]                             // padding, count 3
        let parsed = try RTPHeader.parse(packet)
        #expect(parsed.payloadRange == 28..<30)
        #expect(Array(packet[parsed.payloadRange]) == [0x42, 0x43])
        #expect(parsed.csrcCount == 2 && parsed.hasExtension)
        #expect(parsed.header.sequenceNumber == 7 && parsed.header.timestamp == 9 && parsed.header.marker)
    }

    @Test func parseErrors() {
        func error(_ packet: [UInt8]) -> RTPPacketError? {
            do { _ = try RTPHeader.parse(packet); return nil } catch { return error }
        }
        let base: [UInt8] = [0x80, 96, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]
        #expect(error([]) == .tooShort)
        #expect(error(Array(base.prefix(11))) == .tooShort)
        var v1 = base; v1[0] = 0x40
        #expect(error(v1) == .badVersion)
        var v3 = base; v3[0] = 0xC0
        #expect(error(v3) == .badVersion)
        var csrc = base + [1, 2, 3, 4]; csrc[0] = 0x82  // says 2 CSRCs, holds 1
        #expect(error(csrc) == .badCSRCLength)
        var extHeader = base + [0xBE, 0xDE]; extHeader[0] = 0x90  // extension header cut short
        #expect(error(extHeader) == .badExtension)
        var extBody = base + [0xBE, 0xDE, 0, 2, 1, 2, 3, 4]; extBody[0] = 0x90  // 2 words declared, 1 present
        #expect(error(extBody) == .badExtension)
        var zeroPad = base + [1, 2, 0]; zeroPad[0] = 0xA0
        #expect(error(zeroPad) == .badPadding)
        var bigPad = base + [1, 2, 4]; bigPad[0] = 0xA0  // 4 > 3 payload bytes
        #expect(error(bigPad) == .badPadding)
        var allPad = base + [1, 2, 3]; allPad[0] = 0xA0  // padding may be the whole payload
        #expect(error(allPad) == nil)
        #expect((try? RTPHeader.parse(allPad))?.payloadRange == 12..<12)

        #expect(RTPPacketError.allCases.map(\.reason) == ["tooShort", "badVersion", "badCSRCLength", "badExtension", "badPadding"])
    }

    @Test func randomBytesNeverTrap() {
        var rng = SplitMix64(seed: 7)
        var accepted = 0
        for _ in 0..<20_000 {
            let count = Int.random(in: 0...40, using: &rng)
            var packet = (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if count > 0 && Bool.random(using: &rng) { packet[0] = 0x80 | (packet[0] & 0x3f) }
            if let parsed = try? RTPHeader.parse(packet) {
                accepted += 1
                #expect(parsed.payloadRange.lowerBound >= 12 && parsed.payloadRange.upperBound <= count)
            }
        }
        #expect(accepted > 0)
    }
}

@Suite struct HEVCNALTests {
    @Test func headerFields() {
        // IDR_W_RADL, layer 0, TID 1: 0x26 0x01.
        let idr = HEVCNALHeader(0x26, 0x01)
        #expect(idr.type == .idrWithRADL && idr.layerId == 0 && idr.temporalIdPlusOne == 1 && !idr.forbiddenBit)
        #expect(idr.type.isIRAP && idr.type.isVCL)
        // F=1, type 49, layer 63, TID 7.
        let odd = HEVCNALHeader(0x80 | 49 << 1 | 1, 0xFF)
        #expect(odd.forbiddenBit && odd.type == .fragmentationUnit && odd.layerId == 63 && odd.temporalIdPlusOne == 7)
        #expect(odd.byte0 == 0x80 | 49 << 1 | 1 && odd.byte1 == 0xFF)
        #expect(HEVCNALHeader(of: [0x40, 0x01])?.type == .vps)
        #expect(HEVCNALHeader(of: [0x40]) == nil)
        #expect(HEVCNALUnitType.sps.rawValue == 33 && HEVCNALUnitType.pps.rawValue == 34 && HEVCNALUnitType.cra.rawValue == 21)
        #expect(HEVCNALUnitType.idrNoLP.rawValue == 20 && HEVCNALUnitType.paci.rawValue == 50)
        #expect((16...23).allSatisfy { HEVCNALUnitType(rawValue: $0).isIRAP })
        #expect(!HEVCNALUnitType(rawValue: 15).isIRAP && !HEVCNALUnitType(rawValue: 24).isIRAP)
        #expect(!HEVCNALUnitType.vps.isVCL && HEVCNALUnitType(rawValue: 31).isVCL)
        #expect(HEVCNALUnitType.idrWithRADL.description == "IDR_W_RADL(19)")
    }

    @Test func firstSliceSegmentFlag() {
        #expect(HEVCNALHeader.isFirstSliceSegmentInPicture([0x02, 0x01, 0x80]))
        #expect(!HEVCNALHeader.isFirstSliceSegmentInPicture([0x02, 0x01, 0x7F]))
        #expect(!HEVCNALHeader.isFirstSliceSegmentInPicture([0x02, 0x01]))
        #expect(!HEVCNALHeader.isFirstSliceSegmentInPicture([0x40, 0x01, 0x80]))  // VPS is not VCL
    }
}
