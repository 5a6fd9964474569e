/* SPDX-License-Identifier: Apache-2.0 */
/* store_ident_test.c - device identity through store.h: aliases and
 * physical ids as registered and as the identity rules derive them, an
 * alias that would name two devices refused with both named, lookups by
 * id, alias and physical id (a GPU's replicas and MIG devices, and their
 * replicas), history by any name, the kubelet mirror's DRA devices with
 * their claim, and a DRA driver's published devices kept by the mirror. */
#include "store_fx.h"
#include "../../../server/histq.h"
#include "../../../server/ident.h"

#define UUID "GPU-8a1f0c2e-1111-2222-3333-444455556666"

/* Compact JSON text of 'v' into 'out'. */
static const char *text(const json_t *v, char *out, size_t cap)
{
    char *t = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);

    snprintf(out, cap, "%s", t ? t : "(null)");
    free(t);
    return out;
}

/* GET /v1/devices/{name} as the store answers it: "direct|id,id,..." (the
 * device named directly, '-' for none, then every device covered), or the
 * error's name. */
static const char *find(struct fx *f, const char *name, const char *res, char *out, size_t cap)
{
    json_t *j = NULL, *d;
    struct error e = {0};
    size_t i, used;
    err_t rc = store_device_find(f->st, name, res, &e, &j);

    if (rc) {
        snprintf(out, cap, "%s", err_str(rc));
        return out;
    }
    d = json_object_get(j, "device");
    used = (size_t)snprintf(out, cap, "%s|",
                            json_is_null(d) ? "-" : json_string_value(json_object_get(d, "id")));
    json_array_foreach(json_object_get(j, "devices"), i, d) {
        used += (size_t)snprintf(out + used, cap - used, "%s%s", i ? "," : "",
                                 json_string_value(json_object_get(d, "id")));
    }
    json_decref(j);
    return out;
}

/* "deviceId:pod" of each interval of the history of 'name'. */
static const char *history_of(struct fx *f, const char *name, char *out, size_t cap)
{
    struct histq q = {
        .sel = HISTQ_DEVICE, .device = name, .from_ms = 0, .to_ms = INT64_MAX, .limit = 100};
    json_t *j = NULL, *iv;
    size_t i, used = 0;

    out[0] = '\0';
    CHECK_OK(store_history(f->st, &q, &j));
    json_array_foreach(json_object_get(j, "intervals"), i, iv) {
        used += (size_t)snprintf(out + used, cap - used, "%s%s:%s", i ? "," : "",
                                 json_string_value(json_object_get(iv, "deviceId")),
                                 json_string_value(json_object_get(iv, "name")));
    }
    json_decref(j);
    return out;
}

