/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_extender.c - libFuzzer target for podres-extender's input: each
 * input is parsed as an ExtenderArgs (filter, prioritize) and as an
 * ExtenderBindingArgs, and a parsed one is filtered, prioritized and
 * chosen for against a small view, as the server would. */
#include "../../common/common.h"
#include "../../extender/args.h"
#include "../../extender/view.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct view *view_once(void)
{
    static struct view *v;
    json_t *nd;

    if (v)
        return v;
    v = view_new(60000);
    nd = json_loads(
        "{\"status\":{\"devices\":[{\"resourceName\":\"example.com/gpu\",\"id\":\"g0\","
        "\"health\":\"Healthy\",\"topology\":{\"nodes\":[{\"id\":0}]}},"
        "{\"resourceName\":\"example.com/gpu\",\"id\":\"g1\",\"health\":\"Healthy\"}]}}",
        0, NULL);
    view_set_node(v, "n1", nd);
    json_decref(nd);
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct view *v = view_once();
    struct args a;
    struct args_bind b;
    json_t *fit = NULL, *failed = NULL, *list = NULL, *chosen = NULL;
    struct error e = {0};

    if (args_parse((const char *)data, size, &a, &e) == ERR_OK) {
        if (view_filter(v, a.names, a.totals, &fit, &failed) == ERR_OK) {
            json_decref(fit);
            json_decref(failed);
        }
        if (view_prioritize(v, a.names, a.totals, &list) == ERR_OK)
            json_decref(list);
        if (view_choose(v, "n1", "ns/p", "u", a.requests, &chosen, NULL) == ERR_OK)
            json_decref(chosen);
        view_unassume(v, "ns/p");
        args_release(&a);
    }
    (void)args_parse_bind((const char *)data, size, &b, &e);
    return 0;
}
