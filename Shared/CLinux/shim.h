#ifndef TETHER_CLINUX_SHIM_H
#define TETHER_CLINUX_SHIM_H

// Linux interfaces Glibc's Swift module does not cover.
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <malloc.h>

/// posix_spawn's flag that starts the child in a new session. glibc defines
/// POSIX_SPAWN_SETSID only under _GNU_SOURCE, which would make this module's view of the
/// system headers differ from Glibc's; its value is fixed by glibc's ABI.
static inline short tether_posix_spawn_setsid(void) {
    return 0x80;
}

/// posix_spawn's action that closes every descriptor from `from` on in the child, so it
/// inherits nothing but what is given it. glibc (2.34 and later) declares it only under
/// _GNU_SOURCE, for the same reason as above.
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);

static inline int tether_posix_spawn_close_from(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

/// A descriptor that becomes readable when process `pid` ends (Linux 5.3 and later); -1
/// with errno set where the kernel has no pidfd_open. glibc's wrapper is recent, so the
/// system call is made directly.
static inline int tether_pidfd_open(int pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

/// Names the calling thread (at most 15 bytes are kept) as `ps -T` shows it.
/// pthread_setname_np is declared only under _GNU_SOURCE, for the same reason as above.
static inline int tether_name_this_thread(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}

/// The rtnetlink multicast groups that report links, addresses and routes (IPv4 and IPv6).
static inline unsigned int tether_rtnetlink_groups(void) {
    return RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_IFADDR | RTMGRP_IPV6_ROUTE;
}

#endif
