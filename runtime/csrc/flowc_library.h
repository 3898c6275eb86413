/* flowc standalone library runtime: what a C program needs to run one compiled step without
 * Python (``flowc compile --emit c-library``).
 *
 * It provides in C what the Python runtime's ResourceStore provides on the inference path:
 * variable storage (each model instance owns a copy of the variables, set at create time from
 * the weights baked into the library), the counters of random ops (one per op, starting at 0
 * like a fresh session), owned input copies and the fetched outputs of the last run (blocks of the library's buffer
 * pool, reused by the next run). Host
 * calls (checkpoint files, queues, remote tensors) are refused: the compiler rejects steps
 * that need them, and the hook given to generated code fails with a clear message.
 *
 * Internal: the public API is the per-model header the compiler writes (<name>.h), whose
 * functions forward here. Everything in this file has hidden visibility in the library.
 */
#ifndef FLOWC_LIBRARY_H
#define FLOWC_LIBRARY_H

#include "flowc_rt.h"

/* An input or output of the step: its name, the node it comes from and where that node was
 * written, its dtype and shape (-1: a dim known only at run time). */
typedef struct flowc_lib_tensor_spec {
    const char *name;
    const char *node;
    const char *location;
    int32_t dtype;
    int32_t rank;
    int64_t dims[FLOWC_MAX_RANK];
} flowc_lib_tensor_spec;

/* A variable of the step and where its value lies in the baked weights. */
typedef struct flowc_lib_var_spec {
    const char *name;
    int32_t dtype;
    int32_t rank;
    int64_t dims[FLOWC_MAX_RANK];
    uint64_t offset;             /* bytes into the weights blob */
    uint64_t nbytes;
} flowc_lib_var_spec;

typedef int (*flowc_lib_entry_fn)(const flowc_tensor *feeds, flowc_tensor *fetches,
                                  const flowc_runtime *rt, void *rendezvous, int64_t timeout_ms,
                                  flowc_status *st);

/* Everything the compiler knows about one model, as constant tables. */
typedef struct flowc_lib_model_def {
    const char *name;
    int32_t n_inputs;
    const flowc_lib_tensor_spec *inputs;
    int32_t n_outputs;
    const flowc_lib_tensor_spec *outputs;
    int32_t n_vars;
    const flowc_lib_var_spec *vars;
    const unsigned char *weights;
    uint64_t weights_size;
    int32_t n_streams;
    flowc_lib_entry_fn entry;
    void (*free_fn)(void *);     /* frees fetched buffers (the module's flowc_free) */
    void (*use_pool)(void *);    /* gives the module its buffer pool (its flowc_use_pool) */
} flowc_lib_model_def;

#define FLOWC_LIB_ERROR_SIZE 1280

/* One model instance: its variables, random streams, inputs, last outputs and last error. */
typedef struct flowc_lib_model {
    const flowc_lib_model_def *def;
    flowc_var *vars;
    flowc_var **var_ptrs;
    uint64_t *stream_counters;
    uint64_t **stream_ptrs;
    flowc_runtime rt;
    flowc_tensor *inputs;        /* owned copies, or the caller's buffers; data NULL until set */
    int32_t *input_set;
    int32_t *input_bound;        /* 1: data is the caller's buffer (bind_input), not owned */
    size_t *input_capacity;      /* bytes of each owned input buffer, reused by the next set */
    flowc_tensor *outputs;       /* the last successful run's fetches (blocks of the pool) */
    int32_t has_outputs;
    int32_t counted;             /* 1: counted among the live instances (the pool's users) */
    int32_t error_code;
    char error[FLOWC_LIB_ERROR_SIZE];
} flowc_lib_model;

flowc_lib_model *flowc_lib_create(const flowc_lib_model_def *def);
void flowc_lib_destroy(flowc_lib_model *m);
int32_t flowc_lib_find(const flowc_lib_tensor_spec *specs, int32_t n, const char *name);
int flowc_lib_set_input(flowc_lib_model *m, int32_t index, const void *data, int32_t dtype,
                        int32_t rank, const int64_t *dims);
int flowc_lib_set_input_by_name(flowc_lib_model *m, const char *name, const void *data,
                                int32_t dtype, int32_t rank, const int64_t *dims);
int flowc_lib_bind_input(flowc_lib_model *m, int32_t index, const void *data, int32_t dtype,
                         int32_t rank, const int64_t *dims);
int flowc_lib_bind_input_by_name(flowc_lib_model *m, const char *name, const void *data,
                                 int32_t dtype, int32_t rank, const int64_t *dims);
int flowc_lib_run(flowc_lib_model *m);
int flowc_lib_get_output(flowc_lib_model *m, int32_t index, const void **data, int32_t *dtype,
                         int32_t *rank, const int64_t **dims);
int flowc_lib_get_output_by_name(flowc_lib_model *m, const char *name, const void **data,
                                 int32_t *dtype, int32_t *rank, const int64_t **dims);
const char *flowc_lib_last_error(const flowc_lib_model *m);
const char *flowc_lib_dtype_name(int32_t dtype);

#endif /* FLOWC_LIBRARY_H */
