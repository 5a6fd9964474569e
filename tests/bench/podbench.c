/* podbench - small HTTP/1.1 load and latency driver for `make bench`.
 * Talks only to a unix socket path or 127.0.0.1:PORT ("tcp:PORT").
 * Every loop is bounded in count and in time.
 *
 *   podbench put    ADDR CLIENTS SECONDS MAXREQ   PUT bindings, one connection per client
 *                                                   (all driven by one thread, epoll)
 *   podbench watch  ADDR WATCHERS EVENTS [FILE]   PUT sent -> first and last watcher;
 *                                                   FILE gets each event's times (CLOCK_MONOTONIC
 *                                                   ms: sent, first watcher, last, answer)
 *   podbench get    ADDR PATH N                   keep-alive GET round trips
 *   podbench ready  ADDR TIMEOUT_MS LOG CMD ARGS...  exec CMD (output to LOG), time until /readyz
 *                                                   is 200
 *   podbench time   CMD ARGS...                   wall time of CMD
 * Results are printed as `key=value` words on one line (times in ms).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void die(const char *m)
{
    fprintf(stderr, "podbench: %s: %s\n", m, strerror(errno));
    exit(2);
}

static int dial(const char *addr)
{
    int fd;
    if (strncmp(addr, "tcp:", 4) == 0) {
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons((uint16_t)atoi(addr + 4))};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
            close(fd);
            return -1;
        }
    } else {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", addr);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
            close(fd);
            return -1;
        }
    }
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Read one response; returns the status code, -1 on error. Handles
 * Content-Length and chunked bodies (body discarded). */
static int read_response(int fd)
{
    static __thread char buf[1 << 16];
    size_t have = 0;
    char *eoh = NULL;
    while (!eoh) {
        if (have >= sizeof(buf) - 1)
            return -1;
        ssize_t r = recv(fd, buf + have, sizeof(buf) - 1 - have, 0);
        if (r <= 0)
            return -1;
        have += (size_t)r;
        buf[have] = 0;
        eoh = strstr(buf, "\r\n\r\n");
    }
    int status = atoi(buf + 9);
    size_t hlen = (size_t)(eoh + 4 - buf);
    long clen = -1;
    int chunked = 0;
    for (char *l = buf; l < eoh; l = strstr(l, "\r\n") + 2) {
        if (strncasecmp(l, "Content-Length:", 15) == 0)
            clen = atol(l + 15);
        if (strncasecmp(l, "Transfer-Encoding:", 18) == 0 && strcasestr(l, "chunked") &&
            strcasestr(l, "chunked") < strstr(l, "\r\n"))
            chunked = 1;
    }
    size_t body = have - hlen;
    if (!chunked) {
        long left = clen < 0 ? 0 : clen - (long)body;
        while (left > 0) {
            ssize_t r = recv(fd, buf, sizeof(buf), 0);
            if (r <= 0)
                return -1;
            left -= r;
        }
        return status;
    }
    /* chunked: wait for the terminating 0-chunk */
    memmove(buf, buf + hlen, body);
    have = body;
    buf[have] = 0;
    while (!strstr(buf, "\r\n0\r\n\r\n") && !(have >= 5 && strncmp(buf, "0\r\n\r\n", 5) == 0)) {
        if (have > sizeof(buf) / 2) {
            memmove(buf, buf + have - 16, 16);
            have = 16;
        }
        ssize_t r = recv(fd, buf + have, sizeof(buf) - 1 - have, 0);
        if (r <= 0)
            return -1;
        have += (size_t)r;
        buf[have] = 0;
    }
    return status;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof(*v), cmp_d);
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i];
}

/* ---- put ----
 * One thread drives every client's connection with epoll, as wrk does: each
 * client has one request in flight; its next one is sent when its answer is
 * in. A thread per client cost the machine's two CPUs ~2 wake-ups of a
 * thread per request, CPU the server under test did not get. */
struct putc {
    int id, fd;
    long k;         /* requests sent */
    double t0;      /* when the one in flight was sent */
    char buf[8192]; /* its answer, so far */
    size_t have;
};

