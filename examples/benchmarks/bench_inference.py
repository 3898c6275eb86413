"""Inference of models imported from ONNX: a ResNet-18-style CNN, a MobileNetV2-style CNN (both
3x96x96), a Transformer encoder and an LSTM (inference_models.py), at batches 1 and 32, on one
thread and on all, run by flowc and by onnxruntime; an 8-node MLP (the cost of a call); and
each model's cold compile.

    python3 examples/benchmarks/bench_inference.py [--quick] [--threads T]
                                                    [--models resnet18,...] [--batches 1,32]
                                                    [--no-compile] [--no-graphdef]

flowc runs each model as a user would: ``flowc compile MODEL.onnx -o DIR`` (in this process),
then ``runtime.load_artifact(DIR).run({...})`` (the "flowc C" row, the one the ratios are of),
and the same ONNX graph imported into a ``Session`` (``dsl.onnx.import_graph``, then
``Session.run``). onnxruntime runs the same file (``InferenceSession``, CPU, its intra-op
threads set to the thread count). TensorFlow cannot run an ONNX file itself; the two CNNs
also run from a frozen TensorFlow GraphDef ("GraphDef" rows: ``inference_models.graphdef_twin``
writes the same layers and weights in NHWC as a frozen Keras model has them, ``flowc compile
MODEL.pb``), beside onnxruntime on the ONNX twin and, where TensorFlow is installed, a TF1
session on the .pb (the rows named ``MODEL .pb``).
Before anything is timed, the artifact's outputs must agree with onnxruntime's (and the
Session's with the artifact's) to 1e-3 of their scale; rows are timed in interleaved rounds
(``bench_train_mlp.interleaved_medians``): medians of 60 calls at batch 1 (12 a round, the order
of the systems rotating from round to round; a millisecond row timed 4 calls a round could
not tell 5% apart from the machine's noise) and of 8 at batch 32.

Thread counts: each count runs in a process of its own (BLAS and OpenMP read theirs when they
load), with ``--threads T`` semantics (bench_common.apply_threads); without ``--threads``, one
thread and all the machine's cores. The compile rows time ``flowc compile`` as a new process
into an empty cache folder (``FLOWC_CACHE_DIR``): imports, import of the ONNX file, passes, C
generation and ``cc``; the note gives the CPU time of the command and its compilers.
"""
from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from typing import List, Optional, Sequence, Tuple

import numpy as np

from bench_common import FLOWC, NOT_INSTALLED, Frameworks, Result, optional_import, run_alone
from inference_models import MODELS

NAME = "inference"
BATCHES = (1, 32)
SESSION = "flowc C (Session.run)"
ORT = "onnxruntime"
TF = "TensorFlow (TF1 session)"
GRAPHDEF_MODELS = ("resnet18", "mobilenetv2")      # also run from a GraphDef
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _bench(model: str, batch: int, threads: int) -> str:
    return f"{MODELS[model].short} b{batch}, {threads} thread{'s' if threads > 1 else ''}"


def _compile(path: str, out: str) -> None:
    """``flowc compile path -o out`` in this process (its report not printed)."""
    from compiler.cli import main as flowc
    with contextlib.redirect_stdout(io.StringIO()):
        rc = flowc(["compile", path, "-o", out])
    if rc != 0:
        raise SystemExit(f"flowc compile {path} failed ({rc})")


def _agree(name: str, got: Sequence[np.ndarray], want: Sequence[np.ndarray], what: str) -> None:
    for g, w in zip(got, want):
        scale = float(np.max(np.abs(w))) or 1.0
        if g.shape != w.shape or not np.allclose(g, w, rtol=1e-3, atol=1e-3 * scale):
            raise SystemExit(f"{name}: flowc and {what} disagree (largest difference "
                             f"{float(np.max(np.abs(g - w))):.3g} at scale {scale:.3g}); "
                             "not timing it")


