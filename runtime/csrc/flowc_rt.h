/* flowc C runtime ABI: what generated modules include and link against.
 *
 * A compiled device subgraph exports
 *   int flowc_entry(const flowc_tensor *feeds, flowc_tensor *fetches, flowc_status *st);
 * which runs the subgraph's kernels in a static order. Fetched tensors own their data, allocated
 * with flowc_alloc; the caller releases it with the module's exported flowc_free.
 */
#ifndef FLOWC_RT_H
#define FLOWC_RT_H

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FLOWC_MAX_RANK 8

typedef struct flowc_tensor {
    void *data;
    int64_t dims[FLOWC_MAX_RANK];
    int32_t rank;
    int32_t dtype;
} flowc_tensor;

typedef struct flowc_status {
    int32_t code;                /* 0: ok */
    char node[128];              /* the node that failed */
    char location[256];          /* where it was written */
    char message[768];
} flowc_status;

enum { FLOWC_OK = 0, FLOWC_ERROR = 1, FLOWC_OUT_OF_RANGE = 2, FLOWC_INVALID_ARGUMENT = 3,
       FLOWC_RESOURCE_EXHAUSTED = 4 };

static inline int flowc_fail(flowc_status *st, int code, const char *node, const char *loc,
                             const char *fmt, ...) {
    va_list ap;
    st->code = code;
    snprintf(st->node, sizeof st->node, "%s", node);
    snprintf(st->location, sizeof st->location, "%s", loc);
    va_start(ap, fmt);
    vsnprintf(st->message, sizeof st->message, fmt, ap);
    va_end(ap);
    return code;
}

/* 64-byte aligned, never NULL for a successful zero-byte request. */
static inline void *flowc_alloc(size_t nbytes) {
    size_t n = (nbytes + 63) & ~(size_t)63;
    return aligned_alloc(64, n ? n : 64);
}

static inline int64_t flowc_floordiv_i64(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static inline int64_t flowc_floormod_i64(int64_t a, int64_t b) {
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

#endif /* FLOWC_RT_H */
