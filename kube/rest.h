/* SPDX-License-Identifier: Apache-2.0 */
/* rest.h - the HTTP/JSON client of the REST servers podres talks to: the
 * Kubernetes API server, and podresd over its unix socket or URL. It is not
 * a Kubernetes object model: paths and bodies are the caller's. Blocking,
 * libcurl underneath, one easy handle per client so connections are kept
 * alive (HTTP/2 where TLS offers it); one client per thread, not
 * thread-safe. Every request passes a shared gate: a token bucket (--qps,
 * --burst) and a global backoff that network errors, 5xx and 429 extend
 * (Retry-After honoured: no request before it). Bearer tokens come from a
 * file re-read when it changes, and once more after a 401; they are never
 * logged. */
#ifndef PODRES_REST_H
#define PODRES_REST_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../common/strbuf.h"
#include "kubeconfig.h"

/* The content type of a JSON merge patch (RFC 7386), as rest_do's 'ctype'. */
#define REST_MERGE_PATCH "application/merge-patch+json"

/* libcurl for the process: call once before any client, from one thread,
 * and rest_global_cleanup() after the last. Debian's libcurl links libssh2,
 * whose libssh2_init() inside curl_global_init() starts OpenSSL's libcrypto
 * for SCP and SFTP, resident for nothing. The clients speak http and https
 * only, so libssh2 is initialised first without its crypto. */
err_t rest_global_init(void) WARN_UNUSED;
void rest_global_cleanup(void);

/* Shared by every client of the process. Thread-safe (its own mutex). */
struct rest_gate;

/* Counters for /metrics: requests by verb and code, retries. Thread-safe. */
struct rest_stats;

/* 'qps' <= 0 disables the bucket. New, or NULL. */
struct rest_gate *rest_gate_new(double qps, int burst);
void rest_gate_free(struct rest_gate *g); /* NULL is a no-op */
/* Who the gate's requests go to, as its log lines name it ('peer' static;
 * "Kubernetes API server" unless set). */
void rest_gate_name(struct rest_gate *g, const char *peer);
/* Make every wait and transfer return soon (shutdown). */
void rest_gate_stop(struct rest_gate *g);
bool rest_gate_stopped(struct rest_gate *g);
/* Sleep 'ms' or until stopped; false when stopped. */
bool rest_gate_sleep(struct rest_gate *g, uint64_t ms);

struct rest_stats *rest_stats_new(void);
void rest_stats_free(struct rest_stats *s); /* NULL is a no-op */
/* Append Prometheus lines for the counters (prefix "podres_syncer_"). */
err_t rest_stats_render(struct rest_stats *s, struct strbuf *sb) WARN_UNUSED;

struct rest_opts {
    const struct kubeconfig *kc; /* borrowed; must outlive the client; its *_data are
                                  * read only as files (kubeconfig_data_to_files) */
    const char *unix_socket;     /* connect here instead (podresd), or NULL */
    struct rest_gate *gate;      /* borrowed, or NULL for no limits (podresd) */
    struct rest_stats *stats;    /* borrowed, or NULL */
    int max_attempts;            /* tries of a retryable failure; 0 = 4 */
};

struct rest;

/* New, or NULL if out of memory. */
struct rest *rest_new(const struct rest_opts *opts);
void rest_free(struct rest *k); /* NULL is a no-op */

/* 'method' 'path' (beginning with '/', query included) with 'body' (borrowed,
 * or NULL) sent as 'ctype' (NULL: application/json). On ERR_OK *out is the
 * answer's JSON (new; json_null() for an empty body); with 'out' NULL the
 * answer is not parsed (a write whose answer the caller does not need).
 * Failures: ERR_NOTFOUND 404, ERR_CONFLICT 409, ERR_GONE 410, ERR_FORBIDDEN
 * 401/403, ERR_UNPROCESSABLE 422, ERR_INVAL other 4xx, ERR_UPSTREAM after
 * the retries of network errors, 5xx and 429, ERR_UNAVAIL when the gate
 * stopped, ERR_NOMEM; 'e' (or NULL) then holds the Status message, or what
 * failed. *out untouched on failure. */
err_t rest_do(struct rest *k, const char *method, const char *path, const json_t *body,
              const char *ctype, json_t **out, struct error *e) WARN_UNUSED;

/* The HTTP status of the last rest_do of 'k' (its last attempt): 201 tells
 * a PUT that made the object from one that replaced it; 0 when none came. */
long rest_last_code(const struct rest *k);

/* Called for each line of a stream with the parsed JSON (borrowed). Return
 * false to end the stream. */
typedef bool (*rest_line_fn)(void *ctx, json_t *line);

/* GET 'path' as a stream of newline-delimited JSON objects, calling 'fn' per
 * line, until the server ends it (ERR_OK), 'fn' returns false (ERR_OK), the
 * gate stops (ERR_OK), or an error: the mapped status as for rest_do, or
 * ERR_UPSTREAM for a broken connection (no retry here: the caller resumes).
 * A line that is not JSON ends the stream with ERR_UPSTREAM, and so does,
 * logged, a line longer than 16 MiB (more than any object: the API server
 * refuses requests over 3 MiB): the buffer never holds more than that and
 * one piece. On an error 'e' (or NULL) says why. */
err_t rest_stream(struct rest *k, const char *path, rest_line_fn fn, void *ctx,
                  struct error *e) WARN_UNUSED;

/* The JSON object (a Kubernetes Status, as a rule) the server answered the
 * last rest_do or rest_stream of 'k' with when it failed with an HTTP
 * status; NULL after a success, a transport failure, or a body that is not
 * a JSON object. Borrowed until the next request of 'k'. */
const json_t *rest_last_status(const struct rest *k);

/* Whether 'status' (a Status, or NULL) says the resourceVersion asked for is
 * newer than the server's: "too large resource version", a 504 of reason
 * Timeout with the cause ResourceVersionTooLarge. rest_stream answered so
 * does not count as the server failing (no backoff). */
bool rest_status_too_large(const json_t *status);

/* Percent-encode 's' for a query value into 'out' of 'cap' > 0 bytes
 * (NUL-terminated, cut before an escape that does not fit). */
void rest_escape(const char *s, char *out, size_t cap);

#endif
