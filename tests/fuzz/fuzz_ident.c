/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_ident.c - libFuzzer target for the identity rules of the config file
 * (ident.h): the input's first line is a rule's pattern, the rest an id it
 * is applied to. Any pattern must give ERR_OK or ERR_INVAL with a message
 * naming identity[0]; a rule that compiles must derive without failing,
 * and every name it gives must be a non-empty part of the id, not the id. */
#include "../../common/common.h"
#include "../../server/ident.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* 'name' is a non-empty part of 'id' other than 'id' itself. */
static void check_part(const char *id, const char *name)
{
    if (!name || !name[0] || strcmp(name, id) == 0 || !strstr(id, name))
        abort();
}

static void derive(const struct ident_rules *r, const char *id)
{
    json_t *aliases = json_array();
    char *phys = NULL;
    size_t i;

    if (!aliases)
        return;
    if (ident_derive(r, "example.com/dev", id, &phys, aliases) == ERR_OK) {
        if (phys)
            check_part(id, phys);
        for (i = 0; i < json_array_size(aliases); i++)
            check_part(id, json_string_value(json_array_get(aliases, i)));
    }
    free(phys);
    json_decref(aliases);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ident_rules *r = NULL;
    struct error e = {0};
    char *buf = malloc(size + 1), *nl, *id = NULL;
    json_t *rules, *utf8;
    err_t rc;

    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    nl = strchr(buf, '\n');
    if (nl) {
        *nl = '\0';
        id = nl + 1;
    }
    /* JSON strings are UTF-8 without NUL, as the YAML parser gives them */
    rules = json_pack("[{s:s,s:s}]", "resource", "example.com/*", "pattern", buf);
    if (!rules)
        goto out;
    rc = ident_rules_new(rules, &r, &e);
    if (rc != e.code || (rc == ERR_INVAL && !strstr(e.msg, "identity[0]")))
        abort();
    if (rc != ERR_OK && rc != ERR_INVAL && rc != ERR_NOMEM)
        abort();
    /* ids are valid UTF-8, as every id the store holds is */
    utf8 = id ? json_string(id) : NULL;
    if (!rc && utf8)
        derive(r, id);
    json_decref(utf8);
    ident_rules_free(r);
    json_decref(rules);
out:
    free(buf);
    return 0;
}
