"""Emit one CUDA translation unit (``.cu``) for a GPU device's subgraph.

The module has the same entry ABI as a C module (``flowc_entry``, ``runtime/csrc/flowc_rt.h``),
plus ``flowc_cuda_entry`` taking the CUDA stream to run on. Feeds and fetches cross the entry
as host tensors; every other tensor of the step lives in device memory:

- a feed is copied to the device, a fetch back to a host buffer the caller owns;
- constants are ``__device__`` arrays (no copy per step);
- variables are GPU-resident: ``flowc_var.value.data`` is a device pointer (the host struct
  keeps the dims, the initialized flag and the lock, so checks run on the host);
- ``_Send``/``_Recv`` to a device of the same task run on the module's copy stream through
  pinned host memory, or peer to peer between two GPUs (``codegen_templates/cuda/
  transfer.cu.j2``); to another task they stage through host memory into the transport;
- every other node is host code that checks dims, allocates its outputs with
  ``cudaMallocAsync`` and launches its kernels (grid-stride loops) on the stream: one host call
  per step, no per-op dispatch; buffers are freed (stream-ordered) after their last use.

Dims live in host ``flowc_tensor`` structs, so dynamic dims are computed on the host and
passed to kernels as arguments. Data errors found on the device raise per-site flags that the
entry reads once the stream is done; kernels that change variables do nothing once a flag is
up, so a failing step leaves state unchanged.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence

import numpy as np

from compiler.codegen.c_ops.comm import remote_recv_c, remote_send_c
from compiler.codegen.cuda_kernels import cuda_kernel, has_cuda_kernel
from compiler.codegen.cuda_launch import CudaLaunch, CudaModuleState
from compiler.codegen.cuda_target import BLOCK_SIZE, CUDA, MAX_BLOCKS, CudaTarget
from compiler.codegen.emitter import EmittedModule
from compiler.codegen.emitter_base import EmitterBase
from compiler.codegen.instrument import (Instrumentation, Origins, checks_outputs,
                                         kernel_record, numerics_subject, profile_exports)
from compiler.codegen.kernel_context import KernelContext, TensorRef, c_string
from compiler.codegen import templates
from compiler.errors import CodegenError
from compiler.ir.construct import constant_value
from compiler.ir.graph import Graph, Node, Output
from compiler.ops.comm import is_cross_task, rendezvous_key
from compiler.ir.op_registry import get_op
from runtime.cuda_module import gpu_index
from runtime.dtypes import DType
from runtime.module import ABI_VERSION

_NO_CODE = {"NoOp", "_Sink", "_Retval"}

# The host code runs the nodes through functions of this many nodes each: the host compiler
# is superlinear in function size (as for the C emitter's parts).
NODES_PER_PART = 32

# Largest shape-like input (elements) copied to the host to compute output dims.
_MIRROR_MAX = 16
_SIMPLE_DIM = re.compile(r"^t_\w+\.dims\[\d+\]$")


def _receives_late(order: List[Node]) -> List[Node]:
    """``order`` with each ``_Recv`` moved to just before the first node that needs it: the
    host thread enqueues the GPU work that does not wait for a tensor before it blocks on
    the rendezvous (a receive early in the order would leave the GPU idle while it waits)."""
    waiting: List[Node] = []
    out: List[Node] = []
    placed = set()

    def put(n: Node) -> None:
        for dep in [i.node for i in n.inputs] + list(n.control_inputs):
            if dep in waiting:
                waiting.remove(dep)
                put(dep)
        out.append(n)
        placed.add(n)

    for n in order:
        if n.op == "_Recv":
            waiting.append(n)
        else:
            put(n)
    for n in list(waiting):
        if n not in placed:
            waiting.remove(n)
            put(n)
    return out


def emit_cuda(graph: Graph, feeds: Sequence[Node], retvals: Sequence[Node],
              target: CudaTarget = CUDA, check_numerics: bool = False,
              profile: bool = False, origins: Optional[Origins] = None) -> EmittedModule:
    """The CUDA module of one GPU device's subgraph (``feeds``: its Placeholders in feed
    order; ``retvals``: its ``_Retval`` nodes, ``attrs['index']`` numbering its fetches).
    ``check_numerics``: every floating output (and feed) is scanned on the device after its
    kernel; a NaN or Inf raises an error flag naming the node, as ``--check-numerics`` does
    on a CPU (``compiler/codegen/instrument.py``). ``profile``: each node's work on the
    stream is timed by a pair of CUDA events around it, into the same counters and kernel
    table a profiled CPU module has (``origins``: what Fused nodes replaced)."""
    return _CudaEmitter(graph, list(feeds), list(retvals), target, check_numerics,
                        profile, origins).emit()


class _CudaEmitter(EmitterBase):
    def __init__(self, graph: Graph, feeds: List[Node], retvals: List[Node], target: CudaTarget,
                 check_numerics: bool = False, profile: bool = False,
                 origins: Optional[Origins] = None):
        super().__init__(graph, feeds, retvals, target)
        self.check_numerics = check_numerics
        self.profile = profile
        self.origins = origins or {}
        self.kernels: List[dict] = []       # --profile: the kernel table (counter index)
        self.module = CudaModuleState()
        self.owned: List[str] = []          # tensors whose device buffers this step allocated
        self.constants: List[str] = []
        self.nsends = 0                     # sends on the copy stream (transfer.cu.j2)
        self.npeers = 0                     # receives from another GPU of the task
        self.has_host_receives = False      # receives staged through pinned memory

    # --- emission ----------------------------------------------------------------------
    def emit(self) -> EmittedModule:
        order = _receives_late(list(self.graph))
        position = {n: i for i, n in enumerate(order)}
        for n in order:
            if get_op(n.op, n).is_control_flow:
                raise CodegenError("control flow (Switch/Merge/loops) has no CUDA code; it runs "
                                   "on a CPU device", n)
        self._check_fetchable()
        self._find_roots(order)
        last_use = self._last_uses(order, position)
        fetched = {self.root[r.inputs[0]] for r in self.retvals}
        # a tensor sent on the copy stream is read there after the compute stream has gone
        # on: its buffer lives until the step ends
        sent = {self.root[n.inputs[0]] for n in order
                if n.op == "_Send" and not is_cross_task(n.attrs)}
        frees_after: Dict[int, List[Output]] = {}
        for n in order:
            for out in n.outputs:
                if (self.root[out] == out and out not in fetched and out not in sent
                        and out.dtype is not DType.resource):
                    frees_after.setdefault(last_use.get(out, position[n]), []).append(out)
        for k, n in enumerate(order):
            if k and k % NODES_PER_PART == 0:
                self.part_starts.append(len(self.body))
            timed = self.profile and n.op not in _NO_CODE and n.op != "Const"
            if timed:
                self.body.append(f"FLOWC_PROF_MARK({2 * len(self.kernels)});")
            self._emit_node(n)
            if timed:
                self.body.append(f"FLOWC_PROF_MARK({2 * len(self.kernels) + 1});")
                self.kernels.append(kernel_record(n, self.origins))
            if self.check_numerics:
                self._check_numerics(n)
            for root in frees_after.get(position[n], []):
                ref = self.refs.get(root)
                if ref is not None and ref.var in self.owned:
                    self.body.append(f"cudaFreeAsync({ref.var}.data, flowc_stream); "
                                     f"{ref.var}.data = NULL;")
        instrumentation = {}
        if self.profile or self.check_numerics:
            instrumentation = {"instrumentation": Instrumentation(
                self.profile, self.check_numerics).to_json()}
        if self.profile:
            instrumentation["kernels"] = list(self.kernels)
        return EmittedModule(self._assemble(), {"cuda"} | set(self.module.features),
                             list(self.module.variables), list(self.module.streams),
                             list(self.module.queues), instrumentation)

    def _check_numerics(self, n: Node) -> None:
        """After ``n``'s kernels: one kernel per floating output raising the node's NaN or
        Inf flag (the entry reports the first flagged node once the stream is done; kernels
        that change state do nothing after it, so the step leaves variables unchanged)."""
        if n.op in _NO_CODE or n.op == "Const" or not checks_outputs(n):
            return
        outputs = [o for o in n.outputs if o.dtype in (DType.f32, DType.f64) and o in self.refs]
        if not outputs:
            return
        self._open(n)
        lines = []
        for out in outputs:
            ref = self._ref(out)
            kc = KernelContext(n, [], [ref], self.target, self.module)
            what = numerics_subject(n, out.index)
            launch = CudaLaunch(kc, "check_numerics")
            x = launch.ptr(ref)
            nan = launch.report(f"CheckNumerics: {what}: Tensor had NaN values")
            inf = launch.report(f"CheckNumerics: {what}: Tensor had Inf values")
            body = (f"{self.target.grid_stride_loop('i', launch.value(ref.size))} {{\n"
                    f"    const {ref.ctype} v = {x}[i];\n"
                    f"    if (v != v) {{ {nan} }} else if (isinf(v)) {{ {inf} }}\n}}")
            lines.append(launch.launch(body, ref.size))
        self._close(lines)

    def _open(self, n: Node) -> None:
        loc = str(n.location) if n.location else ""
        self.body.append("")
        self.body.append(self._node_comment(n))
        self.body.append(f"{{ const char *flowc_node = {c_string(n.name)}; "
                         f"const char *flowc_loc = {c_string(loc)}; (void)flowc_node; (void)flowc_loc;")

    def _close(self, lines: List[str]) -> None:
        self.body.extend("    " + line if line else "" for line in "\n".join(lines).splitlines())
        self.body.append("}")

    def _emit_node(self, n: Node) -> None:
        if n.op in _NO_CODE:
            return
        op = get_op(n.op, n)
        self._open(n)
        if n.op == "Placeholder":
            return self._close(self._feed(n))
        if n.op == "Const":
            return self._close(self._const(n))
        inputs = [self._ref(i) for i in n.inputs]
        outputs = [self._ref(o) for o in n.outputs]
        kc = KernelContext(n, inputs, outputs, self.target, self.module)
        if n.op == "_Send":
            return self._close(self._send(kc))
        if n.op == "_Recv":
            return self._close(self._recv(kc))
        kernel = cuda_kernel(n.op)
        if kernel is None or not has_cuda_kernel(n):
            raise CodegenError(f"op {n.op} has no CUDA kernel for this node; the place pass "
                               "keeps such nodes on a CPU device", n)
        if kernel.owns_outputs:
            # The kernel sizes and allocates its outputs as it runs; they are the step's to
            # free (after their last use, or on the way out of a failed step).
            code = kernel.emit(kc)
            self.owned.extend(o.var for o in outputs)
            return self._close(kc.checks + ["{", code, "}"])
        alias_only = kernel.emit is None
        if alias_only and op.c_alias is None:
            raise CodegenError(f"op {n.op} has neither a CUDA kernel nor a view output", n)
        # Output dims are computed on the host: inputs whose values they need (and that are
        # not constants) are first copied back from the device. The kernel then reads those
        # host copies too (a convolution's sizes), and every check made on them (by the dims
        # function or the kernel, Range's delta != 0 among them) runs before the dims are.
        dims_kc = kc
        mirrored: List[str] = []
        mirrors = [i for i in kernel.host_inputs
                   if i < len(inputs) and constant_value(n.inputs[i]) is None]
        if mirrors:
            host_refs = list(inputs)
            for i in mirrors:
                host_refs[i], copy = self._host_mirror(kc, inputs[i])
                mirrored.extend(copy)
            dims_kc = KernelContext(n, host_refs, outputs, self.target, self.module)
        dims_fn = kernel.output_dims if kernel.output_dims is not None else op.c_output_dims
        dims = None
        if dims_fn is not None and (not all(o.static for o in outputs)
                                    or not all(i.static for i in inputs)):
            dims = dims_fn(dims_kc)      # with dynamic inputs: the checks that they agree
        lines: List[str] = []
        for k, o in enumerate(outputs):
            lines.append(f"{o.var}.rank = {o.rank}; {o.var}.dtype = {o.dtype.code};")
            for d in range(o.rank):
                if o.shape[d] is not None:
                    e = str(o.shape[d])
                elif dims is not None:
                    e = dims[k][d]
                else:
                    raise CodegenError(f"output {k} has a dynamic shape {o.type} and the op has "
                                       "no shape function for generated code", n)
                lines.append(f"{o.var}.dims[{d}] = {e};")
                if o.shape[d] is None and _SIMPLE_DIM.match(e):
                    o.dim_alias[d] = e          # kernels see equal dims as equal
        checks = list(kc.checks)
        kc.checks.clear()
        if alias_only:
            lines.append(f"{outputs[0].var}.data = {inputs[op.c_alias].var}.data;")
            return self._close(checks + mirrored + (dims_kc.checks if mirrors else []) + lines)
        for o in outputs:
            if o.dtype is DType.resource:
                continue
            lines.append(f"FLOWC_DEVICE_ALLOC({o.var}, (size_t){o.size} * sizeof({o.ctype}));")
            self.owned.append(o.var)
        if dims_kc is kc:
            code = kernel.emit(kc)
            return self._close(kc.checks + checks + lines + ["{", code, "}"])
        code = kernel.emit(dims_kc)
        self._close(kc.checks + checks + mirrored + dims_kc.checks + lines + ["{", code, "}"])

    def _host_mirror(self, kc: KernelContext, ref: TensorRef):
        """A host copy of a small device tensor (a shape-like input): its TensorRef and the
        host code making it (a copy and a stream sync)."""
        name = "h_" + ref.var
        mirror = TensorRef(name, ref.type, self.target, kc.node)
        nbytes = f"(size_t)({ref.size}) * sizeof({ref.ctype})"
        return mirror, [
            f"flowc_tensor {name} = {ref.var};",
            f"{ref.ctype} {name}_buf[{_MIRROR_MAX}];",
            f"if ({ref.size} > {_MIRROR_MAX}) "
            + kc.fail(f"a shape-like input has more than {_MIRROR_MAX} elements"),
            f"if ({ref.size} > 0) FLOWC_CUDA(cudaMemcpyAsync({name}_buf, {ref.var}.data, {nbytes}, "
            "cudaMemcpyDeviceToHost, flowc_stream));",
            "FLOWC_CUDA(cudaStreamSynchronize(flowc_stream));",
            f"{name}.data = {name}_buf;"]

    def _feed(self, n: Node) -> List[str]:
        k = self._feed_index(n)
        ref = self._ref(n.output(0))
        kc = KernelContext(n, [], [ref], self.target, self.module)
        nbytes = f"(size_t){ref.size} * sizeof({ref.ctype})"
        self.owned.append(ref.var)
        return ([f"{ref.var} = feeds[{k}];"] + kc.type_checks(ref, "feed")
                + [f"{{ const void *host = feeds[{k}].data; {ref.var}.data = NULL;",
                   f"  FLOWC_DEVICE_ALLOC({ref.var}, {nbytes});",
                   f"  if ({ref.size} > 0) FLOWC_CUDA(cudaMemcpyAsync({ref.var}.data, host, "
                   f"{nbytes}, cudaMemcpyHostToDevice, flowc_stream)); }}"])

    def _const(self, n: Node) -> List[str]:
        value: np.ndarray = n.attrs["value"]
        ref = self._ref(n.output(0))
        dtype = n.output_types[0].dtype
        name = "c_" + ref.var[2:]
        flat = value.reshape(-1).tolist() or [0]
        items = ", ".join(self.target.literal(v, dtype) for v in flat)
        self.constants.append(f"/* %{n.name} : {n.output_types[0]} */\n"
                              f"static __device__ const {ref.ctype} {name}[{len(flat)}] = {{{items}}};")
        lines = [f"FLOWC_CUDA(cudaGetSymbolAddress(&{ref.var}.data, {name}));",
                 f"{ref.var}.rank = {ref.rank}; {ref.var}.dtype = {dtype.code};"]
        lines += [f"{ref.var}.dims[{d}] = {dim};" for d, dim in enumerate(value.shape)]
        return lines

    def _send(self, kc: KernelContext) -> List[str]:
        """To a device of this task: on the copy stream (transfer.cu.j2), through pinned host
        memory, or as a device copy handed to another GPU. To another task: staged in host
        memory and handed to the transport's host op."""
        x = kc.inputs[0]
        nbytes = f"(size_t){x.size} * sizeof({x.ctype})"
        if is_cross_task(kc.node.attrs):
            staged = [f"flowc_tensor host = {x.var};",
                      f"host.data = flowc_alloc({nbytes});",
                      "if (!host.data) " + kc.fail("out of memory staging a send",
                                                   code="FLOWC_RESOURCE_EXHAUSTED"),
                      f"if ({x.size} > 0 && cudaMemcpyAsync(host.data, {x.var}.data, {nbytes}, "
                      "cudaMemcpyDeviceToHost, flowc_stream) != cudaSuccess) { free(host.data); "
                      + kc.fail("copying the sent tensor to the host failed") + " }",
                      "if (cudaStreamSynchronize(flowc_stream) != cudaSuccess) { free(host.data); "
                      + kc.fail("the GPU failed before a send") + " }"]
            return staged + ["{", remote_send_c(kc, "host", cleanup="free(host.data);"), "}",
                             "free(host.data);"]
        k = self.nsends
        self.nsends += 1
        lines = []
        root = self.root[kc.node.inputs[0]]
        root_ref = self.refs.get(root)
        if not (root.node.op == "Const" or (root_ref is not None and root_ref.var in self.owned)):
            # the copy stream reads the buffer after the compute stream has gone on: only a
            # buffer of this step (held to its end) or a constant may be read so
            raise CodegenError("a GPU send of a tensor whose buffer the step does not own "
                               f"(made by {root.node.op} '{root.node.name}')", kc.node)
        to_gpu = "/device:GPU:" in kc.node.attrs["recv_device"]
        lines += [f"flowc_send_op *s = &flowc_x->sends[{k}];",
                  "memset(s, 0, sizeof *s);",
                  f"s->rendezvous = flowc_rt->rendezvous; s->slot = {kc.attr('slot')}; "
                  f"s->itemsize = sizeof({x.ctype});",
                  f"s->t = {x.var}; s->t.data = NULL; s->node = flowc_node; s->loc = flowc_loc;"]
        if to_gpu:
            # another GPU of this task: a device copy, handed over (the receiver frees it)
            lines += [f"s->device = FLOWC_GPU_INDEX;",
                      f"FLOWC_CUDA(cudaMalloc(&s->t.data, {nbytes} ? {nbytes} : 64));",
                      f"flowc_x->nsends = {k + 1};     /* started: freed at the end unless taken */",
                      "FLOWC_CUDA(flowc_copy_after(flowc_x, flowc_stream));",
                      f"if ({x.size} > 0) FLOWC_CUDA(cudaMemcpyAsync(s->t.data, {x.var}.data, "
                      f"{nbytes}, cudaMemcpyDeviceToDevice, flowc_x->copy));"]
        else:
            lines += ["s->device = -1;",
                      f"s->t.data = flowc_pinned_take(flowc_x, {nbytes});",
                      "if (!s->t.data) " + kc.fail("out of pinned host memory staging a send",
                                                   code="FLOWC_RESOURCE_EXHAUSTED"),
                      "FLOWC_CUDA(flowc_copy_after(flowc_x, flowc_stream));",
                      f"if ({x.size} > 0) FLOWC_CUDA(cudaMemcpyAsync(s->t.data, {x.var}.data, "
                      f"{nbytes}, cudaMemcpyDeviceToHost, flowc_x->copy));",
                      f"flowc_x->nsends = {k + 1};"]
        return lines + ["FLOWC_CUDA(cudaLaunchHostFunc(flowc_x->copy, flowc_deliver, s));"]

    def _recv(self, kc: KernelContext) -> List[str]:
        """From host memory (a CPU, another task): staged through pinned memory, so the copy
        to the device is asynchronous. From another GPU of this task: a peer copy of the
        device buffer it handed over, freed when the step ends."""
        out = kc.out
        key = c_string(rendezvous_key(kc.node.attrs))
        nbytes = f"(size_t){out.size} * sizeof({out.ctype})"
        self.owned.append(out.var)
        same = [f"h.rank == {out.rank}", f"h.dtype == {out.dtype.code}"]
        same += [f"h.dims[{d}] == {dim}" for d, dim in enumerate(out.shape) if dim is not None]
        cross = is_cross_task(kc.node.attrs)
        source = kc.node.attrs["send_device"]
        if not cross and "/device:GPU:" in source:
            k = self.npeers
            self.npeers += 1
            src = gpu_index(source)
            return [
                "flowc_tensor h;",
                f"if (flowc_rv_recv(flowc_rt->rendezvous, {kc.attr('slot')}, &h, {key}, "
                "flowc_node, flowc_loc, st)) goto fail;",
                f"flowc_x->peer[{k}] = h.data; flowc_x->peer_device[{k}] = {src}; "
                f"flowc_x->npeers = {k + 1};   /* GPU {src}'s buffer: freed at the end */",
                f"if (!({' && '.join(same)})) "
                + kc.fail(f"the received tensor has the wrong type (expected {out.type})"),
                f"flowc_enable_peer({src});",
                f"{out.var} = h; {out.var}.data = NULL;",
                f"FLOWC_DEVICE_ALLOC({out.var}, {nbytes});",
                f"if ({out.size} > 0) FLOWC_CUDA(cudaMemcpyPeerAsync({out.var}.data, FLOWC_GPU_INDEX, "
                f"h.data, {src}, {nbytes}, flowc_stream));"]
        self.has_host_receives = True
        if cross:
            # from another task: the transport's host op fills a host tensor
            receive = ["flowc_tensor h;", "memset(&h, 0, sizeof h);",
                       remote_recv_c(kc, "h", out.rank, out.dtype.code)]
        else:
            receive = ["flowc_tensor h;",
                       f"if (flowc_rv_recv(flowc_rt->rendezvous, {kc.attr('slot')}, &h, {key}, "
                       "flowc_node, flowc_loc, st)) goto fail;"]
        return receive + [
                f"if (!({' && '.join(same)})) {{ free(h.data); "
                + kc.fail(f"the received tensor has the wrong type (expected {out.type})") + " }",
                f"{out.var} = h; {out.var}.data = NULL;     /* its dims: the sizes below */",
                f"void *pinned = flowc_pinned_take(flowc_x, {nbytes});",
                "if (!pinned) { free(h.data); "
                + kc.fail("out of pinned host memory staging a receive",
                          code="FLOWC_RESOURCE_EXHAUSTED") + " }",
                f"if ({out.size} > 0) memcpy(pinned, h.data, {nbytes});",
                "free(h.data);",
                f"FLOWC_DEVICE_ALLOC({out.var}, {nbytes});",
                f"if ({out.size} > 0) FLOWC_CUDA(cudaMemcpyAsync({out.var}.data, pinned, {nbytes}, "
                "cudaMemcpyHostToDevice, flowc_stream));"]

    # --- the translation unit -------------------------------------------------------------
    @property
    def _transfers(self) -> bool:
        """Whether the module sends or receives within its task (transfer.cu.j2)."""
        return bool(self.nsends or self.npeers or self.has_host_receives)

    def _fetches(self) -> List[str]:
        lines = []
        for r in sorted(self.retvals, key=lambda r: r.attrs["index"]):
            k = r.attrs["index"]
            ref = self._ref(r.inputs[0])
            nbytes = f"(size_t){ref.size} * sizeof({ref.ctype})"
            lines += [f"/* fetch {k}: %{r.inputs[0].node.name} */",
                      f"fetches[{k}] = {ref.var};",
                      f"fetches[{k}].data = flowc_alloc({nbytes});",
                      f"if (!fetches[{k}].data) {{ flowc_fail(st, FLOWC_RESOURCE_EXHAUSTED, "
                      f"{c_string(r.inputs[0].node.name)}, \"\", \"out of memory\"); goto fail; }}",
                      f"if ({ref.size} > 0 && cudaMemcpyAsync(fetches[{k}].data, {ref.var}.data, "
                      f"{nbytes}, cudaMemcpyDeviceToHost, flowc_stream) != cudaSuccess) {{ "
                      f"flowc_fail(st, FLOWC_INTERNAL, {c_string(r.inputs[0].node.name)}, \"\", "
                      "\"copying a fetch to the host failed\"); goto fail; }"]
        return lines

    def _assemble(self) -> str:
        nfetch = len(self.retvals)
        sites = self.module.error_sites
        out = [f"/* Generated by flowc from graph @{self.graph.name} for a CUDA device. "
               "Do not edit. */",
               f"#define FLOWC_NSITES {len(sites)}   /* device error sites (below the kernels) */",
               templates.render("cuda", "prelude.cu.j2", block=BLOCK_SIZE, max_blocks=MAX_BLOCKS),
               f"#define FLOWC_GPU_INDEX {_gpu_index(self.graph)}"]
        if self._transfers:
            out.append(templates.render("cuda", "transfer.cu.j2", nsends=self.nsends,
                                        npeers=self.npeers))
        else:
            out += ["/* No transfers to devices of this task (codegen_templates/cuda/transfer.cu.j2). */",
                    "typedef struct flowc_xfer flowc_xfer;",
                    "static inline int flowc_xfer_finish(flowc_xfer *, flowc_status *) { return 0; }",
                    "static inline void flowc_xfer_release(flowc_xfer *) {}"]
        out.append("")
        if self.profile:
            out += [profile_exports(len(self.kernels)),
                    templates.render("cuda", "profile.cu.j2", n=len(self.kernels)), ""]
        out.extend(self.constants)
        out.extend(self.module.globals)
        out.append("")
        out.append("/* Kernels: grid-stride loops; nodes with identical kernels share one. */")
        out.extend(self.module.kernels)
        out.append("/* Device error sites (flag k + 1): node, location, message (a printf format "
                   "of the values the report carried), status code. */")
        if sites:
            out.append("static const char *const flowc_site_node[] = {"
                       + ", ".join(c_string(s[0]) for s in sites) + "};")
            out.append("static const char *const flowc_site_loc[] = {"
                       + ", ".join(c_string(s[1]) for s in sites) + "};")
            out.append("static const char *const flowc_site_msg[] = {"
                       + ", ".join(c_string(s[2]) for s in sites) + "};")
            out.append("static const int flowc_site_code[] = {"
                       + ", ".join(s[3] for s in sites) + "};")
        out.append("")
        out.append("/* Every tensor of the step is a slot of flowc_T (host structs; data in device "
                   "memory but for fetches). */")
        out.extend(self.decls)
        out.append("")
        bounds = self.part_starts + [len(self.body)]
        parts = [self.body[a:b] for a, b in zip(bounds, bounds[1:])]
        for i, lines in enumerate(parts):
            out.append(f"static __attribute__((noinline)) int flowc_part{i}(flowc_tensor *flowc_T, "
                       "const flowc_tensor *feeds, const flowc_runtime *flowc_rt, "
                       "cudaStream_t flowc_stream, int32_t *flowc_err, flowc_xfer *flowc_x, "
                       "cudaEvent_t *flowc_prof_ev, flowc_status *st) {")
            out.append("    (void)feeds; (void)flowc_rt; (void)flowc_err; (void)flowc_x; "
                       "(void)flowc_prof_ev;")
            out.extend(("    " + line) if line else "" for line in lines)
            out.append("    return 0;")
            out.append("fail:")
            out.append("    return st->code ? st->code : FLOWC_ERROR;")
            out.append("}")
            out.append("")
        owned = ", ".join(str(self.slot[v]) for v in self.owned) or "-1"
        out += [
            "extern \"C\" int flowc_cuda_entry(const flowc_tensor *feeds, flowc_tensor *fetches, "
            "const flowc_runtime *rt, void *rendezvous, int64_t timeout_ms, void *stream, "
            "flowc_status *st) {",
            "    const char *flowc_node = \"\", *flowc_loc = \"\";",
            "    cudaStream_t flowc_stream = (cudaStream_t)stream;",
            "    flowc_runtime flowc_rt_call = *rt;   /* this call's view: rendezvous, deadline */",
            "    flowc_rt_call.rendezvous = rendezvous;",
            "    flowc_rt_call.timeout_ms = timeout_ms;",
            "    const flowc_runtime *flowc_rt = &flowc_rt_call;",
            f"    static const int32_t flowc_owned[] = {{{owned}}};",
            "    long long flowc_errors[FLOWC_ERR_BYTES / 8];   /* flags, then each site's values */",
            "    const int32_t *flowc_flags = (const int32_t *)flowc_errors;",
            "    const long long *flowc_values = (const long long *)((const char *)flowc_errors "
            "+ FLOWC_ERR_FLAGS_BYTES);",
            "    (void)flowc_values;",
            "    int32_t *flowc_err = NULL;",
            f"    for (int k = 0; k < {nfetch}; k++) fetches[k].data = NULL;",
            f"    flowc_tensor *flowc_T = (flowc_tensor *)calloc({max(len(self.decls), 1)}, "
            "sizeof(flowc_tensor));",
            "    st->code = 0;",
            "    (void)feeds; (void)flowc_rt; (void)flowc_owned;",
            "    if (!flowc_T) return flowc_fail(st, FLOWC_RESOURCE_EXHAUSTED, \"\", \"\", "
            "\"out of memory\");",
            ("    flowc_xfer *flowc_x = (flowc_xfer *)calloc(1, sizeof(flowc_xfer));"
             if self._transfers else "    flowc_xfer *flowc_x = NULL;"),
            "    flowc_status flowc_xfer_st;      /* the fail path's wait for the copy stream */",
            ("    if (!flowc_x) { free(flowc_T); return flowc_fail(st, FLOWC_RESOURCE_EXHAUSTED, "
             "\"\", \"\", \"out of memory\"); }" if self._transfers else ""),
            ("    cudaEvent_t *flowc_prof_ev = flowc_prof_events();"
             if self.profile else "    cudaEvent_t *flowc_prof_ev = NULL;"),
            ("    if (!flowc_prof_ev) { flowc_fail(st, FLOWC_RESOURCE_EXHAUSTED, \"\", \"\", "
             "\"cannot make the CUDA events of --profile\"); goto fail; }" if self.profile else ""),
            "    FLOWC_CUDA(cudaMallocAsync((void **)&flowc_err, FLOWC_ERR_BYTES, flowc_stream));",
            "    FLOWC_CUDA(cudaMemsetAsync(flowc_err, 0, FLOWC_ERR_BYTES, flowc_stream));",
        ]
        for i in range(len(parts)):
            out.append(f"    if (flowc_part{i}(flowc_T, feeds, flowc_rt, flowc_stream, flowc_err, "
                       "flowc_x, flowc_prof_ev, st)) goto fail;")
        out.extend("    " + line for line in self._fetches())
        out += [
            "    flowc_node = \"\"; flowc_loc = \"\";",
            "    FLOWC_CUDA(cudaMemcpyAsync(flowc_errors, flowc_err, FLOWC_ERR_BYTES, "
            "cudaMemcpyDeviceToHost, flowc_stream));",
            "    FLOWC_CUDA(cudaStreamSynchronize(flowc_stream));",
            "    if (flowc_flags[0]) {",
            "        for (int k = 1; k <= FLOWC_NSITES; k++) {",
            "            if (!flowc_flags[k]) continue;",
        ]
        if sites:
            out.append("            const long long *v = flowc_values + (size_t)k * (FLOWC_ERR_VALUES + 1);")
            out.append("            flowc_fail(st, flowc_site_code[k - 1], flowc_site_node[k - 1], "
                       "flowc_site_loc[k - 1], flowc_site_msg[k - 1], v[1], v[2], v[3], v[4], "
                       "v[5], v[6]);")
        out += [
            "            break;",
            "        }",
            "        if (!st->code) flowc_fail(st, FLOWC_INTERNAL, \"\", \"\", \"a GPU kernel "
            "reported an error\");",
            "        goto fail;",
            "    }",
            "    if (flowc_xfer_finish(flowc_x, st)) goto fail;   /* the copy stream's sends */",
            ("    flowc_prof_finish(flowc_prof_ev, 1);" if self.profile else ""),
            "    for (size_t k = 0; k < sizeof flowc_owned / sizeof flowc_owned[0]; k++)",
            "        if (flowc_owned[k] >= 0 && flowc_T[flowc_owned[k]].data) "
            "cudaFreeAsync(flowc_T[flowc_owned[k]].data, flowc_stream);",
            "    cudaFreeAsync(flowc_err, flowc_stream);",
            "    cudaStreamSynchronize(flowc_stream);",
            "    flowc_xfer_release(flowc_x);",
            "    free(flowc_T);",
            "    return 0;",
            "fail:",
            "    cudaStreamSynchronize(flowc_stream);  /* launched work ends before buffers go */",
            "    flowc_xfer_finish(flowc_x, &flowc_xfer_st);",
            f"    for (int k = 0; k < {nfetch}; k++) {{ free(fetches[k].data); fetches[k].data = NULL; }}",
            "    for (size_t k = 0; k < sizeof flowc_owned / sizeof flowc_owned[0]; k++)",
            "        if (flowc_owned[k] >= 0 && flowc_T[flowc_owned[k]].data) "
            "cudaFree(flowc_T[flowc_owned[k]].data);",
            "    if (flowc_err) cudaFree(flowc_err);",
            "    flowc_xfer_release(flowc_x);",
            ("    flowc_prof_finish(flowc_prof_ev, 0);" if self.profile else ""),
            "    free(flowc_T);",
            "    return st->code ? st->code : FLOWC_ERROR;",
            "}",
            "",
        ]
        out += _EXPORTS.splitlines()
        return "\n".join(out) + "\n"


