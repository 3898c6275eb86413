/* oneDNN's forward convolution with flowc's layouts, for bench_conv.py's engine comparison:
 * an NHWC float32 input, an HWIO filter (reordered once, at creation, into the blocked layout
 * oneDNN's primitive picks for the shape: a constant filter could be reordered at compile
 * time), a bias and an optional ReLU as post-op, an NHWC output. With groups == C == O it is
 * a depthwise convolution, the filter KHxKWxCx1 as TensorFlow's DepthwiseConv2dNative has it. Built by bench_conv.py with
 * cc against the onednn-devel headers and linked to libdnnl; not part of flowc.
 *
 *   void *onednn_conv_create(N, H, W, C, KH, KW, O, sh, sw, pt, pl, pb, pr, groups, filter,
 *                            bias, relu)
 *   int onednn_conv_run(void *conv, const float *x, float *y)
 *   const char *onednn_conv_impl(void *conv)       (the implementation oneDNN chose)
 *   void onednn_conv_destroy(void *conv)
 */
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

typedef struct onednn_conv {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    dnnl_memory_t src, weights, bias, dst;
    const char *impl;
} onednn_conv;

void onednn_conv_destroy(void *p) {
    onednn_conv *c = (onednn_conv *)p;
    if (!c) return;
    if (c->prim) dnnl_primitive_destroy(c->prim);
    if (c->pd) dnnl_primitive_desc_destroy(c->pd);
    if (c->src) dnnl_memory_destroy(c->src);
    if (c->weights) dnnl_memory_destroy(c->weights);
    if (c->bias) dnnl_memory_destroy(c->bias);
    if (c->dst) dnnl_memory_destroy(c->dst);
    if (c->stream) dnnl_stream_destroy(c->stream);
    if (c->engine) dnnl_engine_destroy(c->engine);
    free(c);
}

#define CHECK(call) do { if ((call) != dnnl_success) goto fail; } while (0)