static void test_registered_names(void)
{
    struct fx f;
    char b[1024];
    json_t *d;

    if (fx_open(&f, 1000))
        return;
    CHECK_OK(put_devices(&f, GPU,
                         "{\"devices\":[{\"id\":\"gpu-0\",\"aliases\":[\"nvidia0\",\"" UUID
                         "\",\"0000:3b:00.0\"]},{\"id\":\"gpu-1\"}]}",
                         NULL));
    d = device(&f, GPU, "gpu-0");
    CHECK_STREQ(text(json_object_get(d, "aliases"), b, sizeof(b)),
                "[\"0000:3b:00.0\",\"" UUID "\",\"nvidia0\"]");
    CHECK_STREQ(json_string_value(json_object_get(d, "physical")), "gpu-0");
    json_decref(d);
    CHECK_STREQ(find(&f, "nvidia0", NULL, b, sizeof(b)), "gpu-0|gpu-0");
    CHECK_STREQ(find(&f, UUID, NULL, b, sizeof(b)), "gpu-0|gpu-0");
    CHECK_STREQ(find(&f, "gpu-1", NULL, b, sizeof(b)), "gpu-1|gpu-1");
    CHECK_STREQ(find(&f, "nvidia9", NULL, b, sizeof(b)), err_str(ERR_NOTFOUND));
    CHECK_STREQ(find(&f, "nvidia0", NIC, b, sizeof(b)), err_str(ERR_NOTFOUND));

    /* an alias that names another device, or is its id: 409 naming both,
     * and nothing changes */
    CHECK_EQ_INT(
        put_devices(&f, NIC, "{\"devices\":[{\"id\":\"nic-0\",\"aliases\":[\"nvidia0\"]}]}", NULL),
        ERR_CONFLICT);
    CHECK(strstr(f.err.msg, "nvidia0") && strstr(f.err.msg, "nic-0") && strstr(f.err.msg, "gpu-0"));
    CHECK_EQ_INT(
        put_devices(&f, NIC, "{\"devices\":[{\"id\":\"nic-0\",\"aliases\":[\"gpu-1\"]}]}", NULL),
        ERR_CONFLICT);
    CHECK(strstr(f.err.msg, "is the id of device " GPU " gpu-1") != NULL);
    CHECK_EQ_INT(put_devices(&f, NIC, "{\"devices\":[{\"id\":\"nvidia0\"}]}", NULL), ERR_CONFLICT);
    CHECK(strstr(f.err.msg, "its id is an alias of device " GPU " gpu-0") != NULL);
    CHECK_STREQ(find(&f, "nic-0", NULL, b, sizeof(b)), err_str(ERR_NOTFOUND));
    /* the same alias moved from one device to another in two writes */
    CHECK_OK(put_devices(&f, GPU, "{\"devices\":[{\"id\":\"gpu-0\"},{\"id\":\"gpu-1\"}]}", NULL));
    CHECK_OK(
        put_devices(&f, NIC, "{\"devices\":[{\"id\":\"nic-0\",\"aliases\":[\"nvidia0\"]}]}", NULL));
    CHECK_STREQ(find(&f, "nvidia0", NULL, b, sizeof(b)), "nic-0|nic-0");
    /* a deleted device's aliases go with it */
    CHECK_OK(put_devices(&f, NIC, "{\"devices\":[]}", NULL));
    CHECK_STREQ(find(&f, "nvidia0", NULL, b, sizeof(b)), err_str(ERR_NOTFOUND));
    fx_close(&f);
}

/* A device set written again may change, keep and trade names: names are
 * checked on the set as written, not device by device. */
static void test_names_rewritten(void)
{
    struct fx f;
    char b[1024];

    if (fx_open(&f, 1000))
        return;
    /* names a device had before, kept, dropped, taken again */
    CHECK_OK(put_devices(&f, GPU, "{\"devices\":[{\"id\":\"z0\",\"aliases\":[\"x\"]}]}", NULL));
    CHECK_OK(put_devices(&f, GPU, "{\"devices\":[{\"id\":\"z0\",\"aliases\":[\"y\"]}]}", NULL));
    CHECK_OK(put_devices(&f, GPU, "{\"devices\":[{\"id\":\"z0\",\"aliases\":[\"x\"]}]}", NULL));
    CHECK_OK(put_devices(&f, GPU,
                         "{\"devices\":[{\"id\":\"z0\",\"aliases\":[\"x\"]},{\"id\":\"z1\","
                         "\"physical\":\"P1\"}]}",
                         NULL));
    CHECK_OK(put_devices(&f, GPU,
                         "{\"devices\":[{\"id\":\"z0\",\"aliases\":[\"x\",\"y\"]},{\"id\":"
                         "\"z1\",\"physical\":\"P1\",\"aliases\":[\"w\"]}]}",
                         NULL));
    CHECK_STREQ(find(&f, "y", NULL, b, sizeof(b)), "z0|z0");
    CHECK_STREQ(find(&f, "w", NULL, b, sizeof(b)), "z1|z1");
    /* two devices trade their aliases */
    CHECK_OK(put_devices(&f, GPU,
                         "{\"devices\":[{\"id\":\"z0\",\"aliases\":[\"w\"]},{\"id\":\"z1\","
                         "\"physical\":\"P1\",\"aliases\":[\"x\",\"y\"]}]}",
                         NULL));
    CHECK_STREQ(find(&f, "w", NULL, b, sizeof(b)), "z0|z0");
    CHECK_STREQ(find(&f, "x", NULL, b, sizeof(b)), "z1|z1");
    CHECK_STREQ(find(&f, "y", NULL, b, sizeof(b)), "z1|z1");
    /* a device renamed to its alias, its old id now its alias */
    CHECK_OK(put_devices(&f, GPU, "{\"devices\":[{\"id\":\"x\",\"aliases\":[\"z1\"]}]}", NULL));
    CHECK_STREQ(find(&f, "z1", NULL, b, sizeof(b)), "x|x");
    CHECK_STREQ(find(&f, "w", NULL, b, sizeof(b)), err_str(ERR_NOTFOUND));
    /* still refused: two devices of the set with one alias, naming both */
    CHECK_EQ_INT(put_devices(&f, GPU,
                             "{\"devices\":[{\"id\":\"x\",\"aliases\":[\"q\"]},{\"id\":\"v\","
                             "\"aliases\":[\"q\"]}]}",
                             NULL),
                 ERR_CONFLICT);
    CHECK(strstr(f.err.msg, "alias q of device " GPU " v is an alias of device " GPU " x") ||
          strstr(f.err.msg, "alias q of device " GPU " x is an alias of device " GPU " v"));
    CHECK_STREQ(find(&f, "z1", NULL, b, sizeof(b)), "x|x");
    CHECK_STREQ(find(&f, "v", NULL, b, sizeof(b)), err_str(ERR_NOTFOUND));
    fx_close(&f);
}

