/* SPDX-License-Identifier: Apache-2.0 */
/* render.h - the rows of model.h printed: a kubectl-style table per view
 * (default and -o wide), or the document {"items": rows} as JSON or YAML.
 * Pure but for the clock the caller passes. */
#ifndef PODRES_PLUGIN_RENDER_H
#define PODRES_PLUGIN_RENDER_H
#include <jansson.h>
#include <stdbool.h>
#include <time.h>

#include "../common/err.h"
#include "../common/strbuf.h"

enum render_view {
    RENDER_NODES, /* model_nodes */
    RENDER_NODE,  /* model_node */
    RENDER_WHO,   /* model_who */
    RENDER_PODS,  /* model_pods */
};

enum render_format {
    RENDER_TABLE,
    RENDER_WIDE,
    RENDER_JSON,
    RENDER_YAML,
};

/* -o's value ("" for none) as a format. ERR_INVAL for another. */
err_t render_parse_format(const char *s, enum render_format *out) WARN_UNUSED;

/* Append 'rows' (borrowed) in 'fmt' to 'sb'. 'namespaces': the pods table
 * has a NAMESPACE column (-A). 'now' ages the SINCE column. A table of no
 * rows is empty (the caller says "No resources found"). */
err_t render(enum render_view view, enum render_format fmt, const json_t *rows, bool namespaces,
             time_t now, struct strbuf *sb) WARN_UNUSED;

#endif
