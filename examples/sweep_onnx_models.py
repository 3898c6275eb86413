"""Sweep: ONNX models that users bring (torchvision and Hugging Face transformers families, with
random weights), exported by both ``torch.onnx`` exporters, through ``flowc compile`` and
``flowc run``, compared with onnxruntime.

What it needs: PyTorch 2.x with onnxscript, torchvision, transformers, onnx and onnxruntime (none
of them flowc dependencies), and flowc importable (run it from the repository root, or with the
repository on PYTHONPATH). No pretrained weights are downloaded: every model is built from its
constructor or a small config, with seeded random weights.

    python examples/sweep_onnx_models.py                      # every family, both exporters
    python examples/sweep_onnx_models.py resnet50 bert        # only these families
    python examples/sweep_onnx_models.py --exporter dynamo    # one exporter (torchscript|dynamo)
    python examples/sweep_onnx_models.py --work /tmp/sweep    # where models and artifacts go
    python examples/sweep_onnx_models.py --flowc-python python3  # flowc installed elsewhere

Per family and exporter (``torchscript``: ``dynamo=False`` at opset 17; ``dynamo``:
``dynamo=True`` at opset 18) it exports the model with a dynamic batch axis (and a dynamic
sequence axis for text models), records onnxruntime's outputs at two input sizes, then runs
``flowc check`` (import + shape inference), ``flowc compile`` (C backend, timed) and ``flowc run``
for each input size, comparing every output with rtol 1e-4, atol 1e-4. It prints a table of
imports / compiles / matches per family x exporter and the first error line of what failed, and
writes it as ``WORK/results.json``. An export that fails is reported as such (not flowc's fault).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
import warnings
from dataclasses import asdict, dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED = 20261202
RTOL = 1e-4
ATOL = 1e-4
EXPORTERS = {"torchscript": 17, "dynamo": 18}


@dataclass
class Family:
    """One model family: how to build it and its inputs at a given (batch, sequence) size."""
    name: str
    build: Callable[[], object]                       # -> torch.nn.Module (eval mode)
    inputs: Callable[[int, int], Dict[str, np.ndarray]]
    sizes: Tuple[Tuple[int, int], ...]                # (batch, seq): export size first
    dynamic: Dict[str, Dict[int, str]]                # input name -> {axis: symbol}
    outputs: Tuple[str, ...] = ("y",)


@dataclass
class Result:
    family: str
    exporter: str
    exported: bool = False
    imports: bool = False
    compiles: bool = False
    matches: List[bool] = field(default_factory=list)
    compile_s: float = 0.0
    error: str = ""

    @property
    def ok(self) -> bool:
        return bool(self.matches) and all(self.matches)


# --- the families --------------------------------------------------------------------------------
def _image(size: int, channels: int = 3) -> Callable[[int, int], Dict[str, np.ndarray]]:
    def make(batch: int, _seq: int) -> Dict[str, np.ndarray]:
        r = np.random.RandomState(SEED + batch)
        return {"x": r.standard_normal((batch, channels, size, size)).astype(np.float32)}
    return make


def _tokens(vocab: int, mask: bool = True, types: bool = False):
    def make(batch: int, seq: int) -> Dict[str, np.ndarray]:
        r = np.random.RandomState(SEED + 100 * batch + seq)
        feeds = {"input_ids": r.randint(0, vocab, (batch, seq)).astype(np.int64)}
        if mask:
            m = np.ones((batch, seq), np.int64)
            m[0, seq - 2:] = 0                       # a padded first row
            feeds["attention_mask"] = m
        if types:
            feeds["token_type_ids"] = (np.arange(seq)[None, :] >= seq // 2).repeat(
                batch, 0).astype(np.int64)
        return feeds
    return make


def _audio(samples: int):
    def make(batch: int, _seq: int) -> Dict[str, np.ndarray]:
        r = np.random.RandomState(SEED + batch)
        return {"x": r.standard_normal((batch, samples)).astype(np.float32)}
    return make


def _features(mels: int, frames: int):
    def make(batch: int, _seq: int) -> Dict[str, np.ndarray]:
        r = np.random.RandomState(SEED + batch)
        return {"x": r.standard_normal((batch, mels, frames)).astype(np.float32)}
    return make


def _seeded(make: Callable[[], object]) -> Callable[[], object]:
    def build():
        import torch
        torch.manual_seed(SEED)
        module = make()
        with torch.no_grad():                        # BatchNorm statistics away from 0/1
            for m in module.modules():
                if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)) \
                        and m.running_mean is not None:
                    m.running_mean.uniform_(-0.3, 0.3)
                    m.running_var.uniform_(0.5, 1.5)
        return module.eval()
    return build


class _Logits:
    """A transformers model's first output (logits or last hidden state) as a plain module."""

    def __new__(cls, model, names: Tuple[str, ...]):
        import torch

        class Wrapper(torch.nn.Module):
            varargs = True                   # forward(*args): one dynamic_shapes entry

            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, *args):
                out = self.model(**dict(zip(names, args)), return_dict=True)
                return out[0] if not hasattr(out, "logits") else out.logits
        return Wrapper()


