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
/* Why 's' is not a node name (a DNS-1123 subdomain, as the API server
 * requires of a Node's name), or NULL when it is one: an opts check
 * (opts.h) for --node-name. */
const char *names_node_name_check(const char *s);
/* Whether 's' holds a C0 or C1 control character or DEL (bytes 0x00..0x1F
 * and 0x7F, and U+0080..U+009F in UTF-8). */
bool names_has_control(const char *s);
/* Extended resource name "domain/name": domain a DNS-1123 subdomain, name a
 * qualified-name part ([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, <= 63), and
 * not one Kubernetes keeps for itself: none with "kubernetes.io/" in it
 * (native resources), none starting "requests." (the quota prefix). */
bool names_is_resource_name(const char *s);
/* Device id: [A-Za-z0-9][A-Za-z0-9._:/-]*, at most 253 characters ('/' for
 * MIG ids that name their GPU, MIG-GPU-<uuid>/<gi>/<ci>). */
bool names_is_device_id(const char *s);
/* A device's other name (alias, physical id): [A-Za-z0-9][A-Za-z0-9._:/-]*,
 * at most NAMES_ALIAS_MAX characters (a PCI bus id, a UUID, a MIG id,
 * "pool/device"). */
#define NAMES_ALIAS_MAX 253
bool names_is_alias(const char *s);
/* DRA device id "pool/device": pool one or more DNS-1123 subdomains joined
 * by '/' (at most 253 characters), device a DNS-1123 label. */
bool names_is_dra_device_id(const char *s);
/* A name a device is looked up by: an alias (so any device id of a device
 * plugin), or a DRA device id (which may be longer). */
bool names_is_device_name(const char *s);
/* A resource as a filter names it: an extended resource name, or a DRA
 * driver (a DNS-1123 subdomain). */
bool names_is_resource_or_driver(const char *s);

#endif
