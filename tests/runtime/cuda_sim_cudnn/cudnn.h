/* A stand-in for the part of cuDNN's legacy convolution API flowc calls, for the CUDA
   simulator (tests/runtime/test_cuda_cudnn.py): reference loops over host memory with cuDNN's
   layouts (NHWC tensors, OHWI filters for CUDNN_TENSOR_NHWC, groups, symmetric padding), one
   algorithm. It checks flowc's side of the calls (descriptors, layout kernels, the padding
   after x, the timed choice) on machines without a GPU; it says nothing about cuDNN itself,
   whose runs are the GPU tests'. */
#pragma once
#include <stdlib.h>
#include <string.h>

typedef enum {
    CUDNN_STATUS_SUCCESS = 0, CUDNN_STATUS_ALLOC_FAILED = 2, CUDNN_STATUS_BAD_PARAM = 3
} cudnnStatus_t;
typedef enum { CUDNN_DATA_FLOAT = 0, CUDNN_DATA_DOUBLE = 1 } cudnnDataType_t;
typedef enum { CUDNN_TENSOR_NCHW = 0, CUDNN_TENSOR_NHWC = 1 } cudnnTensorFormat_t;
typedef enum { CUDNN_CONVOLUTION = 0, CUDNN_CROSS_CORRELATION = 1 } cudnnConvolutionMode_t;
typedef enum { CUDNN_DEFAULT_MATH = 0, CUDNN_FMA_MATH = 3 } cudnnMathType_t;
typedef int cudnnConvolutionFwdAlgo_t;
typedef int cudnnConvolutionBwdDataAlgo_t;
typedef int cudnnConvolutionBwdFilterAlgo_t;

struct sim_dnn_desc { int n, c, h, w; cudnnDataType_t t; };     /* a tensor's, a filter's */
struct sim_dnn_conv { int ph, pw, sh, sw, dh, dw, groups; };
typedef struct sim_dnn_desc *cudnnTensorDescriptor_t;
typedef struct sim_dnn_desc *cudnnFilterDescriptor_t;
typedef struct sim_dnn_conv *cudnnConvolutionDescriptor_t;
typedef int *cudnnHandle_t;
typedef struct { int algo; cudnnStatus_t status; float time; size_t memory; } sim_dnn_perf;
typedef sim_dnn_perf cudnnConvolutionFwdAlgoPerf_t;
typedef sim_dnn_perf cudnnConvolutionBwdDataAlgoPerf_t;
typedef sim_dnn_perf cudnnConvolutionBwdFilterAlgoPerf_t;

static inline const char *cudnnGetErrorString(cudnnStatus_t s) {
    return s == CUDNN_STATUS_SUCCESS ? "CUDNN_STATUS_SUCCESS" : "CUDNN_STATUS_BAD_PARAM";
}
static inline cudnnStatus_t cudnnCreate(cudnnHandle_t *h) {
    static int handle;
    *h = &handle;
    return CUDNN_STATUS_SUCCESS;
}
static inline cudnnStatus_t cudnnSetStream(cudnnHandle_t, cudaStream_t) {
    return CUDNN_STATUS_SUCCESS;
}
static inline cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *d) {
    *d = (sim_dnn_desc *)calloc(1, sizeof(sim_dnn_desc));
    return *d ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED;
}
static inline cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *d) {
    return cudnnCreateTensorDescriptor(d);
}
static inline cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *d) {
    *d = (sim_dnn_conv *)calloc(1, sizeof(sim_dnn_conv));
    if (*d) (*d)->groups = 1;
    return *d ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED;
}
static inline cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) {
    free(d);
    return CUDNN_STATUS_SUCCESS;
}
static inline cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) {
    free(d);
    return CUDNN_STATUS_SUCCESS;
}
static inline cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) {
    free(d);
    return CUDNN_STATUS_SUCCESS;
}
static inline cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d,
                                                       cudnnTensorFormat_t f, cudnnDataType_t t,
                                                       int n, int c, int h, int w) {
    if (f != CUDNN_TENSOR_NHWC) return CUDNN_STATUS_BAD_PARAM;
    *d = sim_dnn_desc{n, c, h, w, t};
    return CUDNN_STATUS_SUCCESS;
}
static inline cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t t,
                                                       cudnnTensorFormat_t f, int k, int c, int h,
                                                       int w) {
    if (f != CUDNN_TENSOR_NHWC) return CUDNN_STATUS_BAD_PARAM;
    *d = sim_dnn_desc{k, c, h, w, t};
    return CUDNN_STATUS_SUCCESS;
}
static inline cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d,
                                                            int ph, int pw, int sh, int sw,
                                                            int dh, int dw,
                                                            cudnnConvolutionMode_t m,
                                                            cudnnDataType_t) {
    if (m != CUDNN_CROSS_CORRELATION) return CUDNN_STATUS_BAD_PARAM;
    *d = sim_dnn_conv{ph, pw, sh, sw, dh, dw, d->groups};
    return CUDNN_STATUS_SUCCESS;
}
static inline cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int g) {
    d->groups = g;
    return CUDNN_STATUS_SUCCESS;
}
static inline cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t,
                                                        cudnnMathType_t m) {
    return m == CUDNN_FMA_MATH ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
}
static inline cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(
        cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t f,
        int *n, int *k, int *h, int *w) {
    *n = x->n;
    *k = f->n;
    *h = (x->h + 2 * c->ph - ((f->h - 1) * c->dh + 1)) / c->sh + 1;
    *w = (x->w + 2 * c->pw - ((f->w - 1) * c->dw + 1)) / c->sw + 1;
    return CUDNN_STATUS_SUCCESS;
}

