/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_kubeconfig.c - libFuzzer target for kubeconfig_parse: any bytes must
 * give ERR_OK or an error with a message, never a crash or a leak. */
#include "../../common/common.h"
#include "../../kube/kubeconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kubeconfig kc;
    struct error e = {0};
    err_t rc;

    memset(&kc, 0, sizeof(kc));
    rc = kubeconfig_parse((const char *)data, size, "/nonexistent", &kc, &e);
    if (rc != ERR_OK && rc != ERR_INVAL && rc != ERR_NOMEM)
        abort(); /* the header promises no other code */
    if (rc == ERR_INVAL && e.msg[0] == '\0')
        abort();             /* every rejection says why */
    kubeconfig_release(&kc); /* filled on ERR_OK, still zeroed otherwise */
    return 0;
}
