import Testing
import UringIO
@testable import StreamEngine

/// `FlowPathState`: route lookups in, the transitions a flow acts on out, each once.
struct FlowPathStateTests {
    private let viaFirst = NetworkPath(interfaceIndex: 7, interfaceName: "eth0", gateway: "10.0.0.1",
                                       source: "10.0.0.2", linkMTU: 1500)
    private let ms: Int64 = 1_000_000

    @Test func firstLookupGivesTheMTUOnly() {
        var state = FlowPathState()
        #expect(state.update(viaFirst, now: 0) == [.interfaceMTU(1500)])
        #expect(state.update(viaFirst, now: 1) == [])
        #expect(state.viable && state.changes == 0 && state.unviableEpisodes == 0)
    }

    /// No route for 3 s: unviable once, viable once, the time counted (also while under way).
    @Test func outageCountedOnce() {
        var state = FlowPathState()
        _ = state.update(viaFirst, now: 0)
        #expect(state.update(nil, now: 1_000 * ms) == [.unviable])
        #expect(state.update(nil, now: 1_500 * ms) == [])
        #expect(!state.viable && state.unviableTime(now: 2_000 * ms) == 1_000 * ms)
        #expect(state.update(viaFirst, now: 4_000 * ms) == [.viable])
        #expect(state.viable && state.unviableEpisodes == 1 && state.changes == 0)
        #expect(state.unviableTime(now: 9_000 * ms) == 3_000 * ms)
        #expect(state.lastUnviableAt == 1_000 * ms && state.lastViableAt == 4_000 * ms)
        var down = viaFirst
        down.linkUp = false
        #expect(state.update(down, now: 5_000 * ms) == [.unviable])
        #expect(state.unviableEpisodes == 2)
    }

    /// Another next hop or interface is a change; another source address alone is not (it is
    /// a source change); an MTU change is reported with it.
    @Test func changesOfHopAndMTU() {
        var state = FlowPathState()
        _ = state.update(viaFirst, now: 0)
        var newSource = viaFirst
        newSource.source = "10.0.0.3"
        #expect(state.update(newSource, now: 1) == [.sourceChanged("10.0.0.3")])
        var viaSecond = viaFirst
        viaSecond.gateway = "10.0.0.254"
        viaSecond.linkMTU = 1400
        #expect(state.update(viaSecond, now: 2) == [.changed, .interfaceMTU(1400), .sourceChanged("10.0.0.2")])
        var otherInterface = viaSecond
        otherInterface.interfaceIndex = 9
        #expect(state.update(otherInterface, now: 3) == [.changed])
        #expect(state.changes == 2)
        // Back after an outage on yet another hop: viable, and a change.
        #expect(state.update(nil, now: 4) == [.unviable])
        #expect(state.update(viaFirst, now: 5) == [.viable, .changed, .interfaceMTU(1500)])
        var smaller = viaFirst
        smaller.linkMTU = 1300
        #expect(state.update(smaller, now: 6) == [.interfaceMTU(1300)])
    }

    /// The events a flow's stats make of it: one per outage (even one shorter than a publishing
    /// interval), one per change.
    @Test func eventsFromTheStats() {
        var stats = SenderStats()
        stats.flowIndex = 1
        var detector = SenderEventDetector(initial: stats)
        stats.pathViable = false
        stats.pathUnviableEpisodes = 1
        #expect(detector.update(stats, now: 1) == [.pathUnviable(flow: 1)])
        #expect(detector.update(stats, now: 2) == [])
        stats.pathViable = true
        stats.pathUnviableMs = 3012.5
        #expect(detector.update(stats, now: 3) == [.pathViable(flow: 1, unviableMilliseconds: 3012)])
        stats.pathUnviableEpisodes = 2  // lost and back between two snapshots
        #expect(detector.update(stats, now: 4) == [.pathUnviable(flow: 1), .pathViable(flow: 1, unviableMilliseconds: 3012)])
        stats.pathChanges = 1
        stats.pathInterface = "eth1"
        #expect(detector.update(stats, now: 5) == [.pathChanged(flow: 1, interface: "eth1", gateway: nil, source: nil)])
    }
}
