/// Application-defined RTCP packet, APP (RFC 3550 section 6.7): PT=204, a 5-bit subtype,
/// the sender's SSRC, a four-character name and data in 32-bit words.
public struct RTCPApplicationDefined: Sendable, Hashable {
    /// The 5-bit subtype (in the header's count field).
    public var subtype: UInt8
    /// SSRC (or CSRC) of the packet's sender.
    public var ssrc: UInt32
    /// The four ASCII characters naming the application, as one big-endian word.
    public var name: UInt32
    /// Application-dependent data; a multiple of 4 bytes on the wire (zero-padded when written).
    public var data: [UInt8]

    /// Makes an APP packet. `name` is four ASCII characters (shorter names are space-padded).
    public init(subtype: UInt8 = 0, ssrc: UInt32, name: String, data: [UInt8] = []) {
        let characters = Array(name.utf8.prefix(4)) + Array(repeating: UInt8(ascii: " "), count: max(0, 4 - name.utf8.count))
        self.init(subtype: subtype, ssrc: ssrc,
                  nameWord: characters.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }, data: data)
    }

    /// Makes an APP packet from a name already packed into a word.
    public init(subtype: UInt8 = 0, ssrc: UInt32, nameWord: UInt32, data: [UInt8] = []) {
        self.subtype = subtype & 0x1F
        self.ssrc = ssrc
        self.name = nameWord
        self.data = data
    }

    /// The name as text.
    public var nameString: String {
        String(decoding: (0..<4).map { UInt8(truncatingIfNeeded: name >> (24 - 8 * $0)) }, as: UTF8.self)
    }

    /// Appends the packet (12 bytes plus the data, padded to a word).
    public func serialize(into bytes: inout [UInt8]) {
        let start = RTCPWire.beginPacket(countOrFormat: subtype, packetType: RTCPPacketType.application, into: &bytes)
        RTCPWire.appendUInt32(ssrc, to: &bytes)
        RTCPWire.appendUInt32(name, to: &bytes)
        bytes.append(contentsOf: data)
        RTCPWire.endPacket(startingAt: start, in: &bytes)
    }

    static func parse(body: UnsafeRawBufferPointer, subtype: Int) throws(RTCPBodyError) -> RTCPApplicationDefined {
        var reader = RTCPByteReader(body)
        guard let ssrc = reader.readUInt32(), let name = reader.readUInt32() else {
            throw RTCPBodyError(kind: .tooShort, detail: "APP needs 8 bytes (SSRC, name), body has \(body.count)")
        }
        // RFC 3550 6.7: application data is a multiple of 32 bits; anything else (padding
        // that cuts into a word) could not be written back as it was read.
        guard reader.remaining % 4 == 0 else {
            throw RTCPBodyError(kind: .badLength, detail: "APP data of \(reader.remaining) bytes is not whole 32-bit words")
        }
        return RTCPApplicationDefined(subtype: UInt8(subtype), ssrc: ssrc, nameWord: name,
                                      data: reader.readBytes(reader.remaining) ?? [])
    }
}

/// A receiver's confirmation of path-MTU probes (RFC 8899 packetization-layer probing),
/// carried in an APP packet named "PMTU", subtype 0: for each probe that arrived, its id
/// and its UDP payload size, two 32-bit words.
public struct RTCPPathMTUConfirmation: Sendable, Hashable {
    /// The APP name.
    public static let name = "PMTU"
    /// One probe that arrived.
    public struct Entry: Sendable, Hashable {
        /// The probe's id (from its payload).
        public var probeID: UInt32
        /// The probe's UDP payload size as received.
        public var size: UInt32

        /// Makes an entry.
        public init(probeID: UInt32, size: UInt32) {
            self.probeID = probeID
            self.size = size
        }
    }

    /// SSRC of the receiver confirming.
    public var senderSSRC: UInt32
    /// The probes confirmed.
    public var entries: [Entry]

    /// Makes a confirmation.
    public init(senderSSRC: UInt32, entries: [Entry]) {
        self.senderSSRC = senderSSRC
        self.entries = entries
    }

    /// The APP packet carrying it.
    public var applicationPacket: RTCPApplicationDefined {
        var data: [UInt8] = []
        for entry in entries {
            RTCPWire.appendUInt32(entry.probeID, to: &data)
            RTCPWire.appendUInt32(entry.size, to: &data)
        }
        return RTCPApplicationDefined(subtype: 0, ssrc: senderSSRC, name: Self.name, data: data)
    }

    /// Reads a confirmation from an APP packet; nil when it is not one (name, subtype, or data
    /// not a whole number of entries).
    public init?(_ packet: RTCPApplicationDefined) {
        guard packet.nameString == Self.name, packet.subtype == 0, packet.data.count % 8 == 0 else { return nil }
        var entries: [Entry] = []
        let ok: Bool = packet.data.withUnsafeBytes { raw in
            var reader = RTCPByteReader(raw)
            while reader.remaining > 0 {
                guard let id = reader.readUInt32(), let size = reader.readUInt32() else { return false }
                entries.append(Entry(probeID: id, size: size))
            }
            return true
        }
        guard ok else { return nil }
        self.init(senderSSRC: packet.ssrc, entries: entries)
    }
}
