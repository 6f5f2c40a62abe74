import Testing
@testable import UringIO

/// `Ring(threadBound:)` registers the ring's descriptor with the opening thread. A thread holds
/// at most 16 registrations (the kernel's `IO_RINGFD_REG_MAX`): a ring released on its thread
/// must give its registration back, or after 16 rings (e.g. `MediaSender.run` called again and
/// again on one thread) every further ring would open unregistered, and the old rings' memory
/// would stay held until the thread exits.
@Suite(.enabled(if: uringAvailable, "io_uring is disabled on this kernel"))
struct ThreadBoundRingTests {
    @Test func ringsReleasedOnTheirThreadGiveTheirRegistrationBack() throws {
        for index in 0..<40 {
            let ring = try Ring(entries: 8, threadBound: true)
            #expect(ring.ringDescriptorRegistered, "ring \(index) opened unregistered")
        }
    }

    @Test func aRingWithoutThreadBoundIsNotRegistered() throws {
        let ring = try Ring(entries: 8)
        #expect(!ring.ringDescriptorRegistered)
    }
}
