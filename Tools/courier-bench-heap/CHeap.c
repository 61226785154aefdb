#include "CHeap.h"
#if defined(__linux__)
#include <malloc.h>
size_t courier_heap_in_use(void) { return mallinfo2().uordblks; }  // glibc 2.33+
#else
size_t courier_heap_in_use(void) { return 0; }  // not measured off Linux
#endif
