/* flowc's CUDA simulator: the part of the CUDA runtime API and of the device language that
 * generated modules use, on the host. A GPU module built for the architecture "sim"
 * (`--cuda-arch sim`, or a session under FLOWC_CUDA_SIMULATOR=1) is compiled by the system
 * C++ compiler with this folder first on the include path, and runs on a CPU, as Numba's CUDA
 * simulator runs Python kernels. It is for checking the generated kernels and their host
 * sequencing where no GPU is at hand; it says nothing about speed, and nothing about what
 * only a real GPU does (separate memory spaces, asynchronous streams, races between threads,
 * an architecture's limits).
 *
 * - A launch runs its blocks one after another. The threads of a block are fibers on the
 *   launching thread, switched at __syncthreads(), so barriers and __shared__ memory behave
 *   as on a GPU. Every other block runs its threads in reverse order, and __shared__ arrays
 *   (marked FLOWC_SHARED_FRESH in the kernel) start each block as 0xFF bytes, so a missing
 *   barrier shows. A kernel whose first thread passes no barrier runs its other threads as
 *   plain calls; a barrier that not every thread of a block reaches, or a launch shape a
 *   GPU refuses, is an error of the launch (cudaGetLastError()).
 * - Device memory is host memory. Each allocation is filled with 0xFF bytes (a NaN in every
 *   float, -1 in every integer), so a kernel that reads what nobody wrote gives itself
 *   away, and ends in a guard band that is checked when it is freed: a kernel that wrote
 *   past the end is reported on stderr (and appended to the file FLOWC_CUDA_SIMULATOR_FAULTS
 *   names, where set), and every later call of the module fails with
 *   cudaErrorIllegalAddress, as a real GPU's context does after such a fault.
 * - The legacy default stream (the one the generated modules compute on) is synchronous;
 *   kernels of one module run one at a time, whatever host thread launches them (the one
 *   compute stream); atomics are host atomics. A stream the module creates (the copy stream
 *   of sends) is a worker thread running its copies, event waits and host functions in
 *   order, later than they were enqueued: a send that reads a buffer the step has already
 *   freed or overwritten, or a step that ends before its copies, shows as on a GPU. Pinned
 *   host memory (cudaMallocHost) is told apart from device memory, so freeing one as the
 *   other is an error, and freed memory of either kind is filled with 0xFF bytes first.
 */
#ifndef FLOWC_CUDA_SIMULATOR_H
#define FLOWC_CUDA_SIMULATOR_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <setjmp.h>
#include <ucontext.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#define FLOWC_CUDA_SIMULATED 1

/* ---- the device language ---- */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static thread_local        /* one block runs at a time per host thread */

struct uint3 { unsigned x, y, z; };
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
static thread_local uint3 threadIdx, blockIdx;
static thread_local dim3 blockDim, gridDim;

static inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
static inline double __dmul_rn(double a, double b) { volatile double r = a * b; return r; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, sizeof f); return f; }
static inline double __longlong_as_double(long long u) { double f; memcpy(&f, &u, sizeof f); return f; }

