/* SPDX-License-Identifier: Apache-2.0 */
/* yamlout.c - JSON to YAML through libyaml's emitter (yamlout.h). The
 * emitter picks the quoting style; this file only says which strings may
 * not be plain. */
#define LOG_MOD "plugin"
#include "../common/common.h"
#include "yamlout.h"

#include <strings.h>
#include <yaml.h>

#define MAX_DEPTH 64

static int on_output(void *data, unsigned char *buf, size_t size)
{
    return strbuf_add(data, buf, size) == ERR_OK;
}

bool yamlout_needs_quotes(const char *s)
{
    static const char *const words[] = {"null", "~",   "true", "false", "yes",  "no",
                                        "on",   "off", "y",    "n",     ".inf", ".nan"};
    size_t i;

    if (!*s || strchr("0123456789-+.", *s))
        return true; /* numbers, times, "-", ".5": a reader may take them otherwise */
    for (i = 0; i < ARRAY_SIZE(words); i++) {
        if (strcasecmp(s, words[i]) == 0)
            return true;
    }
    return false;
}

static int scalar(yaml_emitter_t *em, const char *text, bool plain_ok)
{
    yaml_event_t ev;

    if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)(uintptr_t)text,
                                      (int)strlen(text), plain_ok, !plain_ok,
                                      YAML_ANY_SCALAR_STYLE))
        return 0;
    return yaml_emitter_emit(em, &ev);
}

static int emit(yaml_emitter_t *em, const json_t *v, int depth);

static int emit_object(yaml_emitter_t *em, const json_t *v, int depth)
{
    yaml_event_t ev;
    const char *k;
    json_t *x;

    if (!yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE) ||
        !yaml_emitter_emit(em, &ev))
        return 0;
    json_object_foreach((json_t *)v, k, x) {
        if (!scalar(em, k, !yamlout_needs_quotes(k)) || !emit(em, x, depth + 1))
            return 0;
    }
    return yaml_mapping_end_event_initialize(&ev) && yaml_emitter_emit(em, &ev);
}

static int emit_array(yaml_emitter_t *em, const json_t *v, int depth)
{
    yaml_event_t ev;
    const json_t *x;
    size_t i;

    if (!yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
                                              json_array_size(v) ? YAML_BLOCK_SEQUENCE_STYLE
                                                                 : YAML_FLOW_SEQUENCE_STYLE) ||
        !yaml_emitter_emit(em, &ev))
        return 0;
    json_array_foreach(v, i, x) {
        if (!emit(em, x, depth + 1))
            return 0;
    }
    return yaml_sequence_end_event_initialize(&ev) && yaml_emitter_emit(em, &ev);
}

static int emit(yaml_emitter_t *em, const json_t *v, int depth)
{
    char num[64];

    if (depth > MAX_DEPTH)
        return 0;
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return emit_object(em, v, depth);
    case JSON_ARRAY:
        return emit_array(em, v, depth);
    case JSON_STRING:
        return scalar(em, json_string_value(v), !yamlout_needs_quotes(json_string_value(v)));
    case JSON_INTEGER:
        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return scalar(em, num, true);
    case JSON_REAL:
        snprintf(num, sizeof(num), "%.17g", json_real_value(v));
        return scalar(em, num, true);
    case JSON_TRUE:
        return scalar(em, "true", true);
    case JSON_FALSE:
        return scalar(em, "false", true);
    default:
        return scalar(em, "null", true);
    }
}

err_t yamlout_write(const json_t *v, struct strbuf *sb)
{
    yaml_emitter_t em;
    yaml_event_t ev;
    yaml_error_type_t e;
    int ok;

    if (!yaml_emitter_initialize(&em))
        return ERR_NOMEM;
    yaml_emitter_set_output(&em, on_output, sb);
    yaml_emitter_set_unicode(&em, 1);
    yaml_emitter_set_width(&em, -1);
    ok = yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) &&
         yaml_emitter_emit(&em, &ev) &&
         yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) &&
         yaml_emitter_emit(&em, &ev) && emit(&em, v, 0) &&
         yaml_document_end_event_initialize(&ev, 1) && yaml_emitter_emit(&em, &ev) &&
         yaml_stream_end_event_initialize(&ev) && yaml_emitter_emit(&em, &ev) &&
         yaml_emitter_flush(&em);
    e = em.error;
    yaml_emitter_delete(&em);
    if (ok && e == YAML_NO_ERROR)
        return ERR_OK;
    return e == YAML_MEMORY_ERROR ? ERR_NOMEM : ERR_INVAL;
}
