/* SPDX-License-Identifier: Apache-2.0 */
/* db_test.c - SQLite connections (db.c): the statement cache, one-row
 * queries, the database file being its process's (store_fx.h), and a
 * failure logged once, not each time it repeats. */
#include "store_fx.h"

/* The statement cache (db.c): more distinct statements than a
 * connection caches (the rest are prepared and finalised each time), the
 * same statement twice at once (nested use gets a second one), and every one
 * gives the right answer. */
static void test_statement_cache(void)
{
    struct fx f;
    sqlite3 *db = NULL;
    sqlite3_stmt *a = NULL, *b = NULL;
    char sql[64];
    bool row = false;
    int i, round, ok = 0;

    if (fx_open(&f, 100))
        return;
    CHECK_OK(db_read_begin(&f.st->readers, &db));
    for (round = 0; round < 2 && db; round++) {
        for (i = 0; i < 300; i++) {
            snprintf(sql, sizeof(sql), "SELECT %d + ?", i);
            row = false;
            if (db_prep(db, &a, sql, "i", (int64_t)round) == ERR_OK &&
                db_step(db, a, &row) == ERR_OK && row && sqlite3_column_int(a, 0) == i + round)
                ok++;
            db_done(a);
            a = NULL;
        }
    }
    CHECK_EQ_INT(ok, 600);
    if (db) {
        CHECK_OK(db_prep(db, &a, "SELECT ?", "i", (int64_t)1));
        CHECK_OK(db_prep(db, &b, "SELECT ?", "i", (int64_t)2));
        CHECK(a != b);
        CHECK_OK(db_step(db, a, &row));
        CHECK(row && sqlite3_column_int(a, 0) == 1);
        CHECK_OK(db_step(db, b, &row));
        CHECK(row && sqlite3_column_int(b, 0) == 2);
        db_done(b);
        db_done(a);
    }
    db_read_end(&f.st->readers, db);
    fx_close(&f);
}

/* db_row: the one row to read, or ERR_NOTFOUND with the statement given
 * back (the cache has it again: the same SQL prepares at once after). */
static void test_row(void)
{
    struct fx f;
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;

    if (fx_open(&f, 100))
        return;
    CHECK_OK(db_read_begin(&f.st->readers, &db));
    if (db) {
        CHECK_OK(db_row(db, &s, "SELECT ? + 1 WHERE ? = 'yes'", "it", (int64_t)41, "yes"));
        CHECK(s && sqlite3_column_int(s, 0) == 42);
        db_done(s);
        s = NULL;
        CHECK_EQ_INT(db_row(db, &s, "SELECT ? + 1 WHERE ? = 'yes'", "it", (int64_t)41, "no"),
                     ERR_NOTFOUND);
        CHECK(s == NULL);
        CHECK_OK(db_row(db, &s, "SELECT ? + 1 WHERE ? = 'yes'", "it", (int64_t)1, "yes"));
        CHECK(s && sqlite3_column_int(s, 0) == 2);
        db_done(s);
    }
    db_read_end(&f.st->readers, db);
    fx_close(&f);
}

/* The file is its process's while a store has it open: store_open in
 * another process fails with ERR_UNAVAIL, and the holder writes on. The
 * child is forked before the file is opened here: a fork's copy of SQLite's
 * state would believe it held the file too. */
static void test_other_process(void)
{
    struct fx f;
    int go[2], status = -1;
    pid_t pid;

    CHECK(pipe(go) == 0);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        struct store *st = NULL;
        struct store_opts o = {.history = 100};
        char path[128];
        ssize_t n;
        err_t rc;

        close(go[1]);
        n = read(go[0], path, sizeof(path) - 1);
        if (n <= 0)
            _exit(3);
        path[n] = '\0';
        o.path = path;
        rc = store_open(&o, &st);
        _exit(rc == ERR_UNAVAIL && !st ? 0 : rc == ERR_OK ? 1 : 2);
    }
    close(go[0]);
    if (fx_open(&f, 100) == 0)
        CHECK(write(go[1], f.path, strlen(f.path)) == (ssize_t)strlen(f.path));
    close(go[1]); /* without a path, the child reads none and exits 3 */
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK_EQ_INT(WEXITSTATUS(status), 0); /* 1: it opened the file; 2: another error */
    if (!f.st)
        return;
    CHECK_OK(put_devices(&f, GPU, FOUR_GPUS, NULL));
    CHECK_EQ_INT(store_revision(f.st), 4);
    fx_close(&f);
}
/* Run the failing statement 'sql' on 'db' 'times' times; the lines logged
 * at err level (stderr, to a file meanwhile) into 'out'. */
static void fail_logged(sqlite3 *db, const char *sql, int times, char *out, size_t cap)
{
    struct test_stderr c;
    int i;

    out[0] = '\0';
    CHECK_OK(log_setup("text", "err"));
    CHECK(test_stderr_begin(&c));
    if (c.saved < 0)
        return;
    for (i = 0; i < times; i++)
        CHECK_EQ_INT(db_exec(db, sql, NULL), ERR_DB);
    test_stderr_end(&c, out, cap);
}

static int lines(const char *s)
{
    int n = 0;

    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* A failure logged again within the quiet interval is not logged; another
 * failure is; the first, once the interval passed, with its count. */
static void test_error_logged_once(void)
{
    struct fx f;
    sqlite3 *db = NULL;
    char out[4096];

    if (fx_open(&f, 100))
        return;
    CHECK_OK(db_read_begin(&f.st->readers, &db));
    if (!db) {
        fx_close(&f);
        return;
    }
    fail_logged(db, "SELECT * FROM nope", 5, out, sizeof(out));
    CHECK_EQ_INT(lines(out), 1);
    CHECK(strstr(out, "level=err") && strstr(out, "no such table: nope"));
    fail_logged(db, "SELECT * FROM nope2", 1, out, sizeof(out));
    CHECK_EQ_INT(lines(out), 1);
    CHECK(strstr(out, "no such table: nope2") != NULL);
    fail_logged(db, "SELECT * FROM nope2", 3, out, sizeof(out));
    CHECK_EQ_INT(lines(out), 0);
    db_err_quiet_ms(0);
    fail_logged(db, "SELECT * FROM nope2", 1, out, sizeof(out));
    CHECK(strstr(out, "no such table: nope2 (and 3 times more since it was last logged)") != NULL);
    db_err_quiet_ms(DB_ERR_QUIET_MS);
    db_read_end(&f.st->readers, db);
    fx_close(&f);
}

TEST_MAIN(quiet, test_statement_cache, test_row, test_other_process, test_error_logged_once)
