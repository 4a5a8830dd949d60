#ifndef TETHER_CLINUX_SHIM_H
#define TETHER_CLINUX_SHIM_H

// Linux interfaces Glibc's Swift module does not cover.
#include <sys/eventfd.h>

#endif
