// setns(2) for the tests' network namespaces: glibc declares it only under _GNU_SOURCE,
// which the Swift importer does not set, and Glibc does not export it.
#ifndef CNETWORKNAMESPACE_SHIM_H
#define CNETWORKNAMESPACE_SHIM_H

extern int setns(int fd, int nstype);

/// Moves the calling thread into the network namespace open at `fd`. Returns 0 or -1/errno.
static inline int cnn_setns_net(int fd) { return setns(fd, 0x40000000 /* CLONE_NEWNET */); }

#endif
