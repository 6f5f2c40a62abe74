// Shim over libsrtp2 (Debian's libsrtp2-dev 2.5). Glue only: the crypto policies are picked
// by a number so Swift never fills an srtp_policy_t (it holds C pointers), and the library is
// initialised once. Every function forwards to libsrtp2 and returns its srtp_err_status_t.
//
// The library is loaded with dlopen when SRTP is first used, not linked: a process without
// --srtp does not load libsrtp2 and the NSS libraries it needs at start-up, ~0.5 ms of CPU per
// process on the machines results/profile.md section 36 measured. The functions are found
// with dlsym and typed by the header's own declarations (__typeof__).
#ifndef CSRTP_SHIM_H
#define CSRTP_SHIM_H

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>
#include <srtp2/srtp.h>

/// The file name of the library (libsrtp 2's soname).
static inline const char *csrtp_library_name(void) { return "libsrtp2.so.1"; }

/// The libsrtp2 functions the shim calls.
typedef struct {
    __typeof__(srtp_init) *init;
    __typeof__(srtp_create) *create;
    __typeof__(srtp_dealloc) *dealloc;
    __typeof__(srtp_protect) *protect;
    __typeof__(srtp_unprotect) *unprotect;
    __typeof__(srtp_protect_rtcp) *protect_rtcp;
    __typeof__(srtp_unprotect_rtcp) *unprotect_rtcp;
    __typeof__(srtp_remove_stream) *remove_stream;
    __typeof__(srtp_crypto_policy_set_rtp_default) *aes_cm_128_hmac_sha1_80;  // its synonym is a macro
    __typeof__(srtp_crypto_policy_set_aes_cm_128_hmac_sha1_32) *aes_cm_128_hmac_sha1_32;
    __typeof__(srtp_crypto_policy_set_aes_gcm_128_16_auth) *aes_gcm_128_16_auth;
    __typeof__(srtp_crypto_policy_set_aes_gcm_256_16_auth) *aes_gcm_256_16_auth;
    /// Every function was found.
    int complete;
} csrtp_functions;

/// The table csrtp_load fills (a function's static: Swift emits the header's functions, not
/// its variables).
static inline csrtp_functions *csrtp_table(void) {
    static csrtp_functions table;
    return &table;
}

