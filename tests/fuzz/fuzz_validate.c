/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_validate.c - libFuzzer target for the request bodies of every write
 * endpoint: the bytes go through jsonx_parse (as http.c hands them to
 * api.c) and then through the validator the first byte selects (devices
 * PUT, health PATCH, pod PUT, allocate POST, reservation PUT, a DELETE's
 * DeleteOptions), plus the name checks. Any input must give ERR_OK with outputs or an error with a
 * message; never a crash, a leak or another code. */
#include "../../common/common.h"
#include "../../common/jsonx.h"
#include "../../common/names.h"
#include "../../server/validate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(err_t rc, const char *msg)
{
    if (rc != ERR_OK && rc != ERR_INVAL && rc != ERR_UNPROCESSABLE && rc != ERR_NOMEM)
        abort();
    if ((rc == ERR_INVAL || rc == ERR_UNPROCESSABLE) && msg[0] == '\0')
        abort(); /* every rejection says why */
}

static void validate_one(unsigned which, const json_t *body)
{
    struct error e = {0};
    json_t *out = NULL;
    const char *s = NULL;
    uint64_t ttl = 0;
    err_t rc;

    uint64_t rev = 0;

    switch (which % 7) {
    case 0:
        rc = validate_devices_put(body, &out, &ttl, &e);
        break;
    case 1:
        rc = validate_health_patch(body, &s, &e);
        if (!rc && !s)
            abort();
        break;
    case 2:
        rc = validate_pod_put(body, &s, &out, &e);
        break;
    case 3:
        rc = validate_allocate(body, &s, &out, &e);
        break;
    case 4:
        rc = validate_reservation(body, &out, &e);
        break;
    case 5:
        rc = validate_driver_put(body, &out, &e);
        break;
    default:
        rc = validate_delete_options(body, (which / 7) & 1, &s, &rev, &e);
        if (!rc && s && !validate_uid(s))
            abort();
        break;
    }
    check(rc, e.msg);
    if (rc && out)
        abort(); /* outputs untouched on failure */
    json_decref(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct error e = {0};
    char name[300];
    json_t *body = NULL;
    unsigned which;
    err_t rc;

    if (size < 1)
        return 0;
    which = data[0];
    rc = jsonx_parse((const char *)data + 1, size - 1, &body, &e);
    check(rc, e.msg);
    if (!rc && json_is_object(body))
        validate_one(which, body);
    json_decref(body);
    /* The path segments are checked by names.c: the raw bytes as a name. */
    snprintf(name, sizeof(name), "%.*s", (int)(size - 1 < 299 ? size - 1 : 299),
             (const char *)data + 1);
    (void)names_is_dns1123_label(name);
    (void)names_is_dns1123_subdomain(name);
    (void)names_is_resource_name(name);
    (void)names_is_device_id(name);
    (void)names_is_alias(name);
    (void)names_is_dra_device_id(name);
    (void)names_is_resource_or_driver(name);
    (void)validate_uid(name);
    return 0;
}
