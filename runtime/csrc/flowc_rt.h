/* flowc C runtime ABI: what generated modules include and link against.
 *
 * A compiled device subgraph exports
 *   int flowc_entry(const flowc_tensor *feeds, flowc_tensor *fetches, const flowc_runtime *rt,
 *                   void *rendezvous, int64_t timeout_ms, flowc_status *st);
 * which runs the subgraph's kernels in a static order. Fetched tensors own their data, a block of
 * the buffer pool (flowc_pool_alloc, below); the caller releases it with the module's exported
 * flowc_free.
 *
 * State lives in the runtime, outside any step: ``rt->vars`` holds the variables the step uses
 * (in the order of the artifact manifest), ``rt->streams`` the counters of its random ops (each
 * run reserves numbers by advancing its counter), and ``rt->host_call`` lets a kernel ask the
 * runtime to run a host op (checkpoint files). ``rendezvous`` is the step's table of tensors
 * in flight between devices (see below); it is per call, so steps may run concurrently. Variable buffers are malloc'd memory owned by
 * the variable; generated code replaces them with flowc_alloc/free.
 */
#ifndef FLOWC_RT_H
#define FLOWC_RT_H

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

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
    int32_t lock;                /* held by a kernel reading or updating the value */
    int32_t reserved;
    char name[128];
} flowc_var;

/* Reads and updates of one variable from concurrent steps exclude each other (TensorFlow's
   resource-variable mutex), so concurrent AssignAdds add up exactly. */
static inline void flowc_var_lock(flowc_var *v) {
    while (__atomic_exchange_n(&v->lock, 1, __ATOMIC_ACQUIRE)) {
        while (__atomic_load_n(&v->lock, __ATOMIC_RELAXED)) sched_yield();
    }
}

static inline void flowc_var_unlock(flowc_var *v) {
    __atomic_store_n(&v->lock, 0, __ATOMIC_RELEASE);
}

typedef struct flowc_runtime {
    flowc_var **vars;
    uint64_t **streams;
    void **queues;               /* flowc_queue *: the step's queues (manifest order) */
    void *rendezvous;            /* set per call by flowc_entry */
    int64_t timeout_ms;          /* set per call: the step's deadline for blocking ops (<= 0: none) */
    void *host;
    int (*host_call)(void *host, const char *op, const char *node, const char *attrs,
                     int32_t n_in, const flowc_tensor *in, int32_t n_out, flowc_tensor *out,
                     flowc_status *st);
} flowc_runtime;

/* The variable a resource tensor points at. */
#define FLOWC_VAR(t) ((flowc_var *)(t).data)

/* Status codes. Each is one of TensorFlow's error classes in Python (runtime/errors.py,
   class_for_status; FLOWC_ERROR is UnknownError); the numbers are flowc's ABI, not TF's. */
enum { FLOWC_OK = 0, FLOWC_ERROR = 1, FLOWC_OUT_OF_RANGE = 2, FLOWC_INVALID_ARGUMENT = 3,
       FLOWC_RESOURCE_EXHAUSTED = 4,
       FLOWC_FAILED_PRECONDITION = 5, FLOWC_NOT_FOUND = 6, FLOWC_DATA_LOSS = 7,
       FLOWC_DEADLINE_EXCEEDED = 8, FLOWC_ABORTED = 9, FLOWC_UNAVAILABLE = 10,
       FLOWC_CANCELLED = 11, FLOWC_UNIMPLEMENTED = 12, FLOWC_INTERNAL = 13,
       FLOWC_ALREADY_EXISTS = 14, FLOWC_PERMISSION_DENIED = 15, FLOWC_UNAUTHENTICATED = 16 };

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

/* FLOWC_SANITIZE=address (runtime/sanitize.py): memory handed out in larger pieces than asked
 * for (flowc_alloc's 64-byte rounding, the pool's size classes) has the bytes past the request
 * poisoned, and a pooled block is poisoned while it waits in a free list, so AddressSanitizer
 * reports a kernel that reads or writes past a tensor, or one given back, as it would for
 * malloc'd memory. Without AddressSanitizer these are no-ops. */
#if defined(__SANITIZE_ADDRESS__)
#define FLOWC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FLOWC_ASAN 1
#endif
#endif
#ifdef FLOWC_ASAN
#include <sanitizer/asan_interface.h>
#define FLOWC_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define FLOWC_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define FLOWC_POISON(p, n) ((void)(p), (void)(n))
#define FLOWC_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* Buffers of FLOWC_HUGE_PAGE_MIN bytes and more (an embedding table, a large arena) are
 * aligned to 2 MiB and asked to be backed by transparent huge pages: rows gathered from all
 * over a 256 MiB table then miss the TLB far less (one entry maps 2 MiB instead of 4 KiB).
 * Where the kernel does not offer them, madvise fails and the buffer is an ordinary one. */
