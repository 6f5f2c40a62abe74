import MediaFormats
import StreamEngine
import Testing
@testable import streamer

/// The rejection counters are typed in the engine and named only in the stats JSON: the
/// names are the ones the JSON has always had.
@Suite struct RejectionKeysTests {
    @Test func receiverKeysAreTheStatsJSONNames() {
        let keys = ReceiveRejection.allCases.map(\.statsKey)
        #expect(keys == [
            "rtp.tooShort", "rtp.badVersion", "rtp.badCSRCLength", "rtp.badExtension", "rtp.badPadding",
            "foreignSource", "foreignSSRC", "badProbe", "unexpectedPayloadType", "timestampJump", "sequenceJump",
            "rtcp.foreignSource", "badRetransmission",
            "rtcp.tooShort", "rtcp.badVersion", "rtcp.badLength", "rtcp.badPadding", "rtcp.badReportCount",
            "rtcp.badFCI", "rtcp.badSDES", "rtcp.badBye",
            "payload.truncatedPayloadHeader", "payload.forbiddenBitSet", "payload.aggregationSizeOverrun",
            "payload.aggregationUnitTooShort", "payload.aggregationInvalidUnit", "payload.fragmentStartAndEnd",
            "payload.fragmentInvalidType", "payload.fragmentEmpty", "payload.fragmentWithoutStart",
            "payload.fragmentTypeMismatch", "payload.fragmentWithoutEnd", "payload.paciUnsupported",
            "payload.unsupportedNALType",
        ])
        var stats = ReceiverStats()
        stats.rejected = [.foreignSSRC: 3, .rtp(.badPadding): 1, .payload(.fragmentEmpty): 2, .timestampJump: 0]
        let json = receiverStatsObject(stats)["rejected"] as? [String: Int]
        #expect(json == ["foreignSSRC": 3, "rtp.badPadding": 1, "payload.fragmentEmpty": 2, "timestampJump": 0])
    }

    @Test func senderFeedbackKeysAreTheStatsJSONNames() {
        #expect(FeedbackRejection.allCases.map(\.statsKey) == [
            "tooShort", "badVersion", "badLength", "badPadding", "badReportCount", "badFCI", "badSDES", "badBye",
            "confirmsUnsentPacket",
        ])
    }
}
