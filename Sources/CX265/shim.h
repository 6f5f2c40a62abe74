// Shim over libx265 3.5. Its symbols carry the build number (x265_api_get_199),
// so Swift reaches the library only through the API table x265_api_get(0) returns.
// Every helper here is glue over that table: it returns an error value (NULL or
// -1) when the table is missing and otherwise forwards the call unchanged.
//
// The library is loaded with dlopen on first use, not linked: a process that never
// encodes (`streamer recv`, `streamer send` from a file) does not load libx265, libnuma
// and their relocations at start-up, ~0.8 ms of CPU per process on the machines
// results/profile.md section 36 measured.
#ifndef CX265_SHIM_H
#define CX265_SHIM_H

#include <dlfcn.h>
#include <stdint.h>
#include <stddef.h>
#include <x265.h>

#define CX265_STRING_(x) #x
#define CX265_STRING(x) CX265_STRING_(x)

/// The file name of the library built for the x265.h Swift was compiled against.
static inline const char *cx265_library_name(void) { return "libx265.so." CX265_STRING(X265_BUILD); }

/// The x265 API table for the default (8-bit) build, or NULL when the library cannot be
/// loaded or has no such build. Loaded once (dlopen, never closed), then read from a cache.
static inline const x265_api *cx265_api(void) {
    static const x265_api *cached;
    const x265_api *api = __atomic_load_n(&cached, __ATOMIC_ACQUIRE);
    if (api) return api;
    void *library = dlopen(cx265_library_name(), RTLD_NOW | RTLD_LOCAL);
    if (!library) return NULL;
    const x265_api *(*get)(int) =
        (const x265_api *(*)(int))dlsym(library, "x265_api_get_" CX265_STRING(X265_BUILD));
    api = get ? get(0) : NULL;
    if (api) __atomic_store_n(&cached, api, __ATOMIC_RELEASE);
    return api;
}

/// True when the loaded library's table matches the header Swift was compiled
/// against (Swift reads x265_param, x265_picture and x265_nal fields directly).
static inline int cx265_api_matches_header(void) {
    const x265_api *api = cx265_api();
    return api != NULL
        && api->api_build_number == X265_BUILD
        && api->sizeof_param == (int)sizeof(x265_param)
        && api->sizeof_picture == (int)sizeof(x265_picture);
}

/// The library's version string ("3.5+..."), or NULL.
static inline const char *cx265_version(void) {
    const x265_api *api = cx265_api();
    return api ? api->version_str : NULL;
}

/// api->param_alloc.
static inline x265_param *cx265_param_alloc(void) {
    const x265_api *api = cx265_api();
    return api ? api->param_alloc() : NULL;
}

/// api->param_free; NULL is ignored.
static inline void cx265_param_free(x265_param *param) {
    const x265_api *api = cx265_api();
    if (api && param) api->param_free(param);
}

/// api->param_default_preset: 0 on success, negative for an unknown preset or tune.
static inline int cx265_param_default_preset(x265_param *param, const char *preset, const char *tune) {
    const x265_api *api = cx265_api();
    return api ? api->param_default_preset(param, preset, tune) : -1;
}

/// api->param_parse: 0, X265_PARAM_BAD_NAME or X265_PARAM_BAD_VALUE.
static inline int cx265_param_parse(x265_param *param, const char *name, const char *value) {
    const x265_api *api = cx265_api();
    return api ? api->param_parse(param, name, value) : X265_PARAM_BAD_NAME;
}

/// api->param_apply_profile: 0 on success.
static inline int cx265_param_apply_profile(x265_param *param, const char *profile) {
    const x265_api *api = cx265_api();
    return api ? api->param_apply_profile(param, profile) : -1;
}

/// api->picture_alloc.
static inline x265_picture *cx265_picture_alloc(void) {
    const x265_api *api = cx265_api();
    return api ? api->picture_alloc() : NULL;
}

/// api->picture_free; NULL is ignored.
static inline void cx265_picture_free(x265_picture *picture) {
    const x265_api *api = cx265_api();
    if (api && picture) api->picture_free(picture);
}

/// api->picture_init.
static inline void cx265_picture_init(x265_param *param, x265_picture *picture) {
    const x265_api *api = cx265_api();
    if (api) api->picture_init(param, picture);
}

/// Points an input picture at three 8-bit I420 planes. x265 only reads input
/// planes (it copies them during encoder_encode), hence the const casts.
static inline void cx265_picture_set_i420(x265_picture *picture,
                                          const void *luma, const void *cb, const void *cr,
                                          int lumaStride, int chromaStride) {
    picture->planes[0] = (void *)luma;
    picture->planes[1] = (void *)cb;
    picture->planes[2] = (void *)cr;
    picture->stride[0] = lumaStride;
    picture->stride[1] = chromaStride;
    picture->stride[2] = chromaStride;
    picture->bitDepth = 8;
    picture->colorSpace = X265_CSP_I420;
}

/// api->encoder_open: the encoder copies param; NULL when x265 rejects it.
static inline x265_encoder *cx265_encoder_open(x265_param *param) {
    const x265_api *api = cx265_api();
    return api ? api->encoder_open(param) : NULL;
}

/// api->encoder_headers: bytes written (VPS, SPS, PPS), negative on error.
static inline int cx265_encoder_headers(x265_encoder *encoder, x265_nal **nals, uint32_t *count) {
    const x265_api *api = cx265_api();
    return api ? api->encoder_headers(encoder, nals, count) : -1;
}

/// api->encoder_encode: pictures output (0 or 1), negative on error. A NULL
/// input picture flushes. The NAL array stays valid until the next call.
static inline int cx265_encoder_encode(x265_encoder *encoder, x265_nal **nals, uint32_t *count,
                                       x265_picture *input, x265_picture *output) {
    const x265_api *api = cx265_api();
    return api ? api->encoder_encode(encoder, nals, count, input, output) : -1;
}

/// api->encoder_parameters: copies the encoder's current parameters into param.
static inline void cx265_encoder_parameters(x265_encoder *encoder, x265_param *param) {
    const x265_api *api = cx265_api();
    if (api) api->encoder_parameters(encoder, param);
}

/// api->encoder_reconfig: 0 on success (or 1 while a change is pending),
/// negative when the change is refused.
static inline int cx265_encoder_reconfig(x265_encoder *encoder, x265_param *param) {
    const x265_api *api = cx265_api();
    return api ? api->encoder_reconfig(encoder, param) : -1;
}

/// api->encoder_close; NULL is ignored.
static inline void cx265_encoder_close(x265_encoder *encoder) {
    const x265_api *api = cx265_api();
    if (api && encoder) api->encoder_close(encoder);
}

#endif