/* Replicas and MIG devices found by their GPU, through the built-in rules
 * and a registered physical; history by the GPU's name covers a replica. */
static void test_physical(void)
{
    struct fx f;
    struct ident_rules *rules = NULL;
    struct error e = {0};
    char b[1024];
    json_t *d;

    if (fx_open(&f, 1000))
        return;
    CHECK_OK(ident_rules_new(NULL, &rules, &e));
    store_set_ident(f.st, rules);
    CHECK_OK(
        put_devices(&f, GPU,
                    "{\"devices\":[{\"id\":\"" UUID "::0\"},{\"id\":\"" UUID "::1\"},"
                    "{\"id\":\"MIG-GPU-ab12/1/0\"},{\"id\":\"MIG-77\",\"physical\":\"GPU-cd\"},"
                    "{\"id\":\"MIG-77::0\"},{\"id\":\"gpu-x\",\"aliases\":[\"GPU-cd\"]},"
                    "{\"id\":\"mig-1\",\"aliases\":[\"MIG-88\"],\"physical\":\"GPU-cd\"},"
                    "{\"id\":\"MIG-88::0\"}]}",
                    NULL));
    d = device(&f, GPU, UUID "::1");
    CHECK_STREQ(json_string_value(json_object_get(d, "physical")), UUID);
    json_decref(d);
    /* the GPU itself is not registered: every replica, no direct device */
    CHECK_STREQ(find(&f, UUID, NULL, b, sizeof(b)), "-|" UUID "::0," UUID "::1");
    CHECK_STREQ(find(&f, UUID "::1", NULL, b, sizeof(b)), UUID "::1|" UUID "::1");
    CHECK_STREQ(find(&f, "GPU-ab12", NULL, b, sizeof(b)), "-|MIG-GPU-ab12/1/0");
    /* by an alias of the whole GPU: it, its MIG device and that one's replica */
    CHECK_STREQ(find(&f, "GPU-cd", NULL, b, sizeof(b)),
                "gpu-x|MIG-77,MIG-77::0,MIG-88::0,gpu-x,mig-1");
    CHECK_STREQ(find(&f, "gpu-x", NULL, b, sizeof(b)),
                "gpu-x|MIG-77,MIG-77::0,MIG-88::0,gpu-x,mig-1");
    /* a registration's own physical wins over the rules, its own id too
     * (whole) */
    CHECK_OK(put_devices(
        &f, NIC, "{\"devices\":[{\"id\":\"GPU-zz::0\",\"physical\":\"GPU-zz::0\"}]}", NULL));
    d = device(&f, NIC, "GPU-zz::0");
    CHECK_STREQ(json_string_value(json_object_get(d, "physical")), "GPU-zz::0");
    json_decref(d);
    CHECK_OK(put_devices(&f, NIC, "{\"devices\":[]}", NULL));
    /* a replica whose physical is its MIG device's alias, found by that
     * device's id */
    CHECK_STREQ(find(&f, "mig-1", NULL, b, sizeof(b)), "mig-1|MIG-88::0,mig-1");
    CHECK_OK(bind(&f, "ml", "a",
                  "{\"uid\":\"u1\",\"containers\":[{\"name\":\"c\",\"devices\":[{\"resourceName\":"
                  "\"" GPU "\",\"deviceIds\":[\"" UUID "::1\",\"MIG-77::0\",\"MIG-88::0\"]}]}]}",
                  NULL, NULL, NULL));
    CHECK_STREQ(history_of(&f, UUID, b, sizeof(b)), UUID "::1:a");
    CHECK_STREQ(history_of(&f, "GPU-cd", b, sizeof(b)), "MIG-77::0:a,MIG-88::0:a");
    CHECK_STREQ(history_of(&f, "gpu-x", b, sizeof(b)), "MIG-77::0:a,MIG-88::0:a");
    CHECK_STREQ(history_of(&f, "mig-1", b, sizeof(b)), "MIG-88::0:a");
    /* history by a name the device no longer has, of a device gone */
    CHECK_OK(release(&f, "ml", "a", NULL));
    CHECK_OK(put_devices(&f, GPU, "{\"devices\":[]}", NULL));
    CHECK_STREQ(find(&f, UUID, NULL, b, sizeof(b)), err_str(ERR_NOTFOUND));
    CHECK_STREQ(history_of(&f, UUID, b, sizeof(b)), UUID "::1:a");
    fx_close(&f);
    ident_rules_free(rules);
}