def _gpu_index(graph: Graph) -> int:
    """The GPU the subgraph was placed on (``/device:GPU:k``; 0 for an unplaced graph): the
    module selects it on every thread that calls in (``cudaSetDevice`` is per thread)."""
    for n in graph:
        if "/device:GPU:" in (n.assigned_device or ""):
            return gpu_index(n.assigned_device)
    return 0


_EXPORTS = f"""/* The C module ABI (runtime/module.py). Every step on a GPU runs on the device's one
   compute stream, the legacy default stream, which all modules of the process share (as
   TensorFlow runs a GPU's kernels on one compute stream): kernels of concurrent steps run in
   the order their steps enqueued them, so the host lock on a variable orders its updates on
   the device too, and a buffer one step frees (an assignment of a new size) is not reused
   while another step's kernels still read it. */
extern "C" int flowc_entry(const flowc_tensor *feeds, flowc_tensor *fetches, const flowc_runtime *rt,
                           void *rendezvous, int64_t timeout_ms, flowc_status *st) {{
    if (cudaSetDevice(FLOWC_GPU_INDEX) != cudaSuccess)
        return flowc_fail(st, FLOWC_INTERNAL, "", "", "cannot select GPU %d (no such GPU?)", FLOWC_GPU_INDEX);
    return flowc_cuda_entry(feeds, fetches, rt, rendezvous, timeout_ms, (void *)cudaStreamLegacy, st);
}}
extern "C" int flowc_abi_version(void) {{ return {ABI_VERSION}; }}
extern "C" void flowc_free(void *p) {{ free(p); }}
extern "C" size_t flowc_rendezvous_size(void) {{ return sizeof(flowc_rendezvous); }}
extern "C" int flowc_rendezvous_init(void *rv, int32_t nslots, int64_t timeout_ms) {{ return flowc_rv_init((flowc_rendezvous *)rv, nslots, timeout_ms); }}
extern "C" void flowc_rendezvous_abort(void *rv) {{ flowc_rv_abort((flowc_rendezvous *)rv); }}
extern "C" void flowc_rendezvous_destroy(void *rv) {{ flowc_rv_destroy((flowc_rendezvous *)rv); }}
extern "C" size_t flowc_queue_struct_size(void) {{ return sizeof(flowc_queue); }}
extern "C" int flowc_queue_create(void *q, int32_t ncomponents, int64_t capacity, const char *name) {{ return flowc_queue_init((flowc_queue *)q, ncomponents, capacity, name); }}
extern "C" void flowc_queue_free(void *q) {{ flowc_queue_destroy((flowc_queue *)q); }}
extern "C" void flowc_queue_shut(void *q, int32_t cancel) {{ flowc_queue_close((flowc_queue *)q, cancel); }}
extern "C" int64_t flowc_queue_length(void *q) {{ return flowc_queue_count((flowc_queue *)q); }}
/* A GPU variable's value is device memory: the runtime frees, reads and sets it through the
   module (synchronous copies, outside any step; the caller holds no step on the variable). */
extern "C" void flowc_cuda_var_release(flowc_var *v) {{
    if (v && v->value.data) {{ cudaSetDevice(FLOWC_GPU_INDEX); cudaFree(v->value.data); v->value.data = NULL; v->capacity = 0; v->initialized = 0; }}
}}
extern "C" int flowc_cuda_var_to_host(const flowc_var *v, void *dst, size_t nbytes) {{
    if (cudaSetDevice(FLOWC_GPU_INDEX) != cudaSuccess) return 1;
    if (nbytes == 0) return 0;
    if (!v->value.data || (size_t)v->capacity < nbytes) return 2;
    return cudaMemcpy(dst, v->value.data, nbytes, cudaMemcpyDeviceToHost) == cudaSuccess ? 0 : 3;
}}
extern "C" int flowc_cuda_var_from_host(flowc_var *v, const void *src, size_t nbytes) {{
    if (cudaSetDevice(FLOWC_GPU_INDEX) != cudaSuccess) return 1;
    if (!v->value.data || (size_t)v->capacity != nbytes) {{
        /* from the stream-ordered pool, as the step's own assignments allocate */
        void *p = NULL;
        if (cudaMallocAsync(&p, nbytes ? nbytes : 64, 0) != cudaSuccess) return 4;
        if (v->value.data) cudaFreeAsync(v->value.data, 0);
        v->value.data = p;
        v->capacity = (int64_t)nbytes;
    }}
    if (nbytes && cudaMemcpyAsync(v->value.data, src, nbytes, cudaMemcpyHostToDevice, 0) != cudaSuccess) return 3;
    return cudaStreamSynchronize(0) == cudaSuccess ? 0 : 3;
}}
"""
