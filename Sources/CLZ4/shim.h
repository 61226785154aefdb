// The system liblz4 (Linux only: Apple platforms use the Compression framework). The block API
// (lz4.h) is what the log uses; the frame API (lz4frame.h) is used only by tests and the
// benchmark, to check byte compatibility. If this include fails, the library is not installed:
// one clear line beats a wall of linker errors.
#if __has_include(<lz4frame.h>) && __has_include(<lz4.h>)
#include <lz4.h>
#include <lz4frame.h>
#else
#error "liblz4 not found: install it (Debian/Ubuntu: apt-get install liblz4-dev), or run `make test`, which installs it."
#endif