#define FLOWC_HUGE_PAGE (2u << 20)
#define FLOWC_HUGE_PAGE_MIN (16u << 20)

/* 64-byte aligned, never NULL for a successful zero-byte request. */
static inline void *flowc_alloc(size_t nbytes) {
    size_t n = (nbytes + 63) & ~(size_t)63;
#ifdef MADV_HUGEPAGE
    if (n >= FLOWC_HUGE_PAGE_MIN) {
        n = (n + FLOWC_HUGE_PAGE - 1) & ~(size_t)(FLOWC_HUGE_PAGE - 1);
        void *p = aligned_alloc(FLOWC_HUGE_PAGE, n);
        if (p) madvise(p, n, MADV_HUGEPAGE);
        if (p) FLOWC_POISON((char *)p + nbytes, n - nbytes);
        return p;
    }
#endif
    void *p = aligned_alloc(64, n ? n : 64);
    if (p) FLOWC_POISON((char *)p + nbytes, (n ? n : 64) - nbytes);
    return p;
}

/* A buffer a module keeps for its lifetime and reads every step (oneDNN's reordered filters
 * and scratchpads, arena blocks) is 2 MiB aligned from FLOWC_HUGE_PAGE_KEPT_MIN bytes, and the
 * whole 2 MiB pages it covers are asked for transparent huge pages (its tail, under 2 MiB,
 * stays in small pages: nothing is spent beyond the request). ResNet-18's filters (2.4-9.4 MB
 * each, 45 MB in all) in 4 KiB pages made a batch-1 step 4-8.6% slower, by an amount that
 * changed with where a load's pages landed. Buffers allocated and freed every step keep
 * flowc_alloc's threshold: advised memory taken and given back each step is faulted in anew
 * each time (a 9.4 MB buffer allocated, touched and freed in a loop: 83 us from the ordinary
 * heap, 720 us advised). Freed with free. */
#define FLOWC_HUGE_PAGE_KEPT_MIN (2u << 20)

static inline void *flowc_alloc_kept(size_t nbytes) {
    size_t n = (nbytes + 63) & ~(size_t)63;
#ifdef MADV_HUGEPAGE
    if (n >= FLOWC_HUGE_PAGE_KEPT_MIN) {
        void *p = NULL;
        if (posix_memalign(&p, FLOWC_HUGE_PAGE, n) != 0) return NULL;
        madvise(p, n & ~(size_t)(FLOWC_HUGE_PAGE - 1), MADV_HUGEPAGE);
        FLOWC_POISON((char *)p + nbytes, n - nbytes);
        return p;
    }
#endif
    return flowc_alloc(nbytes);
}

/* --- arena pool: a module's step memory, kept mapped across calls ----------------------------
 * A module with a memory plan runs each call in one block of a fixed size (its tensor slots
 * and its arena). Blocks are taken from the module's pool at the start of a call and put back
 * at the end, so the pages stay mapped and warm instead of being allocated and faulted in every
 * step. Calls of one module may run at once from several threads: each takes its own block
 * (lock-free: every slot is swapped atomically); when all are busy a new block is allocated,
 * and a block returned to a full pool is freed. */
#define FLOWC_ARENA_POOL_SLOTS 16

typedef struct flowc_arena_pool {
    void *slots[FLOWC_ARENA_POOL_SLOTS];
} flowc_arena_pool;

static inline void *flowc_arena_take(flowc_arena_pool *pool, size_t nbytes) {
    for (int i = 0; i < FLOWC_ARENA_POOL_SLOTS; i++) {
        if (!__atomic_load_n(&pool->slots[i], __ATOMIC_RELAXED)) continue;
        void *block = __atomic_exchange_n(&pool->slots[i], NULL, __ATOMIC_ACQUIRE);
        if (block) return block;
    }
    return flowc_alloc_kept(nbytes);               /* kept in the pool across calls */
}

