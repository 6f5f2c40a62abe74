// Shim over libx265 3.5. Its symbols carry the build number (x265_api_get_199),
// so Swift reaches the library only through the API table x265_api_get(0) returns.
#ifndef CX265_SHIM_H
#define CX265_SHIM_H

#include <stdint.h>
#include <stddef.h>
#include <x265.h>

/// The x265 API table for the default (8-bit) build, or NULL.
static inline const x265_api *cx265_api(void) { return x265_api_get(0); }

#endif
