import Foundation
import SecureRTP
@testable import StreamEngine
import Testing
import UringIO
@testable import streamer

/// The stats JSON written by `StatsJSON` (Sources/streamer/StatsJSON.swift) is the JSON
/// `JSONSerialization` wrote before: the same object when parsed back, and the same bytes.
@Suite struct StatsJSONTests {
    /// A sender's stats with every optional set and something in every collection.
    static func busySender() -> [SenderStats] {
        var stats = SenderStats()
        stats.packetsSent = 22_782
        stats.bytesSent = 30_915_041
        stats.framesEncoded = 1440
        stats.framesSent = 1440
        stats.pathMTU = 1428
        stats.mtuSource = .probe
        stats.datagramSize = 1400
        stats.mtuFoundAfterMs = 12.5
        stats.pathInterface = "eth0"
        stats.pathGateway = "10.77.1.1"
        stats.pathUnviableAt = 1_764_690_000.125
        stats.pacingRate = 2e9
        stats.batches = 1441
        stats.rttLast = 0.1
        stats.rttMin = 1e-7
        stats.rttSmoothed = 123_456_789.125
        stats.rttMedian = 74.72
        stats.rttLastAt = 1_764_690_001.5
        stats.feedbackIntervalMs = 20
        stats.destination = "127.0.0.1:5004"
        stats.errors = [.send(Errno(111)): 3, .redirect(SystemError("connect", errno: 101)): 1]
        stats.feedbackRejected = [.confirmsUnsentPacket: 2]
        stats.nackRejected = [:]
        stats.rtxSSRC = 0xDEAD_BEEF
        var congestion = CongestionStats()
        congestion.controller = "scream"
        congestion.queueDelayMs = 3.25
        congestion.ceFraction = 1.0 / 3.0
        stats.congestion = congestion
        stats.srtp = SRTPStats(suite: .aeadAES128GCM)
        stats.receivers = [
            MulticastReceiverReport(ssrc: 7, fractionLost: 0.25, cumulativeLost: -2, highestSequence: 65_600,
                                    jitterMs: 0.75, reports: 4, lastReportAtUnix: 1_764_690_002, rttMs: nil,
                                    address: "[fd00::2]:6001"),
            MulticastReceiverReport(ssrc: 9, fractionLost: 0, cumulativeLost: 0, highestSequence: 1,
                                    jitterMs: 0, reports: 1, lastReportAtUnix: 0.5, rttMs: 2, address: nil),
        ]
        var second = SenderStats()
        second.destination = "239.1.2.3:5004"
        return [stats, second]
    }

    /// A receiver's stats with several DSCP values (keys "0", "10", "34", "46": sorted as numbers).
    static func busyReceiver() -> ReceiverStats {
        var stats = ReceiverStats()
        stats.received = 37_833
        stats.lost = 5
        stats.dscp[0] = 1
        stats.dscp[10] = 2
        stats.dscp[34] = 37_830
        stats.dscp[46] = 3
        stats.ecn = [1, 0, 37_832, 0]
        stats.rejected = [.foreignSSRC: 3, .rtp(.badPadding): 1, .payload(.fragmentEmpty): 2]
        stats.source = "127.0.0.1:41000"
        stats.playoutLatencyMs = 300
        stats.playoutLatencyTargetMs = 450
        stats.playoutAddedLatencyMs = .init(p50: 300, p95: 301.5, max: 309, frames: 2400)
        stats.rtcpIntervalSeconds = 0.02
        return stats
    }

    /// Edge cases: escapes, non-ASCII, empty containers, extreme and awkward numbers.
    static var edges: [String: Any] {
        [
            "quote\"back\\slash/": "a \"quoted\" \\ path/to/file",
            "control": "\u{0}\u{1}\u{7}\u{8}\t\n\u{B}\u{C}\r\u{1B}\u{1F}\u{7F}",
            "non-ASCII é": "é €  𝄞 日本",
            "emptyObject": [String: Any](),
            "emptyArray": [Any](),
            "nested": ["a": [[String: Any](), [Any](), ["x": StatsJSON.Null()]], "b": [1, 2, 3], "c": [[String: Int]()]],
            "integers": ["max": Int.max, "min": Int.min, "zero": 0, "negative": -42, "u64": UInt64.max, "u32": UInt32.max,
                         "i64": Int64.min],
            "doubles": [0.1, 1e-7, 123_456_789.125, -0.5, 100.0, 1e16, 1e300, .leastNonzeroMagnitude, -0.0, 2.0 / 3.0, 0.0],
            "bools": [true, false],
            "null": StatsJSON.Null(),
            "order": ["b": 1, "A": 2, "a10": 3, "a9": 4, "rtp.x": 5, "rtpa": 6, "0": 7, "10": 8, "9": 9, "a_b": 10, "ab": 11,
                      "a b": 12, "Connection refused": 13, "redirect: no route": 14],
        ]
    }

