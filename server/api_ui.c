/* SPDX-License-Identifier: Apache-2.0 */
/* api_ui.c - GET /ui: the device timeline page (server/ui/index.html,
 * embedded at build time by tools/embed-ui.sh). The page is static: it reads
 * /v1/devices, /v1/history and /v1/watch itself, with relative URLs, and
 * writes nothing. This file only answers it with headers that let nothing
 * but its own inline style and script run (a CSP of their hashes). */
#define LOG_MOD "api"
#include "../common/common.h"
#include "api.h"

/* From the generated ui_gen.c. */
extern const char ui_page[];
extern const size_t ui_page_len;
extern const char ui_csp[];

err_t api_ui(struct api_req *r, struct api_resp *out)
{
    (void)r;
    /* Persistent: the bytes are static, libmicrohttpd neither copies nor frees them. */
    out->raw = MHD_create_response_from_buffer(ui_page_len, (void *)ui_page,
                                               MHD_RESPMEM_PERSISTENT);
    if (!out->raw)
        return ERR_NOMEM;
    if (MHD_add_response_header(out->raw, MHD_HTTP_HEADER_CONTENT_TYPE,
                                "text/html; charset=utf-8") != MHD_YES ||
        MHD_add_response_header(out->raw, "Content-Security-Policy", ui_csp) != MHD_YES ||
        MHD_add_response_header(out->raw, "X-Content-Type-Options", "nosniff") != MHD_YES ||
        MHD_add_response_header(out->raw, "X-Frame-Options", "DENY") != MHD_YES ||
        MHD_add_response_header(out->raw, "Referrer-Policy", "no-referrer") != MHD_YES ||
        MHD_add_response_header(out->raw, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache") != MHD_YES) {
        MHD_destroy_response(out->raw);
        out->raw = NULL;
        return ERR_NOMEM;
    }
    out->status = 200;
    return ERR_OK;
}
