/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_kubelet_decode.c - libFuzzer target for the decoding of kubelet gRPC
 * answers: the input is a gRPC-framed ListPodResourcesResponse followed by
 * a framed AllocatableResourcesResponse (each 5-byte header + message); the
 * frames go through grpc_unframe, the messages through
 * source_kubelet_decode, and the tail through grpc_percent_decode. */
#include "../../common/common.h"
#include "../../server/grpc.h"
#include "../../server/source_kubelet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The frame at the start of 'data': its length including the header. */
static size_t frame_len(const uint8_t *data, size_t size)
{
    size_t n;

    if (size < GRPC_FRAME_HDR)
        return size;
    n = ((size_t)data[1] << 24 | (size_t)data[2] << 16 | (size_t)data[3] << 8 | data[4]) +
        GRPC_FRAME_HDR;
    return n < size ? n : size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *list = NULL, *alloc = NULL;
    size_t list_len = 0, alloc_len = 0, n1 = frame_len(data, size), n2;
    struct error e = {0};
    char text[128];
    json_t *snap = NULL;
    err_t rc;

    n2 = frame_len(data + n1, size - n1);
    rc = grpc_unframe(data, n1, SOURCE_KUBELET_MAX_RECV, &list, &list_len, &e);
    if (!rc)
        rc = grpc_unframe(data + n1, n2, SOURCE_KUBELET_MAX_RECV, &alloc, &alloc_len, &e);
    if (rc && rc != ERR_INVAL)
        abort();
    if (!rc) {
        memset(&e, 0, sizeof(e));
        rc = source_kubelet_decode(list, list_len, alloc, alloc_len, &snap, &e);
        if (rc != ERR_OK && rc != ERR_INVAL && rc != ERR_NOMEM)
            abort();
        if (rc == ERR_INVAL && e.msg[0] == '\0')
            abort();
        if (!rc && !snap)
            abort();
        json_decref(snap);
    }
    grpc_percent_decode((const char *)data + n1 + n2, size - n1 - n2, text, sizeof(text));
    if (strlen(text) >= sizeof(text))
        abort();
    return 0;
}