    /// `object` as Foundation holds it: each ``StatsJSON/Null`` an `NSNull` (the streamer does
    /// not link Foundation), for `JSONSerialization` to write beside ours.
    static func foundationObject(_ value: Any) -> Any {
        switch value {
        case is StatsJSON.Null: return NSNull()
        case let object as [String: Any]: return object.mapValues(foundationObject)
        case let array as [Any]: return array.map(foundationObject)
        default: return value
        }
    }

    static var objects: [(name: String, object: [String: Any])] {
        let senders = busySender()
        return [
            ("send", senderStatsObject(senders)),
            ("send, idle", senderStatsObject([SenderStats()])),
            ("recv", receiverStatsObject(busyReceiver())),
            ("recv, idle", receiverStatsObject(ReceiverStats())),
            ("demo", demoStatsObject(sender: senders[0], receiver: busyReceiver())),
            ("edges", edges),
        ]
    }

    @Test(arguments: [false, true]) func parsesToWhatFoundationWrote(pretty: Bool) throws {
        for (name, object) in Self.objects {
            let ours = try StatsJSON.data(object, pretty: pretty)
            let foundation = try JSONSerialization.data(withJSONObject: Self.foundationObject(object),
                                                        options: pretty ? [.prettyPrinted, .sortedKeys] : [.sortedKeys])
            let parsedOurs = try #require(try JSONSerialization.jsonObject(with: Data(ours)) as? NSDictionary, "\(name)")
            let parsedFoundation = try #require(try JSONSerialization.jsonObject(with: foundation) as? NSDictionary)
            #expect(parsedOurs.isEqual(parsedFoundation), "\(name)")
        }
    }

    @Test(arguments: [false, true]) func writesFoundationsBytes(pretty: Bool) throws {
        for (name, object) in Self.objects {
            let ours = try StatsJSON.data(object, pretty: pretty)
            let foundation = try JSONSerialization.data(withJSONObject: Self.foundationObject(object),
                                                        options: pretty ? [.prettyPrinted, .sortedKeys] : [.sortedKeys])
            #expect(String(decoding: ours, as: UTF8.self) == String(decoding: foundation, as: UTF8.self), "\(name)")
        }
    }

    @Test func numbersAndEscapesAsWritten() throws {
        let object: [String: Any] = ["d": [0.1, 1e-7, 123_456_789.125, 100.0, -3], "s": "a/\"\\\u{1}é"]
        let text = String(decoding: try StatsJSON.data(object, pretty: false), as: UTF8.self)
        #expect(text == #"{"d":[0.1,1e-07,123456789.125,100,-3],"s":"a\/\"\\\u0001é"}"#)
        #expect(String(decoding: try StatsJSON.data([:], pretty: true), as: UTF8.self) == "{\n\n}")
    }

    /// Every ASCII whitespace, punctuation and symbol character, digits, letters, case and
    /// leading zeros: the order Foundation's `.sortedKeys` gives them.
    @Test func keysInFoundationsOrder() throws {
        var keys = ["x", "x0", "xa", "xA", "xb", "a1", "a01", "a001", "A1", "A01", "a1b", "aa", "aA", "Aa", "AA", "x01y1",
                    "x1y2", "x1y02", "b", "A", "a10", "a9", "rtp.x", "rtpa", "0", "10", "9", "dscp", "Connection refused",
                    "redirect: Network is unreachable"]
        for byte in UInt8(0x09)...0x7E where byte < 0x0E || byte >= 0x20 {
            let character = String(UnicodeScalar(byte))
            if !keys.contains("x" + character) { keys.append("x" + character) }
        }
        var object: [String: Any] = [:]
        for (index, key) in keys.enumerated() { object[key] = index }
        let text = String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]),
                          as: UTF8.self)
        // Each key's value is its index, and no key holds `":N,`: the values in the order written.
        let foundationOrder = text.split(separator: "\":").dropFirst().map { keys[Int($0.prefix { $0.isNumber })!] }
        #expect(keys.sorted(by: StatsJSON.precedes) == foundationOrder)
    }

    @Test func nonFiniteNumbersAreRefusedAsFoundationRefusesThem() {
        for value in [Double.nan, .infinity, -.infinity] {
            let object: [String: Any] = ["cc": ["ceFraction": value]]
            #expect(throws: StatsJSON.InvalidValue.self) { try StatsJSON.data(object, pretty: true) }
            #expect(throws: (any Error).self) { try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) }
        }
    }

    /// The streamer's stats objects hold only the types the writer recognizes by identity: a
    /// value it must cast (an `Int64`, a dictionary of optionals) cost `streamer recv` ~1 ms of
    /// conformance search per process (results/profile.md section 34).
    @Test func theStatsObjectsNeedNoCast() throws {
        for (name, object) in Self.objects where name != "edges" {
            #expect(try StatsJSON.keysWrittenThroughCasts(object) == [], "\(name)")
        }
        // The edges' fixed-width integers and untyped arrays do take the casts.
        #expect(try StatsJSON.keysWrittenThroughCasts(Self.objects.first { $0.name == "edges" }!.object).contains("u64"))
    }

    @Test func otherTypesAreRefused() {
        #expect(throws: StatsJSON.InvalidValue.self) { try StatsJSON.data(["date": Date()], pretty: false) }
    }
}