/* Sync the kubelet snapshot in JSON text 'snap'. */
static void sync_text(struct fx *f, const char *snap)
{
    json_t *s = J(snap);
    bool changed;

    CHECK_OK(store_kubelet_sync(f->st, s, &changed));
    json_decref(s);
}

#define DRA_POD(claim)                                                                             \
    "{\"pods\":[{\"namespace\":\"ml\",\"name\":\"a\",\"containers\":[{\"name\":\"c\",\"devices\":" \
    "[{\"resourceName\":\"gpu.example.com\",\"deviceIds\":[\"pool-a/gpu-0\"],\"topology\":"        \
    "{\"nodes\":[]},\"claims\":[{\"namespace\":\"ml\",\"name\":\"" claim "\",\"deviceIds\":"       \
    "[\"pool-a/gpu-0\"]}]}]}]}],\"devices\":[{\"resourceName\":\"" GPU "\",\"id\":\"" UUID         \
    "::3\"}]}"

/* DRA devices in the kubelet mirror: held with their claim, Healthy;
 * published ones (PUT /v1/drivers) kept with their aliases, bound or not. */
static void test_dra(void)
{
    struct fx f;
    struct ident_rules *rules = NULL;
    struct error e = {0};
    char b[1024];
    json_t *d, *devs = NULL, *body, *out = NULL;
    bool changed;

    if (fx_open(&f, 1000))
        return;
    CHECK_OK(ident_rules_new(NULL, &rules, &e));
    store_set_ident(f.st, rules);
    sync_text(&f, DRA_POD("claim-1"));
    d = device(&f, "gpu.example.com", "pool-a/gpu-0");
    CHECK_STREQ(json_string_value(json_object_get(d, "health")), "Healthy");
    CHECK_STREQ(text(json_object_get(json_object_get(d, "holder"), "claim"), b, sizeof(b)),
                "{\"name\":\"claim-1\",\"namespace\":\"ml\"}");
    json_decref(d);
    /* the rules apply to kubelet devices: a replica found by its GPU */
    CHECK_STREQ(find(&f, UUID, NULL, b, sizeof(b)), "-|" UUID "::3");

    /* the driver publishes the device with its UUID as alias */
    body = J("{\"devices\":[{\"id\":\"pool-a/gpu-0\",\"aliases\":[\"GPU-dra\"],"
             "\"properties\":{\"uuid\":\"GPU-dra\"}},{\"id\":\"pool-a/gpu-1\"}]}");
    CHECK_OK(validate_driver_put(body, &devs, &e));
    CHECK_OK(store_driver_put(f.st, "gpu.example.com", devs, &e, &out, &changed));
    CHECK(changed);
    json_decref(out);
    json_decref(devs);
    json_decref(body);
    CHECK_STREQ(find(&f, "GPU-dra", NULL, b, sizeof(b)), "pool-a/gpu-0|pool-a/gpu-0");
    CHECK_STREQ(find(&f, "pool-a/gpu-0", "gpu.example.com", b, sizeof(b)),
                "pool-a/gpu-0|pool-a/gpu-0");
    /* the claim changes; then the pod goes: published devices stay */
    sync_text(&f, DRA_POD("claim-2"));
    CHECK_STREQ(holder(&f, "gpu.example.com", "pool-a/gpu-0", b, sizeof(b)), "ml/a/c");
    sync_text(&f, "{\"pods\":[],\"devices\":[]}");
    CHECK_STREQ(holder(&f, "gpu.example.com", "pool-a/gpu-0", b, sizeof(b)), "-");
    CHECK_STREQ(holder(&f, "gpu.example.com", "pool-a/gpu-1", b, sizeof(b)), "-");
    /* a new claim is a new interval */
    CHECK_STREQ(history_of(&f, "GPU-dra", b, sizeof(b)), "pool-a/gpu-0:a,pool-a/gpu-0:a");
    CHECK_STREQ(find(&f, "GPU-dra", NULL, b, sizeof(b)), "pool-a/gpu-0|pool-a/gpu-0");
    /* a DRA device neither published nor bound goes */
    sync_text(&f, DRA_POD("claim-3"));
    body = J("{\"devices\":[]}");
    CHECK_OK(validate_driver_put(body, &devs, &e));
    CHECK_OK(store_driver_put(f.st, "gpu.example.com", devs, &e, &out, &changed));
    json_decref(out);
    json_decref(devs);
    json_decref(body);
    CHECK_STREQ(holder(&f, "gpu.example.com", "pool-a/gpu-0", b, sizeof(b)), "ml/a/c");
    CHECK_STREQ(holder(&f, "gpu.example.com", "pool-a/gpu-1", b, sizeof(b)), "missing");
    sync_text(&f, "{\"pods\":[],\"devices\":[]}");
    CHECK_STREQ(holder(&f, "gpu.example.com", "pool-a/gpu-0", b, sizeof(b)), "missing");
    fx_close(&f);
    ident_rules_free(rules);
}