static void put_send(struct putc *c)
{
    char body[512], req[1024];
    int n = snprintf(body, sizeof(body),
                     "{\"uid\":\"u%ld\",\"containers\":[{\"name\":\"main\",\"devices\":[{"
                     "\"resourceName\":\"bench.io/dev\",\"deviceIds\":[\"c%d-%ld\"]}]}]}",
                     c->k, c->id, c->k % 2);
    int m = snprintf(req, sizeof(req),
                     "PUT /v1/namespaces/bench/pods/w%d HTTP/1.1\r\nHost: localhost\r\n"
                     "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
                     c->id, n, body);
    c->k++;
    c->have = 0;
    c->t0 = now_ms();
    if (send_all(c->fd, req, (size_t)m) != 0)
        die("send");
}

/* The status of a complete answer in c->buf (Content-Length bodies only:
 * podresd's answers to PUT); 0 while incomplete. */
static int put_complete(struct putc *c)
{
    c->buf[c->have] = 0;
    char *eoh = strstr(c->buf, "\r\n\r\n");
    if (!eoh)
        return 0;
    long clen = 0;
    for (char *l = c->buf; l < eoh; l = strstr(l, "\r\n") + 2)
        if (strncasecmp(l, "Content-Length:", 15) == 0)
            clen = atol(l + 15);
    if ((long)(c->have - (size_t)(eoh + 4 - c->buf)) < clen)
        return 0;
    return atoi(c->buf + 9);
}

static int cmd_put(char **a)
{
    int clients = atoi(a[1]);
    double secs = atof(a[2]);
    long max = atol(a[3]), done = 0, errors = 0; /* max: requests per client */
    struct putc *c = calloc((size_t)clients, sizeof(*c));
    double *lat = calloc((size_t)clients * (size_t)max + 1, sizeof(double));
    int ep = epoll_create1(EPOLL_CLOEXEC), busy; /* clients with a request in flight */
    struct epoll_event evs[64];
    double t0 = now_ms(), until = t0 + secs * 1e3;

    if (ep < 0 || !c || !lat)
        die("setup");
    for (int i = 0; i < clients; i++) {
        c[i].id = i;
        c[i].fd = dial(a[0]);
        if (c[i].fd < 0)
            die("connect");
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &c[i]};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, c[i].fd, &ev) != 0)
            die("epoll_ctl");
    }
    for (int i = 0; i < clients && max > 0; i++)
        put_send(&c[i]);
    busy = max > 0 ? clients : 0;
    while (busy > 0) {
        int n = epoll_wait(ep, evs, 64, 10000);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            die("epoll_wait (no answer in 10 s)");
        for (int e = 0; e < n; e++) {
            struct putc *p = evs[e].data.ptr;
            ssize_t r = recv(p->fd, p->buf + p->have, sizeof(p->buf) - 1 - p->have, 0);
            if (r <= 0)
                die("recv");
            p->have += (size_t)r;
            int st = put_complete(p);
            if (!st) {
                if (p->have >= sizeof(p->buf) - 1)
                    die("answer too long");
                continue;
            }
            if (st == 200 || st == 201)
                lat[done++] = now_ms() - p->t0;
            else
                errors++;
            if (p->k < max && now_ms() < until)
                put_send(p);
            else
                busy--;
        }
    }
    double el = now_ms() - t0;
    for (int i = 0; i < clients; i++)
        close(c[i].fd);
    close(ep);
    printf("ok=%ld errors=%ld secs=%.3f rate=%.1f p50=%.3f p99=%.3f\n", done, errors, el / 1e3,
           (double)done * 1e3 / el, pct(lat, (size_t)done, 0.5), pct(lat, (size_t)done, 0.99));
    free(lat);
    free(c);
    return errors ? 1 : 0;
}

/* ---- get ---- */
static int cmd_get(char **a)
{
    int n = atoi(a[2]);
    int fd = dial(a[0]);
    if (fd < 0)
        die("connect");
    char req[512];
    int m = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", a[1]);
    double *lat = calloc((size_t)n, sizeof(double));
    for (int i = 0; i < n; i++) {
        double t0 = now_ms();
        if (send_all(fd, req, (size_t)m) || read_response(fd) != 200)
            die("get");
        lat[i] = now_ms() - t0;
    }
    printf("n=%d p50=%.3f p99=%.3f\n", n, pct(lat, (size_t)n, 0.5), pct(lat, (size_t)n, 0.99));
    return 0;
}

