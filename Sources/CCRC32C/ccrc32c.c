// Hardware CRC-32C. Measured on this machine kind: ~20 ns per 150 bytes against ~135 ns for the
// Swift slicing-by-8 table, which stays as the fallback everywhere else.
#include "ccrc32c.h"
#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>

int courier_crc32c_hardware_available(void) {
    return __builtin_cpu_supports("sse4.2") ? 1 : 0;
}

__attribute__((target("sse4.2")))
uint32_t courier_crc32c_hardware(uint32_t crc, const void *data, size_t length) {
    const unsigned char *p = data;
    uint64_t c = ~crc;
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = _mm_crc32_u64(c, word);
        p += 8;
        length -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (length > 0) {
        c32 = _mm_crc32_u8(c32, *p++);
        length--;
    }
    return ~c32;
}

#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
#include <arm_acle.h>

int courier_crc32c_hardware_available(void) { return 1; }

uint32_t courier_crc32c_hardware(uint32_t crc, const void *data, size_t length) {
    const unsigned char *p = data;
    uint32_t c = ~crc;
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = __crc32cd(c, word);
        p += 8;
        length -= 8;
    }
    while (length > 0) {
        c = __crc32cb(c, *p++);
        length--;
    }
    return ~c;
}

#else
int courier_crc32c_hardware_available(void) { return 0; }
uint32_t courier_crc32c_hardware(uint32_t crc, const void *data, size_t length) {
    (void)data; (void)length;
    return crc;  // never called: availability is 0
}
#endif
