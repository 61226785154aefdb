// `courier-bench --model`: the heap in use, for bytes per message (glibc's malloc.h, which
// Swift's Glibc module does not include).
#include <stddef.h>
size_t courier_heap_in_use(void);
