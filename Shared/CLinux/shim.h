#ifndef TETHER_CLINUX_SHIM_H
#define TETHER_CLINUX_SHIM_H

// Linux interfaces Glibc's Swift module does not cover.
#include <sys/eventfd.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

/// posix_spawn's flag that starts the child in a new session. glibc defines
/// POSIX_SPAWN_SETSID only under _GNU_SOURCE, which would make this module's view of the
/// system headers differ from Glibc's; its value is fixed by glibc's ABI.
static inline short tether_posix_spawn_setsid(void) {
    return 0x80;
}

/// The rtnetlink multicast groups that report links, addresses and routes (IPv4 and IPv6).
static inline unsigned int tether_rtnetlink_groups(void) {
    return RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_IFADDR | RTMGRP_IPV6_ROUTE;
}

#endif
