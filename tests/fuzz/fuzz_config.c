/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_config.c - libFuzzer target for podresd's config file: YAML bytes
 * through cfg_yaml_parse and config_apply (what config_load does with a
 * file). Any input must give ERR_OK or an error with a message. */
#include "../../common/common.h"
#include "../../common/cfg.h"
#include "../../server/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct config c;
    struct error e = {0};
    json_t *doc = NULL;
    err_t rc;

    rc = cfg_yaml_parse((const char *)data, size, &doc, &e);
    if (rc != ERR_OK && rc != ERR_INVAL && rc != ERR_NOMEM)
        abort();
    if (rc != e.code || (rc == ERR_INVAL && e.msg[0] == '\0'))
        abort();
    if (rc)
        return 0;
    memset(&c, 0, sizeof(c));
    if (config_init(&c) == ERR_OK) {
        e = (struct error){0};
        rc = config_apply(&c, doc, &e);
        if (rc != e.code || (rc == ERR_INVAL && e.msg[0] == '\0'))
            abort();
        config_release(&c);
    }
    json_decref(doc);
    return 0;
}
