import CMalloc

/// Keeps glibc's malloc from giving freed heap memory back to the kernel after every frame.
///
/// A `.hevc` file source allocates each NAL unit's array (tens of kilobytes, an IDR slice
/// hundreds) and the sender frees it once sent. With glibc's defaults the heap's top is
/// trimmed as soon as more than 128 KiB lie free there (the threshold moves up only after a
/// large mmapped block is freed), so the next frame's arrays fault their pages in again, and
/// NAL units above the mmap threshold (128 KiB at first) are mapped and unmapped one by one:
/// half of `streamer send`'s page faults were in the copy into those arrays
/// (results/profile.md, section 22). Freed memory up to `trimThreshold` now stays in the
/// process, and blocks below `mmapThreshold` come from the heap.
///
/// `streamer send` calls it once, before its source and engine threads start; `recv` and
/// `demo` keep glibc's defaults (their receive path allocates otherwise, and was not measured
/// with these settings). Uses `mallopt(3)`.
func keepFreedHeapMemory(trimThreshold: Int32 = 64 << 20, mmapThreshold: Int32 = 16 << 20) {
    _ = mallopt(M_MMAP_THRESHOLD, mmapThreshold)
    _ = mallopt(M_TRIM_THRESHOLD, trimThreshold)
}
