/* sqlite_commit - the reference for durable writes: a raw SQLite commit loop
 * with podresd's PRAGMAs (WAL, synchronous=FULL, foreign_keys=ON).
 * Each iteration is BEGIN IMMEDIATE; one INSERT of a ~200-byte row; COMMIT.
 *
 *   sqlite_commit DB SECONDS MAXN [PACE_MS]   prints: n=N secs=S rate=R p50=MS p99=MS
 *
 * With PACE_MS each commit follows PACE_MS of sleep, as row 4's PUTs do: the
 * latencies are then those of a commit on an idle machine.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void check(sqlite3 *db, int rc, const char *what)
{
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
        fprintf(stderr, "sqlite_commit: %s: %s\n", what, sqlite3_errmsg(db));
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: sqlite_commit DB SECONDS MAXN [PACE_MS]\n");
        return 2;
    }
    double secs = atof(argv[2]);
    long maxn = atol(argv[3]);
    double pace = argc == 5 ? atof(argv[4]) : 0;
    sqlite3 *db;
    check(NULL, sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL),
          "open");
    sqlite3_busy_timeout(db, 5000);
    check(db,
          sqlite3_exec(db,
                       "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;"
                       "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, k TEXT, v TEXT);",
                       NULL, NULL, NULL),
          "setup");
    sqlite3_stmt *ins, *begin, *commit;
    check(db, sqlite3_prepare_v2(db, "INSERT INTO t(k, v) VALUES (?1, ?2)", -1, &ins, NULL),
          "prepare");
    check(db, sqlite3_prepare_v2(db, "BEGIN IMMEDIATE", -1, &begin, NULL), "prepare");
    check(db, sqlite3_prepare_v2(db, "COMMIT", -1, &commit, NULL), "prepare");
    char v[200];
    memset(v, 'x', sizeof(v) - 1);
    v[sizeof(v) - 1] = 0;
    double *lat = calloc((size_t)maxn + 1, sizeof(double));
    double t0 = now_ms(), until = t0 + secs * 1e3;
    long n = 0;
    for (; n < maxn && now_ms() < until; n++) {
        char k[32];
        if (pace > 0) {
            long ns = (long)(pace * 1e6);
            nanosleep(&(struct timespec){.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000},
                      NULL);
        }
        snprintf(k, sizeof(k), "k%ld", n);
        double s = now_ms();
        check(db, sqlite3_step(begin), "begin");
        sqlite3_reset(begin);
        sqlite3_bind_text(ins, 1, k, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(ins, 2, v, -1, SQLITE_STATIC);
        check(db, sqlite3_step(ins), "insert");
        sqlite3_reset(ins);
        check(db, sqlite3_step(commit), "commit");
        sqlite3_reset(commit);
        lat[n] = now_ms() - s;
    }
    double el = now_ms() - t0;
    qsort(lat, (size_t)n, sizeof(double), cmp_d);
    printf("n=%ld secs=%.3f rate=%.1f p50=%.3f p99=%.3f\n", n, el / 1e3, (double)n * 1e3 / el,
           n ? lat[n / 2] : 0.0, n ? lat[(size_t)((double)(n - 1) * 0.99)] : 0.0);
    sqlite3_finalize(ins);
    sqlite3_finalize(begin);
    sqlite3_finalize(commit);
    sqlite3_close(db);
    return 0;
}
