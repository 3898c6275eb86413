"""What a loop's gradient saves per iteration: a value the backward loop needs only the shape
of (a loop variable that grows by ``concat``, the input of ``expand_dims``) is saved as its
shape, or made again as a constant when the shape is static, not saved whole; the gradients
stay those of the unrolled graph, of finite differences and of the interpreter."""
import numpy as np

import dsl as fl
from compiler.codegen.control_flow import saved_bytes_per_iteration
from compiler.step import make_step_graph, optimize
from oracle import check_against_interpreter

T, B, H = 4, 2, 3


def _growing_loop(xs, h0, W, n):
    """An RNN that collects its states in a loop variable growing by one row per step."""
    def body(i, h, hs):
        h2 = fl.tanh(fl.matmul(h, W) + fl.gather(xs, i))
        return i + 1, h2, fl.concat([hs, fl.expand_dims(h2, 0)], 0)

    _, _, hs = fl.while_loop(lambda i, h, hs: i < n, body, [0, h0, fl.zeros([0, B, H], fl.f64)],
                             shape_invariants=[[], [B, H], [None, B, H]])
    return hs


def _numeric(loss, feeds, x, eps=1e-6):
    base = {k: np.array(v) for k, v in feeds.items()}
    out = np.zeros_like(base[x])
    with fl.Session(graph=loss.graph, backend="interpreter") as s:
        for idx in np.ndindex(out.shape):
            up, down = dict(base), dict(base)
            up[x], down[x] = base[x].copy(), base[x].copy()
            up[x][idx] += eps
            down[x][idx] -= eps
            out[idx] = (s.run(loss, up) - s.run(loss, down)) / (2 * eps)
    return out


def _saved(graph, feeds, fetches):
    step = make_step_graph(graph, [f.output for f in feeds], [f.output for f in fetches])
    optimize(step)
    return saved_bytes_per_iteration(step.graph)


def test_a_growing_accumulator_is_saved_as_its_shape_not_whole(graph):
    xs = fl.placeholder(fl.f64, [T, B, H], name="xs")
    h0 = fl.placeholder(fl.f64, [B, H], name="h0")
    W = fl.placeholder(fl.f64, [H, H], name="W")
    n = fl.placeholder(fl.i32, [], name="n")
    hs = _growing_loop(xs, h0, W, n)
    grads = fl.gradients(fl.reduce_sum(hs * hs), [xs, h0, W])
    [(frame, count, nbytes)] = _saved(graph, [xs, h0, W, n], grads)
    # per iteration: the counter i (4 bytes), the shape of the accumulator (3 x i32), the
    # state h (read by the matmul's gradient) and tanh's output (its gradient): 2 x 6 f64.
    # Saving the accumulator itself would add a term in its run-time length ("?").
    assert (frame, count, nbytes) == ("while", 4, str(4 + 12 + 2 * B * H * 8))


def test_gradients_of_a_growing_accumulator_match_unrolled_finite_differences_and_c(graph, rng):
    xs = fl.placeholder(fl.f64, [T, B, H], name="xs")
    h0 = fl.placeholder(fl.f64, [B, H], name="h0")
    W = fl.placeholder(fl.f64, [H, H], name="W")
    n = fl.placeholder(fl.i32, [], name="n")
    hs = _growing_loop(xs, h0, W, n)
    weights = fl.constant(np.arange(1.0, T * B * H + 1).reshape(T, B, H) / 10.0)
    loss = fl.reduce_sum(hs * fl.slice(weights, [0, 0, 0], fl.shape(hs)))
    grads = fl.gradients(loss, [xs, h0, W])
    feeds = {xs: rng.normal(size=(T, B, H)) * 0.5, h0: rng.normal(size=(B, H)),
             W: rng.normal(size=(H, H)) * 0.5}
    for steps in (1, T):
        h, rows = h0, []
        for t in range(steps):
            h = fl.tanh(fl.matmul(h, W) + xs[t])
            rows.append(h)
        unrolled_loss = fl.reduce_sum(fl.stack(rows) * weights[:steps])
        unrolled = fl.gradients(unrolled_loss, [xs, h0, W])
        full = {**feeds, n: np.int32(steps)}
        got = check_against_interpreter(graph, {"gxs": grads[0], "gh0": grads[1], "gW": grads[2]},
                                        full)
        with fl.Session(graph=graph, backend="interpreter") as s:
            want = s.run(unrolled, feeds)
        for x, a, b in zip((xs, h0, W), got.values(), want):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(a, _numeric(loss, full, x), rtol=1e-5, atol=1e-6)
