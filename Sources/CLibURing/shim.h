// Shim over liburing 2.3 and the socket headers the UDP layer needs.
//
// Glibc headers come BEFORE <liburing.h>: liburing defines _XOPEN_SOURCE when
// no glibc header has been seen yet, which renames fd_set's field and breaks
// clean debug builds against SwiftGlibc (see field notes).
#ifndef CLIBURING_SHIM_H
#define CLIBURING_SHIM_H

#include <sys/types.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/ioctl.h>
#include <net/if.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <signal.h>
#include <sys/syscall.h>
#include <linux/errqueue.h>
#include <linux/time_types.h>
#include <liburing.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

// MARK: - Constants Swift cannot import (macros built from enums or casts)

static const unsigned cu_iosqe_io_link = IOSQE_IO_LINK;
static const unsigned cu_iosqe_fixed_file = IOSQE_FIXED_FILE;
static const unsigned cu_iosqe_buffer_select = IOSQE_BUFFER_SELECT;
static const unsigned cu_iosqe_cqe_skip_success = IOSQE_CQE_SKIP_SUCCESS;
static const unsigned cu_cqe_f_more = IORING_CQE_F_MORE;
static const unsigned cu_cqe_f_buffer = IORING_CQE_F_BUFFER;
static const unsigned cu_cqe_f_notif = IORING_CQE_F_NOTIF;
static const unsigned cu_cqe_buffer_shift = IORING_CQE_BUFFER_SHIFT;
static const unsigned cu_recv_multishot = IORING_RECV_MULTISHOT;
static const unsigned cu_setup_single_issuer = IORING_SETUP_SINGLE_ISSUER;
static const unsigned cu_setup_defer_taskrun = IORING_SETUP_DEFER_TASKRUN;
static const unsigned cu_setup_coop_taskrun = IORING_SETUP_COOP_TASKRUN;
static const unsigned cu_setup_submit_all = IORING_SETUP_SUBMIT_ALL;
static const int cu_so_timestampns = SO_TIMESTAMPNS_OLD;
static const int cu_scm_timestampns = SO_TIMESTAMPNS_OLD;
static const int cu_so_rxq_ovfl = SO_RXQ_OVFL;
static const int cu_so_meminfo = SO_MEMINFO;
/// `SK_MEMINFO_DROPS` and `SK_MEMINFO_VARS` of <linux/sock_diag.h> (kernel ABI), written out: two
/// numbers do not need that header beside the Glibc module's socket types.
static const int cu_sk_meminfo_drops = 8;
static const int cu_sk_meminfo_vars = 9;
static const int cu_udp_segment = UDP_SEGMENT;
static const int cu_udp_gro = UDP_GRO;

// MARK: - cmsg macros

static inline struct cmsghdr *cu_cmsg_firsthdr(struct msghdr *msg) { return CMSG_FIRSTHDR(msg); }
static inline struct cmsghdr *cu_cmsg_nxthdr(struct msghdr *msg, struct cmsghdr *c) { return CMSG_NXTHDR(msg, c); }
static inline unsigned char *cu_cmsg_data(struct cmsghdr *c) { return CMSG_DATA(c); }
static inline size_t cu_cmsg_space(size_t len) { return CMSG_SPACE(len); }
static inline size_t cu_cmsg_len(size_t len) { return CMSG_LEN(len); }

/// Writes one int-valued control message at `c` and returns the space it takes.
static inline size_t cu_cmsg_put_int(struct cmsghdr *c, int level, int type, int value) {
    c->cmsg_level = level;
    c->cmsg_type = type;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &value, sizeof(int));
    return CMSG_SPACE(sizeof(int));
}

/// Writes one uint16-valued control message (UDP_SEGMENT takes a u16).
static inline size_t cu_cmsg_put_u16(struct cmsghdr *c, int level, int type, uint16_t value) {
    c->cmsg_level = level;
    c->cmsg_type = type;
    c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    memcpy(CMSG_DATA(c), &value, sizeof(uint16_t));
    return CMSG_SPACE(sizeof(uint16_t));
}

// MARK: - Buffer rings (liburing 2.3 has no io_uring_setup_buf_ring)