/* A kubelet device whose id is another device's alias (a DRA driver's
 * published UUID, say) is kept, said and counted: the name then names
 * both. */
static void test_kubelet_id_clash(void)
{
    struct fx f;
    char b[1024];
    json_t *body, *devs = NULL, *out = NULL;
    struct error e = {0};
    bool changed;

    if (fx_open(&f, 1000))
        return;
    body = J("{\"devices\":[{\"id\":\"pool-a/gpu-0\",\"aliases\":[\"GPU-k0\"]}]}");
    CHECK_OK(validate_driver_put(body, &devs, &e));
    CHECK_OK(store_driver_put(f.st, "gpu.example.com", devs, &e, &out, &changed));
    json_decref(out);
    json_decref(devs);
    json_decref(body);
    CHECK_EQ_INT(store_alias_conflicts(f.st), 0);
    sync_text(&f, "{\"pods\":[],\"devices\":[{\"resourceName\":\"" GPU "\",\"id\":\"GPU-k0\"}]}");
    CHECK_EQ_INT(store_alias_conflicts(f.st), 1);
    CHECK_STREQ(holder(&f, GPU, "GPU-k0", b, sizeof(b)), "-");
    CHECK_STREQ(find(&f, "GPU-k0", NULL, b, sizeof(b)), err_str(ERR_CONFLICT));
    CHECK_STREQ(find(&f, "GPU-k0", GPU, b, sizeof(b)), "GPU-k0|GPU-k0");
    /* the same List again: the device is not new, nothing more is counted */
    sync_text(&f, "{\"pods\":[],\"devices\":[{\"resourceName\":\"" GPU "\",\"id\":\"GPU-k0\"}]}");
    CHECK_EQ_INT(store_alias_conflicts(f.st), 1);
    fx_close(&f);
}

TEST_MAIN(quiet, test_registered_names, test_names_rewritten, test_physical, test_dra,
          test_kubelet_id_clash)
