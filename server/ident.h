/* SPDX-License-Identifier: Apache-2.0 */
/* ident.h - identity rules: the physical device and the other names a
 * device id implies, read from named groups of POSIX extended regular
 * expressions (the config file's identity: key, then the built-in rules for
 * NVIDIA replica and MIG ids). Compiled once at start; immutable after, so
 * threads share them without a lock. Not where a registration's own
 * physical and aliases are merged with these, nor where they are stored:
 * that is the store's. */
#ifndef PODRES_IDENT_H
#define PODRES_IDENT_H
#include <jansson.h>

#include "../common/err.h"

#define IDENT_MAX_RULES 64     /* rules of the identity: key */
#define IDENT_MAX_GROUPS 8     /* named groups of one pattern */
#define IDENT_MAX_PATTERN 1024 /* bytes of one pattern */
/* Positions of one pattern with its repetitions written out: a{1,300} is
 * 300, (ab){4} 8, (a{3}){5} 15; '*' and '?' add none, '+' doubles. */
#define IDENT_MAX_EXPANDED 1024

struct ident_rules; /* immutable once made, so shared by threads without a lock */

/* Compile 'rules' (a JSON array of {"resource": str, "pattern": str}, as the
 * config file's identity: key gives them; NULL, JSON null or [] for none)
 * followed by the built-in rules into *out (new: ident_rules_free() it).
 * 'resource' is an exact resource name, a prefix ending in '*', or '*'.
 * 'pattern' is an ERE that must match a whole id, with named groups
 * (?<name>...) or (?P<name>...): "physical", or any name starting with
 * "alias"; at least one, at most IDENT_MAX_GROUPS. Refused too, as glibc
 * may take unbounded memory or time on them: more than IDENT_MAX_EXPANDED
 * positions, back-references (\1), and *, + or {n,} repeating what can
 * match the empty string ((a|b?)+). A bad entry is ERR_INVAL
 * with 'e' naming the key "identity", "identity[i]", "identity[i].resource"
 * or "identity[i].pattern" and why (regerror's text for a pattern regcomp
 * refuses). ERR_NOMEM when out of memory. */
err_t ident_rules_new(const json_t *rules, struct ident_rules **out, struct error *e) WARN_UNUSED;
void ident_rules_free(struct ident_rules *r); /* NULL is a no-op */

/* Apply the first rule whose resource and pattern match 'resource' and 'id'
 * ('id' valid UTF-8, as every id the store holds is). On ERR_OK *physical is
 * the "physical" group's capture (new: free() it), or NULL when no rule
 * matched, the rule has no such group, or it captured nothing, an empty
 * string or 'id' itself. Each "alias*" group that captured a non-empty
 * string other than 'id' is appended to 'aliases' (a JSON array; borrowed)
 * unless the array holds it already. A capture that is not a name an
 * alias may be (names_is_alias()) is ignored. ERR_NOMEM only: *physical is
 * then untouched, and 'aliases' may hold some of the rule's aliases.
 * Thread-safe. */
err_t ident_derive(const struct ident_rules *r, const char *resource, const char *id,
                   char **physical, json_t *aliases) WARN_UNUSED;

#endif
