/* SPDX-License-Identifier: Apache-2.0 */
/* cfg.c - YAML to JSON with libyaml's event parser, and scalar parsing.
 * It is not a config schema: callers check keys and types of the result. */
#include "common.h"
#include "cfg.h"

#include <yaml.h>

struct yconv {
    yaml_parser_t parser; /* libyaml state */
    struct error *e;      /* what went wrong, and where */
    int depth;            /* current nesting */
};

static err_t convert(struct yconv *y, yaml_event_t *ev, json_t **out);

static err_t fail(struct yconv *y, const yaml_mark_t *m, const char *what)
{
    return errorf(y->e, ERR_INVAL, "line %zu, column %zu: %s", m->line + 1, m->column + 1, what);
}

static err_t nomem(struct yconv *y)
{
    return errorf(y->e, ERR_NOMEM, "out of memory");
}

static err_t next_event(struct yconv *y, yaml_event_t *ev)
{
    if (yaml_parser_parse(&y->parser, ev))
        return ERR_OK;
    return errorf(y->e, ERR_INVAL, "line %zu, column %zu: %s", y->parser.problem_mark.line + 1,
                  y->parser.problem_mark.column + 1,
                  y->parser.problem ? y->parser.problem : "YAML syntax error");
}

static json_t *plain_scalar(const char *s, size_t n)
{
    long long v;
    char *end;

    if (n == 0 || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0)
        return json_null();
    if (strcmp(s, "true") == 0 || strcmp(s, "True") == 0)
        return json_true();
    if (strcmp(s, "false") == 0 || strcmp(s, "False") == 0)
        return json_false();
    if ((s[0] >= '0' && s[0] <= '9') || (s[0] == '-' && n > 1)) {
        errno = 0;
        v = strtoll(s, &end, 10);
        if (errno == 0 && *end == '\0')
            return json_integer(v);
    }
    return json_stringn(s, n);
}

static err_t scalar(struct yconv *y, yaml_event_t *ev, json_t **out)
{
    const char *s = (const char *)ev->data.scalar.value;
    size_t n = ev->data.scalar.length;

    if (strlen(s) != n)
        return fail(y, &ev->start_mark, "NUL byte in scalar");
    if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
        *out = plain_scalar(s, n);
    else
        *out = json_stringn(s, n);
    if (!*out)
        return fail(y, &ev->start_mark, "scalar is not valid UTF-8");
    return ERR_OK;
}

static err_t sequence(struct yconv *y, json_t **out)
{
    json_t *arr = json_array();
    yaml_event_t ev;
    json_t *item = NULL;
    err_t rc = arr ? ERR_OK : nomem(y);

    while (!rc) {
        rc = next_event(y, &ev);
        if (rc)
            break;
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            *out = arr;
            return ERR_OK;
        }
        rc = convert(y, &ev, &item);
        yaml_event_delete(&ev);
        if (!rc && json_array_append_new(arr, item))
            rc = nomem(y);
    }
    json_decref(arr);
    return rc;
}

static err_t mapping(struct yconv *y, json_t **out)
{
    json_t *obj = json_object();
    yaml_event_t ev;
    json_t *val = NULL;
    char key[256];
    err_t rc = obj ? ERR_OK : nomem(y);

    while (!rc) {
        rc = next_event(y, &ev);
        if (rc)
            break;
        if (ev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&ev);
            *out = obj;
            return ERR_OK;
        }
        if (ev.type != YAML_SCALAR_EVENT || ev.data.scalar.length >= sizeof(key)) {
            rc = fail(y, &ev.start_mark, "mapping keys must be short scalars");
            yaml_event_delete(&ev);
            break;
        }
        memcpy(key, ev.data.scalar.value, ev.data.scalar.length + 1);
        if (json_object_get(obj, key))
            rc = fail(y, &ev.start_mark, "duplicate key");
        yaml_event_delete(&ev);
        if (!rc)
            rc = next_event(y, &ev);
        if (rc)
            break;
        rc = convert(y, &ev, &val);
        yaml_event_delete(&ev);
        if (!rc && json_object_set_new(obj, key, val))
            rc = fail(y, &ev.start_mark, "key is not valid UTF-8");
    }
    json_decref(obj);
    return rc;
}

/* Convert the node that starts with 'ev' (borrowed) into *out (new). */
static err_t convert(struct yconv *y, yaml_event_t *ev, json_t **out)
{
    err_t rc;

    switch (ev->type) {
    case YAML_SCALAR_EVENT:
        return scalar(y, ev, out);
    case YAML_ALIAS_EVENT:
        return fail(y, &ev->start_mark, "YAML aliases are not supported");
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT:
        if (++y->depth > CFG_MAX_DEPTH)
            return fail(y, &ev->start_mark, "nesting too deep");
        rc = ev->type == YAML_SEQUENCE_START_EVENT ? sequence(y, out) : mapping(y, out);
        y->depth--;
        return rc;
    default:
        return fail(y, &ev->start_mark, "unexpected YAML event");
    }
}

