"""``flowc train``: the training loop of a model that declares its loss, optimizer, metrics and
data (see docs/training.md).

The loop is a user-level library like the optimizers it drives: it adds
``optimizer.minimize(loss, global_step)`` to the model's graph (after the ops of
``GraphKeys.UPDATE_OPS``: batch normalization's moving averages), feeds shuffled batches of the
data set's training split to a ``Session``, evaluates the loss and the metrics on the held-out
split, and checkpoints with ``train.Saver``. The ``flowc`` command line finds the ``train``
subcommand through the ``flowc.commands`` entry-point group (``register_command``), so the
compiler never imports this module.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import math
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from compiler.ir.reachability import needed_nodes
from dsl.context import Graph
from dsl.session import BACKENDS, Session
from dsl.tensor import Tensor, static_shape
from runtime.dtypes import DType
from runtime.errors import FlowcError

__all__ = ["TrainSpec", "TrainResult", "TrainError", "DataSet", "load_data", "load_spec",
           "train", "register_command"]

DEVICES = ("auto", "cpu", "gpu")   # where `flowc train` runs its steps (--device)
MASK = "is_test"                 # the data file's held-out mask (docs/training.md)
HOLD_OUT = 0.2                   # held out when a data file has no mask
EVAL_CHUNK = 1024                # held-out examples per evaluation step
CHECKPOINT_PREFIX = "model.ckpt"
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")


class TrainError(FlowcError):
    """A model cannot be trained as asked: no loss or optimizer, bad data, bad options."""


@dataclass
class TrainSpec:
    """What training needs: the graph, a scalar ``loss``, an optimizer, scalar ``metrics``
    (means over a batch), the data file, the default settings of ``flowc train``, and the
    model's train/eval switch (``training``: a scalar bool tensor that training steps feed
    True; evaluation leaves a ``placeholder_with_default`` to its default and feeds a plain
    placeholder False)."""
    graph: Graph
    loss: Tensor
    optimizer: Any
    metrics: Dict[str, Tensor] = field(default_factory=dict)
    data: Optional[str] = None
    steps: int = 1000
    batch_size: int = 32
    eval_every: Optional[int] = None               # None: a fifth of the steps
    seed: int = 0
    name: str = "<model>"                          # the model file, for messages
    # the train/eval switch (a scalar bool tensor, usually placeholder_with_default(False)):
    # fed True in training steps, left to its default in evaluation
    training: Optional[Tensor] = None


@dataclass
class TrainResult:
    """How a run ended: the global step reached, the held-out loss and metrics, the speed."""
    step: int
    start_step: int
    loss: float
    metrics: Dict[str, float]
    examples: int                                  # held-out examples evaluated
    steps_per_second: float
    status: int = 0                                # 0, or 128 + the signal that stopped it
    checkpoint: Optional[str] = None               # the last checkpoint written


# --- models -------------------------------------------------------------------------------------
def spec_from_flow(path: str, check_data: bool = True) -> TrainSpec:
    """The ``TrainSpec`` a ``*.flow`` file declares (``loss``, ``optimizer``, ``metric``,
    ``data``, ``train(...)``)."""
    from dsl.flow import load_flow
    program = load_flow(path, check_data=check_data)
    decl = program.training
    if decl.loss is None:
        raise TrainError(f"{path}: the model declares no loss; add 'loss = ...' (a scalar)")
    if decl.optimizer is None:
        raise TrainError(f"{path}: the model declares no optimizer; add e.g. "
                         "'optimizer = adam(learning_rate=0.001)'")
    return TrainSpec(program.graph, decl.loss.value, decl.optimizer.value,
                     {k: d.value for k, d in decl.metrics.items()},
                     decl.data.value if decl.data is not None else None,
                     decl.setting("steps"), decl.setting("batch_size"),
                     decl.setting("eval_every"), decl.setting("seed"), path,
                     program.training_switch)


def spec_from_python(path: str) -> TrainSpec:
    """The ``TrainSpec`` a Python model file's ``train_spec()`` returns."""
    name = "flowc_train_" + "".join(c if c.isalnum() else "_" for c in
                                    os.path.splitext(os.path.basename(path))[0])
    module_spec = importlib.util.spec_from_file_location(name, os.path.abspath(path))
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
        make = getattr(module, "train_spec", None)
        if not callable(make):
            raise TrainError(f"{path} defines no train_spec() function; a Python model for "
                             "'flowc train' returns a dsl.trainer.TrainSpec from train_spec()")
        spec = make()
    except FlowcError:
        raise
    except Exception as e:
        raise TrainError(f"{path}: {type(e).__name__}: {e}") from e
    if not isinstance(spec, TrainSpec):
        raise TrainError(f"{path}: train_spec() returned {type(spec).__name__}, not a TrainSpec")
    spec.name = path
    return spec


