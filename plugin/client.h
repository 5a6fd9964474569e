/* SPDX-License-Identifier: Apache-2.0 */
/* client.h - kubectl-podres's access to the API server: the kubeconfig as
 * kubectl takes it (--kubeconfig, $KUBECONFIG, --context; kube/kubeconfig.h),
 * exec credential plugins (kube/execcred.h), and one GET of a list through
 * the REST client (kube/rest.h). Errors come back as the one line the
 * user sees. Not thread-safe. */
#ifndef PODRES_PLUGIN_CLIENT_H
#define PODRES_PLUGIN_CLIENT_H
#include <jansson.h>

#include "../common/err.h"
#include "../kube/kubeconfig.h"

struct client;

/* Load the configuration 'sel' names (borrowed) and run its exec plugin,
 * if any. On ERR_OK *out is new (client_free); else 'e' says why. */
err_t client_open(const struct kubeconfig_sel *sel, struct client **out,
                  struct error *e) WARN_UNUSED;
void client_free(struct client *c); /* NULL is a no-op */

/* The context's namespace, or "default". Borrowed until client_free. */
const char *client_namespace(const struct client *c);

/* GET the list at 'path' of 'resource' (e.g. "nodedevices.podres.dev",
 * for messages). On ERR_OK *out is new. Failures, with 'e': ERR_NOTFOUND
 * (the server does not serve it), ERR_FORBIDDEN (401 or 403, naming the verb
 * and resource), others as rest_do. A 401 with an exec plugin runs it again
 * once. */
err_t client_list(struct client *c, const char *path, const char *resource, json_t **out,
                  struct error *e) WARN_UNUSED;

#endif