/* ---- watch ---- */
#define NEEDLE "\"kind\":\"PodResources\""
struct watcher {
    int fd;
    long seen;
    char tail[32];
    size_t tlen;
};

static long count_needle(struct watcher *w, const char *p, size_t n)
{
    /* tail of the previous read + this read */
    static char tmp[(1 << 16) + 64];
    memcpy(tmp, w->tail, w->tlen);
    memcpy(tmp + w->tlen, p, n);
    size_t len = w->tlen + n;
    tmp[len] = 0;
    long c = 0;
    for (char *s = tmp; (s = memmem(s, (size_t)(tmp + len - s), NEEDLE, sizeof(NEEDLE) - 1));
         s += sizeof(NEEDLE) - 1)
        c++;
    w->tlen = len < sizeof(NEEDLE) - 1 ? len : sizeof(NEEDLE) - 2;
    memcpy(w->tail, tmp + len - w->tlen, w->tlen);
    return c;
}

static int cmd_watch(char **a)
{
    int nw = atoi(a[1]), ev = atoi(a[2]);
    struct watcher *w = calloc((size_t)nw, sizeof(*w));
    char req[512], buf[1 << 16];
    int m = snprintf(req, sizeof(req),
                     "GET /v1/watch?kind=PodResources&namespace=watchbench HTTP/1.1\r\n"
                     "Host: localhost\r\n\r\n");
    for (int i = 0; i < nw; i++) {
        w[i].fd = dial(a[0]);
        if (w[i].fd < 0 || send_all(w[i].fd, req, (size_t)m))
            die("watch connect");
    }
    /* let every stream deliver its initial list and initialEventsEnd bookmark */
    double settle = now_ms() + 2000;
    struct pollfd *pf = calloc((size_t)nw + 1, sizeof(*pf));
    while (now_ms() < settle) {
        for (int i = 0; i < nw; i++)
            pf[i] = (struct pollfd){.fd = w[i].fd, .events = POLLIN};
        if (poll(pf, (nfds_t)nw, 50) <= 0)
            continue;
        for (int i = 0; i < nw; i++)
            if (pf[i].revents & POLLIN) {
                ssize_t r = recv(w[i].fd, buf, sizeof(buf), 0);
                if (r <= 0)
                    die("watch stream ended");
                w[i].seen += count_needle(&w[i], buf, (size_t)r);
            }
    }
    int pfd = dial(a[0]);
    if (pfd < 0)
        die("connect");
    double *lat = calloc((size_t)ev, sizeof(double)), *rtt = calloc((size_t)ev, sizeof(double));
    double *first = calloc((size_t)ev, sizeof(double)), *fan = calloc((size_t)ev, sizeof(double));
    double *sent = calloc((size_t)ev, sizeof(double));
    int done = 0, misses = 0;
    for (int e = 0; e < ev; e++) {
        char body[256], put[768];
        int n = snprintf(body, sizeof(body),
                         "{\"uid\":\"u%d\",\"containers\":[{\"name\":\"main\"}]}", e);
        int pm = snprintf(put, sizeof(put),
                          "PUT /v1/namespaces/watchbench/pods/p HTTP/1.1\r\nHost: localhost\r\n"
                          "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
                          n, body);
        long want[4096];
        for (int i = 0; i < nw && i < 4096; i++)
            want[i] = w[i].seen + 1;
        double t0 = now_ms(), t1 = 0, tfirst = 0, tlast = 0;
        if (send_all(pfd, put, (size_t)pm))
            die("put");
        int pending = nw;
        double deadline = t0 + 5000;
        while (pending > 0 && now_ms() < deadline) {
            for (int i = 0; i < nw; i++)
                pf[i] = (struct pollfd){.fd = w[i].fd, .events = w[i].seen < want[i] ? POLLIN : 0};
            if (poll(pf, (nfds_t)nw, 100) <= 0)
                continue;
            double tn = now_ms();
            for (int i = 0; i < nw; i++)
                if (pf[i].revents & (POLLIN | POLLHUP)) {
                    ssize_t r = recv(w[i].fd, buf, sizeof(buf), 0);
                    if (r <= 0)
                        die("watch stream ended");
                    w[i].seen += count_needle(&w[i], buf, (size_t)r);
                    if (w[i].seen >= want[i]) {
                        if (pending-- == nw)
                            tfirst = tn;
                        tlast = tn;
                    }
                }
        }
        int st = read_response(pfd);
        t1 = now_ms();
        if (st != 200 && st != 201)
            die("put status");
        if (pending) {
            misses++;
            continue;
        }
        lat[done] = tlast - t0;
        rtt[done] = t1 - t0;
        sent[done] = t0;
        first[done] = tfirst - t0;
        fan[done] = tlast - tfirst;
        done++;
        usleep(10000);
    }
    if (a[3]) { /* each event's times, CLOCK_MONOTONIC ms: sent, first, last watcher, answer */
        FILE *f = fopen(a[3], "w");
        if (!f)
            die("events file");
        for (int e = 0; e < done; e++)
            fprintf(f, "%.3f %.3f %.3f %.3f\n", sent[e], sent[e] + first[e], sent[e] + lat[e],
                    sent[e] + rtt[e]);
        fclose(f);
    }
    printf("events=%d misses=%d p50=%.3f p99=%.3f put_rtt_p50=%.3f put_rtt_p99=%.3f "
           "first_p50=%.3f first_p99=%.3f fan_p50=%.3f fan_p99=%.3f\n",
           done, misses, pct(lat, (size_t)done, 0.5), pct(lat, (size_t)done, 0.99),
           pct(rtt, (size_t)done, 0.5), pct(rtt, (size_t)done, 0.99), pct(first, (size_t)done, 0.5),
           pct(first, (size_t)done, 0.99), pct(fan, (size_t)done, 0.5),
           pct(fan, (size_t)done, 0.99));
    return misses ? 1 : 0;
}