def load_spec(path: str, check_data: bool = True) -> TrainSpec:
    """The ``TrainSpec`` of a model file: ``*.flow`` or ``*.py`` (``train_spec()``)."""
    if not os.path.exists(path):
        raise TrainError(f"{path}: no such file")
    if os.path.isdir(path):
        raise TrainError(f"{path} is a directory; expected a model file (*.flow or *.py)")
    suffix = os.path.splitext(path)[1]
    if suffix == ".flow":
        return spec_from_flow(path, check_data)
    if suffix == ".py":
        return spec_from_python(path)
    raise TrainError(f"{path}: cannot train a '{suffix or '(none)'}' file; expected a *.flow "
                     "model that declares its loss and optimizer, or a *.py with train_spec()")


# --- data ---------------------------------------------------------------------------------------
@dataclass
class DataSet:
    """Arrays for each fed input (by placeholder), split into training and held-out rows."""
    inputs: List[Tensor]
    train: List[np.ndarray]
    test: List[np.ndarray]
    note: Optional[str] = None                    # how the split was made, when not by the file

    @property
    def train_size(self) -> int:
        return len(self.train[0]) if self.train else 0

    @property
    def test_size(self) -> int:
        return len(self.test[0]) if self.test else 0


def fed_inputs(graph: Graph, tensors: List[Tensor]) -> List[Tensor]:
    """The placeholders ``tensors`` need, in graph order."""
    need = needed_nodes([t.output for t in tensors], [], set())
    return [Tensor(n.output(0)) for n in graph if n in need and n.op == "Placeholder"]


def _fit(name: str, array: np.ndarray, tensor: Tensor, path: str) -> np.ndarray:
    """``array`` checked against placeholder ``tensor`` and converted to its dtype."""
    want = tensor.output.type
    shape = static_shape(tensor)
    if shape is not None:
        if len(shape) == 0 or shape[0] is not None:
            raise TrainError(f"{path}: input '{name}' is {want}; to be fed batches of examples "
                             "its first dim must be '?'")
        if array.ndim != len(shape) or any(d is not None and d != a
                                           for d, a in zip(shape[1:], array.shape[1:])):
            got = "[" + ", ".join(str(d) for d in array.shape) + "]"
            raise TrainError(f"{path}: array '{name}' has shape {got}; input '{name}' is {want} "
                             f"(one row per example)")
    dt: DType = tensor.dtype
    if array.dtype == dt.np:
        return array
    if dt is DType.bool:
        ok = array.dtype == np.bool_
    elif dt.is_floating:
        ok = np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_
    else:
        ok = np.issubdtype(array.dtype, np.integer) or array.dtype == np.bool_
        if ok and array.size and np.issubdtype(array.dtype, np.integer):
            info = np.iinfo(dt.np)
            ok = info.min <= array.min() and array.max() <= info.max
    if not ok:
        raise TrainError(f"{path}: array '{name}' is {array.dtype}; input '{name}' is {want}, and "
                         f"{array.dtype} values do not convert to {dt.name} exactly")
    return array.astype(dt.np)