/// Loads the library and finds its functions (run once, by pthread_once).
static inline void csrtp_load(void) {
    csrtp_functions *table = csrtp_table();
    void *library = dlopen(csrtp_library_name(), RTLD_NOW | RTLD_LOCAL);
    if (!library) return;
#define CSRTP_FIND(field, name) \
    if (!(table->field = (__typeof__(table->field))dlsym(library, #name))) return;
    CSRTP_FIND(init, srtp_init)
    CSRTP_FIND(create, srtp_create)
    CSRTP_FIND(dealloc, srtp_dealloc)
    CSRTP_FIND(protect, srtp_protect)
    CSRTP_FIND(unprotect, srtp_unprotect)
    CSRTP_FIND(protect_rtcp, srtp_protect_rtcp)
    CSRTP_FIND(unprotect_rtcp, srtp_unprotect_rtcp)
    CSRTP_FIND(remove_stream, srtp_remove_stream)
    CSRTP_FIND(aes_cm_128_hmac_sha1_80, srtp_crypto_policy_set_rtp_default)
    CSRTP_FIND(aes_cm_128_hmac_sha1_32, srtp_crypto_policy_set_aes_cm_128_hmac_sha1_32)
    CSRTP_FIND(aes_gcm_128_16_auth, srtp_crypto_policy_set_aes_gcm_128_16_auth)
    CSRTP_FIND(aes_gcm_256_16_auth, srtp_crypto_policy_set_aes_gcm_256_16_auth)
#undef CSRTP_FIND
    table->complete = 1;
}

/// The library's functions, or NULL when it cannot be loaded or lacks one of them. Loaded
/// once (dlopen, never closed; pthread_once orders the table's writes before every read).
static inline const csrtp_functions *csrtp_library(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, csrtp_load);
    const csrtp_functions *table = csrtp_table();
    return table->complete ? table : NULL;
}

/// The suites SecureRTP names, by number (SRTPSuite's raw order).
enum {
    CSRTP_AES_CM_128_HMAC_SHA1_80 = 0,
    CSRTP_AES_CM_128_HMAC_SHA1_32 = 1,
    CSRTP_AEAD_AES_128_GCM = 2,
    CSRTP_AEAD_AES_256_GCM = 3,
};

/// Loads the library and calls srtp_init (call once; SecureRTP keeps the result in a global):
/// its status, or -1 when the library cannot be loaded.
static inline int csrtp_init(void) {
    const csrtp_functions *srtp = csrtp_library();
    return srtp ? (int)srtp->init() : -1;
}

/// Sets the RTP and RTCP crypto policies of a suite; 0, or -1 for an unknown number.
/// SRTCP keeps its 80-bit tag with the _32 suite (RFC 4568 6.2.1: only SRTP's is shortened).
static inline int csrtp_set_policies(srtp_policy_t *policy, int suite) {
    const csrtp_functions *srtp = csrtp_library();
    if (!srtp) return -1;
    switch (suite) {
    case CSRTP_AES_CM_128_HMAC_SHA1_80:
        srtp->aes_cm_128_hmac_sha1_80(&policy->rtp);
        srtp->aes_cm_128_hmac_sha1_80(&policy->rtcp);
        return 0;
    case CSRTP_AES_CM_128_HMAC_SHA1_32:
        srtp->aes_cm_128_hmac_sha1_32(&policy->rtp);
        srtp->aes_cm_128_hmac_sha1_80(&policy->rtcp);
        return 0;
    case CSRTP_AEAD_AES_128_GCM:
        srtp->aes_gcm_128_16_auth(&policy->rtp);
        srtp->aes_gcm_128_16_auth(&policy->rtcp);
        return 0;
    case CSRTP_AEAD_AES_256_GCM:
        srtp->aes_gcm_256_16_auth(&policy->rtp);
        srtp->aes_gcm_256_16_auth(&policy->rtcp);
        return 0;
    default:
        return -1;
    }
}

/// srtp_create with one wildcard policy: every outbound SSRC (`inbound` 0) or every inbound
/// SSRC (`inbound` 1) under one master key (key then salt, copied by libsrtp2), a replay
/// window of `window` packets, and (outbound) resends of a packet allowed.
static inline int csrtp_create(srtp_t *session, int suite, const unsigned char *master, int inbound,
                               unsigned long window) {
    const csrtp_functions *srtp = csrtp_library();
    if (!srtp) return (int)srtp_err_status_fail;
    srtp_policy_t policy;
    memset(&policy, 0, sizeof policy);
    if (csrtp_set_policies(&policy, suite) != 0) return (int)srtp_err_status_bad_param;
    policy.ssrc.type = inbound ? ssrc_any_inbound : ssrc_any_outbound;
    policy.key = (unsigned char *)master;  // libsrtp2 only reads it (srtp_stream_init_keys)
    policy.window_size = window;
    policy.allow_repeat_tx = inbound ? 0 : 1;
    policy.next = NULL;
    return (int)srtp->create(session, &policy);
}

/// The status of a call into a library that could not be loaded.
#define CSRTP_UNLOADED ((int)srtp_err_status_fail)

/// srtp_dealloc.
static inline int csrtp_dealloc(srtp_t session) {
    const csrtp_functions *srtp = csrtp_library();
    return srtp ? (int)srtp->dealloc(session) : CSRTP_UNLOADED;
}

/// srtp_protect: `length` in, the protected length out; room for the tag must follow.
static inline int csrtp_protect(srtp_t session, void *packet, int *length) {
    const csrtp_functions *srtp = csrtp_library();
    return srtp ? (int)srtp->protect(session, packet, length) : CSRTP_UNLOADED;
}

/// srtp_unprotect: `length` in, the plaintext length out.
static inline int csrtp_unprotect(srtp_t session, void *packet, int *length) {
    const csrtp_functions *srtp = csrtp_library();
    return srtp ? (int)srtp->unprotect(session, packet, length) : CSRTP_UNLOADED;
}

/// srtp_protect_rtcp: room for the SRTCP index and tag must follow.
static inline int csrtp_protect_rtcp(srtp_t session, void *packet, int *length) {
    const csrtp_functions *srtp = csrtp_library();
    return srtp ? (int)srtp->protect_rtcp(session, packet, length) : CSRTP_UNLOADED;
}

/// srtp_unprotect_rtcp.
static inline int csrtp_unprotect_rtcp(srtp_t session, void *packet, int *length) {
    const csrtp_functions *srtp = csrtp_library();
    return srtp ? (int)srtp->unprotect_rtcp(session, packet, length) : CSRTP_UNLOADED;
}

/// srtp_remove_stream for an SSRC in host order.
static inline int csrtp_remove_stream(srtp_t session, uint32_t ssrc) {
    const csrtp_functions *srtp = csrtp_library();
    return srtp ? (int)srtp->remove_stream(session, htonl(ssrc)) : CSRTP_UNLOADED;
}

#endif