/* mode 0: y = x (*) f; 1: dx = the transposed convolution of dy by f; 2: df from x and dy.
   Shapes that do not agree are a bad parameter, as in cuDNN. */
template <class T>
static cudnnStatus_t sim_dnn_conv_run(int mode, const sim_dnn_desc *xd, T *x, const sim_dnn_desc *fd,
                                      T *f, const sim_dnn_conv *c, const sim_dnn_desc *yd, T *y) {
    const int cg = fd->c, kg = fd->n / c->groups;
    int n, k, h, w;
    cudnnGetConvolution2dForwardOutputDim((cudnnConvolutionDescriptor_t)c,
                                          (cudnnTensorDescriptor_t)xd,
                                          (cudnnFilterDescriptor_t)fd, &n, &k, &h, &w);
    if (xd->c != cg * c->groups || fd->n % c->groups || n != yd->n || k != yd->c || h != yd->h
        || w != yd->w || xd->t != fd->t || xd->t != yd->t)
        return CUDNN_STATUS_BAD_PARAM;
    if (mode == 1) memset(x, 0, sizeof(T) * (size_t)xd->n * xd->h * xd->w * xd->c);
    if (mode == 2) memset(f, 0, sizeof(T) * (size_t)fd->n * fd->h * fd->w * fd->c);
    for (int b = 0; b < yd->n; b++)
        for (int oh = 0; oh < yd->h; oh++)
            for (int ow = 0; ow < yd->w; ow++)
                for (int o = 0; o < yd->c; o++) {
                    T acc = 0;
                    T &yv = y[(((size_t)b * yd->h + oh) * yd->w + ow) * yd->c + o];
                    for (int r = 0; r < fd->h; r++)
                        for (int s = 0; s < fd->w; s++) {
                            const int ih = oh * c->sh - c->ph + r * c->dh;
                            const int iw = ow * c->sw - c->pw + s * c->dw;
                            if (ih < 0 || ih >= xd->h || iw < 0 || iw >= xd->w) continue;
                            for (int ci = 0; ci < cg; ci++) {
                                T &xv = x[(((size_t)b * xd->h + ih) * xd->w + iw) * xd->c
                                          + (o / kg) * cg + ci];
                                T &fv = f[(((size_t)o * fd->h + r) * fd->w + s) * fd->c + ci];
                                if (mode == 0) acc += xv * fv;
                                else if (mode == 1) xv += yv * fv;
                                else fv += xv * yv;
                            }
                        }
                    if (mode == 0) yv = acc;
                }
    return CUDNN_STATUS_SUCCESS;
}