def load_data(path: str, inputs: List[Tensor], seed: int = 0) -> DataSet:
    """Read the npz at ``path``: one array per input (named as the input's placeholder),
    rows are examples; the bool array ``is_test`` marks the held-out rows. Without it a seeded
    ``HOLD_OUT`` fraction is held out."""
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
    except FileNotFoundError:
        raise TrainError(f"{path}: no such data file") from None
    except (OSError, ValueError) as e:
        raise TrainError(f"{path}: cannot read the data file (expected a .npz written by "
                         f"numpy.savez): {e}") from None
    have = ", ".join(sorted(arrays)) or "no arrays"
    fitted = []
    for t in inputs:
        name = t.op.name
        if name not in arrays:
            raise TrainError(f"{path}: no array '{name}' for input '{name}' {t.output.type} "
                             f"(the file has: {have})")
        fitted.append(_fit(name, arrays[name], t, path))
    sizes = {t.op.name: len(a) for t, a in zip(inputs, fitted)}
    if len(set(sizes.values())) > 1:
        raise TrainError(f"{path}: the arrays have different numbers of rows: "
                         + ", ".join(f"'{k}' {v}" for k, v in sizes.items()))
    n = next(iter(sizes.values()), 0)
    note = None
    if MASK in arrays and MASK not in sizes:
        mask = arrays[MASK]
        if mask.shape != (n,) or not (mask.dtype == np.bool_ or
                                      np.issubdtype(mask.dtype, np.integer)):
            raise TrainError(f"{path}: array '{MASK}' must be a bool vector of {n} rows (one per "
                             f"example), not {mask.dtype} {list(mask.shape)}")
        mask = mask.astype(bool)
    else:
        mask = np.zeros(n, bool)
        mask[np.random.default_rng(seed).permutation(n)[:int(round(HOLD_OUT * n))]] = True
        note = (f"{path} has no '{MASK}' array: holding out {int(mask.sum())} of {n} examples "
                f"chosen with seed {seed}")
    if n and mask.all():
        raise TrainError(f"{path}: '{MASK}' marks every example as held out; none is left to "
                         "train on")
    if n == 0:
        raise TrainError(f"{path}: the data set has no examples")
    return DataSet(list(inputs), [a[~mask] for a in fitted], [a[mask] for a in fitted], note)


# --- the loop ------------------------------------------------------------------------------------
class _Signals:
    """SIGINT/SIGTERM set ``received`` (the loop stops after its step and checkpoints); a
    second SIGINT interrupts at once."""

    def __init__(self):
        self.received: Optional[int] = None
        self._previous: Dict[int, Any] = {}

    def _handle(self, signum, frame):
        if self.received is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.received = signum

    def __enter__(self):
        for s in (signal.SIGINT, signal.SIGTERM):
            try:
                self._previous[s] = signal.signal(s, self._handle)
            except ValueError:                      # not the main thread: no handlers
                pass
        return self

    def __exit__(self, *exc):
        for s, h in self._previous.items():
            signal.signal(s, h)
        return False


def _without_node(message: str) -> str:
    """A restore error's message without its "node 'save/RestoreV2': checkpoint 'P' ..."
    preamble (the caller names the model and the checkpoint)."""
    marker = "does not match what is restored from it (nothing was restored): "
    if marker in message:
        return "it was written by another model: " + message.split(marker, 1)[1]
    return message


def _global_step(graph: Graph):
    """``train.get_or_create_global_step()`` of ``graph``."""
    from dsl import train as train_lib
    with graph.as_default():
        return train_lib.get_or_create_global_step()


def _saver_lib():
    try:
        from dsl.saver import Saver, latest_checkpoint
    except ImportError as e:
        raise TrainError(f"checkpoints are not available ({e})") from None
    return Saver, latest_checkpoint