template <class T> static inline T atomicAdd(T *p, T v) {
    T old, want;
    __atomic_load(p, &old, __ATOMIC_RELAXED);
    do { want = (T)(old + v); } while (!__atomic_compare_exchange(p, &old, &want, false,
                                                                 __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return old;
}

template <class T> static inline T atomicCAS(T *p, T compare, T value) {
    __atomic_compare_exchange(p, &compare, &value, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return compare;                     /* the old value, as CUDA's atomicCAS returns */
}

/* ---- the runtime API ---- */
enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorPeerAccessAlreadyEnabled = 704,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchFailure = 719,
};
typedef enum cudaError cudaError_t;
enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3, cudaMemcpyDefault = 4,
};
typedef struct flowc_sim_stream *cudaStream_t;
typedef struct flowc_sim_event *cudaEvent_t;
typedef void (*cudaHostFn_t)(void *);
#define CUDART_CB
#define cudaStreamNonBlocking 0x01
#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaEventDisableTiming 0x02

namespace flowc_sim {

/* The module's fault (sticky, as a GPU context's is) and the calling thread's last error. */
static const char *fault = NULL;
static char fault_text[256];
static thread_local cudaError_t last_error = cudaSuccess;
static thread_local const char *last_message = NULL;

static inline cudaError_t fail(cudaError_t e, const char *message) {
    last_error = e;
    last_message = message;
    return e;
}

static inline cudaError_t ok(void) {
    return fault ? fail(cudaErrorIllegalAddress, fault) : cudaSuccess;
}

/* An allocation: a header, the bytes, a guard band. */
static const uint64_t kMagic = 0x666c6f7763736d31ULL;      /* "flowcsm1": device memory */
static const uint64_t kMagicPinned = 0x666c6f7763736832ULL;   /* "flowcsh2": pinned host memory */
static const size_t kHead = 64, kGuard = 64;
static const unsigned char kGuardByte = 0xA5;

static inline cudaError_t allocate(void **p, size_t n, uint64_t magic = kMagic) {
    unsigned char *base = (unsigned char *)malloc(kHead + n + kGuard);
    if (!base) return fail(cudaErrorMemoryAllocation, "out of memory");
    ((uint64_t *)base)[0] = magic;
    ((uint64_t *)base)[1] = n;
    memset(base + kHead, 0xFF, n);
    memset(base + kHead + n, kGuardByte, kGuard);
    *p = base + kHead;
    return ok();
}

static inline cudaError_t release(void *p, uint64_t magic = kMagic) {
    if (!p) return ok();
    unsigned char *base = (unsigned char *)p - kHead;
    if (((uint64_t *)base)[0] != magic)
        return fail(cudaErrorInvalidValue, magic == kMagic
                    ? "cudaFree of a pointer that is not device memory"
                    : "cudaFreeHost of a pointer that is not pinned host memory");
    const size_t n = ((uint64_t *)base)[1];
    for (size_t k = 0; k < kGuard; k++) {
        if (base[kHead + n + k] != kGuardByte) {
            snprintf(fault_text, sizeof fault_text, "flowc CUDA simulator: a kernel wrote past the "
                     "end of a %zu-byte device buffer (byte %zu after it; found when it was freed)",
                     n, k);
            fprintf(stderr, "%s\n", fault_text);
            /* and to FLOWC_CUDA_SIMULATOR_FAULTS, a file, where set (tests check it) */
            const char *log = getenv("FLOWC_CUDA_SIMULATOR_FAULTS");
            FILE *f = log && *log ? fopen(log, "a") : NULL;
            if (f) { fprintf(f, "%s\n", fault_text); fclose(f); }
            fault = fault_text;
            break;
        }
    }
    ((uint64_t *)base)[0] = 0;
    memset(base + kHead, 0xFF, n);          /* a late reader of freed memory sees NaNs */
    free(base);
    return ok();
}

/* The threads of a block, as fibers of the launching host thread. A fiber is made once
   (ucontext, for its own stack) and then switched with _setjmp/_longjmp, which do not touch
   the signal mask (swapcontext makes a system call per switch). A fiber loops: it runs the
   kernel body for whatever block is being run, then waits to be resumed for the next. */
enum { kReady = 0, kWaiting = 1, kDone = 2 };
struct Fiber {
    jmp_buf at;
    void *stack = NULL;
    bool parked = false;                /* between two runs of the body */
};
struct Block {
    static const size_t kStack = 256 * 1024;
    jmp_buf home;
    ucontext_t boot_home, boot;
    std::vector<Fiber> fibers;
    std::vector<char> state;            /* kReady, kWaiting (at a barrier), kDone */
    unsigned current = 0;
    bool as_fibers = true;
    bool misused_barrier = false;
    const std::function<void()> *body = NULL;
    uint64_t generation = 0;            /* blocks run so far: shared memory is fresh per block */
    bool backwards = false;             /* resume order: every other block runs threads last-first */
    std::vector<std::pair<void *, uint64_t> > fresh;   /* __shared__ arrays poisoned, when */
    ~Block() { for (Fiber &f : fibers) if (f.stack) munmap(f.stack, kStack); }
};
static thread_local Block *running = NULL;

static inline void enter_thread(unsigned t) {
    threadIdx.x = t % blockDim.x;
    threadIdx.y = (t / blockDim.x) % blockDim.y;
    threadIdx.z = t / (blockDim.x * blockDim.y);
}

__attribute__((noinline)) static void fiber_main(void) {
    Block *b = running;
    if (!_setjmp(b->fibers[b->current].at))
        swapcontext(&b->boot, &b->boot_home);          /* made: park until first resumed */
    for (;;) {
        b = running;
        b->fibers[b->current].parked = false;
        (*b->body)();
        b->state[b->current] = kDone;
        b->fibers[b->current].parked = true;
        if (!_setjmp(b->fibers[b->current].at)) _longjmp(b->home, 1);
    }
}

__attribute__((noinline)) static void syncthreads(void) {
    Block *b = running;
    if (!b->as_fibers) { b->misused_barrier = true; return; }
    b->state[b->current] = kWaiting;
    if (!_setjmp(b->fibers[b->current].at)) _longjmp(b->home, 1);
}

/* A __shared__ array at the start of a block: garbage (0xFF bytes), as on a GPU, so a read
   of what no thread of this block wrote, or a missing barrier, shows. Called by every thread;
   the first of the block (thread 0 or, running backwards, the last) poisons it. */
static inline void fresh_shared(void *p, size_t n) {
    Block *b = running;
    for (auto &f : b->fresh)
        if (f.first == p) {
            if (f.second != b->generation) { memset(p, 0xFF, n); f.second = b->generation; }
            return;
        }
    memset(p, 0xFF, n);
    b->fresh.push_back(std::make_pair(p, b->generation));
}

/* (Re)make fiber t: a fresh stack frame of fiber_main, parked at its start. */
static bool make_fiber(Block &b, unsigned t) {
    Fiber &f = b.fibers[t];
    if (!f.stack) {
        void *s = mmap(NULL, Block::kStack, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (s == MAP_FAILED) return false;
        f.stack = s;
    }
    if (getcontext(&b.boot) != 0) return false;
    b.boot.uc_stack.ss_sp = f.stack;
    b.boot.uc_stack.ss_size = Block::kStack;
    b.boot.uc_link = NULL;
    makecontext(&b.boot, fiber_main, 0);
    b.current = t;
    if (swapcontext(&b.boot_home, &b.boot) != 0) return false;
    f.parked = true;
    return true;
}

__attribute__((noinline)) static void resume(Block &b, unsigned t) {
    b.current = t;
    enter_thread(t);
    b.state[t] = kReady;
    if (!_setjmp(b.home)) _longjmp(b.fibers[t].at, 1);
}

/* One block: its first thread as a fiber; if it passed no barrier the rest are plain calls,
   else every thread is a fiber, all resumed each time all of them wait at a barrier. Every
   other block runs its threads last-first, so code that reads what another thread writes
   without a barrier between sees it unwritten in one order or the other. */
static cudaError_t run_block(Block &b, unsigned n) {
    b.generation++;
    b.backwards = !b.backwards;
    if (b.fibers.size() < n) b.fibers.resize(n);
    b.state.assign(n, kReady);
    b.as_fibers = true;
    b.misused_barrier = false;
    for (unsigned t = 0; t < n; t++)
        if (!b.fibers[t].parked && !make_fiber(b, t))
            return fail(cudaErrorLaunchFailure, "the CUDA simulator cannot make a fiber");
    const unsigned first = b.backwards ? n - 1 : 0;
#define FLOWC_SIM_EACH_THREAD(t) \
    for (unsigned k_ = 0, t = first; k_ < n; k_++, t = b.backwards ? n - 1 - k_ : k_)
    resume(b, first);
    if (b.state[first] == kDone) {
        b.as_fibers = false;
        FLOWC_SIM_EACH_THREAD(t) {
            if (t == first) continue;
            enter_thread(t);
            b.current = t;
            (*b.body)();
        }
        if (b.misused_barrier)
            return fail(cudaErrorLaunchFailure, "__syncthreads() reached by some threads of a "
                        "block and not by the first one run");
        return cudaSuccess;
    }
    FLOWC_SIM_EACH_THREAD(t) if (t != first) resume(b, t);
    for (;;) {
        unsigned done = 0;
        for (unsigned t = 0; t < n; t++) done += b.state[t] == kDone;
        if (done == n) return cudaSuccess;
        if (done != 0) {
            /* Some threads ended while others wait: on a GPU the waiting ones hang. Their
               fibers are abandoned and made again for the next launch. */
            for (unsigned t = 0; t < n; t++)
                if (b.state[t] == kWaiting) b.fibers[t].parked = false;
            return fail(cudaErrorLaunchFailure, "__syncthreads() not reached by every thread "
                        "of a block (some threads had returned)");
        }
        FLOWC_SIM_EACH_THREAD(t) resume(b, t);
    }
#undef FLOWC_SIM_EACH_THREAD
}

static inline cudaError_t run_grid(dim3 grid, dim3 block, const std::function<void()> &body) {
    if (fault) return ok();
    const unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    if (threads == 0 || threads > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 ||
        grid.z == 0 || grid.y > 65535 || grid.z > 65535)
        return fail(cudaErrorInvalidConfiguration, "invalid configuration argument");
    static thread_local Block b;
    if (running) return fail(cudaErrorLaunchFailure, "a launch from inside a kernel");
    /* One kernel at a time, as on a GPU's one compute stream (the generated modules run every
       step on the legacy default stream): kernels of steps running in other host threads
       wait here rather than run at the same time. Per module; steps of one step signature
       share their module. */
    static std::mutex stream;
    std::lock_guard<std::mutex> in_order(stream);
    b.body = &body;
    running = &b;
    blockDim = block;
    gridDim = grid;
    cudaError_t e = cudaSuccess;
    for (unsigned z = 0; z < grid.z && e == cudaSuccess; z++)
        for (unsigned y = 0; y < grid.y && e == cudaSuccess; y++)
            for (unsigned x = 0; x < grid.x && e == cudaSuccess; x++) {
                blockIdx.x = x; blockIdx.y = y; blockIdx.z = z;
                e = run_block(b, (unsigned)threads);
            }
    running = NULL;
    return e;
}

template <class... P> struct Launch {
    void (*kernel)(P...);
    dim3 grid, block;
    template <class... A> void operator()(A... args) const {
        static_assert(sizeof...(A) == sizeof...(P), "a launch with the wrong number of arguments");
        const std::function<void()> body = [&]() { kernel(static_cast<P>(args)...); };
        run_grid(grid, block, body);
    }
};

template <class... P>
static inline Launch<P...> launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t shared,
                                  cudaStream_t) {
    (void)shared;              /* dynamic shared memory: no generated kernel asks for any */
    return Launch<P...>{kernel, grid, block};
}

/* A stream the module created: a worker thread that runs its work in order. The legacy
   default stream (and NULL) runs work at once, on the calling thread. */
struct Worker {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()> > work;
    bool busy = false;
    Worker() { std::thread([this] { loop(); }).detach(); }   /* lives as long as the process */
    void loop() {
        std::unique_lock<std::mutex> lock(mu);
        for (;;) {
            cv.wait(lock, [this] { return !work.empty(); });
            std::function<void()> next = std::move(work.front());
            work.pop_front();
            busy = true;
            lock.unlock();
            next();
            lock.lock();
            busy = false;
            cv.notify_all();
        }
    }
    void push(std::function<void()> fn) {
        std::lock_guard<std::mutex> lock(mu);
        work.push_back(std::move(fn));
        cv.notify_all();
    }
    void drain() {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [this] { return work.empty() && !busy; });
    }
};

static inline Worker *worker_of(cudaStream_t s) {
    return (s == NULL || s == cudaStreamLegacy) ? NULL : (Worker *)(void *)s;
}

static inline void enqueue(cudaStream_t s, std::function<void()> fn) {
    Worker *w = worker_of(s);
    if (w) w->push(std::move(fn));
    else fn();
}

/* An event: the number of records made and the number done; a wait waits for the records
   made before it. */
struct Event {
    std::mutex mu;
    std::condition_variable cv;
    uint64_t recorded = 0, done = 0;
    int64_t done_ns = 0;                /* when the last record was reached (host clock) */
    void wait_for(uint64_t n) {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return done >= n; });
    }
};

}  // namespace flowc_sim