/* ---- ready / time ---- */
static int ready_once(const char *addr)
{
    int fd = dial(addr);
    if (fd < 0)
        return 0;
    const char *req = "GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    int st = send_all(fd, req, strlen(req)) ? -1 : read_response(fd);
    close(fd);
    return st == 200;
}

static pid_t spawn(char **argv, const char *log)
{
    pid_t p = fork();
    if (p == 0) {
        int fd = open(log ? log : "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        execvp(argv[0], argv);
        _exit(127);
    }
    return p;
}

static int cmd_ready(char **a)
{
    double limit = atof(a[1]);
    double t0 = now_ms();
    pid_t p = spawn(a + 3, a[2]);
    while (now_ms() - t0 < limit) {
        if (ready_once(a[0])) {
            printf("ms=%.3f pid=%d\n", now_ms() - t0, (int)p);
            return 0;
        }
        if (waitpid(p, NULL, WNOHANG) == p) {
            fprintf(stderr, "podbench: the process exited\n");
            return 1;
        }
        usleep(1000);
    }
    printf("ms=timeout pid=%d\n", (int)p);
    return 1;
}

static int cmd_time(char **a)
{
    double t0 = now_ms();
    int st;
    pid_t p = spawn(a, NULL);
    waitpid(p, &st, 0);
    printf("ms=%.3f rc=%d\n", now_ms() - t0, WIFEXITED(st) ? WEXITSTATUS(st) : 128);
    return 0;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc >= 6 && strcmp(argv[1], "put") == 0)
        return cmd_put(argv + 2);
    if (argc >= 5 && strcmp(argv[1], "watch") == 0)
        return cmd_watch(argv + 2);
    if (argc >= 5 && strcmp(argv[1], "get") == 0)
        return cmd_get(argv + 2);
    if (argc >= 6 && strcmp(argv[1], "ready") == 0)
        return cmd_ready(argv + 2);
    if (argc >= 3 && strcmp(argv[1], "time") == 0)
        return cmd_time(argv + 2);
    fprintf(stderr, "usage: see the head of tests/bench/podbench.c\n");
    return 2;
}
