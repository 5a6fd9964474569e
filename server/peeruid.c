/* SPDX-License-Identifier: Apache-2.0 */
/* peeruid.c - SO_PEERCRED, and the socket table of /proc/net for loopback
 * TCP peers. */
#include "../common/common.h"
#include "peeruid.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <strings.h>
#include <sys/socket.h>

bool peer_is_loopback(const struct sockaddr *sa)
{
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    const struct sockaddr_in6 *a6;

    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family != AF_INET6)
        return false;
    a6 = (const struct sockaddr_in6 *)sa;
    return IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr) ||
           (memcmp(a6->sin6_addr.s6_addr, mapped, 12) == 0 && a6->sin6_addr.s6_addr[12] == 127);
}

/* An address as /proc/net/tcp{,6} prints it: each 32-bit word of the
 * address as stored, in hex, then ':' and the port. */
static void proc_addr(const struct sockaddr_storage *ss, char *out, size_t cap)
{
    const struct sockaddr_in *a4 = (const struct sockaddr_in *)ss;
    const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)ss;
    uint32_t w[4];

    if (ss->ss_family == AF_INET) {
        snprintf(out, cap, "%08X:%04X", (unsigned)a4->sin_addr.s_addr, ntohs(a4->sin_port));
        return;
    }
    memcpy(w, &a6->sin6_addr, sizeof(w));
    snprintf(out, cap, "%08X%08X%08X%08X:%04X", (unsigned)w[0], (unsigned)w[1], (unsigned)w[2],
             (unsigned)w[3], ntohs(a6->sin6_port));
}

/* The uid of the socket whose local address is 'client' and remote one
 * 'server' in the table 'path'. */
static bool proc_uid(const char *path, const char *client, const char *server, uid_t *uid)
{
    char line[512], local[80], remote[80];
    unsigned u;
    bool found = false;
    FILE *f = fopen(path, "re");

    if (!f)
        return false;
    while (!found && fgets(line, sizeof(line), f)) {
        if (sscanf(line, " %*s %79s %79s %*s %*s %*s %*s %u", local, remote, &u) == 3 &&
            strcasecmp(local, client) == 0 && strcasecmp(remote, server) == 0) {
            *uid = (uid_t)u;
            found = true;
        }
    }
    fclose(f);
    return found;
}

bool peer_uid(int fd, uid_t *uid)
{
    struct sockaddr_storage peer, self;
    socklen_t plen = sizeof(peer), slen = sizeof(self);
    struct ucred cred;
    socklen_t clen = sizeof(cred);
    char client[80], server[80];

    if (getpeername(fd, (struct sockaddr *)&peer, &plen) != 0)
        return false;
    if (peer.ss_family == AF_UNIX) {
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0)
            return false;
        *uid = cred.uid;
        return true;
    }
    if (!peer_is_loopback((struct sockaddr *)&peer) ||
        getsockname(fd, (struct sockaddr *)&self, &slen) != 0 || self.ss_family != peer.ss_family)
        return false;
    proc_addr(&peer, client, sizeof(client));
    proc_addr(&self, server, sizeof(server));
    return proc_uid(peer.ss_family == AF_INET ? "/proc/net/tcp" : "/proc/net/tcp6", client, server,
                    uid);
}