static inline cudnnStatus_t sim_dnn_run(int mode, const sim_dnn_desc *xd, const void *x,
                                        const sim_dnn_desc *fd, const void *f,
                                        const sim_dnn_conv *c, const sim_dnn_desc *yd,
                                        const void *y) {
    if (xd->t == CUDNN_DATA_DOUBLE)
        return sim_dnn_conv_run<double>(mode, xd, (double *)x, fd, (double *)f, c, yd, (double *)y);
    return sim_dnn_conv_run<float>(mode, xd, (float *)x, fd, (float *)f, c, yd, (float *)y);
}

/* One algorithm (1), needing 4 KiB of workspace, which the runs check they were given. */
static inline cudnnStatus_t sim_dnn_found(int *found, sim_dnn_perf *p, size_t workspace) {
    *found = 1;
    *p = sim_dnn_perf{1, workspace >= 4096 ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM,
                      0.1f, 4096};
    return CUDNN_STATUS_SUCCESS;
}
#define SIM_DNN_WORKSPACE(ws, n) \
    if (!(ws) || (n) < 4096) return CUDNN_STATUS_BAD_PARAM

static inline cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(
        cudnnHandle_t, cudnnTensorDescriptor_t xd, const void *x, cudnnFilterDescriptor_t fd,
        const void *f, cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t yd, void *y, int,
        int *found, cudnnConvolutionFwdAlgoPerf_t *p, void *, size_t n) {
    sim_dnn_found(found, p, n);
    return sim_dnn_run(0, xd, x, fd, f, c, yd, y);
}
static inline cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(
        cudnnHandle_t, cudnnFilterDescriptor_t fd, const void *f, cudnnTensorDescriptor_t yd,
        const void *dy, cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t xd, void *dx, int,
        int *found, cudnnConvolutionBwdDataAlgoPerf_t *p, void *, size_t n) {
    sim_dnn_found(found, p, n);
    return sim_dnn_run(1, xd, dx, fd, f, c, yd, dy);
}
static inline cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(
        cudnnHandle_t, cudnnTensorDescriptor_t xd, const void *x, cudnnTensorDescriptor_t yd,
        const void *dy, cudnnConvolutionDescriptor_t c, cudnnFilterDescriptor_t fd, void *df, int,
        int *found, cudnnConvolutionBwdFilterAlgoPerf_t *p, void *, size_t n) {
    sim_dnn_found(found, p, n);
    return sim_dnn_run(2, xd, x, fd, df, c, yd, dy);
}
static inline cudnnStatus_t cudnnConvolutionForward(
        cudnnHandle_t, const void *, cudnnTensorDescriptor_t xd, const void *x,
        cudnnFilterDescriptor_t fd, const void *f, cudnnConvolutionDescriptor_t c,
        cudnnConvolutionFwdAlgo_t, void *ws, size_t n, const void *, cudnnTensorDescriptor_t yd,
        void *y) {
    SIM_DNN_WORKSPACE(ws, n);
    return sim_dnn_run(0, xd, x, fd, f, c, yd, y);
}
static inline cudnnStatus_t cudnnConvolutionBackwardData(
        cudnnHandle_t, const void *, cudnnFilterDescriptor_t fd, const void *f,
        cudnnTensorDescriptor_t yd, const void *dy, cudnnConvolutionDescriptor_t c,
        cudnnConvolutionBwdDataAlgo_t, void *ws, size_t n, const void *,
        cudnnTensorDescriptor_t xd, void *dx) {
    SIM_DNN_WORKSPACE(ws, n);
    return sim_dnn_run(1, xd, dx, fd, f, c, yd, dy);
}
static inline cudnnStatus_t cudnnConvolutionBackwardFilter(
        cudnnHandle_t, const void *, cudnnTensorDescriptor_t xd, const void *x,
        cudnnTensorDescriptor_t yd, const void *dy, cudnnConvolutionDescriptor_t c,
        cudnnConvolutionBwdFilterAlgo_t, void *ws, size_t n, const void *,
        cudnnFilterDescriptor_t fd, void *df) {
    SIM_DNN_WORKSPACE(ws, n);
    return sim_dnn_run(2, xd, x, fd, df, c, yd, dy);
}
