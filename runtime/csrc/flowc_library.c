/* flowc standalone library runtime (see flowc_library.h). */
#include "flowc_library.h"

static size_t itemsize_of(int32_t dtype) {
    switch (dtype) {
    case 1: return 4;            /* f32 */
    case 2: return 8;            /* f64 */
    case 3: return 4;            /* i32 */
    case 4: return 8;            /* i64 */
    case 5: return 1;            /* bool */
    case 6: return 1;            /* i8 */
    case 7: return 2;            /* i16 */
    case 8: return 1;            /* u8 */
    case 9: return 2;            /* f16 */
    case 10: return 2;           /* bf16 */
    case 11: return 2;           /* u16 */
    case 12: return 4;           /* u32 */
    case 13: return 8;           /* u64 */
    default: return 0;
    }
}

const char *flowc_lib_dtype_name(int32_t dtype) {
    switch (dtype) {
    case 1: return "f32";
    case 2: return "f64";
    case 3: return "i32";
    case 4: return "i64";
    case 5: return "bool";
    case 6: return "i8";
    case 7: return "i16";
    case 8: return "u8";
    case 9: return "f16";
    case 10: return "bf16";
    case 11: return "u16";
    case 12: return "u32";
    case 13: return "u64";
    default: return "unknown dtype";
    }
}

static void clear_error(flowc_lib_model *m) {
    m->error_code = 0;
    m->error[0] = '\0';
}

