/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_execcred.c - libFuzzer target for what an exec credential plugin
 * prints (execcred_parse) and for the exec block of a kubeconfig
 * (execcred_cfg_parse, from YAML): any bytes give ERR_OK or an error with a
 * message, never a crash or a leak. Nothing is run. */
#include "../../common/common.h"
#include "../../common/cfg.h"
#include "../../kube/execcred.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_output(const char *text, size_t len)
{
    struct execcred_result r = {0};
    struct error e = {0};
    err_t rc = execcred_parse(text, len, "client.authentication.k8s.io/v1", &r, &e);

    if (rc != ERR_OK && rc != ERR_INVAL && rc != ERR_NOMEM)
        abort(); /* the header promises no other code */
    if (rc == ERR_INVAL && e.msg[0] == '\0')
        abort(); /* every rejection says why */
    if (rc == ERR_OK && !r.token && !(r.cert_data && r.key_data))
        abort(); /* a success carries a credential */
    execcred_result_release(&r);
}

static void fuzz_block(const char *text, size_t len)
{
    struct execcred_cfg *c = NULL;
    json_t *doc = NULL;
    struct error e = {0};
    err_t rc;

    if (cfg_yaml_parse(text, len, &doc, &e))
        return;
    rc = execcred_cfg_parse(doc, "/nonexistent", &c, &e);
    if (rc == ERR_INVAL && e.msg[0] == '\0')
        abort();
    if (rc == ERR_OK && (!c || !c->argv || !c->argv[0] || !c->command))
        abort();
    execcred_cfg_free(c);
    json_decref(doc);
}

/* The first byte chooses: 'Y' an exec block in YAML, anything else output. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 0 && data[0] == 'Y')
        fuzz_block((const char *)data + 1, size - 1);
    else
        fuzz_output((const char *)data, size);
    return 0;
}