/// Maps and registers a provided-buffer ring of `entries` (a power of two)
/// for group `bgid`. Returns NULL and sets *err to a negative errno on failure.
static inline struct io_uring_buf_ring *cu_buf_ring_setup(struct io_uring *ring, unsigned entries,
                                                          int bgid, int *err) {
    size_t size = entries * sizeof(struct io_uring_buf);
    void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    if (mem == MAP_FAILED) { *err = -errno; return NULL; }
    struct io_uring_buf_ring *br = (struct io_uring_buf_ring *)mem;
    struct io_uring_buf_reg reg;
    memset(&reg, 0, sizeof(reg));
    reg.ring_addr = (unsigned long)(uintptr_t)br;
    reg.ring_entries = entries;
    reg.bgid = (unsigned short)bgid;
    int ret = io_uring_register_buf_ring(ring, &reg, 0);
    if (ret) { munmap(mem, size); *err = ret; return NULL; }
    io_uring_buf_ring_init(br);
    *err = 0;
    return br;
}

static inline void cu_buf_ring_free(struct io_uring *ring, struct io_uring_buf_ring *br,
                                    unsigned entries, int bgid) {
    io_uring_unregister_buf_ring(ring, bgid);
    munmap(br, entries * sizeof(struct io_uring_buf));
}

static inline void cu_buf_ring_add(struct io_uring_buf_ring *br, void *addr, unsigned len,
                                   unsigned short bid, unsigned entries, int offset) {
    io_uring_buf_ring_add(br, addr, len, bid, io_uring_buf_ring_mask(entries), offset);
}

static inline void cu_buf_ring_advance(struct io_uring_buf_ring *br, int count) {
    io_uring_buf_ring_advance(br, count);
}

// MARK: - Path MTU

static const int cu_so_ee_origin_local = SO_EE_ORIGIN_LOCAL;
static const int cu_so_ee_origin_icmp = SO_EE_ORIGIN_ICMP;
static const int cu_so_ee_origin_icmp6 = SO_EE_ORIGIN_ICMP6;

/// The MTU of the local interface that holds the address `fd` is bound to (after
/// connect: the interface toward the peer). Returns the MTU, or a negative errno.
static inline int cu_local_interface_mtu(int fd) {
    struct sockaddr_storage local;
    socklen_t length = sizeof(local);
    if (getsockname(fd, (struct sockaddr *)&local, &length) != 0) return -errno;
    struct ifaddrs *list = NULL;
    if (getifaddrs(&list) != 0) return -errno;
    int mtu = -ENODEV;
    for (struct ifaddrs *entry = list; entry; entry = entry->ifa_next) {
        if (!entry->ifa_addr || entry->ifa_addr->sa_family != local.ss_family) continue;
        int same = 0;
        if (local.ss_family == AF_INET) {
            same = ((struct sockaddr_in *)entry->ifa_addr)->sin_addr.s_addr
                == ((struct sockaddr_in *)&local)->sin_addr.s_addr;
        } else if (local.ss_family == AF_INET6) {
            same = memcmp(&((struct sockaddr_in6 *)entry->ifa_addr)->sin6_addr,
                          &((struct sockaddr_in6 *)&local)->sin6_addr, sizeof(struct in6_addr)) == 0;
        }
        if (!same) continue;
        struct ifreq request;
        memset(&request, 0, sizeof(request));
        strncpy(request.ifr_name, entry->ifa_name, IFNAMSIZ - 1);
        mtu = ioctl(fd, SIOCGIFMTU, &request) == 0 ? request.ifr_mtu : -errno;
        break;
    }
    freeifaddrs(list);
    return mtu;
}

// MARK: - Route monitor (NETLINK_ROUTE)

/// The rtnetlink multicast groups of path changes: links, IPv4/IPv6 addresses and routes
/// (RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_IFADDR | RTMGRP_IPV6_ROUTE,
/// from <linux/rtnetlink.h>, written out: that header is not needed for five bits).
static const unsigned cu_rtmgrp_path_changes = 0x1 | 0x10 | 0x40 | 0x100 | 0x400;

