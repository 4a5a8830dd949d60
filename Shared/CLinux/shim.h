#ifndef TETHER_CLINUX_SHIM_H
#define TETHER_CLINUX_SHIM_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

// Linux interfaces Glibc's Swift module does not cover.
#include <spawn.h>
#include <sys/eventfd.h>

/// posix_spawn's flag that starts the child in a new session (glibc, _GNU_SOURCE).
static inline short tether_posix_spawn_setsid(void) {
    return POSIX_SPAWN_SETSID;
}

#endif
