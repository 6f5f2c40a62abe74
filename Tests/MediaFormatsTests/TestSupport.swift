import MediaFormats

/// A NAL unit of `type` and `size` bytes (size >= 2); VCL units get first_slice_segment_in_pic_flag = `firstSlice`.
func makeNAL(type: UInt8, size: Int, firstSlice: Bool = true, fill: UInt8 = 0xAB, layerId: UInt8 = 0, tid: UInt8 = 1) -> [UInt8] {
    precondition(size >= 2)
    let header = HEVCNALHeader(type: HEVCNALUnitType(rawValue: type), layerId: layerId, temporalIdPlusOne: tid)
    var nal = [header.byte0, header.byte1]
    for index in 2..<size { nal.append(fill &+ UInt8(truncatingIfNeeded: index)) }
    if size > 2 { nal[2] = firstSlice ? 0x80 | (nal[2] & 0x7f) : nal[2] & 0x7f }
    // Never end in 0 nor hold 00 00: Annex B would trim or split it.
    for index in 2..<size where nal[index] == 0 { nal[index] = index == 2 && !firstSlice ? 0x01 : 0x81 }
    return nal
}

/// A NAL unit of random bytes (no zero bytes, so no emulated start codes) with a valid header.
func randomNAL<G: RandomNumberGenerator>(type: UInt8, size: Int, using rng: inout G) -> [UInt8] {
    var nal = makeNAL(type: type, size: size)
    for index in 3..<max(3, size) { nal[index] = UInt8.random(in: 1...255, using: &rng) }
    return nal
}