def _import_torchvision() -> None:
    """Import torchvision even when its C extension does not match the installed torch (a CUDA
    torchvision wheel next to a CPU torch): its ops' fake registrations are skipped; the models
    the sweep builds do not use those ops."""
    try:
        import torchvision  # noqa: F401
        return
    except RuntimeError:
        for name in [m for m in sys.modules if m.startswith("torchvision")]:
            del sys.modules[name]
    import torch
    register_fake = torch.library.register_fake

    def lenient(name, *args, **kwargs):
        if isinstance(name, str) and name.startswith("torchvision::"):
            return lambda fn: fn
        return register_fake(name, *args, **kwargs)
    torch.library.register_fake = lenient
    try:
        import torchvision  # noqa: F401,F811
    finally:
        torch.library.register_fake = register_fake


def families() -> Dict[str, Family]:
    _import_torchvision()
    import torchvision.models as tv
    import torchvision.models.segmentation as seg
    import torchvision.models.detection as det

    batch = {"x": {0: "batch"}}
    image_sizes = ((2, 0), (3, 0))

    def vision(name: str, make: Callable[[], object], size: int = 64, out: str = "y") -> Family:
        return Family(name, _seeded(make), _image(size), image_sizes, batch, (out,))

    class Seg:
        def __new__(cls, make):
            import torch

            class Head(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.m = make()

                def forward(self, x):
                    return self.m(x)["out"]
            return Head()

    class Backbone:
        def __new__(cls, make):
            import torch

            class Body(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.m = make()

                def forward(self, x):
                    return tuple(self.m(x).values())
            return Body()

    fams = [
        vision("resnet50", lambda: tv.resnet50(num_classes=10)),
        vision("resnext50_32x4d", lambda: tv.resnext50_32x4d(num_classes=10)),
        vision("wide_resnet50_2", lambda: tv.wide_resnet50_2(num_classes=10)),
        vision("mobilenet_v3_small", lambda: tv.mobilenet_v3_small(num_classes=10)),
        vision("mobilenet_v3_large", lambda: tv.mobilenet_v3_large(num_classes=10)),
        vision("efficientnet_b0", lambda: tv.efficientnet_b0(num_classes=10)),
        vision("efficientnet_v2_s", lambda: tv.efficientnet_v2_s(num_classes=10)),
        vision("regnet_y_400mf", lambda: tv.regnet_y_400mf(num_classes=10)),
        vision("densenet121", lambda: tv.densenet121(num_classes=10)),
        vision("squeezenet1_1", lambda: tv.squeezenet1_1(num_classes=10)),
        vision("shufflenet_v2_x0_5", lambda: tv.shufflenet_v2_x0_5(num_classes=10)),
        vision("mnasnet0_5", lambda: tv.mnasnet0_5(num_classes=10)),
        vision("googlenet", lambda: tv.googlenet(num_classes=10, aux_logits=False,
                                                 init_weights=True)),
        vision("inception_v3", lambda: tv.inception_v3(num_classes=10, aux_logits=False,
                                                       init_weights=True), size=299),
        vision("convnext_tiny", lambda: tv.convnext_tiny(num_classes=10)),
        vision("vit_small", lambda: tv.VisionTransformer(
            image_size=64, patch_size=16, num_layers=2, num_heads=4, hidden_dim=64,
            mlp_dim=128, num_classes=10)),
        vision("swin_t", lambda: tv.swin_t(num_classes=10)),
        vision("maxvit_t", lambda: tv.maxvit_t(num_classes=10), size=224),
        vision("deeplabv3_mobilenet", lambda: Seg(lambda: seg.deeplabv3_mobilenet_v3_large(
            num_classes=4, weights_backbone=None, aux_loss=False))),
        vision("fcn_resnet50", lambda: Seg(lambda: seg.fcn_resnet50(
            num_classes=4, weights_backbone=None, aux_loss=False))),
        vision("lraspp_mobilenet", lambda: Seg(lambda: seg.lraspp_mobilenet_v3_large(
            num_classes=4, weights_backbone=None))),
        vision("fpn_resnet18_backbone", lambda: Backbone(
            lambda: det.backbone_utils.resnet_fpn_backbone(
                backbone_name="resnet18", weights=None, trainable_layers=5))),
    ]
    out = {f.name: f for f in fams}
    out.update(text_families())
    return out


def text_families() -> Dict[str, Family]:
    _import_torchvision()                       # transformers imports it when it is installed
    import transformers as hf

    text = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    sizes = ((2, 8), (3, 5))
    small = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=128, vocab_size=100, max_position_embeddings=64)

    def hf_text(name: str, make: Callable[[], object], types: bool = False) -> Family:
        names = ("input_ids", "attention_mask") + (("token_type_ids",) if types else ())
        dyn = dict(text)
        if types:
            dyn["token_type_ids"] = {0: "batch", 1: "seq"}
        return Family(name, _seeded(lambda: _Logits(make(), names)), _tokens(100, types=types),
                      sizes, dyn)

    fams = [
        hf_text("bert", lambda: hf.BertModel(hf.BertConfig(**small)), types=True),
        hf_text("distilbert", lambda: hf.DistilBertModel(hf.DistilBertConfig(
            dim=64, n_layers=2, n_heads=4, hidden_dim=128, vocab_size=100,
            max_position_embeddings=64))),
        hf_text("roberta", lambda: hf.RobertaModel(hf.RobertaConfig(
            **{**small, "max_position_embeddings": 70}))),
        hf_text("gpt2", lambda: hf.GPT2LMHeadModel(hf.GPT2Config(
            n_embd=64, n_layer=2, n_head=4, vocab_size=100, n_positions=64, use_cache=False))),
        hf_text("t5_encoder", lambda: hf.T5EncoderModel(hf.T5Config(
            d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, vocab_size=100))),
    ]
    out = {f.name: f for f in fams}
    out["hf_vit"] = Family("hf_vit", _seeded(lambda: _Logits(hf.ViTModel(hf.ViTConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        image_size=32, patch_size=8)), ("pixel_values",))), _image(32), ((2, 0), (3, 0)),
        {"x": {0: "batch"}})
    out["wav2vec2"] = Family("wav2vec2", _seeded(lambda: _Logits(hf.Wav2Vec2Model(
        hf.Wav2Vec2Config(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                          intermediate_size=128, conv_dim=(32, 32, 32),
                          conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
                          num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4)),
        ("input_values",))), _audio(1600), ((2, 0), (3, 0)), {"x": {0: "batch"}})
    out["whisper_encoder"] = Family("whisper_encoder", _seeded(lambda: _Logits(
        hf.WhisperModel(hf.WhisperConfig(
            d_model=64, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=128,
            decoder_layers=1, decoder_attention_heads=4, decoder_ffn_dim=128, num_mel_bins=16,
            max_source_positions=50, vocab_size=100, pad_token_id=1, bos_token_id=2,
            eos_token_id=3, decoder_start_token_id=2)).get_encoder(), ("input_features",))),
        _features(16, 100), ((2, 0), (3, 0)), {"x": {0: "batch"}})
    return out


