/* SPDX-License-Identifier: Apache-2.0 */
/* cfg.c - YAML to JSON with libyaml's event parser, and scalar parsing.
 * It is not a config schema: callers check keys and types of the result. */
#include "common.h"
#include "cfg.h"

#include <yaml.h>

struct yconv {
    yaml_parser_t parser; /* libyaml state */
    char *msg;            /* error message buffer */
    size_t cap;           /* its size */
    int depth;            /* current nesting */
};

static err_t convert(struct yconv *y, yaml_event_t *ev, json_t **out);

static err_t fail(struct yconv *y, const yaml_mark_t *m, const char *what)
{
    snprintf(y->msg, y->cap, "line %zu, column %zu: %s", m->line + 1, m->column + 1, what);
    return ERR_INVAL;
}

static err_t next_event(struct yconv *y, yaml_event_t *ev)
{
    if (yaml_parser_parse(&y->parser, ev))
        return ERR_OK;
    snprintf(y->msg, y->cap, "line %zu, column %zu: %s", y->parser.problem_mark.line + 1,
             y->parser.problem_mark.column + 1,
             y->parser.problem ? y->parser.problem : "YAML syntax error");
    return ERR_INVAL;
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
    err_t rc = arr ? ERR_OK : ERR_NOMEM;

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
            rc = ERR_NOMEM;
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
    err_t rc = obj ? ERR_OK : ERR_NOMEM;

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

/* Skip STREAM_START and DOCUMENT_START; convert the root; check the end. */
static err_t document(struct yconv *y, json_t **out)
{
    yaml_event_t ev;
    json_t *root = NULL;
    err_t rc;
    int i;

    for (i = 0; i < 2; i++) {
        rc = next_event(y, &ev);
        if (rc)
            return rc;
        if (ev.type == YAML_STREAM_END_EVENT) {
            yaml_event_delete(&ev);
            *out = json_object();
            return *out ? ERR_OK : ERR_NOMEM;
        }
        yaml_event_delete(&ev);
    }
    rc = next_event(y, &ev);
    if (rc)
        return rc;
    rc = convert(y, &ev, &root);
    yaml_event_delete(&ev);
    if (rc)
        return rc;
    rc = next_event(y, &ev);
    if (!rc && ev.type != YAML_DOCUMENT_END_EVENT)
        rc = fail(y, &ev.start_mark, "expected the end of the document");
    yaml_event_delete(&ev);
    if (!rc) {
        rc = next_event(y, &ev);
        if (!rc) {
            if (ev.type != YAML_STREAM_END_EVENT)
                rc = fail(y, &ev.start_mark, "only one YAML document is allowed");
            yaml_event_delete(&ev);
        }
    }
    if (rc) {
        json_decref(root);
        return rc;
    }
    *out = json_is_null(root) ? (json_decref(root), json_object()) : root;
    return *out ? ERR_OK : ERR_NOMEM;
}

err_t cfg_yaml_parse(const char *buf, size_t len, json_t **out, char *msg, size_t cap)
{
    struct yconv y = {.msg = msg, .cap = cap};
    err_t rc;

    if (!yaml_parser_initialize(&y.parser))
        return ERR_NOMEM;
    yaml_parser_set_input_string(&y.parser, (const unsigned char *)buf, len);
    rc = document(&y, out);
    yaml_parser_delete(&y.parser);
    return rc;
}

err_t cfg_yaml_load(const char *path, json_t **out, char *msg, size_t cap)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t n;
    err_t rc = ERR_IO;

    if (!f) {
        snprintf(msg, cap, "cannot open: %s", strerror(errno));
        return ERR_IO;
    }
    buf = malloc(4 << 20);
    if (!buf) {
        rc = ERR_NOMEM;
        goto out;
    }
    n = fread(buf, 1, 4 << 20, f);
    if (ferror(f)) {
        snprintf(msg, cap, "cannot read: %s", strerror(errno));
        goto out;
    }
    if (n == 4 << 20) {
        snprintf(msg, cap, "file is larger than 4 MiB");
        rc = ERR_INVAL;
        goto out;
    }
    rc = cfg_yaml_parse(buf, n, out, msg, cap);
out:
    free(buf);
    fclose(f);
    return rc;
}

err_t cfg_parse_duration(const char *s, uint64_t *ms)
{
    uint64_t total = 0, v, mult;
    char *end;

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
    for (;;) {
        if (strncmp(end, "ms", 2) == 0) {
            mult = 1;
            end += 2;
        } else if (*end == 's' || *end == 'm' || *end == 'h' || *end == 'd') {
            mult = *end == 's' ? 1000 : *end == 'm' ? 60000 : *end == 'h' ? 3600000 : 86400000;
            end++;
        } else {
            return ERR_INVAL;
        }
        if (v > (UINT64_MAX - total) / mult)
            return ERR_INVAL;
        total += v * mult;
        if (*end == '\0')
            break;
        s = end;
        if (*s < '0' || *s > '9')
            return ERR_INVAL;
        v = strtoull(s, &end, 10);
        if (errno || end == s)
            return ERR_INVAL;
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