void *onednn_conv_create(long N, long H, long W, long C, long KH, long KW, long O, long sh,
                         long sw, long pt, long pl, long pb, long pr, long groups,
                         const float *filter, const float *bias, int relu) {
    onednn_conv *c = (onednn_conv *)calloc(1, sizeof *c);
    dnnl_memory_desc_t src_md = NULL, user_w_md = NULL, any_w_md = NULL, bias_md = NULL,
                       dst_md = NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t ops = NULL;
    dnnl_memory_t user_w = NULL;
    dnnl_primitive_desc_t reorder_pd = NULL;
    dnnl_primitive_t reorder = NULL;
    if (!c) return NULL;
    const long OH = (H + pt + pb - KH) / sh + 1, OW = (W + pl + pr - KW) / sw + 1;
    dnnl_dims_t src_dims = {N, C, H, W}, w_dims = {O, C, KH, KW}, b_dims = {O},
                dst_dims = {N, O, OH, OW}, g_dims = {groups, O / groups, C / groups, KH, KW};
    const int wn = groups > 1 ? 5 : 4;
    const dnnl_dim_t *wd = groups > 1 ? g_dims : w_dims;
    dnnl_dims_t strides = {sh, sw}, dilates = {0, 0}, pad_l = {pt, pl}, pad_r = {pb, pr};
    CHECK(dnnl_engine_create(&c->engine, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&c->stream, c->engine, dnnl_stream_default_flags));
    CHECK(dnnl_memory_desc_create_with_tag(&src_md, 4, src_dims, dnnl_f32, dnnl_nhwc));
    CHECK(dnnl_memory_desc_create_with_tag(&user_w_md, wn, wd, dnnl_f32,
                                           groups > 1 ? dnnl_hwigo : dnnl_hwio));
    CHECK(dnnl_memory_desc_create_with_tag(&any_w_md, wn, wd, dnnl_f32, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_create_with_tag(&bias_md, 1, b_dims, dnnl_f32, dnnl_x));
    CHECK(dnnl_memory_desc_create_with_tag(&dst_md, 4, dst_dims, dnnl_f32, dnnl_nhwc));
    CHECK(dnnl_primitive_attr_create(&attr));
    if (relu) {
        CHECK(dnnl_post_ops_create(&ops));
        CHECK(dnnl_post_ops_append_eltwise(ops, dnnl_eltwise_relu, 0.f, 0.f));
        CHECK(dnnl_primitive_attr_set_post_ops(attr, ops));
    }
    CHECK(dnnl_convolution_forward_primitive_desc_create(
        &c->pd, c->engine, dnnl_forward_inference, dnnl_convolution_direct, src_md, any_w_md,
        bias_md, dst_md, strides, dilates, pad_l, pad_r, attr));
    CHECK(dnnl_primitive_desc_query(c->pd, dnnl_query_impl_info_str, 0, &c->impl));
    CHECK(dnnl_primitive_create(&c->prim, c->pd));
    const_dnnl_memory_desc_t w_md = dnnl_primitive_desc_query_md(c->pd, dnnl_query_weights_md, 0);
    CHECK(dnnl_memory_create(&c->src, src_md, c->engine, DNNL_MEMORY_NONE));
    CHECK(dnnl_memory_create(&c->dst, dst_md, c->engine, DNNL_MEMORY_NONE));
    CHECK(dnnl_memory_create(&c->bias, bias_md, c->engine, DNNL_MEMORY_ALLOCATE));
    CHECK(dnnl_memory_create(&c->weights, w_md, c->engine, DNNL_MEMORY_ALLOCATE));
    CHECK(dnnl_memory_create(&user_w, user_w_md, c->engine, (void *)filter));
    void *b = NULL;
    CHECK(dnnl_memory_get_data_handle(c->bias, &b));
    if (bias) memcpy(b, bias, (size_t)O * sizeof(float));
    else memset(b, 0, (size_t)O * sizeof(float));
    CHECK(dnnl_reorder_primitive_desc_create(&reorder_pd, user_w_md, c->engine, w_md, c->engine,
                                             NULL));
    CHECK(dnnl_primitive_create(&reorder, reorder_pd));
    dnnl_exec_arg_t rargs[2] = {{DNNL_ARG_FROM, user_w}, {DNNL_ARG_TO, c->weights}};
    CHECK(dnnl_primitive_execute(reorder, c->stream, 2, rargs));
    CHECK(dnnl_stream_wait(c->stream));
    goto done;
fail:
    onednn_conv_destroy(c);
    c = NULL;
done:
    if (reorder) dnnl_primitive_destroy(reorder);
    if (reorder_pd) dnnl_primitive_desc_destroy(reorder_pd);
    if (user_w) dnnl_memory_destroy(user_w);
    if (ops) dnnl_post_ops_destroy(ops);
    if (attr) dnnl_primitive_attr_destroy(attr);
    dnnl_memory_desc_destroy(src_md);
    dnnl_memory_desc_destroy(user_w_md);
    dnnl_memory_desc_destroy(any_w_md);
    dnnl_memory_desc_destroy(bias_md);
    dnnl_memory_desc_destroy(dst_md);
    return c;
}

int onednn_conv_run(void *p, const float *x, float *y) {
    onednn_conv *c = (onednn_conv *)p;
    if (dnnl_memory_set_data_handle(c->src, (void *)x) != dnnl_success) return 1;
    if (dnnl_memory_set_data_handle(c->dst, y) != dnnl_success) return 1;
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, c->src}, {DNNL_ARG_WEIGHTS, c->weights},
                               {DNNL_ARG_BIAS, c->bias}, {DNNL_ARG_DST, c->dst}};
    if (dnnl_primitive_execute(c->prim, c->stream, 4, args) != dnnl_success) return 1;
    return dnnl_stream_wait(c->stream) != dnnl_success;
}

const char *onednn_conv_impl(void *p) {
    return ((onednn_conv *)p)->impl;
}
