/* SPDX-License-Identifier: Apache-2.0 */
/* grpc.h - a minimal unary gRPC client: HTTP/2 with prior knowledge over a
 * unix socket, through libcurl (no gRPC library). One request message, one
 * answer message; no TLS, no compression, no streaming. The framing helpers
 * are pure and also serve the tests. A client is one curl easy handle kept
 * for life, with a fresh connection per call (libcurl 7.88 cannot reuse a
 * prior-knowledge HTTP/2 connection); one per thread, not thread-safe. The client does not log: a
 * failed call describes itself in 'struct grpc_status' and the caller decides how loudly to report
 * it. */
#ifndef PODRES_GRPC_H
#define PODRES_GRPC_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"

#define GRPC_FRAME_HDR 5 /* compressed flag + 4-byte big-endian length */

/* The gRPC status codes a caller acts on (the wire carries 0..16). */
enum grpc_code {
    GRPC_OK = 0,
    GRPC_CANCELLED = 1,
    GRPC_UNKNOWN = 2,
    GRPC_DEADLINE_EXCEEDED = 4,
    GRPC_NOT_FOUND = 5,
    GRPC_PERMISSION_DENIED = 7,
    GRPC_RESOURCE_EXHAUSTED = 8,
    GRPC_UNIMPLEMENTED = 12,
    GRPC_INTERNAL = 13,
    GRPC_UNAVAILABLE = 14,
    GRPC_UNAUTHENTICATED = 16,
};

struct grpc_opts {
    const char *socket_path;  /* unix socket; borrowed, must outlive the client */
    uint64_t timeout_ms;      /* limit of a whole call, milliseconds (> 0) */
    size_t max_recv;          /* largest answer message accepted, bytes */
    const volatile int *stop; /* a call in progress aborts once *stop != 0; may be NULL */
};

/* How a call ended. */
struct grpc_status {
    int code;          /* grpc-status, or the code a transport failure maps to */
    bool no_socket;    /* the socket is missing or refuses connections */
    char message[256]; /* grpc-message (percent-decoded) or the transport error */
};

struct grpc;

/* 'o' is copied (the socket path stays borrowed). New, or NULL if out of memory. */
struct grpc *grpc_new(const struct grpc_opts *o);
void grpc_free(struct grpc *g); /* NULL is a no-op */

/* Call 'method' ("/package.Service/Method") with the serialised request
 * 'req'. On ERR_OK *resp (new: free() it; never NULL) holds the answer
 * message of *resp_len bytes and st->code is GRPC_OK. ERR_UPSTREAM: the
 * socket is missing, the connection failed or timed out (st->code
 * GRPC_UNAVAILABLE or GRPC_DEADLINE_EXCEEDED), or the server answered a
 * non-OK status (st->code is it). ERR_INVAL: the answer is malformed (HTTP
 * status, content type, framing, no grpc-status, over max_recv); st->code is
 * GRPC_INTERNAL. ERR_NOMEM. *st is always written. */
err_t grpc_call(struct grpc *g, const char *method, const uint8_t *req, size_t req_len,
                uint8_t **resp, size_t *resp_len, struct grpc_status *st) WARN_UNUSED;

/* ---- framing (pure) ---- */

/* The length-prefixed message: on ERR_OK *out is new (free() it), *out_len
 * = len + GRPC_FRAME_HDR. ERR_INVAL when len does not fit 32 bits. */
err_t grpc_frame(const uint8_t *msg, size_t len, uint8_t **out, size_t *out_len) WARN_UNUSED;

/* Check that 'buf' holds exactly one uncompressed message of at most 'max'
 * bytes; *msg (borrowed from buf) and *msg_len locate it. ERR_INVAL for a
 * short or trailing buffer, a compressed message or one over 'max'; 'e'
 * (may be NULL) says which. Outputs untouched on failure. */
err_t grpc_unframe(const uint8_t *buf, size_t len, size_t max, const uint8_t **msg, size_t *msg_len,
                   struct error *e) WARN_UNUSED;

/* Decode a grpc-message value (percent-encoded UTF-8) of 'n' bytes into
 * 'out' (always NUL-terminated, truncated to 'cap'). Malformed escapes are
 * kept as they are, as the gRPC spec asks. */
void grpc_percent_decode(const char *in, size_t n, char *out, size_t cap);

/* The gRPC code of a non-200 HTTP status (the gRPC HTTP mapping). */
int grpc_code_of_http(long http_status);

#endif
