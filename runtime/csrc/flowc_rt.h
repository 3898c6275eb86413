/* flowc C runtime ABI: what generated modules include and link against.
 *
 * A compiled device subgraph exports
 *   int flowc_entry(const flowc_tensor *feeds, flowc_tensor *fetches,
 *                   const flowc_runtime *rt, flowc_status *st);
 * which runs the subgraph's kernels in a static order. Fetched tensors own their data, allocated
 * with flowc_alloc; the caller releases it with the module's exported flowc_free.
 *
 * State lives in the runtime, outside any step: ``rt->vars`` holds the variables the step uses
 * (in the order of the artifact manifest), ``rt->streams`` the counters of its random ops (each
 * run reserves numbers by advancing its counter), and ``rt->host_call`` lets a kernel ask the
 * runtime to run a host op (checkpoint files). Variable buffers are malloc'd memory owned by
 * the variable; generated code replaces them with flowc_alloc/free.
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

/* A resource variable. A resource tensor's data points at one of these. */
typedef struct flowc_var {
    flowc_tensor value;          /* current value; data is NULL until first assigned */
    int64_t capacity;            /* bytes allocated at value.data */
    int32_t initialized;
    int32_t dtype;               /* the dtype it was created with */
    char name[128];
} flowc_var;

typedef struct flowc_runtime {
    flowc_var **vars;
    uint64_t **streams;
    void *host;
    int (*host_call)(void *host, const char *op, const char *node, const char *attrs,
                     int32_t n_in, const flowc_tensor *in, int32_t n_out, flowc_tensor *out,
                     flowc_status *st);
} flowc_runtime;

/* The variable a resource tensor points at. */
#define FLOWC_VAR(t) ((flowc_var *)(t).data)

enum { FLOWC_OK = 0, FLOWC_ERROR = 1, FLOWC_OUT_OF_RANGE = 2, FLOWC_INVALID_ARGUMENT = 3,
       FLOWC_RESOURCE_EXHAUSTED = 4,
       FLOWC_FAILED_PRECONDITION = 5, FLOWC_NOT_FOUND = 6, FLOWC_DATA_LOSS = 7 };

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