# --- export and reference ------------------------------------------------------------------------
def export(fam: Family, exporter: str, path: str) -> List[Dict[str, np.ndarray]]:
    """Write ``fam`` as ONNX to ``path``; the feeds at each size with onnxruntime's outputs
    (``{name: array}`` with the outputs under their ONNX names)."""
    import onnx
    import onnxruntime as ort
    import torch

    torch.set_num_threads(1)
    module = fam.build()
    feeds = [fam.inputs(b, s) for b, s in fam.sizes]
    names = list(feeds[0])
    args = tuple(torch.from_numpy(feeds[0][n]) for n in names)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "torchscript":
            torch.onnx.export(module, args, path, dynamo=False,
                              opset_version=EXPORTERS[exporter], input_names=names,
                              output_names=list(fam.outputs),
                              dynamic_axes={n: {a: s for a, s in fam.dynamic[n].items()}
                                            for n in names if n in fam.dynamic})
        else:
            dims = {}
            shapes = tuple({a: dims.setdefault(s, torch.export.Dim.AUTO)
                            for a, s in fam.dynamic.get(n, {}).items()} for n in names)
            if getattr(module, "varargs", False):
                shapes = (shapes,)
            program = torch.onnx.export(module, args, dynamo=True,
                                        opset_version=EXPORTERS[exporter], input_names=names,
                                        output_names=list(fam.outputs), dynamic_shapes=shapes,
                                        external_data=False)
            program.save(path, external_data=False)
    proto = onnx.load(path)
    graph_inputs = [i.name for i in proto.graph.input]
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    outputs = [o.name for o in session.get_outputs()]
    recorded = []
    for feed in feeds:
        feed = {n: v for n, v in feed.items() if n in graph_inputs}
        values = session.run(outputs, feed)
        recorded.append({"feeds": feed, "outputs": dict(zip(outputs, values))})
    return recorded


