/* SPDX-License-Identifier: Apache-2.0 */
/* names.c - validation of names that come from clients. */
#include "common.h"
#include "names.h"

static bool is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_alnum(char c)
{
    return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

/* Label rules over s[0..n). */
static bool label_ok(const char *s, size_t n)
{
    size_t i;

    if (n == 0 || n > 63 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
        return false;
    for (i = 1; i + 1 < n; i++) {
        if (!is_lower_alnum(s[i]) && s[i] != '-')
            return false;
    }
    return true;
}

bool names_is_dns1123_label(const char *s)
{
    return s && label_ok(s, strlen(s));
}

bool names_is_dns1123_subdomain(const char *s)
{
    size_t n;
    const char *dot;

    if (!s)
        return false;
    n = strlen(s);
    if (n == 0 || n > 253)
        return false;
    for (;;) {
        dot = strchr(s, '.');
        if (!dot)
            return label_ok(s, strlen(s));
        if (!label_ok(s, (size_t)(dot - s)))
            return false;
        s = dot + 1;
    }
}

const char *names_node_name_check(const char *s)
{
    return names_is_dns1123_subdomain(s)
               ? NULL
               : "must be a node name: a lower-case DNS-1123 subdomain (a-z, 0-9, '-' and "
                 "'.'), at most 253 characters";
}

bool names_has_control(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;

    for (; p && *p; p++) {
        if (*p < 0x20 || *p == 0x7F || (p[0] == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F))
            return true;
    }
    return false;
}

bool names_is_resource_name(const char *s)
{
    const char *slash;
    char domain[254];
    size_t dn, i, n;

    if (!s)
        return false;
    /* Kubernetes' IsExtendedResourceName: a name with "kubernetes.io/" in it
     * is a native resource, and "requests." is the quota prefix */
    if (strstr(s, "kubernetes.io/") || strncmp(s, "requests.", 9) == 0)
        return false;
    slash = strchr(s, '/');
    if (!slash || strchr(slash + 1, '/'))
        return false;
    dn = (size_t)(slash - s);
    if (dn == 0 || dn >= sizeof(domain))
        return false;
    memcpy(domain, s, dn);
    domain[dn] = '\0';
    if (!names_is_dns1123_subdomain(domain))
        return false;
    s = slash + 1;
    n = strlen(s);
    if (n == 0 || n > 63 || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
        return false;
    for (i = 1; i + 1 < n; i++) {
        if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return false;
    }
    return true;
}

bool names_is_device_id(const char *s)
{
    size_t i, n;

    if (!s)
        return false;
    n = strlen(s);
    if (n == 0 || n > 253 || !is_alnum(s[0]))
        return false;
    for (i = 1; i < n; i++) {
        if (!is_alnum(s[i]) && !strchr("._:/-", s[i]))
            return false;
    }
    return true;
}

bool names_is_alias(const char *s)
{
    size_t n, i;

    if (!s || !is_alnum(s[0]))
        return false;
    n = strlen(s);
    if (n > NAMES_ALIAS_MAX)
        return false;
    for (i = 1; i < n; i++) {
        if (!is_alnum(s[i]) && !strchr("._:/-", s[i]))
            return false;
    }
    return true;
}

bool names_is_dra_device_id(const char *s)
{
    const char *slash = s ? strrchr(s, '/') : NULL;
    char pool[254];
    size_t pn;
    char *p, *end;

    if (!slash || !names_is_dns1123_label(slash + 1))
        return false;
    pn = (size_t)(slash - s);
    if (pn == 0 || pn >= sizeof(pool))
        return false;
    memcpy(pool, s, pn);
    pool[pn] = '\0';
    for (p = pool;; p = end + 1) {
        end = strchr(p, '/');
        if (end)
            *end = '\0';
        if (!names_is_dns1123_subdomain(p))
            return false;
        if (!end)
            return true;
    }
}

bool names_is_device_name(const char *s)
{
    return names_is_alias(s) || names_is_dra_device_id(s);
}

bool names_is_resource_or_driver(const char *s)
{
    return names_is_resource_name(s) || names_is_dns1123_subdomain(s);
}