def _fmt(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) and abs(value) >= 1e-3 else f"{value:.3g}"


def _summary(step: int, loss: float, metrics: Dict[str, float], examples: int) -> str:
    parts = [f"loss {_fmt(loss)}"] + [f"{k} {_fmt(v)}" for k, v in metrics.items()]
    return f"step {step}: {', '.join(parts)} (held-out, {examples} examples)"


def _session(graph: Graph, backend: str, device: str, name: str) -> Session:
    """The training session: on the process's GPU where it has one ("auto", as fl.Session
    places by itself), on the CPU only ("cpu"), or on a GPU or not at all ("gpu")."""
    if device not in DEVICES:
        raise TrainError(f"unknown device '{device}'; choose one of {', '.join(DEVICES)}")
    if device == "cpu":
        from dsl.config import ConfigProto
        return Session(graph=graph, backend=backend, config=ConfigProto(device_count={"GPU": 0}))
    if device == "gpu" and backend != "c":
        raise TrainError(f"--device gpu needs the compiled backend, not '{backend}'")
    session = Session(graph=graph, backend=backend)
    if device == "gpu" and not session.gpus:
        from runtime.cuda_module import cuda_status
        why = cuda_status()[1] or "this process has no GPU"
        session.close()
        raise TrainError(f"{name}: --device gpu, but no GPU is usable: {why}")
    return session


