/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_kube_stream.c - libFuzzer target for the syncer's splitting of a
 * watch stream into lines: the input arrives through rest.c's on_body in
 * pieces whose sizes the first bytes choose; each complete line must reach
 * the callback as JSON, a bad line must stop the stream, and nothing may
 * crash or leak. Reaches the static on_body by including rest.c. */
#include "../../kube/rest.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool on_line(void *ctx, json_t *v)
{
    size_t *n = ctx;

    if (!v)
        abort();
    (*n)++;
    /* A Status line stops the stream, as the informer does for ERROR. */
    return !json_is_string(json_object_get(v, "kind"));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct xfer x = {.fn = on_line, .status = 200};
    size_t lines = 0, off = 4, piece, got;
    char *buf;

    if (size < 4)
        return 0;
    x.ctx = &lines;
    while (off < size && !x.stop) {
        piece = 1 + data[off % 4] % 64;
        if (piece > size - off)
            piece = size - off;
        buf = malloc(piece); /* a separate block: ASan sees any over-read */
        if (!buf)
            break;
        memcpy(buf, data + off, piece);
        got = on_body(buf, 1, piece, &x);
        free(buf);
        if (got != piece && !x.stop)
            break; /* over BODY_MAX or out of memory */
        off += piece;
    }
    if (x.len > x.cap)
        abort();
    free(x.body);
    return 0;
}