/// `struct sockaddr_nl` of <linux/netlink.h>, mirrored: that header, included here, breaks the
/// Glibc module's socket types in Swift (SOCK_STREAM unknown in a clean build).
struct cu_sockaddr_nl {
    sa_family_t nl_family;
    unsigned short nl_pad;
    uint32_t nl_pid;
    uint32_t nl_groups;
};
_Static_assert(sizeof(struct cu_sockaddr_nl) == 12, "sockaddr_nl is 12 bytes");

/// Opens a NETLINK_ROUTE (protocol 0) socket bound to the multicast `groups` (0: requests only).
/// Returns the descriptor, or a negative errno.
static inline int cu_netlink_route_socket(unsigned groups) {
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    struct cu_sockaddr_nl local;
    memset(&local, 0, sizeof(local));
    local.nl_family = AF_NETLINK;
    local.nl_groups = groups;
    if (bind(fd, (struct sockaddr *)&local, sizeof(local)) != 0) {
        int code = errno;
        close(fd);
        return -code;
    }
    return fd;
}

// MARK: - Multi-message calls (declared under _GNU_SOURCE, which the Swift importer lacks)

struct mmsghdr;
extern int sendmmsg(int fd, struct mmsghdr *vector, unsigned int count, int flags);
extern int recvmmsg(int fd, struct mmsghdr *vector, unsigned int count, int flags, struct timespec *timeout);

/// Sends up to `count` messages of `vector` (laid out as `struct mmsghdr`). Returns how many, or -1/errno.
static inline int cu_sendmmsg(int fd, void *vector, unsigned int count, int flags) {
    return sendmmsg(fd, (struct mmsghdr *)vector, count, flags);
}
/// Receives up to `count` messages into `vector` (laid out as `struct mmsghdr`). Returns how many, or -1/errno.
static inline int cu_recvmmsg(int fd, void *vector, unsigned int count, int flags) {
    return recvmmsg(fd, (struct mmsghdr *)vector, count, flags, NULL);
}

// MARK: - Submission and completion (one io_uring_enter per call, counted by the caller)

/// Submits what is queued and waits for `wait_nr` completions with one
/// io_uring_enter. Returns the number submitted or a negative errno.
static inline int cu_submit_and_wait(struct io_uring *ring, unsigned wait_nr) {
    return io_uring_submit_and_wait(ring, wait_nr);
}

/// Submits what is queued and waits, in one io_uring_enter, until `wait_nr` completions are
/// ready or `timeout_ns` has passed (IORING_ENTER_EXT_ARG, Linux 5.11: the timeout belongs to
/// this wait alone; no timer entry, no completion for it). For rings without SQPOLL, as
/// liburing's own submit does: publish the SQ tail, then enter. Returns the number submitted
/// (even when the wait then timed out), 0 or -ETIME when nothing was, or a negative errno.
/// `registered`: the ring's descriptor is registered (io_uring_register_ring_fd succeeded):
/// the enter names it by its index in the task's table, and the kernel takes no file
/// reference to the ring per call.
static inline int cu_submit_and_wait_timeout(struct io_uring *ring, unsigned wait_nr, long long timeout_ns,
                                             bool registered) {
    struct io_uring_sq *sq = &ring->sq;
    unsigned tail = sq->sqe_tail;
    if (sq->sqe_head != tail) {
        sq->sqe_head = tail;
        io_uring_smp_store_release(sq->ktail, tail);
    }
    unsigned to_submit = tail - io_uring_smp_load_acquire(sq->khead);
    struct __kernel_timespec ts = { .tv_sec = timeout_ns / 1000000000LL, .tv_nsec = timeout_ns % 1000000000LL };
    struct io_uring_getevents_arg arg = { .sigmask = 0, .sigmask_sz = _NSIG / 8, .pad = 0, .ts = (__u64)(uintptr_t)&ts };
    long rc = syscall(__NR_io_uring_enter, registered ? ring->enter_ring_fd : ring->ring_fd, to_submit, wait_nr,
                      IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG | (registered ? IORING_ENTER_REGISTERED_RING : 0),
                      &arg, sizeof(arg));
    return rc < 0 ? -errno : (int)rc;
}

static inline int cu_peek_cqe(struct io_uring *ring, struct io_uring_cqe **cqe) {
    return io_uring_peek_cqe(ring, cqe);
}

#endif
