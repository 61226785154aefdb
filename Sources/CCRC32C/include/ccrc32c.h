#ifndef COURIER_CCRC32C_H
#define COURIER_CCRC32C_H
#include <stddef.h>
#include <stdint.h>

/// 1 if this CPU has a CRC32C instruction the library can use (SSE4.2 on x86-64, the CRC
/// extension on arm64 when the compiler guarantees it), else 0.
int courier_crc32c_hardware_available(void);

/// CRC-32C of `data`, continuing from `crc` (pre/post inverted like the Swift version).
/// Only call when `courier_crc32c_hardware_available()` returned 1.
uint32_t courier_crc32c_hardware(uint32_t crc, const void *data, size_t length);

#endif