def measure_here(models: Sequence[str], batches: Sequence[int], threads: int,
                 quick: bool, graphdef: bool = True) -> List[Result]:
    """Every model at every batch on ``threads`` threads, in this process (its BLAS and OpenMP
    thread variables already set)."""
    import onnx
    import dsl as fl
    from bench_train_mlp import interleaved_medians
    from dsl.onnx import import_graph
    from runtime import load_artifact
    ort = optional_import("onnxruntime")
    results: List[Result] = []
    work = tempfile.mkdtemp(prefix="flowc-bench-inference-")
    atexit.register(shutil.rmtree, work, True)        # its artifacts: ~0.5-0.9 GB a pass
    for name in models:
        for batch in batches:
            bench = _bench(name, batch, threads)
            print(f"  {bench} ...", file=sys.stderr, flush=True)
            model, inputs = MODELS[name].build(batch)
            path = os.path.join(work, f"{name}_b{batch}.onnx")
            onnx.save(model, path)
            out = os.path.join(work, f"{name}_b{batch}")
            _compile(path, out)
            art = load_artifact(out)
            imported = import_graph(model, path)
            sess = fl.Session(graph=imported.graph)
            fetches = list(imported.outputs.values())
            feed = {imported.inputs[k]: v for k, v in inputs.items()}
            got = art.run(inputs)
            _agree(bench, sess.run(fetches, feed), got, "its Session")
            steps = {FLOWC: lambda: art.run(inputs), SESSION: lambda: sess.run(fetches, feed)}
            if ort is not None:
                options = ort.SessionOptions()
                options.intra_op_num_threads = threads
                options.inter_op_num_threads = 1
                peer = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
                _agree(bench, got, peer.run(None, inputs), ORT)
                steps[ORT] = (lambda p=peer: p.run(None, inputs))
            repeats = (6 if quick else 60) if batch == 1 else (3 if quick else 8)
            medians = interleaved_medians({k: (v, repeats) for k, v in steps.items()},
                                          rounds=3 if quick else 5)
            results += [Result(bench, k, v, batch, "examples") for k, v in medians.items()]
            if ort is None:
                results.append(Result(bench, ORT, None, note=NOT_INSTALLED))
            sess.close()
            if graphdef and name in GRAPHDEF_MODELS:
                results += _graphdef_rows(name, batch, threads, quick, model, inputs, path,
                                          work, ort)
    return results


def _graphdef_rows(name: str, batch: int, threads: int, quick: bool, model, inputs, onnx_path,
                   work: str, ort) -> List[Result]:
    """The CNN as a frozen TensorFlow GraphDef (inference_models.graphdef_twin: the same layers
    and weights in NHWC) compiled by ``flowc compile MODEL.pb``, beside onnxruntime on the ONNX
    file and TensorFlow (a TF1 session on the .pb) where installed."""
    from bench_train_mlp import interleaved_medians
    from inference_models import graphdef_twin, nhwc
    from runtime import load_artifact
    bench = f"{MODELS[name].short} .pb b{batch}, {threads} thread{'s' if threads > 1 else ''}"
    print(f"  {bench} ...", file=sys.stderr, flush=True)
    pb = os.path.join(work, f"{name}_b{batch}.pb")
    feed_name, fetch = graphdef_twin(model, pb)
    out = os.path.join(work, f"{name}_b{batch}_graphdef")
    _compile(pb, out)
    art = load_artifact(out)
    feeds = {feed_name: nhwc(inputs["image"])}
    got = art.run(feeds)
    got = list(got.values()) if isinstance(got, dict) else list(got)
    steps = {FLOWC: lambda: art.run(feeds)}
    results: List[Result] = []
    if ort is not None:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        peer = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
        _agree(bench, got, peer.run(None, inputs), ORT + " (the ONNX twin)")
        steps[ORT] = (lambda p=peer: p.run(None, inputs))
    else:
        results.append(Result(bench, ORT, None, note=NOT_INSTALLED))
    tf = optional_import("tensorflow")
    if tf is not None:
        graph_def = tf.compat.v1.GraphDef()
        with open(pb, "rb") as f:
            graph_def.ParseFromString(f.read())
        g = tf.Graph()
        with g.as_default():
            tf.graph_util.import_graph_def(graph_def, name="")
        config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads,
                                          inter_op_parallelism_threads=1)
        tf_sess = tf.compat.v1.Session(graph=g, config=config)
        tf_feed = {feed_name + ":0": feeds[feed_name]}
        _agree(bench, got, [tf_sess.run(fetch + ":0", tf_feed)], TF)
        steps[TF] = lambda: tf_sess.run(fetch + ":0", tf_feed)
    else:
        results.append(Result(bench, TF, None, note=NOT_INSTALLED))
    repeats = (6 if quick else 60) if batch == 1 else (3 if quick else 8)
    medians = interleaved_medians({k: (v, repeats) for k, v in steps.items()},
                                  rounds=3 if quick else 5)
    return results + [Result(bench, k, v, batch, "examples") for k, v in medians.items()]