/* "<location>: node '<node>': <message>", as the Python runtime words a failed step. */
static int set_error(flowc_lib_model *m, int code, const char *node, const char *location,
                     const char *fmt, ...) {
    char message[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    char where[512] = "";
    size_t n = 0;
    if (location && location[0])
        n += (size_t)snprintf(where + n, sizeof where - n, "%s: ", location);
    if (node && node[0] && n < sizeof where)
        snprintf(where + n, sizeof where - n, "node '%s': ", node);
    snprintf(m->error, sizeof m->error, "%s%s", where, message);
    m->error_code = code;
    return code;
}

/* "f32[?,64]" for a spec (rank-0: "f32[]"). */
static void spec_text(char *out, size_t size, int32_t dtype, int32_t rank, const int64_t *dims) {
    size_t n = (size_t)snprintf(out, size, "%s[", flowc_lib_dtype_name(dtype));
    for (int32_t d = 0; d < rank && n < size; d++) {
        if (dims[d] < 0)
            n += (size_t)snprintf(out + n, size - n, "%s?", d ? "," : "");
        else
            n += (size_t)snprintf(out + n, size - n, "%s%lld", d ? "," : "", (long long)dims[d]);
    }
    if (n < size) snprintf(out + n, size - n, "]");
}

static int refuse_host_call(void *host, const char *op, const char *node, const char *attrs,
                            int32_t n_in, const flowc_tensor *in, int32_t n_out, flowc_tensor *out,
                            flowc_status *st) {
    (void)host; (void)attrs; (void)n_in; (void)in; (void)n_out; (void)out;
    return flowc_fail(st, FLOWC_FAILED_PRECONDITION, node ? node : "", "",
                      "host op '%s' needs the Python runtime; a C library cannot run it", op);
}

/* The library's buffer pool (flowc_pool, flowc_rt.h), as the Python runtime has one per
 * process: the module allocates a run's outputs and its dynamic-size buffers from it, and the
 * next run gives the outputs back first, so an output of the same size gets the same memory
 * again instead of a new allocation (and, for a large one, new page faults) every run. Idle
 * blocks are kept up to FLOWC_LIB_POOL_CACHED_BYTES and freed when the last instance is
 * destroyed. ``pool_lock`` orders handing the pool to the module (once, before any instance
 * runs) and counting instances. */
#define FLOWC_LIB_POOL_CACHED_BYTES ((int64_t)1 << 30)
static flowc_pool lib_pool = {.max_cached_bytes = FLOWC_LIB_POOL_CACHED_BYTES,
                              .initialized = 1};
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static int32_t pool_given;
static int64_t live_instances;

static void instance_made(const flowc_lib_model_def *def) {
    pthread_mutex_lock(&pool_lock);
    if (!pool_given) {
        def->use_pool(&lib_pool);
        pool_given = 1;
    }
    live_instances++;
    pthread_mutex_unlock(&pool_lock);
}

static void instance_gone(void) {
    pthread_mutex_lock(&pool_lock);
    if (--live_instances == 0) flowc_pool_trim(&lib_pool);
    pthread_mutex_unlock(&pool_lock);
}

static void free_outputs(flowc_lib_model *m) {
    if (!m->has_outputs) return;
    for (int32_t i = 0; i < m->def->n_outputs; i++) {
        if (m->outputs[i].data) m->def->free_fn(m->outputs[i].data);
        m->outputs[i].data = NULL;
    }
    m->has_outputs = 0;
}

void flowc_lib_destroy(flowc_lib_model *m) {
    if (!m) return;
    if (m->outputs) free_outputs(m);
    if (m->inputs && m->input_bound)
        for (int32_t i = 0; i < m->def->n_inputs; i++)
            if (!m->input_bound[i]) free(m->inputs[i].data);
    if (m->vars)
        for (int32_t i = 0; i < m->def->n_vars; i++) free(m->vars[i].value.data);
    free(m->vars);
    free(m->var_ptrs);
    free(m->stream_counters);
    free(m->stream_ptrs);
    free(m->inputs);
    free(m->input_set);
    free(m->input_bound);
    free(m->input_capacity);
    free(m->outputs);
    const int counted = m->counted;
    free(m);
    if (counted) instance_gone();
}

static size_t at_least_one(int32_t n) { return n > 0 ? (size_t)n : 1; }

flowc_lib_model *flowc_lib_create(const flowc_lib_model_def *def) {
    flowc_lib_model *m = (flowc_lib_model *)calloc(1, sizeof *m);
    if (!m) return NULL;
    m->def = def;
    m->vars = (flowc_var *)calloc(at_least_one(def->n_vars), sizeof(flowc_var));
    m->var_ptrs = (flowc_var **)calloc(at_least_one(def->n_vars), sizeof(flowc_var *));
    m->stream_counters = (uint64_t *)calloc(at_least_one(def->n_streams), sizeof(uint64_t));
    m->stream_ptrs = (uint64_t **)calloc(at_least_one(def->n_streams), sizeof(uint64_t *));
    m->inputs = (flowc_tensor *)calloc(at_least_one(def->n_inputs), sizeof(flowc_tensor));
    m->input_set = (int32_t *)calloc(at_least_one(def->n_inputs), sizeof(int32_t));
    m->input_bound = (int32_t *)calloc(at_least_one(def->n_inputs), sizeof(int32_t));
    m->input_capacity = (size_t *)calloc(at_least_one(def->n_inputs), sizeof(size_t));
    m->outputs = (flowc_tensor *)calloc(at_least_one(def->n_outputs), sizeof(flowc_tensor));
    if (!m->vars || !m->var_ptrs || !m->stream_counters || !m->stream_ptrs || !m->inputs
        || !m->input_set || !m->input_bound || !m->input_capacity || !m->outputs) {
        flowc_lib_destroy(m);
        return NULL;
    }
    for (int32_t i = 0; i < def->n_vars; i++) {
        const flowc_lib_var_spec *spec = &def->vars[i];
        flowc_var *v = &m->vars[i];
        if (spec->offset > def->weights_size || spec->nbytes > def->weights_size - spec->offset) {
            flowc_lib_destroy(m);          /* tables inconsistent with the blob: refuse */
            return NULL;
        }
        v->value.data = flowc_alloc((size_t)spec->nbytes);
        if (!v->value.data) {
            flowc_lib_destroy(m);
            return NULL;
        }
        if (spec->nbytes) memcpy(v->value.data, def->weights + spec->offset, (size_t)spec->nbytes);
        v->value.rank = spec->rank;
        v->value.dtype = spec->dtype;
        for (int32_t d = 0; d < spec->rank; d++) v->value.dims[d] = spec->dims[d];
        v->capacity = (int64_t)spec->nbytes;
        v->initialized = 1;
        v->dtype = spec->dtype;
        snprintf(v->name, sizeof v->name, "%s", spec->name);
        m->var_ptrs[i] = v;
    }
    for (int32_t i = 0; i < def->n_streams; i++) m->stream_ptrs[i] = &m->stream_counters[i];
    m->rt.vars = m->var_ptrs;
    m->rt.streams = m->stream_ptrs;
    m->rt.queues = NULL;
    m->rt.rendezvous = NULL;
    m->rt.timeout_ms = 0;
    m->rt.host = NULL;
    m->rt.host_call = refuse_host_call;
    instance_made(def);
    m->counted = 1;
    return m;
}

int32_t flowc_lib_find(const flowc_lib_tensor_spec *specs, int32_t n, const char *name) {
    if (!name) return -1;
    for (int32_t i = 0; i < n; i++)
        if (strcmp(specs[i].name, name) == 0) return i;
    return -1;
}

/* What set_input and bind_input start with: clears the model's error and checks a value for
 * input ``index`` (the model is there, the index, dtype, rank, every dim known at compile
 * time, the size, and that ``data`` is there when the value has elements); 0 with its size in
 * ``*nbytes_out``, or the error code (the model's error says why). */
static int check_input(flowc_lib_model *m, int32_t index, const void *data, int32_t dtype,
                       int32_t rank, const int64_t *dims, size_t *nbytes_out) {
    if (!m) return FLOWC_INVALID_ARGUMENT;
    clear_error(m);
    const flowc_lib_model_def *def = m->def;
    if (index < 0 || index >= def->n_inputs)
        return set_error(m, FLOWC_INVALID_ARGUMENT, "", "",
                         "input index %d is out of range: model '%s' has %d input(s)",
                         (int)index, def->name, (int)def->n_inputs);
    const flowc_lib_tensor_spec *spec = &def->inputs[index];
    char want[160], got[160];           /* formatted only for an error */
    if (rank < 0 || rank > FLOWC_MAX_RANK) {
        spec_text(want, sizeof want, spec->dtype, spec->rank, spec->dims);
        return set_error(m, FLOWC_INVALID_ARGUMENT, spec->node, spec->location,
                         "input '%s' expects %s; got rank %d", spec->name, want, (int)rank);
    }
    if (rank > 0 && !dims)
        return set_error(m, FLOWC_INVALID_ARGUMENT, spec->node, spec->location,
                         "input '%s': dims is NULL for a rank-%d value", spec->name, (int)rank);
    for (int32_t d = 0; d < rank; d++)
        if (dims[d] < 0)
            return set_error(m, FLOWC_INVALID_ARGUMENT, spec->node, spec->location,
                             "input '%s': dim %d is negative (%lld)", spec->name, (int)d,
                             (long long)dims[d]);
    int fits = dtype == spec->dtype && rank == spec->rank;
    for (int32_t d = 0; fits && d < rank; d++)
        if (spec->dims[d] >= 0 && spec->dims[d] != dims[d]) fits = 0;
    if (!fits) {
        spec_text(want, sizeof want, spec->dtype, spec->rank, spec->dims);
        spec_text(got, sizeof got, dtype, rank, dims);
        return set_error(m, FLOWC_INVALID_ARGUMENT, spec->node, spec->location,
                         "input '%s' expects %s; got %s", spec->name, want, got);
    }
    const size_t itemsize = itemsize_of(dtype);
    int64_t count = 1;
    for (int32_t d = 0; d < rank; d++) {
        if (dims[d] && count > (INT64_MAX / (int64_t)itemsize) / dims[d]) {
            spec_text(got, sizeof got, dtype, rank, dims);
            return set_error(m, FLOWC_INVALID_ARGUMENT, spec->node, spec->location,
                             "input '%s': %s is too large", spec->name, got);
        }
        count *= dims[d];
    }
    const size_t nbytes = (size_t)count * itemsize;
    if (nbytes && !data) {
        spec_text(got, sizeof got, dtype, rank, dims);
        return set_error(m, FLOWC_INVALID_ARGUMENT, spec->node, spec->location,
                         "input '%s': data is NULL for %s", spec->name, got);
    }
    *nbytes_out = nbytes;
    return 0;
}

static void set_shape(flowc_lib_model *m, int32_t index, int32_t dtype, int32_t rank,
                      const int64_t *dims) {
    flowc_tensor *t = &m->inputs[index];
    t->rank = rank;
    t->dtype = dtype;
    for (int32_t d = 0; d < FLOWC_MAX_RANK; d++) t->dims[d] = d < rank ? dims[d] : 0;
    m->input_set[index] = 1;
}

int flowc_lib_set_input(flowc_lib_model *m, int32_t index, const void *data, int32_t dtype,
                        int32_t rank, const int64_t *dims) {
    size_t nbytes;
    const int rc = check_input(m, index, data, dtype, rank, dims, &nbytes);
    if (rc) return rc;
    flowc_tensor *t = &m->inputs[index];
    if (m->input_bound[index] || !t->data || nbytes > m->input_capacity[index]) {
        /* a buffer of its own, kept for the next value of the same size or smaller (never
         * the caller's buffer of a bind_input before: that one is not written) */
        void *copy = flowc_alloc(nbytes);
        if (!copy) {
            const flowc_lib_tensor_spec *spec = &m->def->inputs[index];
            return set_error(m, FLOWC_RESOURCE_EXHAUSTED, spec->node, spec->location,
                             "out of memory copying input '%s' (%zu bytes)", spec->name,
                             nbytes);
        }
        if (!m->input_bound[index]) free(t->data);
        t->data = copy;
        m->input_bound[index] = 0;
        m->input_capacity[index] = nbytes;
    }
    if (nbytes) memcpy(t->data, data, nbytes);
    set_shape(m, index, dtype, rank, dims);
    return 0;
}

int flowc_lib_bind_input(flowc_lib_model *m, int32_t index, const void *data, int32_t dtype,
                         int32_t rank, const int64_t *dims) {
    size_t nbytes;
    const int rc = check_input(m, index, data, dtype, rank, dims, &nbytes);
    if (rc) return rc;
    flowc_tensor *t = &m->inputs[index];
    if (!m->input_bound[index]) free(t->data);      /* the copy of an earlier set_input */
    /* The step only reads its feeds (the Python runtime hands it numpy arrays the same way). */
    t->data = nbytes ? (void *)data : NULL;
    m->input_bound[index] = 1;
    m->input_capacity[index] = 0;
    set_shape(m, index, dtype, rank, dims);
    return 0;
}

/* The index of ``m``'s input ``name``; -1 (the error set: FLOWC_NOT_FOUND) when it has none. */
static int32_t input_named(flowc_lib_model *m, const char *name) {
    const int32_t index = flowc_lib_find(m->def->inputs, m->def->n_inputs, name);
    if (index < 0) {
        clear_error(m);
        set_error(m, FLOWC_NOT_FOUND, "", "", "model '%s' has no input named '%s'",
                  m->def->name, name ? name : "(null)");
    }
    return index;
}

int flowc_lib_set_input_by_name(flowc_lib_model *m, const char *name, const void *data,
                                int32_t dtype, int32_t rank, const int64_t *dims) {
    if (!m) return FLOWC_INVALID_ARGUMENT;
    const int32_t index = input_named(m, name);
    return index < 0 ? FLOWC_NOT_FOUND : flowc_lib_set_input(m, index, data, dtype, rank, dims);
}

int flowc_lib_bind_input_by_name(flowc_lib_model *m, const char *name, const void *data,
                                 int32_t dtype, int32_t rank, const int64_t *dims) {
    if (!m) return FLOWC_INVALID_ARGUMENT;
    const int32_t index = input_named(m, name);
    return index < 0 ? FLOWC_NOT_FOUND : flowc_lib_bind_input(m, index, data, dtype, rank, dims);
}

int flowc_lib_run(flowc_lib_model *m) {
    if (!m) return FLOWC_INVALID_ARGUMENT;
    clear_error(m);
    const flowc_lib_model_def *def = m->def;
    for (int32_t i = 0; i < def->n_inputs; i++)
        if (!m->input_set[i])
            return set_error(m, FLOWC_FAILED_PRECONDITION, def->inputs[i].node,
                             def->inputs[i].location,
                             "input '%s' was not set (set every input before running)",
                             def->inputs[i].name);
    free_outputs(m);                    /* back to the pool: this run's outputs reuse them */
    flowc_status st;
    memset(&st, 0, sizeof st);
    memset(m->outputs, 0, at_least_one(def->n_outputs) * sizeof(flowc_tensor));
    const int rc = def->entry(m->inputs, m->outputs, &m->rt, NULL, 0, &st);
    if (rc != 0) {
        memset(m->outputs, 0, at_least_one(def->n_outputs) * sizeof(flowc_tensor));
        return set_error(m, st.code ? st.code : rc, st.node, st.location, "%s", st.message);
    }
    m->has_outputs = 1;
    return 0;
}

int flowc_lib_get_output(flowc_lib_model *m, int32_t index, const void **data, int32_t *dtype,
                         int32_t *rank, const int64_t **dims) {
    if (!m) return FLOWC_INVALID_ARGUMENT;
    clear_error(m);
    const flowc_lib_model_def *def = m->def;
    if (index < 0 || index >= def->n_outputs)
        return set_error(m, FLOWC_INVALID_ARGUMENT, "", "",
                         "output index %d is out of range: model '%s' has %d output(s)",
                         (int)index, def->name, (int)def->n_outputs);
    if (!m->has_outputs)
        return set_error(m, FLOWC_FAILED_PRECONDITION, def->outputs[index].node,
                         def->outputs[index].location,
                         "no value for output '%s': run the model first (a failed run leaves "
                         "no outputs)", def->outputs[index].name);
    const flowc_tensor *t = &m->outputs[index];
    if (data) *data = t->data;
    if (dtype) *dtype = t->dtype ? t->dtype : def->outputs[index].dtype;
    if (rank) *rank = t->rank;
    if (dims) *dims = t->dims;
    return 0;
}

int flowc_lib_get_output_by_name(flowc_lib_model *m, const char *name, const void **data,
                                 int32_t *dtype, int32_t *rank, const int64_t **dims) {
    if (!m) return FLOWC_INVALID_ARGUMENT;
    const int32_t index = flowc_lib_find(m->def->outputs, m->def->n_outputs, name);
    if (index < 0) {
        clear_error(m);
        return set_error(m, FLOWC_NOT_FOUND, "", "", "model '%s' has no output named '%s'",
                         m->def->name, name ? name : "(null)");
    }
    return flowc_lib_get_output(m, index, data, dtype, rank, dims);
}

const char *flowc_lib_last_error(const flowc_lib_model *m) {
    if (!m) return "no model (create returned NULL: out of memory)";
    return m->error;
}
