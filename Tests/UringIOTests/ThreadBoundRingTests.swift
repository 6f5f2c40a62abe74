import Foundation
import Synchronization
import Testing
@testable import UringIO

/// `Ring(threadBound:)` registers the ring's descriptor with the opening thread. A thread holds
/// at most 16 registrations (the kernel's `IO_RINGFD_REG_MAX`): a ring released on its thread
/// must give its registration back, or after 16 rings (e.g. `MediaSender.run` called again and
/// again on one thread) every further ring would open unregistered, and the old rings' memory
/// would stay held until the thread exits.
@Suite(.enabled(if: uringAvailable, "io_uring is disabled on this kernel"))
struct ThreadBoundRingTests {
    /// On a thread of its own: the registrations are the thread's, and a test-pool thread may
    /// hold up to all 16 for rings other tests opened there and released elsewhere (a fresh-clone
    /// CI run: all 40 rings here opened unregistered).
    @Test func ringsReleasedOnTheirThreadGiveTheirRegistrationBack() throws {
        let unregistered = Mutex<[Int]>([])
        let failure = Mutex<(any Error)?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread {
            defer { done.signal() }
            do {
                for index in 0..<40 {
                    let ring = try Ring(entries: 8, threadBound: true)
                    if !ring.ringDescriptorRegistered { unregistered.withLock { $0.append(index) } }
                }
            } catch { failure.withLock { $0 = error } }
        }.start()
        done.wait()
        if let error = failure.withLock({ $0 }) { throw error }
        #expect(unregistered.withLock { $0 } == [], "rings opened unregistered")
    }

    @Test func aRingWithoutThreadBoundIsNotRegistered() throws {
        let ring = try Ring(entries: 8)
        #expect(!ring.ringDescriptorRegistered)
    }
}