class Trainer:
    """One training run of a ``TrainSpec`` (see ``train``)."""

    def __init__(self, spec: TrainSpec, data: DataSet, backend: str = "c",
                 checkpoint_dir: Optional[str] = None, max_to_keep: int = 5,
                 device: str = "auto"):
        self.spec = spec
        self.data = data
        self.checkpoint_dir = checkpoint_dir
        graph = spec.graph
        try:
            self.global_step = _global_step(graph)
            with graph.as_default():
                # the model's update ops (batch normalization's moving averages) run with each
                # training step, as tf.contrib.training.create_train_op runs them
                from dsl.context import control_dependencies
                from dsl.variables import GraphKeys, global_variables_initializer
                with control_dependencies(graph.get_collection(GraphKeys.UPDATE_OPS)):
                    self.train_op = spec.optimizer.minimize(spec.loss,
                                                            global_step=self.global_step)
                self.init_op = global_variables_initializer()
        except FlowcError:
            raise
        except (ValueError, TypeError, NotImplementedError) as e:
            raise TrainError(f"{spec.name}: cannot build the training step: {e}") from None
        self.saver = None
        if checkpoint_dir is not None:
            Saver, self._latest = _saver_lib()
            with graph.as_default():
                self.saver = Saver(max_to_keep=max_to_keep)
        self.session = _session(graph, backend, device, spec.name)
        self.eval_fetches = [spec.loss] + list(spec.metrics.values())
        needed = {t.output for t in fed_inputs(graph, [spec.loss])}
        # (placeholder, training rows) of the inputs a training step needs
        self.train_feeds = [(t, a) for t, a in zip(data.inputs, data.train) if t.output in needed]
        # what training steps feed besides the batch: the switch on; evaluation leaves a
        # placeholder_with_default to its default (off: the inference step has no dropout
        # ops at all) and feeds a plain placeholder False
        switch = spec.training
        self.mode_feed = {switch: True} if switch is not None else {}
        self.eval_feed = {switch: False} if switch is not None and \
            switch.op.node.op == "Placeholder" else {}

    def where(self) -> str:
        """Where the steps run: the session's first GPU, or the CPU."""
        return self.session.gpus[0] if self.session.gpus else "the CPU"

    def train_feed(self, rows) -> dict:
        """The feed of a training step on ``rows`` of the training split."""
        feed = {t: a[rows] for t, a in self.train_feeds}
        feed.update(self.mode_feed)
        return feed

    # --- state --------------------------------------------------------------------------
    def start(self, resume: bool) -> Tuple[int, Optional[str]]:
        """Initialise the variables, or restore the latest checkpoint; (step, checkpoint)."""
        if resume:
            path = self._latest(self.checkpoint_dir) if os.path.isdir(self.checkpoint_dir) \
                else None
            if path is not None:
                try:
                    self.saver.restore(self.session, path)
                except FlowcError as e:
                    # the checkpoint's own words, said of the model being trained (the
                    # restore node was made here, not in the model file)
                    detail = getattr(e, "message", None) or str(e)
                    raise TrainError(f"{self.spec.name}: cannot resume from checkpoint {path} "
                                     f"(nothing was restored): {_without_node(detail)}") from None
                return int(self.session.run(self.global_step)), path
        self.session.run(self.init_op)
        return 0, None

    def save(self, step: int) -> Optional[str]:
        if self.saver is None:
            return None
        os.makedirs(self.checkpoint_dir, exist_ok=True)
        return self.saver.save(self.session, os.path.join(self.checkpoint_dir,
                                                          CHECKPOINT_PREFIX), global_step=step,
                               write_meta_graph=False)

    # --- steps --------------------------------------------------------------------------
    def evaluate(self) -> Tuple[float, Dict[str, float]]:
        """The loss and metrics on the held-out split, averaged over its examples."""
        n = self.data.test_size
        totals = np.zeros(len(self.eval_fetches))
        for lo in range(0, n, EVAL_CHUNK):
            feed = {t: a[lo:lo + EVAL_CHUNK] for t, a in zip(self.data.inputs, self.data.test)}
            feed.update(self.eval_feed)
            values = self.session.run(self.eval_fetches, feed)
            totals += np.asarray(values, np.float64) * min(EVAL_CHUNK, n - lo)
        means = totals / max(n, 1)
        return float(means[0]), {k: float(v) for k, v in zip(self.spec.metrics, means[1:])}

    def batches(self, start: int, batch_size: int, seed: int):
        """(step, rows) from ``start`` on: each epoch a new permutation of the training rows,
        drawn from ``(seed, epoch)``, so a resumed run sees the batches it would have."""
        n = self.data.train_size
        size = min(batch_size, n)
        per_epoch = max(n // size, 1)
        step, epoch, order = start, -1, None
        while True:
            e, i = divmod(step, per_epoch)
            if e != epoch:
                epoch, order = e, np.random.default_rng([seed, e]).permutation(n)
            yield step, order[i * size:(i + 1) * size]
            step += 1


def train(spec: TrainSpec, *, steps: Optional[int] = None, batch_size: Optional[int] = None,
          eval_every: Optional[int] = None, data: Optional[str] = None,
          seed: Optional[int] = None, checkpoint_dir: Optional[str] = None,
          resume: bool = False, backend: str = "c", progress: Optional[bool] = None,
          logdir: Optional[str] = None, device: str = "auto", losses: Optional[str] = None,
          out=None, err=None) -> TrainResult:
    """Train ``spec``'s model; arguments given override the spec's settings.

    Prints one line per evaluation and a final summary to ``out`` (stdout), a progress bar and
    notes to ``err`` (stderr; the bar only on a terminal, or when ``progress`` is True).
    SIGINT and SIGTERM stop the run after the current step, with a checkpoint when
    ``checkpoint_dir`` is given; the result's ``status`` is then 128 + the signal number.
    With ``logdir``, TensorBoard scalars go there: ``train/loss`` every step, ``eval/loss``,
    ``eval/<metric>`` and ``train/steps_per_sec`` at every evaluation, and the graph.
    ``device`` is where the steps run (``DEVICES``: "auto" is the GPU where the process has
    one, as ``fl.Session`` places); with ``losses``, every step's training loss is written to
    that file as ``step<TAB>loss`` lines (full precision), e.g. to compare two devices' runs.
    """
    out = out or sys.stdout
    err = err or sys.stderr
    steps = spec.steps if steps is None else steps
    batch_size = spec.batch_size if batch_size is None else batch_size
    seed = spec.seed if seed is None else seed
    eval_every = spec.eval_every if eval_every is None else eval_every
    if eval_every is None:
        eval_every = max(steps // 5, 1)
    for what, value, low in (("steps", steps, 0), ("batch size", batch_size, 1),
                             ("eval every", eval_every, 1), ("seed", seed, 0)):
        if value < low:
            raise TrainError(f"{what} must be at least {low}, got {value}")
    if backend not in BACKENDS:
        raise TrainError(f"unknown backend '{backend}'; choose one of {', '.join(BACKENDS)}")
    if resume and checkpoint_dir is None:
        raise TrainError("--resume needs --checkpoint-dir (where the checkpoints are)")
    for what, t in [("the loss", spec.loss)] + [(f"metric '{k}'", v)
                                                 for k, v in spec.metrics.items()]:
        if static_shape(t) is None or len(static_shape(t)) != 0:
            raise TrainError(f"{spec.name}: {what} must be a scalar, but {t.name} is "
                             f"{t.output.type}")
    _check_switch(spec)
    path = data if data is not None else spec.data
    if path is None:
        raise TrainError(f"{spec.name}: no data: declare 'data = \"file.npz\"' in the model or "
                         "give --data FILE.npz")
    fetched = [spec.loss] + list(spec.metrics.values())
    switch = spec.training.output if spec.training is not None else None
    dataset = load_data(path, [t for t in fed_inputs(spec.graph, fetched)
                               if t.output != switch], seed)
    if dataset.note:
        print(f"flowc: note: {dataset.note}", file=err)
    trainer = Trainer(spec, dataset, backend, checkpoint_dir, device=device)
    if device != "auto" or trainer.session.gpus:
        print(f"flowc: training on {trainer.where()}", file=err)
    start, restored = trainer.start(resume)
    if restored:
        print(f"flowc: resuming from {restored} (step {start})", file=err)
    elif resume:
        print(f"flowc: note: no checkpoint in {checkpoint_dir}: starting from step 0", file=err)
    log = _ScalarLog(logdir, spec.graph, losses)
    try:
        return _loop(trainer, start, steps, batch_size, eval_every, seed, progress, out, err, log)
    finally:
        log.close()


def _check_switch(spec: TrainSpec) -> None:
    """The spec's ``training`` switch, if any, is a scalar bool tensor of its graph that a
    step can feed."""
    t = spec.training
    if t is None:
        return
    if not isinstance(t, Tensor) or t.output.node.graph is not spec.graph:
        raise TrainError(f"{spec.name}: the training switch must be a tensor of the model's "
                         f"graph, got {t!r}")
    if t.dtype is not DType.bool or static_shape(t) is None or len(static_shape(t)) != 0:
        raise TrainError(f"{spec.name}: the training switch must be a scalar bool, but "
                         f"{t.name} is {t.output.type}")
    if t.op.node.op not in ("Placeholder", "PlaceholderWithDefault"):
        raise TrainError(f"{spec.name}: the training switch {t.name} is a {t.op.node.op}, "
                         "which a step cannot feed; use fl.placeholder_with_default(False, [])")


class _ScalarLog:
    """TensorBoard scalars of a run (nothing when there is no logdir)."""

    def __init__(self, logdir: Optional[str], graph: Graph, losses: Optional[str] = None):
        self.writer = None
        if logdir:
            from dsl.summary import FileWriter
            self.writer = FileWriter(logdir, graph=graph, flush_secs=10)
        self.losses = None
        if losses:
            try:
                self.losses = open(losses, "w", encoding="utf-8")
            except OSError as e:
                raise TrainError(f"cannot write the losses file {losses}: {e.strerror}") from None

    def loss(self, step: int, value: float) -> None:
        """A training step's loss: to TensorBoard, and to the losses file."""
        if self.losses is not None:
            self.losses.write(f"{step}\t{value!r}\n")
        self.scalars(step, {"train/loss": value})

    def scalars(self, step: int, values: Dict[str, float]) -> None:
        if self.writer is not None:
            for tag, value in values.items():
                self.writer.add_scalar(tag, value, step)

    def evaluation(self, step: int, loss: float, metrics: Dict[str, float], rate: float) -> None:
        values = {"eval/loss": loss}
        values.update({f"eval/{k}": v for k, v in metrics.items()})
        if rate > 0:
            values["train/steps_per_sec"] = rate
        self.scalars(step, values)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.losses is not None:
            self.losses.close()


def _loop(trainer: Trainer, start: int, steps: int, batch_size: int, eval_every: int, seed: int,
          progress: Optional[bool], out, err, log: _ScalarLog) -> TrainResult:
    from tqdm import tqdm
    spec, dataset = trainer.spec, trainer.data
    show = progress if progress is not None else err.isatty()
    bar = tqdm(total=steps, initial=min(start, steps), unit="step", file=err, disable=not show,
               dynamic_ncols=True, leave=False, smoothing=0.1)

    def say(line: str) -> None:
        if show:
            bar.write(line, file=out)
        else:
            print(line, file=out, flush=True)

    checkpoint = None
    step = timed_from = start
    loss_avg = None
    train_seconds = 0.0
    train_feed = trainer.train_feed
    fetches = [spec.loss, trainer.train_op]
    run = trainer.session.run
    last_postfix = 0.0
    with _Signals() as signals, contextlib.closing(bar):
        t0 = time.perf_counter()
        if step < steps:
            for step, rows in trainer.batches(start, batch_size, seed):
                loss_value = run(fetches, train_feed(rows))[0]
                step += 1
                if not math.isfinite(loss_value):
                    raise TrainError(f"{spec.name}: the loss is {loss_value} at step {step}; "
                                     "try a smaller learning rate")
                loss_avg = loss_value if loss_avg is None else 0.95 * loss_avg + 0.05 * loss_value
                log.loss(step, float(loss_value))
                if step == start + 1:                # the first step compiled it: not timed
                    t0, timed_from = time.perf_counter(), step
                bar.update(1)
                now = time.perf_counter()
                if show and now - last_postfix > 0.2:
                    bar.set_postfix_str(f"loss {loss_avg:.4f}", refresh=False)
                    last_postfix = now
                if signals.received is not None or step >= steps:
                    break
                if step % eval_every == 0:
                    train_seconds += time.perf_counter() - t0      # evaluation: not timed
                    loss, metrics = trainer.evaluate()
                    say(_summary(step, loss, metrics, dataset.test_size))
                    log.evaluation(step, loss, metrics, (step - timed_from) / train_seconds
                                   if train_seconds > 0 and step > timed_from else 0.0)
                    checkpoint = trainer.save(step) or checkpoint
                    t0 = time.perf_counter()
        train_seconds += time.perf_counter() - t0
        if signals.received is not None:
            bar.close()
            checkpoint = trainer.save(step) or checkpoint
            name = signal.Signals(signals.received).name
            saved = f"saved {checkpoint}" if checkpoint and trainer.saver else \
                "no --checkpoint-dir, nothing saved"
            print(f"flowc: {name} at step {step}: stopped ({saved})", file=err)
            return TrainResult(step, start, float("nan"), {}, 0,
                               (step - timed_from) / train_seconds if train_seconds else 0.0,
                               128 + signals.received, checkpoint)
        loss, metrics = trainer.evaluate()
        checkpoint = trainer.save(step) or checkpoint
    rate = (step - timed_from) / train_seconds if train_seconds > 0 else 0.0
    log.evaluation(step, loss, metrics, rate if step > timed_from else 0.0)
    line = _summary(step, loss, metrics, dataset.test_size)
    print(f"{line}, {rate:.0f} steps/s" if step > timed_from else line, file=out, flush=True)
    if checkpoint:
        print(f"flowc: saved {checkpoint}", file=err)
    return TrainResult(step, start, loss, metrics, dataset.test_size, rate, 0, checkpoint)


# --- the command line ----------------------------------------------------------------------------
def _int_at_least(minimum: int, what: str):
    """An argparse type: an integer of at least ``minimum``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected a {what} integer, got {value}")
        return value
    return parse


_positive = _int_at_least(1, "positive")
_natural = _int_at_least(0, "non-negative")


def register_command(subparsers) -> None:
    """Add ``flowc train`` to the ``flowc`` command line (the ``flowc.commands`` entry point)."""
    p = subparsers.add_parser(
        "train", help="train a model that declares its loss, optimizer and data",
        description="Train a *.flow model that declares its loss, optimizer, metrics and data "
        "(or a *.py model with train_spec()): shuffled batches of the training split, a "
        "progress bar, the loss and metrics on the held-out split every K steps and at the end, "
        "and checkpoints. See docs/training.md.")
    p.add_argument("model", metavar="MODEL", help="model file (*.flow, or *.py with train_spec())")
    p.add_argument("--steps", type=_natural, metavar="N",
                   help="train until the global step is N (default: the model's train(steps=))")
    p.add_argument("--batch-size", type=_positive, metavar="B",
                   help="examples per step (default: the model's train(batch_size=))")
    p.add_argument("--eval-every", type=_positive, metavar="K",
                   help="evaluate on the held-out split (and checkpoint) every K steps")
    p.add_argument("--data", metavar="FILE.npz",
                   help="data file instead of the model's 'data' (arrays named as the inputs, "
                        "bool 'is_test' marks the held-out rows)")
    p.add_argument("--seed", type=_natural, metavar="S",
                   help="seed of the batch shuffling (default: the model's train(seed=), or 0)")
    p.add_argument("--checkpoint-dir", metavar="D",
                   help="write checkpoints to D at every evaluation, at the end, and when "
                        "interrupted")
    p.add_argument("--resume", action="store_true",
                   help="continue from the latest checkpoint in --checkpoint-dir")
    p.add_argument("--backend", choices=BACKENDS, default="c",
                   help="run steps as compiled C (default) or on the numpy interpreter")
    p.add_argument("--threads", type=_positive, metavar="T",
                   help="threads of the BLAS library (OPENBLAS_NUM_THREADS; 1 is often fastest "
                        "for small models on a busy machine)")
    p.add_argument("--logdir", metavar="DIR",
                   help="write TensorBoard scalars (train/loss, eval/loss, eval/<metric>, "
                        "train/steps_per_sec) and the graph to DIR (needs tensorboardX: the "
                        "tensorboard extra)")
    p.add_argument("--device", choices=DEVICES, default="auto",
                   help="where the steps run: auto (the GPU where the process has one, as "
                        "fl.Session places; FLOWC_CUDA_SIMULATOR=1 gives it a simulated one), "
                        "cpu, or gpu (an error without one)")
    p.add_argument("--losses", metavar="FILE",
                   help="write every step's training loss to FILE as 'step<TAB>loss' lines")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=cmd_train)


def cmd_train(args: argparse.Namespace) -> int:
    """``flowc train``: the exit status is 0, or 128 + the signal that interrupted it."""
    if args.threads is not None:                 # read by OpenBLAS when a step first loads it
        for var in BLAS_THREAD_VARIABLES:
            os.environ[var] = str(args.threads)
    spec = load_spec(args.model, check_data=args.data is None)
    result = train(spec, steps=args.steps, batch_size=args.batch_size,
                   eval_every=args.eval_every, data=args.data, seed=args.seed,
                   checkpoint_dir=args.checkpoint_dir, resume=args.resume, backend=args.backend,
                   progress=False if args.quiet else None, logdir=args.logdir,
                   device=args.device, losses=args.losses)
    return result.status