def compile_seconds(name: str) -> Tuple[float, float]:
    """Wall time of ``flowc compile`` of ``name`` (batch 1) as a new process into an empty
    cache, and the CPU time it and its compiler processes used (on a busy machine the wall
    time is mostly waiting for a core)."""
    import onnx
    model, _ = MODELS[name].build(1)
    with tempfile.TemporaryDirectory(prefix="flowc-bench-compile-") as work:
        path = os.path.join(work, f"{name}.onnx")
        onnx.save(model, path)
        env = dict(os.environ, FLOWC_CACHE_DIR=os.path.join(work, "cache"),
                   PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "compiler.cli", "compile", path, "-o",
                        os.path.join(work, "out")], env=env, check=True, cwd=ROOT,
                       stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _child(models: Sequence[str], batches: Sequence[int], threads: int,
           quick: bool, graphdef: bool = True) -> List[Result]:
    """``measure_here`` in a new process with ``--threads threads``."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--threads", str(threads),
           "--models", ",".join(models), "--batches", ",".join(map(str, batches))]
    if quick:
        cmd.append("--quick")
    if not graphdef:
        cmd.append("--no-graphdef")
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
    return [Result(**json.loads(line[len("RESULT "):]))
            for line in done.stdout.splitlines() if line.startswith("RESULT ")]


def measure(fw: Frameworks, quick: bool = False, models: Optional[Sequence[str]] = None,
            batches: Sequence[int] = BATCHES, compile_rows: bool = True,
            graphdef: bool = True) -> List[Result]:
    models = list(models or MODELS)
    counts = [fw.threads] if fw.threads else sorted({1, os.cpu_count() or 1})
    results: List[Result] = []
    for threads in counts:
        results += _child(models, batches, threads, quick, graphdef)
    if compile_rows:
        for name in [m for m in models if m != "mlp"]:
            wall, cpu = compile_seconds(name)
            results.append(Result(f"compile: {MODELS[name].name}", FLOWC + " cold (empty cache)",
                                  wall, 1, "compiles",
                                  note=f"flowc compile, a new process; {cpu:.1f} s CPU"))
    return results


def _arguments(parser) -> None:
    parser.add_argument("--models", default=",".join(MODELS),
                        help="comma-separated: " + ", ".join(MODELS))
    parser.add_argument("--batches", default=",".join(map(str, BATCHES)))
    parser.add_argument("--no-compile", action="store_true", help="leave out the compile rows")
    parser.add_argument("--no-graphdef", action="store_true",
                        help="leave out the CNNs' GraphDef rows")
    parser.add_argument("--child", action="store_true",
                        help="(internal) one thread count in this process, results as JSON lines")


def main() -> None:
    if "--child" in sys.argv:                     # one thread count, results as JSON lines
        import argparse
        from bench_common import add_threads_argument, apply_threads
        parser = argparse.ArgumentParser()
        parser.add_argument("--quick", action="store_true")
        add_threads_argument(parser)
        _arguments(parser)
        args = parser.parse_args()
        apply_threads(args.threads)
        for r in measure_here(args.models.split(","), [int(b) for b in args.batches.split(",")],
                              args.threads, args.quick, not args.no_graphdef):
            print("RESULT " + json.dumps(r.__dict__), flush=True)
        return
    run_alone(__doc__, "inference of ONNX models (ms per step; flowc/peer: the artifact's time "
              "over the row's)",
              lambda fw, args: measure(fw, args.quick, args.models.split(","),
                                       [int(b) for b in args.batches.split(",")],
                                       not args.no_compile, not args.no_graphdef),
              _arguments)


if __name__ == "__main__":
    main()
