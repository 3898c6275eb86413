"""Compiled loops allocate the buffers of static size their iterations compute once, at the
loop's entry: the C of a loop body (and of the kernels it calls) has no allocation, the loop
variables take over the body's buffers by swapping pointers, and pops of static shape fill a
buffer that is already there. Results stay the interpreter's."""
import re

import numpy as np

import dsl as fl
from compiler.codegen.emitter import emit_c
from compiler.step import make_step_graph, optimize
from oracle import check_against_interpreter

# How generated code allocates a tensor's buffer (a kernel's own scratch space is not counted).
ALLOCATIONS = ("flowc_alloc(", "flowc_cf_copy(")


def _source(graph, feeds, fetches):
    step = make_step_graph(graph, [f.output for f in feeds], [f.output for f in fetches])
    optimize(step)
    return emit_c(step.graph, step.feeds, step.retvals).source


def _blocks(source: str, opener: str):
    """The text of every block that starts with ``opener`` (up to its matching brace)."""
    out = []
    for m in re.finditer(re.escape(opener), source):
        depth, k = 0, m.end() - 1
        while True:
            depth += {"{": 1, "}": -1}.get(source[k], 0)
            if depth == 0:
                break
            k += 1
        out.append(source[m.start():k + 1])
    return out


def _allocations_per_iteration(source: str):
    """Allocating calls in loop bodies, and in the kernels those bodies call."""
    kernels = {m.group(1): body for m in re.finditer(
        r"static __attribute__\(\(noinline\)\) int (k[0-9a-f]+_\w+)\(.*?\{\n(.*?)\nfail:", source, re.S)
        for body in [m.group(2)]}
    found = []
    for loop in _blocks(source, "while (1) {"):
        # leaving the loop (once per run of it) copies the variables out
        loop = re.sub(r"if \(!\([^\n]*\)\) \{\n.*?break;\n\s*\}", "", loop, flags=re.S)
        for a in ALLOCATIONS:
            if a in loop:
                found.append(("loop", a))
        for name in set(re.findall(r"\b(k[0-9a-f]+_\w+)\(", loop)):
            found += [(name, a) for a in ALLOCATIONS if a in kernels[name]]
    return found


def _rnn_with_gradients(T=5, B=3, H=4):
    xs = fl.placeholder(fl.f32, [T, B, H], name="xs")
    W = fl.placeholder(fl.f32, [2 * H, H], name="W")
    n = fl.placeholder(fl.i32, [], name="n")

    def body(i, h, c):
        z = fl.matmul(fl.concat([fl.gather(xs, i), h], 1), W)
        c2 = fl.sigmoid(z) * c + fl.tanh(z)
        return i + 1, fl.tanh(c2) * 0.5, c2

    zeros = fl.zeros([B, H])
    _, h, c = fl.while_loop(lambda i, h, c: i < n, body, [0, zeros, zeros])
    loss = fl.reduce_sum(h * h) + fl.reduce_sum(c)
    return (xs, W, n), [h, c] + fl.gradients(loss, [xs, W])


def test_loop_bodies_of_static_shapes_allocate_nothing_per_iteration(graph):
    (xs, W, n), fetches = _rnn_with_gradients()
    source = _source(graph, [xs, W, n], fetches)
    assert source.count("while (1) {") == 2                 # the loop and its gradient
    assert _allocations_per_iteration(source) == []
    assert re.search(r"/\* \d+ buffers of static size for the loop's iterations, \d+ bytes: "
                     r"allocated once \*/", source)


def test_the_check_finds_allocations_in_a_loop_of_dynamic_shapes(graph):
    """(The check above can fail: a loop whose values have run-time shapes allocates.)"""
    x = fl.placeholder(fl.f32, [None], name="x")
    n = fl.placeholder(fl.i32, [], name="n")
    _, y = fl.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, fl.tanh(v) * 2.0), [0, x])
    assert _allocations_per_iteration(_source(graph, [x, n], [y]))


def test_loops_with_preallocated_buffers_compute_what_the_interpreter_does(graph, rng):
    (xs, W, n), fetches = _rnn_with_gradients()
    feeds = {xs: rng.normal(size=xs.shape).astype(np.float32),
             W: (rng.normal(size=W.shape) * 0.5).astype(np.float32)}
    for steps in (0, 1, 5):
        check_against_interpreter(graph, fetches, {**feeds, n: np.int32(steps)})


def test_loop_variables_that_swap_repeat_or_keep_their_value(graph):
    """Next values that are another variable's buffer, the same body value twice, or the
    variable itself: the pointer swap must not take a buffer two variables share."""
    n = fl.placeholder(fl.i32, [], name="n")
    a0 = fl.constant([1.0, 2.0])
    b0 = fl.constant([3.0, 5.0])

    def body(i, a, b, c, d, keep):
        s = a + b
        return i + 1, b, a, s, s, keep

    out = fl.while_loop(lambda i, *_: i < n, body, [0, a0, b0, a0, b0, b0])
    for steps in (0, 1, 2, 5):
        check_against_interpreter(graph, out[1:], {n: np.int32(steps)})
