// The system's zlib (Linux: zlib1g-dev; Apple platforms: the SDK's libz), for
// `Content-Encoding: gzip` request bodies.
#include <zlib.h>
