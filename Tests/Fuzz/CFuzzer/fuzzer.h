#ifndef TETHER_CFUZZER_H
#define TETHER_CFUZZER_H

#include <stddef.h>
#include <stdint.h>

/// libFuzzer's driver (linked by -sanitize=fuzzer): runs `callback` on generated inputs,
/// taking libFuzzer's usual command line. Called from a program's own main, since SwiftPM
/// gives every executable one.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
