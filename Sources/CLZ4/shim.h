// The system liblz4, frame API only. If this include fails, the library is not installed:
// one clear line beats a wall of linker errors.
#if __has_include(<lz4frame.h>)
#include <lz4frame.h>
#else
#error "liblz4 not found: install it (Debian/Ubuntu: apt-get install liblz4-dev; macOS: brew install lz4), or run `make test`, which installs it."
#endif
