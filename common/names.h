/* SPDX-License-Identifier: Apache-2.0 */
/* names.h - Kubernetes name rules and podres identifier rules. Pure
 * predicates: no allocation, no logging, thread-safe. */
#ifndef PODRES_NAMES_H
#define PODRES_NAMES_H
#include <stdbool.h>

/* RFC 1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 characters. */
bool names_is_dns1123_label(const char *s);
/* RFC 1123 subdomain: dot-separated labels, at most 253 characters. */
bool names_is_dns1123_subdomain(const char *s);
/* Extended resource name "domain/name": domain a DNS-1123 subdomain, name a
 * qualified-name part ([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, <= 63), and
 * not one Kubernetes keeps for itself: none with "kubernetes.io/" in it
 * (native resources), none starting "requests." (the quota prefix). */
bool names_is_resource_name(const char *s);
/* Device id: [A-Za-z0-9][A-Za-z0-9._:-]*, at most 253 characters. */
bool names_is_device_id(const char *s);

#endif
