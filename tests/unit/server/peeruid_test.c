/* SPDX-License-Identifier: Apache-2.0 */
/* peeruid_test.c - the user at the other end of a socket, through
 * server/peeruid.h: a unix socket pair, loopback TCP (this process's user,
 * and as root another user's connection from a child), a TCP peer that is
 * not on loopback. */
#include "../../../common/common.h"
#include "../../../server/peeruid.h"
#include "../test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_unix(void)
{
    int sv[2];
    uid_t uid = 12345;

    CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    CHECK(peer_uid(sv[0], &uid));
    CHECK_EQ_INT(uid, getuid());
    close(sv[0]);
    close(sv[1]);
}

/* A listener on 127.0.0.1 and its port. */
static int listener(int *port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    CHECK_OK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)));
    CHECK_OK(listen(fd, 4));
    CHECK_OK(getsockname(fd, (struct sockaddr *)&sa, &len));
    *port = ntohs(sa.sin_port);
    return fd;
}

static int dial(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_OK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)));
    return fd;
}

static void test_loopback_tcp(void)
{
    int port, lfd = listener(&port), c = dial(port), a = accept(lfd, NULL, NULL), sv[2];
    uid_t uid = 12345;
    char b;
    pid_t pid;

    CHECK(a >= 0);
    CHECK(peer_uid(a, &uid));
    CHECK_EQ_INT(uid, getuid());
    close(a);
    close(c);
    if (getuid() != 0)
        goto out; /* another user's connection needs a setuid child */
    CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    pid = fork();
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(2);
        c = dial(port);
        (void)!write(sv[1], "x", 1);
        (void)!read(sv[1], &b, 1); /* held open until the parent looked */
        _exit(0);
    }
    CHECK(pid > 0);
    CHECK(read(sv[0], &b, 1) == 1);
    a = accept(lfd, NULL, NULL);
    uid = 0;
    CHECK(peer_uid(a, &uid));
    CHECK_EQ_INT(uid, 65534);
    (void)!write(sv[0], "x", 1);
    waitpid(pid, NULL, 0);
    close(a);
    close(sv[0]);
    close(sv[1]);
out:
    close(lfd);
}

static void test_loopback_addresses(void)
{
    struct sockaddr_in a4 = {.sin_family = AF_INET};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6};

    inet_pton(AF_INET, "127.1.2.3", &a4.sin_addr);
    CHECK(peer_is_loopback((struct sockaddr *)&a4));
    inet_pton(AF_INET, "10.0.0.1", &a4.sin_addr);
    CHECK(!peer_is_loopback((struct sockaddr *)&a4));
    inet_pton(AF_INET6, "::1", &a6.sin6_addr);
    CHECK(peer_is_loopback((struct sockaddr *)&a6));
    inet_pton(AF_INET6, "::ffff:127.0.0.9", &a6.sin6_addr);
    CHECK(peer_is_loopback((struct sockaddr *)&a6));
    inet_pton(AF_INET6, "::ffff:10.0.0.9", &a6.sin6_addr);
    CHECK(!peer_is_loopback((struct sockaddr *)&a6));
    inet_pton(AF_INET6, "fe80::1", &a6.sin6_addr);
    CHECK(!peer_is_loopback((struct sockaddr *)&a6));
}

/* Not a connected socket: not known. */
static void test_unknown(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    uid_t uid;

    CHECK(!peer_uid(fd, &uid));
    close(fd);
    CHECK(!peer_uid(-1, &uid));
}

TEST_MAIN(test_unix, test_loopback_tcp, test_loopback_addresses, test_unknown)
