/* SPDX-License-Identifier: Apache-2.0 */
/* peeruid.h - the local user at the other end of a connected socket, so
 * that one user's connections and watches can be bounded apart from
 * another's: a unix socket's peer credentials (SO_PEERCRED), or, for a TCP
 * connection from a loopback address, the owner of the client's socket as
 * the kernel lists it in /proc/net/tcp or /proc/net/tcp6 (what identd
 * reads). Thread-safe. */
#ifndef PODRES_PEERUID_H
#define PODRES_PEERUID_H
#include <stdbool.h>
#include <sys/types.h>

struct sockaddr;

/* The user of the peer of 'fd' into *uid; false when it is not known (a
 * TCP peer that is not on loopback, a socket gone, no /proc). */
bool peer_uid(int fd, uid_t *uid);

/* Whether a TCP peer address (struct sockaddr_in or _in6) is loopback:
 * 127.0.0.0/8, ::1, or ::ffff:127.0.0.0/104. */
bool peer_is_loopback(const struct sockaddr *sa);

#endif