/* The next event is of 'type'; else 'what' is wrong. */
static err_t expect(struct yconv *y, yaml_event_type_t type, const char *what)
{
    yaml_event_t ev;
    err_t rc = next_event(y, &ev);

    if (rc)
        return rc;
    if (ev.type != type)
        rc = fail(y, &ev.start_mark, what);
    yaml_event_delete(&ev);
    return rc;
}

/* STREAM_START and DOCUMENT_START, or the end of a stream with no
 * document (*empty). */
static err_t document_start(struct yconv *y, bool *empty)
{
    yaml_event_t ev;
    err_t rc;
    int i;

    *empty = false;
    for (i = 0; i < 2 && !*empty; i++) {
        rc = next_event(y, &ev);
        if (rc)
            return rc;
        *empty = ev.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&ev);
    }
    return ERR_OK;
}

/* The one document of the stream: its root, then its end and the stream's. */
static err_t document(struct yconv *y, json_t **out)
{
    yaml_event_t ev;
    json_t *root = NULL;
    bool empty;
    err_t rc = document_start(y, &empty);

    if (rc || empty)
        goto out;
    rc = next_event(y, &ev);
    if (rc)
        goto out;
    rc = convert(y, &ev, &root);
    yaml_event_delete(&ev);
    if (rc)
        goto out;
    rc = expect(y, YAML_DOCUMENT_END_EVENT, "expected the end of the document");
    if (rc)
        goto out;
    rc = expect(y, YAML_STREAM_END_EVENT, "only one YAML document is allowed");
out:
    if (rc) {
        json_decref(root);
        return rc;
    }
    if (!root || json_is_null(root)) {
        json_decref(root);
        root = json_object();
        if (!root)
            return nomem(y);
    }
    *out = root;
    return ERR_OK;
}

err_t cfg_yaml_parse(const char *buf, size_t len, json_t **out, struct error *e)
{
    struct yconv y = {.e = e};
    err_t rc;

    if (!yaml_parser_initialize(&y.parser))
        return errorf(e, ERR_NOMEM, "out of memory");
    yaml_parser_set_input_string(&y.parser, (const unsigned char *)buf, len);
    rc = document(&y, out);
    yaml_parser_delete(&y.parser);
    return rc;
}

err_t cfg_yaml_load(const char *path, json_t **out, struct error *e)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t n;
    err_t rc;

    if (!f)
        return errorf(e, ERR_IO, "cannot open: %s", strerror(errno));
    buf = malloc(4 << 20);
    if (!buf) {
        rc = errorf(e, ERR_NOMEM, "out of memory");
        goto out;
    }
    n = fread(buf, 1, 4 << 20, f);
    if (ferror(f)) {
        rc = errorf(e, ERR_IO, "cannot read: %s", strerror(errno));
        goto out;
    }
    if (n == 4 << 20) {
        rc = errorf(e, ERR_INVAL, "file is larger than 4 MiB");
        goto out;
    }
    rc = cfg_yaml_parse(buf, n, out, e);
out:
    free(buf);
    fclose(f);
    return rc;
}

/* The unit at 's' in milliseconds ("ms", "s", "m", "h", "d"), its length
 * into *len; 0 when 's' starts with none. */
static uint64_t unit_ms(const char *s, size_t *len)
{
    static const struct {
        const char *name;
        uint64_t ms;
    } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
    size_t i;

    for (i = 0; i < ARRAY_SIZE(units); i++) {
        *len = strlen(units[i].name);
        if (strncmp(s, units[i].name, *len) == 0)
            return units[i].ms;
    }
    return 0;
}

/* One "<number><unit>" term at *p, in milliseconds into *out; *p moves past
 * it. Only the 'first' term may start as strtoull allows (white space). */
static err_t term(const char **p, bool first, uint64_t *out)
{
    uint64_t v, mult;
    size_t len;
    char *end;

    if (!first && (**p < '0' || **p > '9'))
        return ERR_INVAL;
    errno = 0;
    v = strtoull(*p, &end, 10);
    if (errno || end == *p)
        return ERR_INVAL;
    mult = unit_ms(end, &len);
    if (!mult || v > UINT64_MAX / mult)
        return ERR_INVAL;
    *out = v * mult;
    *p = end + len;
    return ERR_OK;
}

err_t cfg_parse_duration(const char *s, uint64_t *ms)
{
    uint64_t total = 0, v;
    const char *p;
    char *end;
    bool first;

    if (!s || !*s || *s == '-' || *s == '+')
        return ERR_INVAL;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || end == s)
        return ERR_INVAL;
    if (*end == '\0') {
        if (v > UINT64_MAX / 1000)
            return ERR_INVAL;
        *ms = v * 1000;
        return ERR_OK;
    }
    for (p = s; *p;) {
        first = p == s;
        if (term(&p, first, &v) || v > UINT64_MAX - total)
            return ERR_INVAL;
        total += v;
    }
    *ms = total;
    return ERR_OK;
}

err_t cfg_parse_int(const char *s, long long min, long long max, long long *out)
{
    long long v;
    char *end;

    if (!s || !*s)
        return ERR_INVAL;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || *end != '\0' || v < min || v > max)
        return ERR_INVAL;
    *out = v;
    return ERR_OK;
}
