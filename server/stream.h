/* SPDX-License-Identifier: Apache-2.0 */
/* stream.h - long-lived HTTP responses (the watch feed) served by one thread
 * with epoll instead of a thread per connection. Once http.c has accepted a
 * watch request it takes the socket over from libmicrohttpd and adopts it
 * here; the loop writes the response head, then pulls bytes from the
 * stream's source whenever the socket can take them and the source may have
 * more: after streams_kick() (the feed calls it on every publish) and at the
 * time the source asked for. A client that stops reading holds its stream
 * for at most the stall timeout, whether or not bytes wait for it; one that
 * closes frees it at once.
 * Thread-safe: adopt and kick from any thread; sources run on the loop. */
#ifndef PODRES_STREAM_H
#define PODRES_STREAM_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"

enum stream_pull {
    STREAM_DATA, /* *data, *len: the next bytes; borrowed until the next pull */
    STREAM_IDLE, /* nothing now: pull again after a kick or at *wake_ms */
    STREAM_END,  /* the response is complete */
};

struct stream_src {
    /* Called on the loop thread only. 'now_ms' is CLOCK_MONOTONIC. */
    enum stream_pull (*pull)(void *cls, uint64_t now_ms, const char **data, size_t *len,
                             uint64_t *wake_ms);
    void (*free)(void *cls); /* the stream is gone; called once */
    /* For the memory budget (streams_set_budget); both NULL, or both set.
     * 'held': the bytes the source holds for its stream that are not
     * written yet (0: none), and in *age how far behind the oldest of them
     * is (lower is older: a revision). 'shed': the stream is ended for the
     * budget; let go of everything held (the bytes of the last pull too:
     * the loop forgets them) and give the last bytes to send, borrowed
     * until free (*len 0: none). No pull follows. */
    size_t (*held)(void *cls, uint64_t *age);
    void (*shed)(void *cls, const char **data, size_t *len);
};

struct streams;

/* How many streams at once. A stream's socket decides its budget: a unix
 * socket's count only against 'unix_max' and its user's 'per_uid', a TCP
 * connection's against 'tcp_max' and its client's 'per_peer', so TCP
 * clients can never take the unix socket's streams, nor one user all of
 * them. A TCP client is its peer address, or on loopback the local user
 * owning the client's socket (peeruid.h). */
struct stream_limits {
    size_t unix_max; /* streams on unix sockets */
    size_t per_uid;  /* streams of one user on unix sockets */
    size_t tcp_max;  /* streams on TCP connections, all clients together */
    size_t per_peer; /* streams of one TCP client */
};

/* Serve streams within 'lim' (copied). A client that reads nothing for
 * 'stall_s' seconds is dropped: whether bytes wait here because its socket
 * is full, or only in the socket (its unread queue, for a unix socket; the
 * bytes it has not acknowledged, for TCP). New, or an error. */
err_t streams_start(const struct stream_limits *lim, unsigned stall_s, struct streams **out);

/* Serve 'fd' (a connected socket, now owned) with 'src'/'cls' (owned from
 * here: freed through src->free even when this fails). 'head' is the
 * response head up to and including the blank line; 'chunked' frames the
 * body in HTTP/1.1 chunks, otherwise the body ends when the socket closes.
 * ERR_UNAVAIL when the stream's budget is spent (see stream_limits) or the
 * loop is stopping. */
err_t streams_adopt(struct streams *s, int fd, const char *head, bool chunked,
                    const struct stream_src *src, void *cls);

/* Bound what the streams' sources hold together: after each turn of the
 * loop, while total(ctx) is above 'max' bytes, the stream whose held bytes
 * are oldest (see stream_src.held; the most bytes among equals) is shed:
 * its source lets go of what it holds. Its last bytes (stream_src.shed)
 * are sent when no byte of a chunk is half written, and the stream ends;
 * otherwise it is closed at once. Sheds are logged at warn, at most once
 * every 10 s with their count. Call before the first adoption; 'total'
 * must be thread-safe and quick. */
void streams_set_budget(struct streams *s, size_t max, size_t (*total)(void *ctx), void *ctx);

/* Pull every stream soon. Cheap when there are none; async-signal-unsafe
 * but lock-free: fine under another module's lock. */
void streams_kick(void *s);

/* Streams open now. */
size_t streams_count(struct streams *s);

/* Give each stream a last pull (sources end once the service is stopping),
 * write what fits without waiting, close them all and join the loop.
 * NULL is a no-op. */
void streams_stop(struct streams *s);

#endif
