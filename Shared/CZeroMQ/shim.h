#ifndef TETHER_CZEROMQ_SHIM_H
#define TETHER_CZEROMQ_SHIM_H

#include <zmq.h>

#endif