static inline void flowc_arena_give(flowc_arena_pool *pool, void *block) {
    for (int i = 0; i < FLOWC_ARENA_POOL_SLOTS; i++) {
        void *empty = NULL;
        if (!__atomic_load_n(&pool->slots[i], __ATOMIC_RELAXED) &&
            __atomic_compare_exchange_n(&pool->slots[i], &empty, block, false,
                                        __ATOMIC_RELEASE, __ATOMIC_RELAXED))
            return;
    }
    free(block);
}

static inline void flowc_arena_pool_drain(flowc_arena_pool *pool) {
    for (int i = 0; i < FLOWC_ARENA_POOL_SLOTS; i++)
        free(__atomic_exchange_n(&pool->slots[i], NULL, __ATOMIC_ACQUIRE));
}

/* --- buffer pool: fetched results and step buffers the memory plan does not cover -----------
 * A step's fetched outputs (and its dynamic-size buffers) are allocated here instead of with
 * the system allocator. A block starts with a 64-byte header naming its pool and capacity;
 * flowc_pool_release puts it back on its size class's free list, so the next step that needs
 * a buffer of that size gets memory whose pages are already mapped (a fresh 64 MiB buffer from
 * malloc is a new mmap and 16,384 first-touch page faults). The pool is one per process: the
 * runtime creates it and hands it to every module it loads (flowc_use_pool), and a block goes
 * back to the pool in its header, whichever module frees it. Without a pool (a module used
 * alone), blocks still carry a header and are freed straight away. Blocks of at least
 * FLOWC_POOL_MIN_BYTES are cached in size classes of four per power of two, smaller ones in
 * one class per power of two from 64 bytes (a scalar fetched every step then costs no malloc
 * and free: about 700 of the 6,000 instructions of an empty step), up to
 * ``max_cached_bytes`` idle in all. Blocks of
 * FLOWC_HUGE_PAGE_MIN bytes and more ask for huge pages (flowc_alloc): streaming through a
 * 64 MiB result then misses the TLB 512x less often (an elementwise chain over 16M floats,
 * timed in a standalone C harness, ran about 7% faster on one core). */
#define FLOWC_POOL_HEADER 64
#define FLOWC_POOL_MIN_BYTES ((size_t)1 << 14)
#define FLOWC_POOL_CLASSES 160

typedef struct flowc_pool {
    int32_t lock;
    int32_t initialized;
    int64_t max_cached_bytes;    /* idle bytes kept; a block returned beyond this is freed */
    int64_t cached_bytes;        /* idle bytes in the free lists */
    int64_t cached_blocks;
    int64_t live_blocks;         /* handed out and not yet released (pooled or not) */
    int64_t hits;                /* allocations served from a free list */
    int64_t misses;              /* allocations of a size class with no idle block */
    int64_t fail_countdown;      /* test hook: > 0 fails the allocation it counts down to */
    void *free_lists[FLOWC_POOL_CLASSES];
} flowc_pool;

typedef struct flowc_pool_block {
    flowc_pool *pool;            /* NULL: not cached, freed on release */
    size_t capacity;             /* usable bytes after the header */
    int32_t size_class;          /* -1: not cached (no pool, or beyond the last class) */
    int32_t reserved;
    void *next;                  /* free-list link while idle */
} flowc_pool_block;

static inline void flowc_pool_init(flowc_pool *pool, int64_t max_cached_bytes) {
    memset(pool, 0, sizeof *pool);
    pool->max_cached_bytes = max_cached_bytes;
    pool->initialized = 1;
}

/* The size class of an n-byte request and its capacity: below FLOWC_POOL_MIN_BYTES one class
   per power of two from 64 bytes (classes 0 to 8), from there four per power of two. */
#define FLOWC_POOL_SMALL_CLASSES 9
static inline int flowc_pool_class(size_t n, size_t *capacity) {
    if (n < FLOWC_POOL_MIN_BYTES) {
        const int e = n <= 64 ? 6 : 64 - __builtin_clzll((unsigned long long)(n - 1));
        *capacity = (size_t)1 << e;                                 /* 2^(e-1) < n <= 2^e */
        return e - 6;
    }
    int e = 63 - __builtin_clzll((unsigned long long)(n - 1));     /* 2^e < n <= 2^(e+1) */
    const size_t step = (size_t)1 << (e - 2);                       /* an eighth of 2^(e+1) */
    const size_t q = (n + step - 1) / step;                         /* 5, 6, 7 or 8 */
    *capacity = q * step;
    return FLOWC_POOL_SMALL_CLASSES + (e - 13) * 4 + (int)q - 5;
}

