// Shim over libsrtp2 (Debian's libsrtp2-dev 2.5). Glue only: the crypto policies are picked
// by a number so Swift never fills an srtp_policy_t (it holds C pointers), and the library is
// initialised once. Every function forwards to libsrtp2 and returns its srtp_err_status_t.
#ifndef CSRTP_SHIM_H
#define CSRTP_SHIM_H

#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>
#include <srtp2/srtp.h>

/// The suites SecureRTP names, by number (SRTPSuite's raw order).
enum {
    CSRTP_AES_CM_128_HMAC_SHA1_80 = 0,
    CSRTP_AES_CM_128_HMAC_SHA1_32 = 1,
    CSRTP_AEAD_AES_128_GCM = 2,
    CSRTP_AEAD_AES_256_GCM = 3,
};

/// srtp_init (call once; SecureRTP keeps the result in a global).
static inline int csrtp_init(void) { return (int)srtp_init(); }

/// Sets the RTP and RTCP crypto policies of a suite; 0, or -1 for an unknown number.
/// SRTCP keeps its 80-bit tag with the _32 suite (RFC 4568 6.2.1: only SRTP's is shortened).
static inline int csrtp_set_policies(srtp_policy_t *policy, int suite) {
    switch (suite) {
    case CSRTP_AES_CM_128_HMAC_SHA1_80:
        srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&policy->rtp);
        srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&policy->rtcp);
        return 0;
    case CSRTP_AES_CM_128_HMAC_SHA1_32:
        srtp_crypto_policy_set_aes_cm_128_hmac_sha1_32(&policy->rtp);
        srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&policy->rtcp);
        return 0;
    case CSRTP_AEAD_AES_128_GCM:
        srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy->rtp);
        srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy->rtcp);
        return 0;
    case CSRTP_AEAD_AES_256_GCM:
        srtp_crypto_policy_set_aes_gcm_256_16_auth(&policy->rtp);
        srtp_crypto_policy_set_aes_gcm_256_16_auth(&policy->rtcp);
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
    srtp_policy_t policy;
    memset(&policy, 0, sizeof policy);
    if (csrtp_set_policies(&policy, suite) != 0) return (int)srtp_err_status_bad_param;
    policy.ssrc.type = inbound ? ssrc_any_inbound : ssrc_any_outbound;
    policy.key = (unsigned char *)master;  // libsrtp2 only reads it (srtp_stream_init_keys)
    policy.window_size = window;
    policy.allow_repeat_tx = inbound ? 0 : 1;
    policy.next = NULL;
    return (int)srtp_create(session, &policy);
}

/// srtp_dealloc.
static inline int csrtp_dealloc(srtp_t session) { return (int)srtp_dealloc(session); }

/// srtp_protect: `length` in, the protected length out; room for the tag must follow.
static inline int csrtp_protect(srtp_t session, void *packet, int *length) {
    return (int)srtp_protect(session, packet, length);
}

/// srtp_unprotect: `length` in, the plaintext length out.
static inline int csrtp_unprotect(srtp_t session, void *packet, int *length) {
    return (int)srtp_unprotect(session, packet, length);
}

/// srtp_protect_rtcp: room for the SRTCP index and tag must follow.
static inline int csrtp_protect_rtcp(srtp_t session, void *packet, int *length) {
    return (int)srtp_protect_rtcp(session, packet, length);
}

/// srtp_unprotect_rtcp.
static inline int csrtp_unprotect_rtcp(srtp_t session, void *packet, int *length) {
    return (int)srtp_unprotect_rtcp(session, packet, length);
}

/// srtp_remove_stream for an SSRC in host order.
static inline int csrtp_remove_stream(srtp_t session, uint32_t ssrc) {
    return (int)srtp_remove_stream(session, htonl(ssrc));
}

#endif