# --- flowc ---------------------------------------------------------------------------------------
FLOWC_PYTHON = sys.executable
FLOWC_ROOT = ROOT


def flowc(*args: str, timeout: int = 900) -> Tuple[int, str, float]:
    """``flowc ARGS`` from this checkout, run by ``FLOWC_PYTHON`` (it must have flowc installed,
    for its ``.onnx`` loader entry point, or its dependencies and this checkout's egg-info)."""
    env = dict(os.environ, PYTHONPATH=FLOWC_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    start = time.time()
    try:
        proc = subprocess.run([FLOWC_PYTHON, "-m", "compiler.cli", *args], cwd=FLOWC_ROOT, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout} s", time.time() - start
    return proc.returncode, proc.stderr + proc.stdout, time.time() - start


def first_error(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower()]
    return (errors or lines or ["(no message)"])[-1 if "Traceback" in text else 0][:300]


def recorded_run(base: str) -> Optional[List[Dict[str, Dict[str, np.ndarray]]]]:
    """What an earlier sweep exported and recorded at ``base`` (None when it did not)."""
    if not os.path.exists(base + ".onnx"):
        return None
    recorded = []
    for i in range(8):
        if not os.path.exists(f"{base}.ref{i}.npz"):
            break
        with np.load(f"{base}.in{i}.npz") as feeds, np.load(f"{base}.ref{i}.npz") as outputs:
            recorded.append({"feeds": dict(feeds), "outputs": dict(outputs)})
    return recorded or None


def sweep_one(fam: Family, exporter: str, work: str, reuse: bool = False,
              stop_after: str = "run") -> Result:
    result = Result(fam.name, exporter)
    base = os.path.join(work, f"{fam.name}.{exporter}")
    model = base + ".onnx"
    try:
        recorded = recorded_run(base) if reuse else None
        if recorded is None:
            recorded = export(fam, exporter, model)
            for i, rec in enumerate(recorded):
                np.savez(f"{base}.in{i}.npz", **rec["feeds"])
                np.savez(f"{base}.ref{i}.npz", **rec["outputs"])
    except Exception as e:                              # noqa: BLE001  (reported)
        result.error = f"export: {type(e).__name__}: {str(e).splitlines()[0][:250] if str(e) else ''}"
        return result
    result.exported = True
    rc, text, _ = flowc("check", model)
    if rc != 0:
        result.error = "import: " + first_error(text)
        return result
    result.imports = True
    if stop_after == "check":
        return result
    artifact = base + ".artifact"
    rc, text, seconds = flowc("compile", model, "-o", artifact)
    result.compile_s = round(seconds, 1)
    if rc != 0:
        result.error = "compile: " + first_error(text)
        return result
    result.compiles = True
    for i, rec in enumerate(recorded):
        inputs, saved = f"{base}.in{i}.npz", f"{base}.out{i}.npz"
        rc, text, _ = flowc("run", artifact, "--feeds", inputs, "--save", saved)
        if rc != 0:
            result.matches.append(False)
            result.error = result.error or f"run size {fam.sizes[i]}: " + first_error(text)
            continue
        with np.load(saved) as got:
            ok = True
            for name, want in rec["outputs"].items():
                have = got[name] if name in got.files else None
                if have is None or have.shape != want.shape:
                    ok = False
                    result.error = result.error or (
                        f"size {fam.sizes[i]}: {name}: shape "
                        f"{None if have is None else have.shape}, expected {want.shape}")
                    continue
                if not np.allclose(have, want, rtol=RTOL, atol=ATOL):
                    ok = False
                    diff = float(np.max(np.abs(have.astype(np.float64) - want)))
                    result.error = result.error or (
                        f"size {fam.sizes[i]}: {name}: max |diff| {diff:.3g}")
            result.matches.append(ok)
    return result


def table(results: List[Result]) -> str:
    rows = ["family                  exporter     import compile match  compile_s  note"]
    mark = {True: "yes", False: "no"}
    for r in results:
        match = "-" if not r.matches else ("yes" if r.ok else
                                           f"{sum(r.matches)}/{len(r.matches)}")
        rows.append(f"{r.family:<23} {r.exporter:<12} {mark[r.imports]:<6} "
                    f"{mark[r.compiles]:<7} {match:<6} {r.compile_s:>9}  {r.error}")
    return "\n".join(rows)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="*", help="family names (default: all)")
    parser.add_argument("--exporter", choices=sorted(EXPORTERS), action="append")
    parser.add_argument("--work", default=os.path.join(ROOT, "build", "onnx_sweep"))
    parser.add_argument("--flowc-python", default=sys.executable,
                        help="the Python that runs flowc (one where flowc is installed; "
                             "default: this one)")
    parser.add_argument("--flowc-root", default=ROOT,
                        help="the flowc checkout to run (default: the one holding this script)")
    parser.add_argument("--reuse", action="store_true",
                        help="reuse the models and reference outputs an earlier sweep wrote to "
                             "WORK instead of exporting them again")
    parser.add_argument("--stop-after", choices=("check", "run"), default="run",
                        help="check: import and infer shapes only (no C compile)")
    args = parser.parse_args(argv)
    global FLOWC_PYTHON, FLOWC_ROOT
    FLOWC_PYTHON, FLOWC_ROOT = args.flowc_python, os.path.abspath(args.flowc_root)
    fams = families()
    unknown = [n for n in args.families if n not in fams]
    if unknown:
        parser.error(f"unknown families {unknown}; known: {', '.join(fams)}")
    os.makedirs(args.work, exist_ok=True)
    results: List[Result] = []
    for name in args.families or list(fams):
        for exporter in args.exporter or list(EXPORTERS):
            try:
                result = sweep_one(fams[name], exporter, args.work, args.reuse,
                                   args.stop_after)
            except Exception:                            # noqa: BLE001  (reported)
                result = Result(name, exporter, error="sweep: " + traceback.format_exc()
                                .strip().splitlines()[-1][:250])
            results.append(result)
            print(table([result]).splitlines()[1], flush=True)
    print()
    print(table(results))
    with open(os.path.join(args.work, "results.json"), "w", encoding="utf-8") as f:
        json.dump([asdict(r) for r in results], f, indent=1)
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
