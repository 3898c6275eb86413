"""Training steps on a GPU for bench_gpu.py: the MLP of bench_train_mlp.py and the CNN of
bench_train_cnn.py trained through ``fl.Session`` (which puts every op with a GPU kernel on
GPU:0 when the process has a GPU), checked against the same session on the CPU
(``ConfigProto(device_count={"GPU": 0})``) and against PyTorch on the same GPU, then timed.

Each step feeds the batch from host memory, in flowc (a feed) and in PyTorch (``.cuda()``).
"""
from __future__ import annotations

from typing import Callable, List, Tuple

import numpy as np

import bench_train_cnn as cnn
import bench_train_mlp as mlp
import dsl as fl

STEPS_CHECKED = 5
CPU_ONLY = fl.ConfigProto(device_count={"GPU": 0})


def flowc_mlp(batch: int):
    model = mlp.FlowcModel(mlp.init_params())
    x, labels = mlp.sample_batch(batch)
    return (model.graph, model.x, model.labels, model.loss, model.train_op, model.init,
            x, labels)


def flowc_cnn(batch: int):
    g, x, labels, loss, train_op, init, _ = cnn.flowc_model(cnn.init_params())
    xv, lv = cnn.sample_batch(batch)
    return g, x, labels, loss, train_op, init, xv, lv


def flowc_session(case, config=None):
    """(the session, a step returning the loss, a step returning nothing)."""
    g, x, labels, loss, train_op, init, xv, lv = case
    sess = fl.Session(graph=g, config=config)
    sess.run(init)
    feed = {x: xv, labels: lv}
    return (sess, lambda: float(sess.run([loss, train_op], feed)[0]),
            lambda: sess.run(train_op, feed))


def devices_of(sess) -> List[str]:
    """Where the session's variables live (GPU:0 when the step went to the GPU)."""
    return sorted({d.rsplit("/", 1)[-1] for d in sess.variable_devices().values()})


def torch_mlp(torch, batch: int) -> Tuple[Callable[[], float], Callable[[], object]]:
    params = mlp.init_params()
    xv, lv = mlp.sample_batch(batch)
    layers = torch.nn.ModuleList()
    for w, b in params:
        layer = torch.nn.Linear(*w.shape)
        with torch.no_grad():
            layer.weight.copy_(torch.from_numpy(w.T.copy()))
            layer.bias.copy_(torch.from_numpy(b))
        layers.append(layer)
    layers = layers.cuda()
    opt = torch.optim.SGD(layers.parameters(), lr=mlp.LEARNING_RATE)
    xh, lh = torch.from_numpy(xv), torch.from_numpy(lv)

    def step():
        x, labels = xh.cuda(), lh.cuda()
        h = x
        for k, layer in enumerate(layers):
            h = layer(h)
            if k < len(layers) - 1:
                h = torch.relu(h)
        loss = torch.nn.functional.cross_entropy(h, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return lambda: float(step().detach()), step


def torch_cnn(torch, batch: int) -> Tuple[Callable[[], float], Callable[[], object]]:
    """bench_train_cnn's PyTorch model, on the GPU (NCHW; the input converted once)."""
    F = torch.nn.functional
    xv, lv = cnn.sample_batch(batch)
    modules = cnn.torch_layers(torch, cnn.init_params()).cuda()
    conv1, conv2, dense, out = modules
    opt = torch.optim.SGD(modules.parameters(), lr=cnn.LEARNING_RATE)
    xh = torch.from_numpy(xv).permute(0, 3, 1, 2).contiguous()
    lh = torch.from_numpy(lv)

    def step():
        x, labels = xh.cuda(), lh.cuda()
        h = F.max_pool2d(F.relu(conv1(x)), 2)
        h = F.max_pool2d(F.relu(conv2(h)), 2).permute(0, 2, 3, 1).reshape(x.shape[0], -1)
        loss = F.cross_entropy(out(F.relu(dense(h))), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return lambda: float(step().detach()), step


def check_losses(name: str, gpu: Callable[[], float], cpu: Callable[[], float],
                 torch_loss: Callable[[], float], rtol: float) -> None:
    """The first steps' losses on the GPU equal the CPU session's and PyTorch's."""
    g = [gpu() for _ in range(STEPS_CHECKED)]
    c = [cpu() for _ in range(STEPS_CHECKED)]
    t = [torch_loss() for _ in range(STEPS_CHECKED)]
    print(f"{name} losses: flowc GPU {np.round(g, 5).tolist()}, flowc CPU "
          f"{np.round(c, 5).tolist()}, torch GPU {np.round(t, 5).tolist()}")
    np.testing.assert_allclose(g, c, rtol=rtol, err_msg=f"{name}: GPU vs CPU session")
    np.testing.assert_allclose(g, t, rtol=rtol, err_msg=f"{name}: flowc vs PyTorch on the GPU")