static inline void flowc_pool_lock(flowc_pool *pool) {
    while (__atomic_exchange_n(&pool->lock, 1, __ATOMIC_ACQUIRE)) {
        while (__atomic_load_n(&pool->lock, __ATOMIC_RELAXED)) sched_yield();
    }
}

static inline void flowc_pool_unlock(flowc_pool *pool) {
    __atomic_store_n(&pool->lock, 0, __ATOMIC_RELEASE);
}

/* nbytes of 64-byte aligned memory (never NULL for zero bytes), or NULL when out of memory. */
static inline void *flowc_pool_alloc(flowc_pool *pool, size_t nbytes) {
    if (pool && __atomic_load_n(&pool->fail_countdown, __ATOMIC_RELAXED) > 0 &&
        __atomic_sub_fetch(&pool->fail_countdown, 1, __ATOMIC_RELAXED) == 0)
        return NULL;
    size_t capacity = (nbytes + 63) & ~(size_t)63;
    int size_class = -1;
    flowc_pool_block *b = NULL;
    if (pool) {
        size_class = flowc_pool_class(nbytes, &capacity);
        if (size_class >= FLOWC_POOL_CLASSES) size_class = -1;
    }
    if (size_class >= 0) {
        flowc_pool_lock(pool);
        b = (flowc_pool_block *)pool->free_lists[size_class];
        if (b) {
            pool->free_lists[size_class] = b->next;
            pool->cached_bytes -= (int64_t)b->capacity;
            pool->cached_blocks--;
            pool->hits++;
        } else {
            pool->misses++;
        }
        pool->live_blocks++;
        flowc_pool_unlock(pool);
        if (b) {
            char *p = (char *)b + FLOWC_POOL_HEADER;
            FLOWC_UNPOISON(p, nbytes);
            FLOWC_POISON(p + nbytes, b->capacity - nbytes);
            return p;
        }
    } else if (pool) {
        __atomic_add_fetch(&pool->live_blocks, 1, __ATOMIC_RELAXED);
    }
    b = (flowc_pool_block *)flowc_alloc(FLOWC_POOL_HEADER + capacity);   /* huge pages if large */
    if (!b) {
        if (pool) __atomic_sub_fetch(&pool->live_blocks, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    b->pool = size_class >= 0 ? pool : NULL;
    b->capacity = capacity;
    b->size_class = size_class;
    b->reserved = 0;
    b->next = pool;              /* the pool that counts it live (NULL: none) */
    FLOWC_UNPOISON((char *)b + FLOWC_POOL_HEADER, nbytes);
    FLOWC_POISON((char *)b + FLOWC_POOL_HEADER + nbytes, capacity - nbytes);
    return (char *)b + FLOWC_POOL_HEADER;
}

/* Give a block from flowc_pool_alloc back (NULL is ignored). */
static inline void flowc_pool_release(void *p) {
    if (!p) return;
    flowc_pool_block *b = (flowc_pool_block *)((char *)p - FLOWC_POOL_HEADER);
    flowc_pool *pool = b->pool;
    if (!pool) {
        flowc_pool *counted = (flowc_pool *)b->next;
        if (counted) __atomic_sub_fetch(&counted->live_blocks, 1, __ATOMIC_RELAXED);
        free(b);
        return;
    }
    flowc_pool_lock(pool);
    pool->live_blocks--;
    if (pool->cached_bytes + (int64_t)b->capacity <= pool->max_cached_bytes) {
        FLOWC_POISON(p, b->capacity);            /* idle: no kernel may touch it */
        b->next = pool->free_lists[b->size_class];
        pool->free_lists[b->size_class] = b;
        pool->cached_bytes += (int64_t)b->capacity;
        pool->cached_blocks++;
        b = NULL;
    }
    flowc_pool_unlock(pool);
    free(b);
}

/* Free every idle block (blocks in use go back to the pool as usual when released). */
static inline void flowc_pool_trim(flowc_pool *pool) {
    flowc_pool_lock(pool);
    void *lists[FLOWC_POOL_CLASSES];
    memcpy(lists, pool->free_lists, sizeof lists);
    memset(pool->free_lists, 0, sizeof pool->free_lists);
    pool->cached_bytes = 0;
    pool->cached_blocks = 0;
    flowc_pool_unlock(pool);
    for (int c = 0; c < FLOWC_POOL_CLASSES; c++) {
        for (flowc_pool_block *b = (flowc_pool_block *)lists[c]; b;) {
            flowc_pool_block *next = (flowc_pool_block *)b->next;
            free(b);
            b = next;
        }
    }
}

static inline int64_t flowc_floordiv_i64(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static inline int64_t flowc_floormod_i64(int64_t a, int64_t b) {
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

/* --- the rendezvous: tensors in flight between the devices of one step ---------------------
 * One slot per _Send/_Recv pair (numbered by the partition pass). A send copies the tensor
 * into the slot and never blocks; a receive waits for its slot (up to timeout_ms, <= 0: no
 * limit) and takes ownership of the buffer. An abort (a device failed) wakes every receiver.
 * Every module carries this code and exports it, so the runtime can create the table with any
 * module of the step.
 *
 * flowc_rv_put hands over a buffer instead of copying it: a GPU sending to another GPU of the
 * process puts a device buffer, with the function that frees one (``release``) for a table
 * destroyed before anyone took it; NULL means free(). */
typedef struct flowc_rv_slot {
    int32_t full;
    int32_t taken;
    flowc_tensor t;
    void (*release)(void *);
} flowc_rv_slot;

typedef struct flowc_rendezvous {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int32_t aborted;
    int32_t nslots;
    int64_t timeout_ms;
    flowc_rv_slot *slots;
} flowc_rendezvous;

static inline int flowc_rv_init(flowc_rendezvous *rv, int32_t nslots, int64_t timeout_ms) {
    memset(rv, 0, sizeof *rv);
    if (pthread_mutex_init(&rv->mu, NULL) || pthread_cond_init(&rv->cv, NULL)) return 1;
    rv->nslots = nslots;
    rv->timeout_ms = timeout_ms;
    rv->slots = (flowc_rv_slot *)calloc(nslots > 0 ? (size_t)nslots : 1, sizeof(flowc_rv_slot));
    return rv->slots == NULL;
}

static inline void flowc_rv_abort(flowc_rendezvous *rv) {
    pthread_mutex_lock(&rv->mu);
    rv->aborted = 1;
    pthread_cond_broadcast(&rv->cv);
    pthread_mutex_unlock(&rv->mu);
}

static inline void flowc_rv_destroy(flowc_rendezvous *rv) {
    for (int32_t i = 0; i < rv->nslots; i++)
        if (rv->slots[i].full && !rv->slots[i].taken) {
            if (rv->slots[i].release) rv->slots[i].release(rv->slots[i].t.data);
            else free(rv->slots[i].t.data);
        }
    free(rv->slots);
    rv->slots = NULL;
    pthread_cond_destroy(&rv->cv);
    pthread_mutex_destroy(&rv->mu);
}

static inline int64_t flowc_tensor_nbytes(const flowc_tensor *t, size_t itemsize) {
    int64_t n = 1;
    for (int32_t d = 0; d < t->rank; d++) n *= t->dims[d];
    return n * (int64_t)itemsize;
}

/* Hand ``t`` (its buffer included) to ``slot``; on failure the buffer is still the caller's. */
static inline int flowc_rv_put(void *rendezvous, int32_t slot, const flowc_tensor *t,
                               void (*release)(void *), const char *node, const char *loc,
                               flowc_status *st) {
    flowc_rendezvous *rv = (flowc_rendezvous *)rendezvous;
    if (!rv || slot < 0 || slot >= rv->nslots)
        return flowc_fail(st, FLOWC_INTERNAL, node, loc, "no rendezvous slot %d for this step", (int)slot);
    pthread_mutex_lock(&rv->mu);
    flowc_rv_slot *s = &rv->slots[slot];
    if (s->full) {
        pthread_mutex_unlock(&rv->mu);
        return flowc_fail(st, FLOWC_INTERNAL, node, loc, "rendezvous slot %d was sent twice", (int)slot);
    }
    s->t = *t;
    s->release = release;
    s->full = 1;
    pthread_cond_broadcast(&rv->cv);
    pthread_mutex_unlock(&rv->mu);
    return 0;
}

static inline int flowc_rv_send(void *rendezvous, int32_t slot, const flowc_tensor *t,
                                size_t itemsize, const char *node, const char *loc,
                                flowc_status *st) {
    flowc_rendezvous *rv = (flowc_rendezvous *)rendezvous;
    if (!rv || slot < 0 || slot >= rv->nslots)
        return flowc_fail(st, FLOWC_INTERNAL, node, loc, "no rendezvous slot %d for this step", (int)slot);
    const int64_t nbytes = flowc_tensor_nbytes(t, itemsize);
    void *copy = flowc_alloc((size_t)nbytes);
    if (!copy) return flowc_fail(st, FLOWC_RESOURCE_EXHAUSTED, node, loc, "out of memory sending %lld bytes", (long long)nbytes);
    if (nbytes) memcpy(copy, t->data, (size_t)nbytes);
    flowc_tensor owned = *t;
    owned.data = copy;
    const int rc = flowc_rv_put(rendezvous, slot, &owned, NULL, node, loc, st);
    if (rc) free(copy);
    return rc;
}

static inline int flowc_rv_recv(void *rendezvous, int32_t slot, flowc_tensor *out,
                                const char *key, const char *node, const char *loc,
                                flowc_status *st) {
    flowc_rendezvous *rv = (flowc_rendezvous *)rendezvous;
    if (!rv || slot < 0 || slot >= rv->nslots)
        return flowc_fail(st, FLOWC_INTERNAL, node, loc, "no rendezvous slot %d for this step", (int)slot);
    struct timespec deadline;
    if (rv->timeout_ms > 0) {
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += rv->timeout_ms / 1000;
        deadline.tv_nsec += (rv->timeout_ms % 1000) * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) { deadline.tv_sec += 1; deadline.tv_nsec -= 1000000000L; }
    }
    pthread_mutex_lock(&rv->mu);
    flowc_rv_slot *s = &rv->slots[slot];
    while (!s->full && !rv->aborted) {
        if (rv->timeout_ms > 0) {
            if (pthread_cond_timedwait(&rv->cv, &rv->mu, &deadline) == ETIMEDOUT && !s->full) {
                pthread_mutex_unlock(&rv->mu);
                return flowc_fail(st, FLOWC_DEADLINE_EXCEEDED, node, loc,
                                  "timed out after %lld ms waiting for %s", (long long)rv->timeout_ms, key);
            }
        } else {
            pthread_cond_wait(&rv->cv, &rv->mu);
        }
    }
    if (!s->full) {
        pthread_mutex_unlock(&rv->mu);
        return flowc_fail(st, FLOWC_ABORTED, node, loc, "step aborted while waiting for %s", key);
    }
    *out = s->t;
    s->taken = 1;
    pthread_mutex_unlock(&rv->mu);
    return 0;
}

/* --- queues: FIFO of elements (tuples of tensors), blocking with backpressure --------------
 * A queue lives in the runtime's store, outside any step; every module carries this code and
 * exports init/destroy, so the store creates a queue with the module of the first step that
 * uses it. Elements are owned copies; a dequeue hands their buffers to the step. */
#define FLOWC_QUEUE_MAX_COMPONENTS 16

typedef struct flowc_queue {
    pthread_mutex_t mu;
    pthread_cond_t changed;      /* an element came or went, or the queue closed */
    int32_t ncomponents;
    int32_t closed;
    int32_t cancelled;           /* closed with cancel_pending_enqueues */
    int32_t rng_seeded;          /* a shuffling queue's generator is set (first dequeue) */
    int64_t capacity;            /* elements; <= 0: unbounded */
    int64_t head, count, slots;  /* a ring of ``slots`` elements */
    uint64_t rng;                /* splitmix64 state of a RandomShuffleQueue's dequeues */
    flowc_tensor *items;         /* slots * ncomponents */
    char name[128];
} flowc_queue;

static inline int flowc_queue_init(flowc_queue *q, int32_t ncomponents, int64_t capacity,
                                   const char *name) {
    memset(q, 0, sizeof *q);
    if (ncomponents < 1 || ncomponents > FLOWC_QUEUE_MAX_COMPONENTS) return 1;
    if (pthread_mutex_init(&q->mu, NULL) || pthread_cond_init(&q->changed, NULL)) return 1;
    q->ncomponents = ncomponents;
    q->capacity = capacity;
    snprintf(q->name, sizeof q->name, "%s", name);
    return 0;
}

static inline void flowc_queue_destroy(flowc_queue *q) {
    for (int64_t i = 0; i < q->count; i++) {
        const int64_t s = (q->head + i) % q->slots;
        for (int32_t c = 0; c < q->ncomponents; c++) free(q->items[s * q->ncomponents + c].data);
    }
    free(q->items);
    q->items = NULL;
    pthread_cond_destroy(&q->changed);
    pthread_mutex_destroy(&q->mu);
}

static inline void flowc_deadline(struct timespec *deadline, int64_t timeout_ms) {
    clock_gettime(CLOCK_REALTIME, deadline);
    deadline->tv_sec += timeout_ms / 1000;
    deadline->tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (deadline->tv_nsec >= 1000000000L) { deadline->tv_sec += 1; deadline->tv_nsec -= 1000000000L; }
}

/* Wait on the queue's condition (lock held); 1 when the deadline passed. */
static inline int flowc_queue_wait(flowc_queue *q, int64_t timeout_ms, const struct timespec *deadline) {
    if (timeout_ms > 0)
        return pthread_cond_timedwait(&q->changed, &q->mu, deadline) == ETIMEDOUT;
    pthread_cond_wait(&q->changed, &q->mu);
    return 0;
}

/* Enqueue one element: components[c] sliced at ``row`` of its leading dim when ``row >= 0``
   (enqueue_many), whole otherwise. Blocks while the queue is full. */
static inline int flowc_queue_put(flowc_queue *q, const flowc_tensor *components,
                                  const size_t *itemsize, int64_t row, int64_t timeout_ms,
                                  const char *node, const char *loc, flowc_status *st) {
    flowc_tensor elem[FLOWC_QUEUE_MAX_COMPONENTS];
    for (int32_t c = 0; c < q->ncomponents; c++) {
        const flowc_tensor *t = &components[c];
        elem[c] = *t;
        int64_t nbytes = flowc_tensor_nbytes(t, itemsize[c]);
        const char *src = (const char *)t->data;
        if (row >= 0) {
            nbytes = t->dims[0] ? nbytes / t->dims[0] : 0;
            src += row * nbytes;
            elem[c].rank = t->rank - 1;
            for (int32_t d = 0; d + 1 < t->rank; d++) elem[c].dims[d] = t->dims[d + 1];
        }
        elem[c].data = flowc_alloc((size_t)nbytes);
        if (!elem[c].data) {
            for (int32_t k = 0; k < c; k++) free(elem[k].data);
            return flowc_fail(st, FLOWC_RESOURCE_EXHAUSTED, node, loc, "out of memory enqueueing");
        }
        if (nbytes) memcpy(elem[c].data, src, (size_t)nbytes);
    }
    struct timespec deadline;
    if (timeout_ms > 0) flowc_deadline(&deadline, timeout_ms);
    pthread_mutex_lock(&q->mu);
    int timed_out = 0;
    while (!q->closed && q->capacity > 0 && q->count >= q->capacity && !timed_out)
        timed_out = flowc_queue_wait(q, timeout_ms, &deadline);
    if (q->closed || timed_out || (q->capacity > 0 && q->count >= q->capacity)) {
        const int closed = q->closed;
        pthread_mutex_unlock(&q->mu);
        for (int32_t c = 0; c < q->ncomponents; c++) free(elem[c].data);
        if (closed)
            return flowc_fail(st, FLOWC_CANCELLED, node, loc, "queue '%s' is closed", q->name);
        return flowc_fail(st, FLOWC_DEADLINE_EXCEEDED, node, loc,
                          "timed out after %lld ms: queue '%s' is full", (long long)timeout_ms, q->name);
    }
    if (q->count == q->slots) {                 /* grow the ring */
        const int64_t slots = q->slots ? 2 * q->slots : 16;
        flowc_tensor *items = (flowc_tensor *)calloc((size_t)(slots * q->ncomponents), sizeof(flowc_tensor));
        if (!items) {
            pthread_mutex_unlock(&q->mu);
            for (int32_t c = 0; c < q->ncomponents; c++) free(elem[c].data);
            return flowc_fail(st, FLOWC_RESOURCE_EXHAUSTED, node, loc, "out of memory growing queue '%s'", q->name);
        }
        for (int64_t i = 0; i < q->count; i++)
            memcpy(&items[i * q->ncomponents], &q->items[((q->head + i) % q->slots) * q->ncomponents],
                   sizeof(flowc_tensor) * (size_t)q->ncomponents);
        free(q->items);
        q->items = items;
        q->slots = slots;
        q->head = 0;
    }
    const int64_t s = (q->head + q->count) % q->slots;
    memcpy(&q->items[s * q->ncomponents], elem, sizeof(flowc_tensor) * (size_t)q->ncomponents);
    q->count++;
    pthread_cond_broadcast(&q->changed);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

/* splitmix64: a RandomShuffleQueue picks each dequeued element with it; runtime/queues.py
   (the interpreter's queue) draws the same numbers from the same (seed, seed2). */
static inline uint64_t flowc_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Wait until ``want`` elements are there (or, with ``allow_fewer``, the queue is closed with
   at least one); take ``*got`` of them into ``out[k * ncomponents + c]`` (buffers handed
   over). Lock released on return.
   ``shuffle`` (a RandomShuffleQueue): until the queue is closed, wait for ``want +
   min_after_dequeue`` elements, and take each element at random among those there (the
   generator is seeded from ``seed``/``seed2`` at the queue's first such dequeue; both 0: from
   the clock, as TensorFlow seeds nondeterministically). */
static inline int flowc_queue_take_ex(flowc_queue *q, int64_t want, int allow_fewer, flowc_tensor *out,
                                      int64_t *got, int64_t timeout_ms, int shuffle,
                                      int64_t min_after_dequeue, int64_t seed, int64_t seed2,
                                      const char *node, const char *loc, flowc_status *st) {
    struct timespec deadline;
    if (timeout_ms > 0) flowc_deadline(&deadline, timeout_ms);
    const int64_t ready = want + (shuffle && min_after_dequeue > 0 ? min_after_dequeue : 0);
    pthread_mutex_lock(&q->mu);
    int timed_out = 0;
    while (q->count < ready && !q->closed && !timed_out)
        timed_out = flowc_queue_wait(q, timeout_ms, &deadline);
    int64_t n = q->count < want ? q->count : want;
    if (!q->closed && q->count < ready) n = -1;            /* timed out short of min_after */
    if (n < want && !(q->closed && allow_fewer && n > 0)) {
        const int64_t have = q->count;
        const int closed = q->closed;
        pthread_mutex_unlock(&q->mu);
        if (closed)
            return flowc_fail(st, FLOWC_OUT_OF_RANGE, node, loc,
                              "queue '%s' is closed and has insufficient elements (requested %lld, "
                              "current size %lld)", q->name, (long long)want, (long long)have);
        return flowc_fail(st, FLOWC_DEADLINE_EXCEEDED, node, loc,
                          "timed out after %lld ms waiting for %lld element(s) of queue '%s' (size %lld)",
                          (long long)timeout_ms, (long long)ready, q->name, (long long)have);
    }
    if (shuffle && !q->rng_seeded) {
        uint64_t s0 = (uint64_t)seed * 0x9E3779B97F4A7C15ULL ^ (uint64_t)seed2;
        if (seed == 0 && seed2 == 0) {
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            s0 = (uint64_t)now.tv_nsec ^ ((uint64_t)now.tv_sec << 32) ^ (uint64_t)(uintptr_t)q;
        }
        q->rng = s0;
        q->rng_seeded = 1;
    }
    for (int64_t k = 0; k < n; k++) {
        if (shuffle && q->count > 1) {                     /* bring a random element to the head */
            const int64_t pick = (q->head + (int64_t)(flowc_splitmix64(&q->rng) % (uint64_t)q->count)) % q->slots;
            flowc_tensor tmp[FLOWC_QUEUE_MAX_COMPONENTS];
            const size_t sz = sizeof(flowc_tensor) * (size_t)q->ncomponents;
            memcpy(tmp, &q->items[pick * q->ncomponents], sz);
            memcpy(&q->items[pick * q->ncomponents], &q->items[q->head * q->ncomponents], sz);
            memcpy(&q->items[q->head * q->ncomponents], tmp, sz);
        }
        memcpy(&out[k * q->ncomponents], &q->items[q->head * q->ncomponents],
               sizeof(flowc_tensor) * (size_t)q->ncomponents);
        q->head = (q->head + 1) % q->slots;
        q->count--;
    }
    *got = n;
    pthread_cond_broadcast(&q->changed);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

static inline int flowc_queue_take(flowc_queue *q, int64_t want, int allow_fewer, flowc_tensor *out,
                                   int64_t *got, int64_t timeout_ms, const char *node,
                                   const char *loc, flowc_status *st) {
    return flowc_queue_take_ex(q, want, allow_fewer, out, got, timeout_ms, 0, 0, 0, 0, node, loc, st);
}

static inline void flowc_queue_close(flowc_queue *q, int cancel_pending_enqueues) {
    pthread_mutex_lock(&q->mu);
    q->closed = 1;
    if (cancel_pending_enqueues) q->cancelled = 1;
    pthread_cond_broadcast(&q->changed);
    pthread_mutex_unlock(&q->mu);
}

static inline int64_t flowc_queue_count(flowc_queue *q) {
    pthread_mutex_lock(&q->mu);
    const int64_t n = q->count;
    pthread_mutex_unlock(&q->mu);
    return n;
}

#endif /* FLOWC_RT_H */