#define __syncthreads() flowc_sim::syncthreads()
#define FLOWC_SHARED_FRESH(array) flowc_sim::fresh_shared((array), sizeof(array))
#define FLOWC_LAUNCH(kernel, grid, block, shared, stream) \
    flowc_sim::launch(kernel, (grid), (block), (shared), (stream))

static inline cudaError_t cudaGetLastError(void) {
    cudaError_t e = flowc_sim::last_error;
    flowc_sim::last_error = cudaSuccess;
    return e != cudaSuccess ? e : flowc_sim::ok();
}
static inline const char *cudaGetErrorString(cudaError_t e) {
    if (e == cudaSuccess) return "no error";
    return flowc_sim::last_message ? flowc_sim::last_message : "error in the CUDA simulator";
}
/* FLOWC_CUDA_SIMULATOR=N: the simulator has N GPUs (one where it is set otherwise). They
   share the host's memory, so a kernel reading another GPU's buffer is not caught. */
static inline int flowc_sim_gpu_count(void) {
    const char *v = getenv("FLOWC_CUDA_SIMULATOR");
    const int n = v ? atoi(v) : 1;
    return n > 1 ? n : 1;
}
static inline cudaError_t cudaSetDevice(int device) {
    return device >= 0 && device < flowc_sim_gpu_count()
               ? flowc_sim::ok()
               : flowc_sim::fail(cudaErrorInvalidDevice, "the CUDA simulator has no such GPU");
}
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) {
    *s = (cudaStream_t)(void *)new flowc_sim::Worker();
    return flowc_sim::ok();
}
static inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
    flowc_sim::Worker *w = flowc_sim::worker_of(s);
    if (w) w->drain();          /* the worker thread stays, idle: it is never stopped */
    return flowc_sim::ok();
}
static inline cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    flowc_sim::Worker *w = flowc_sim::worker_of(s);
    if (w) w->drain();
    return flowc_sim::ok();
}
static inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) {
    *e = (cudaEvent_t)(void *)new flowc_sim::Event();
    return flowc_sim::ok();
}
static inline cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }
/* The milliseconds between two completed records (the host's clock when each was reached). */
static inline cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    flowc_sim::Event *a = (flowc_sim::Event *)(void *)start, *b = (flowc_sim::Event *)(void *)end;
    if (!a || !b) return flowc_sim::fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime of no event");
    std::lock_guard<std::mutex> la(a->mu);
    std::lock_guard<std::mutex> lb(b->mu);
    if (!a->done || !b->done || a->done < a->recorded || b->done < b->recorded)
        return flowc_sim::fail(cudaErrorNotReady, "cudaEventElapsedTime of an event not reached");
    *ms = (float)((double)(b->done_ns - a->done_ns) / 1e6);
    return flowc_sim::ok();
}
static inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
    if (!e) return flowc_sim::fail(cudaErrorInvalidResourceHandle, "cudaEventDestroy of no event");
    delete (flowc_sim::Event *)(void *)e;
    return flowc_sim::ok();
}
static inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    flowc_sim::Event *ev = (flowc_sim::Event *)(void *)e;
    if (!ev) return flowc_sim::fail(cudaErrorInvalidResourceHandle, "cudaEventRecord of no event");
    uint64_t n;
    { std::lock_guard<std::mutex> lock(ev->mu); n = ++ev->recorded; }
    flowc_sim::enqueue(s, [ev, n] {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        std::lock_guard<std::mutex> lock(ev->mu);
        if (ev->done < n) {
            ev->done = n;
            ev->done_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
        }
        ev->cv.notify_all();
    });
    return flowc_sim::ok();
}
static inline cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    flowc_sim::Event *ev = (flowc_sim::Event *)(void *)e;
    uint64_t n;
    { std::lock_guard<std::mutex> lock(ev->mu); n = ev->recorded; }
    ev->wait_for(n);
    return flowc_sim::ok();
}
static inline cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned = 0) {
    flowc_sim::Event *ev = (flowc_sim::Event *)(void *)e;
    if (!ev) return flowc_sim::fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent of no event");
    uint64_t n;
    { std::lock_guard<std::mutex> lock(ev->mu); n = ev->recorded; }
    flowc_sim::enqueue(s, [ev, n] { ev->wait_for(n); });
    return flowc_sim::ok();
}
static inline cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *arg) {
    flowc_sim::enqueue(s, [fn, arg] { fn(arg); });
    return flowc_sim::ok();
}
static inline cudaError_t cudaMallocHost(void **p, size_t n) {
    return flowc_sim::allocate(p, n, flowc_sim::kMagicPinned);
}
static inline cudaError_t cudaFreeHost(void *p) { return flowc_sim::release(p, flowc_sim::kMagicPinned); }
static inline cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer) {
    const int n = flowc_sim_gpu_count();
    *can = device != peer && device >= 0 && device < n && peer >= 0 && peer < n;
    return flowc_sim::ok();
}
static inline cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned) {
    return peer >= 0 && peer < flowc_sim_gpu_count()
               ? flowc_sim::ok()
               : flowc_sim::fail(cudaErrorInvalidDevice, "the CUDA simulator has no such GPU");
}
static inline cudaError_t cudaMalloc(void **p, size_t n) { return flowc_sim::allocate(p, n); }
template <class T> static inline cudaError_t cudaMalloc(T **p, size_t n) {
    return flowc_sim::allocate((void **)p, n);
}
static inline cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t) {
    return flowc_sim::allocate(p, n);
}
template <class T> static inline cudaError_t cudaMallocAsync(T **p, size_t n, cudaStream_t) {
    return flowc_sim::allocate((void **)p, n);
}
static inline cudaError_t cudaFree(void *p) { return flowc_sim::release(p); }
static inline cudaError_t cudaFreeAsync(void *p, cudaStream_t) { return flowc_sim::release(p); }
static inline cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind) {
    if (n) memmove(dst, src, n);
    return flowc_sim::ok();
}
static inline cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind,
                                          cudaStream_t s) {
    if (n) flowc_sim::enqueue(s, [dst, src, n] { memmove(dst, src, n); });
    return flowc_sim::ok();
}
static inline cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_device, const void *src,
                                              int src_device, size_t n, cudaStream_t s) {
    const int gpus = flowc_sim_gpu_count();
    if (dst_device < 0 || dst_device >= gpus || src_device < 0 || src_device >= gpus)
        return flowc_sim::fail(cudaErrorInvalidDevice, "the CUDA simulator has no such GPU");
    return cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s);
}
static inline cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
    if (n) flowc_sim::enqueue(s, [p, v, n] { memset(p, v, n); });
    return flowc_sim::ok();
}
template <class T> static inline cudaError_t cudaGetSymbolAddress(void **p, const T &symbol) {
    *p = (void *)&symbol;
    return flowc_sim::ok();
}

/* The module's sticky fault, for tests: NULL while none. */
extern "C" const char *flowc_cuda_simulator_fault(void) { return flowc_sim::fault; }

#endif
