// Preloaded into `streamer send` under valgrind by results/sender-cg.py (results/profile.md
// section 41); not part of the engine. Valgrind runs one thread at a time and keeps its lock
// through an io_uring_enter that waits (it does not know the call blocks), so while the ring
// thread waits the file source's thread cannot run and the sender stalls for seconds. Here a
// waiting io_uring_enter is split into its submission and zero-timeout waits separated by
// 100 µs nanosleeps, which valgrind knows block: the other threads run in between. The waits'
// timeouts (IORING_ENTER_EXT_ARG) are kept. Every other system call goes through unchanged.
// The polling's instructions are this `syscall`'s, which sender-cg.py takes out of the totals
// (callgrind's --toggle-collect=syscall does not do it: its switch is not per thread, so the
// source thread's work went uncounted while the ring thread polled).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>

struct getevents_arg { uint64_t sigmask; uint32_t sigmask_sz; uint32_t min_wait_usec; uint64_t ts; };
struct kernel_timespec { int64_t tv_sec, tv_nsec; };
enum { enter_getevents = 1, enter_ext_arg = 8 };

static int64_t monotonic(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

long syscall(long number, ...) {
    static long (*forward)(long, ...);
    va_list list;
    va_start(list, number);
    long a[6];
    for (int i = 0; i < 6; i++) a[i] = va_arg(list, long);
    va_end(list);
    if (!forward) forward = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
    unsigned flags = (unsigned)a[3];
    if (number != __NR_io_uring_enter || !(flags & enter_getevents) || (unsigned)a[2] == 0)
        return forward(number, a[0], a[1], a[2], a[3], a[4], a[5]);
    int64_t deadline = INT64_MAX;
    struct getevents_arg poll = {0};
    struct kernel_timespec zero = {0, 0};
    if (flags & enter_ext_arg) {
        const struct getevents_arg *arg = (const struct getevents_arg *)a[4];
        poll = *arg;
        if (arg->ts) {
            const struct kernel_timespec *ts = (const struct kernel_timespec *)arg->ts;
            deadline = monotonic() + ts->tv_sec * 1000000000LL + ts->tv_nsec;
        }
    }
    poll.ts = (uint64_t)(uintptr_t)&zero;
    long submitted = 0;
    if (a[1] > 0) {
        submitted = forward(number, a[0], a[1], 0L, (long)(flags & ~(unsigned)enter_getevents), a[4], a[5]);
        if (submitted < 0) return submitted;
    }
    for (;;) {
        long rc = forward(number, a[0], 0L, a[2], (long)(flags | enter_getevents | enter_ext_arg), (long)&poll,
                          (long)sizeof poll);
        if (rc >= 0) return submitted;
        if (errno != ETIME && errno != EINTR) return submitted > 0 ? submitted : rc;
        if (monotonic() >= deadline) {
            if (submitted > 0) return submitted;
            errno = ETIME;
            return -1;
        }
        struct timespec pause = {0, 100000};
        nanosleep(&pause, 0);
    }
}
