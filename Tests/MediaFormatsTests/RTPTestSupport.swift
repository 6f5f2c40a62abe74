import MediaFormats

/// The RTP packets (header, payload) of access units, consecutive sequence numbers from `firstSequence`.
func rtpPackets(_ aus: [AccessUnit], budget: Int, firstSequence: UInt16 = 1000) throws -> [(RTPHeader, [UInt8])] {
    let packetizer = try HEVCPacketizer(maxPayloadSize: budget)
    var sequence = firstSequence
    var packets: [(RTPHeader, [UInt8])] = []
    for au in aus {
        for payload in packetizer.plan(au) {
            let header = RTPHeader(marker: payload.marker, payloadType: 96, sequenceNumber: sequence,
                                   timestamp: au.timestamp, ssrc: 0x1234_5678)
            packets.append((header, packetizer.bytes(of: payload, of: au)))
            sequence &+= 1
        }
    }
    return packets
}

/// Pushes packets in the given order (and flushes); returns every access unit out.
func depacketize(_ packets: [(RTPHeader, [UInt8])], into depacketizer: inout HEVCDepacketizer, flush: Bool = true) -> [DepacketizedAccessUnit] {
    var out: [DepacketizedAccessUnit] = []
    for (header, payload) in packets { out += depacketizer.push(header, payload: payload) }
    if flush { out += depacketizer.flush() }
    return out
}
