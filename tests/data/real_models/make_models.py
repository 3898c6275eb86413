"""Writes the real-model test suite's models (tests/compiler/test_real_models.py): small,
seeded versions of the model families users bring to ``flowc compile``, exported by the
frameworks themselves, with their inputs and the reference runtime's outputs.

What it needs (none of it is a flowc dependency; the tests read only the files it writes):
PyTorch 2.x (CPU) with onnxscript (torch.onnx.export's default, dynamo exporter), onnx,
onnxruntime, Hugging Face transformers (the ``hf_*`` models, built from small configs, no
downloads), and TensorFlow 2.x with Keras 3. The committed files were written with torch
2.13.0, onnx 1.23.2, onnxruntime 1.32.0, tensorflow 2.21.0 and keras 3.15.1.

How to run it (from anywhere; it writes next to itself and rewrites manifest.json):

    python tests/data/real_models/make_models.py            # every model
    python tests/data/real_models/make_models.py torch_mlp  # only these (manifest kept)

What it writes, per model NAME (the manifest lists each with its file, format, family, input
and output names, and the tolerance its comparison uses):

- ``NAME.onnx`` (PyTorch -> ONNX with ``torch.onnx.export``'s defaults: the dynamo exporter and
  its default opset, 20 with torch 2.13; ``torch_transformer_opset17``: the TorchScript
  exporter at opset 17, torch's default before 2.9; weights inside the file except for
  ``torch_mlp``, which keeps torch's default external data file ``torch_mlp.onnx.data`` and a
  symbolic batch axis), or ``NAME.pb`` (a frozen TensorFlow GraphDef), or ``NAME/`` (a
  SavedModel directory, with a symbolic batch axis);
- ``NAME.inputs.npz``: the inputs, by the model's input names (for a SavedModel: its
  signature's input names);
- ``NAME.outputs.npz``: what onnxruntime (ONNX) or TensorFlow (GraphDef, SavedModel) computes
  for those inputs, by output name (a GraphDef's fetched tensor names; a signature's output
  names).

Every weight and input comes from a fixed seed, so a rerun writes the same numbers (the .npz
files are byte for byte the same; a frozen GraphDef's function names may differ, and any file
may with other framework versions). Each export is checked against the framework's own model
before it is written.
"""
from __future__ import annotations

import json
import os
import re
import sys
import warnings
from typing import Callable, Dict, List

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MANIFEST = os.path.join(HERE, "manifest.json")
SEED = 20261201
TORCH_OPSET_NOTE = "torch.onnx.export defaults (dynamo exporter)"
LEGACY_NOTE = "torch.onnx.export(dynamo=False, opset_version=17): the TorchScript exporter"

ABOUT = ("Written by make_models.py (see its docstring); read by "
         "tests/compiler/test_real_models.py. Per model: file (a SavedModel: its folder), "
         "format (onnx, graphdef or saved_model), family, source (how it was made), reference "
         "(what computed NAME.outputs.npz), the input and output names with their dtypes and "
         "shapes (NAME.inputs.npz, NAME.outputs.npz), and the tolerance flowc's outputs are "
         "held to: |flowc - reference| <= atol + rtol * |reference|.")

# f32 comparisons: relative tolerance, with an absolute floor for values near zero.
RTOL = 1e-4
ATOL = 1e-5


def rng(offset: int = 0) -> np.random.RandomState:
    return np.random.RandomState(SEED + offset)


def strip_stack_traces(path: str) -> None:
    """Drop the exporter's per-node Python stack traces (metadata ``pkg.torch.onnx.stack_trace``):
    they name the files of the machine that made the model, and nothing reads them."""
    import onnx
    proto = onnx.load(path, load_external_data=False)

    def strip(graph) -> None:
        for node in graph.node:
            keep = [p for p in node.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
            del node.metadata_props[:]
            node.metadata_props.extend(keep)
            for attr in node.attribute:
                if attr.g.node:
                    strip(attr.g)
                for g in attr.graphs:
                    strip(g)
    strip(proto.graph)
    for function in proto.functions:
        strip(function)
    onnx.save(proto, path)


def save_npz(path: str, arrays: Dict[str, np.ndarray]) -> None:
    with open(path, "wb") as f:
        np.savez(f, **arrays)


# --- PyTorch -> ONNX ---------------------------------------------------------------------------
def torch_models() -> Dict[str, Callable[[], dict]]:
    import torch
    from torch import nn

    torch.set_num_threads(1)

    def init_(make: Callable[[], nn.Module], seed: int) -> nn.Module:
        """``make()``'s module in eval mode, its weights from ``seed`` alone, looking trained:
        BatchNorm statistics and affine terms (and LayerNorm's) away from their 0/1 initial
        values (otherwise BatchNorm folds to almost nothing)."""
        torch.manual_seed(SEED + seed)
        module = make()
        for m in module.modules():
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                with torch.no_grad():
                    m.running_mean.uniform_(-0.5, 0.5)
                    m.running_var.uniform_(0.5, 1.5)
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-0.2, 0.2)
            if isinstance(m, nn.LayerNorm):
                with torch.no_grad():
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-0.2, 0.2)
        return module.eval()

    class BasicBlock(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    class ResNet(nn.Module):
        def __init__(self, classes: int = 10):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8),
                                      nn.ReLU(), nn.MaxPool2d(2))
            self.layers = nn.Sequential(BasicBlock(8, 8, 1), BasicBlock(8, 16, 2),
                                        BasicBlock(16, 32, 2))
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(32, classes)

        def forward(self, x):
            return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))

    class InvertedResidual(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int, expand: int):
            super().__init__()
            hidden = cin * expand
            self.residual = stride == 1 and cin == cout
            self.block = nn.Sequential(
                nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(),
                nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
                nn.BatchNorm2d(hidden), nn.ReLU6(),
                nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            return x + self.block(x) if self.residual else self.block(x)

    class MobileNetV2(nn.Module):
        def __init__(self, classes: int = 10):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU6(),
                InvertedResidual(16, 8, 1, 1), InvertedResidual(8, 16, 2, 4),
                InvertedResidual(16, 16, 1, 4), InvertedResidual(16, 24, 2, 4),
                nn.Conv2d(24, 64, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU6())
            self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(64, classes))

        def forward(self, x):
            x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
            return self.classifier(torch.flatten(x, 1))

    class TransformerClassifier(nn.Module):
        def __init__(self, d: int = 32, heads: int = 4, layers: int = 2):
            super().__init__()
            self.embed = nn.Linear(16, d)
            self.pos = nn.Parameter(torch.randn(1, 12, d) * 0.1)
            layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=64, dropout=0.0,
                                               activation="gelu", batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(d)
            self.head = nn.Linear(d, 5)

        def forward(self, x):
            h = self.encoder(self.embed(x) + self.pos)
            return self.head(self.norm(h).mean(dim=1))

    class LSTMModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(8, 16, num_layers=2, batch_first=True, bidirectional=True)
            self.head = nn.Linear(32, 4)

        def forward(self, x):
            y, (h, c) = self.rnn(x)
            return self.head(y[:, -1]), h

    class GRUModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(8, 16, num_layers=2, batch_first=True)
            self.head = nn.Linear(16, 4)

        def forward(self, x):
            y, h = self.rnn(x)
            return self.head(y), h

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(),
                                     nn.Linear(32, 3))

        def forward(self, x):
            return torch.softmax(self.net(x), dim=-1)

    def export(name: str, family: str, model: nn.Module, inputs: Dict[str, np.ndarray],
               outputs: List[str], external_data: bool = False, legacy: bool = False,
               dynamic_batch: bool = False, dynamic_axes: Dict[str, Dict[int, str]] = None,
               export_inputs: Dict[str, np.ndarray] = None) -> dict:
        """``dynamic_axes``: symbolic axes per input (both exporters); the model is exported
        with ``export_inputs`` when given (another size than the recorded ``inputs``: the
        file must work for sizes it was not traced at)."""
        import onnx
        import onnxruntime as ort
        path = os.path.join(HERE, name + ".onnx")
        for stale in (path, path + ".data"):
            if os.path.exists(stale):
                os.remove(stale)
        args = tuple(torch.from_numpy(v) for v in inputs.values())
        traced = args if export_inputs is None else \
            tuple(torch.from_numpy(export_inputs[k]) for k in inputs)
        if legacy:      # the TorchScript exporter, torch.onnx.export's default before 2.9
            warnings.filterwarnings("ignore", "You are using the legacy TorchScript",
                                    DeprecationWarning)
            torch.onnx.export(model, traced, path, input_names=list(inputs),
                              output_names=outputs, dynamo=False, opset_version=17,
                              dynamic_axes=dynamic_axes)
        else:
            dynamic = None
            if dynamic_batch:       # the first axis of every input is a symbolic "batch"
                batch = torch.export.Dim("batch", min=1, max=4096)
                dynamic = tuple({0: batch} for _ in args)
            if dynamic_axes:        # one torch.export.Dim per symbol, shared by the inputs
                dims: Dict[str, object] = {}
                dynamic = tuple({a: dims.setdefault(sym, torch.export.Dim.AUTO)
                                 for a, sym in dynamic_axes.get(k, {}).items()}
                                for k in inputs)
                if getattr(model, "varargs", False):
                    dynamic = (dynamic,)
            torch.onnx.export(model, traced, path, input_names=list(inputs),
                              output_names=outputs, external_data=external_data,
                              dynamic_shapes=dynamic)
        strip_stack_traces(path)
        proto = onnx.load(path)
        onnx.checker.check_model(proto)
        opset = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1   # the same sums each run
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        got = session.run(outputs, inputs)
        with torch.no_grad():
            want = model(*args)
        want = want if isinstance(want, tuple) else (want,)
        for o, w, g in zip(outputs, want, got):     # the export is faithful to the model
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5, err_msg=name + ":" + o)
        save_npz(os.path.join(HERE, name + ".inputs.npz"), inputs)
        save_npz(os.path.join(HERE, name + ".outputs.npz"), dict(zip(outputs, got)))
        entry = {"file": name + ".onnx", "format": "onnx", "family": family,
                 "source": f"PyTorch {torch.__version__.split('+')[0]}, "
                           f"{LEGACY_NOTE if legacy else TORCH_OPSET_NOTE}, opset {opset}",
                 "reference": f"onnxruntime {ort.__version__}",
                 "op_types": sorted({n.op_type for n in proto.graph.node})}
        if external_data:
            entry["external_data"] = name + ".onnx.data"
        if dynamic_batch:
            entry["dynamic_batch"] = True
        if dynamic_axes:
            entry["dynamic_axes"] = {k: {str(a): sym for a, sym in v.items()}
                                     for k, v in dynamic_axes.items()}
        return entry

    def hf_text(make: Callable[[], nn.Module], names: List[str], seed: int) -> nn.Module:
        """A Hugging Face transformers model (built from a config: random weights) as a
        module of positional inputs ``names`` returning its first output."""
        class Positional(nn.Module):
            varargs = True                          # forward(*args): one dynamic_shapes entry

            def __init__(self):
                super().__init__()
                self.model = make()

            def forward(self, *args):
                return self.model(**dict(zip(names, args)), return_dict=True)[0]
        return init_(Positional, seed)

    def tokens(offset: int, batch: int, seq: int, vocab: int) -> Dict[str, np.ndarray]:
        """Token ids and an attention mask with the first row's last two tokens padded."""
        ids = rng(offset).randint(1, vocab, (batch, seq)).astype(np.int64)
        mask = np.ones((batch, seq), np.int64)
        mask[0, -2:] = 0
        return {"input_ids": ids, "attention_mask": mask}

    text_axes = {"input_ids": {0: "batch", 1: "sequence"},
                 "attention_mask": {0: "batch", 1: "sequence"}}
    small = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, vocab_size=50, max_position_embeddings=40)

    def swin():
        import torchvision.models as tv
        return tv.SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[1, 1],
                                  num_heads=[2, 2], window_size=[4, 4], num_classes=5)

    class SegmentationHead(nn.Module):
        """torchvision's segmentation models' shape: a strided backbone, a classifier, and
        ``F.interpolate(..., size=x.shape[-2:], mode="bilinear")`` back to the input size."""
        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(
                nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                nn.Conv2d(8, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
            self.classifier = nn.Conv2d(16, 4, 1)

        def forward(self, x):
            y = self.classifier(self.backbone(x))
            return nn.functional.interpolate(y, size=x.shape[-2:], mode="bilinear",
                                             align_corners=False)

    def bert():
        import transformers as hf
        return hf.BertModel(hf.BertConfig(**small))

    def roberta():
        import transformers as hf
        return hf.RobertaModel(hf.RobertaConfig(**small))

    def f32(offset: int, *shape: int, scale: float = 1.0) -> np.ndarray:
        return (rng(offset).randn(*shape) * scale).astype(np.float32)

    return {
        "torch_resnet": lambda: export(
            "torch_resnet", "ResNet-style CNN (conv, BatchNorm, ReLU, residual adds, max and "
            "global average pooling, linear)", init_(ResNet, 1),
            {"image": f32(101, 2, 3, 32, 32)}, ["logits"]),
        "torch_mobilenetv2": lambda: export(
            "torch_mobilenetv2", "MobileNetV2-style CNN (depthwise = grouped conv, inverted "
            "residuals, ReLU6)", init_(MobileNetV2, 2),
            {"image": f32(102, 2, 3, 32, 32)}, ["logits"]),
        "torch_transformer": lambda: export(
            "torch_transformer", "Transformer encoder (nn.TransformerEncoder: multi-head "
            "attention, GELU feed-forward, LayerNorm)", init_(TransformerClassifier, 3),
            {"tokens": f32(103, 2, 12, 16)}, ["logits"]),
        "torch_transformer_opset17": lambda: export(
            "torch_transformer_opset17", "Transformer encoder as torch 2.0-2.8 exported it by "
            "default (TorchScript exporter, opset 17: GELU as Erf, shapes computed in the graph)",
            init_(TransformerClassifier, 3), {"tokens": f32(103, 2, 12, 16)}, ["logits"],
            legacy=True),
        "torch_lstm": lambda: export(
            "torch_lstm", "LSTM (nn.LSTM, 2 layers, bidirectional) with a linear head",
            init_(LSTMModel, 4), {"sequence": f32(104, 2, 7, 8)}, ["logits", "h_n"]),
        "torch_gru": lambda: export(
            "torch_gru", "GRU (nn.GRU, 2 layers) with a linear head per step",
            init_(GRUModel, 5), {"sequence": f32(105, 2, 7, 8)}, ["logits", "h_n"]),
        "hf_bert_dynamic": lambda: export(
            "hf_bert_dynamic", "Hugging Face BERT (transformers BertModel from a small config) "
            "with dynamic batch and sequence axes, TorchScript exporter (opset 17): "
            "position_ids[:, :seq] is a Slice to a length computed from Shape(input_ids)",
            hf_text(bert, ["input_ids", "attention_mask"], 7), tokens(107, 3, 5, 50),
            ["last_hidden_state"], legacy=True, dynamic_axes=text_axes,
            export_inputs=tokens(207, 2, 8, 50)),
        "hf_roberta_dynamic": lambda: export(
            "hf_roberta_dynamic", "Hugging Face RoBERTa (transformers RobertaModel from a small "
            "config) with dynamic batch and sequence axes, dynamo exporter: position ids from "
            "the padding mask (CumSum), gathered with GatherElements on the dynamic shape",
            hf_text(roberta, ["input_ids", "attention_mask"], 8), tokens(108, 3, 5, 50),
            ["last_hidden_state"], dynamic_axes=text_axes, export_inputs=tokens(208, 2, 8, 50)),
        "tv_swin_dynamic_batch": lambda: export(
            "tv_swin_dynamic_batch", "torchvision SwinTransformer (small config: 2 stages, "
            "window 4) with a dynamic batch, TorchScript exporter (opset 17): window pads and "
            "reshapes computed from Shape(x) whose batch is unknown",
            init_(swin, 9), {"image": f32(109, 3, 3, 32, 32)}, ["logits"], legacy=True,
            dynamic_axes={"image": {0: "batch"}}, export_inputs={"image": f32(209, 2, 3, 32, 32)}),
        "torch_segmentation_dynamic_batch": lambda: export(
            "torch_segmentation_dynamic_batch", "segmentation head as torchvision's (FCN, "
            "DeepLabV3, LRASPP) end: bilinear F.interpolate to the input's size with a dynamic "
            "batch, TorchScript exporter (opset 17): Resize sizes = Concat(Shape(x)[:2], [H, W])",
            init_(SegmentationHead, 10), {"image": f32(110, 3, 3, 24, 20)}, ["masks"],
            legacy=True, dynamic_axes={"image": {0: "batch"}},
            export_inputs={"image": f32(210, 2, 3, 24, 20)}),
        "torch_segmentation_dynamic_batch_dynamo": lambda: export(
            "torch_segmentation_dynamic_batch_dynamo", "the segmentation head above through "
            "the dynamo exporter: Resize sizes = Concat(Shape(x, start=0, end=2), [H, W])",
            init_(SegmentationHead, 10), {"image": f32(110, 3, 3, 24, 20)}, ["masks"],
            dynamic_axes={"image": {0: "batch"}}, export_inputs={"image": f32(210, 2, 3, 24, 20)}),
        "torch_mlp": lambda: export(
            "torch_mlp", "MLP (linear, ReLU, softmax) with a symbolic batch axis", init_(MLP, 6),
            {"features": f32(106, 4, 20)}, ["probs"], external_data=True, dynamic_batch=True),
    }


# --- Keras / TensorFlow -> frozen GraphDef, SavedModel ------------------------------------------
def tf_models() -> Dict[str, Callable[[], dict]]:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    import keras
    from keras import layers
    from tensorflow.python.framework.convert_to_constants import \
        convert_variables_to_constants_v2

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    versions = f"TensorFlow {tf.__version__}, Keras {keras.__version__}"

    def f32(offset: int, *shape: int, scale: float = 1.0) -> np.ndarray:
        return (rng(offset).randn(*shape) * scale).astype(np.float32)

    def trained_looking(model: "keras.Model", seed: int) -> "keras.Model":
        """Seeded weights away from Keras' initial values: BatchNormalization statistics and
        affine terms, biases and LayerNormalization terms that are not 0 or 1."""
        r = rng(seed)
        for layer in model.layers:
            if isinstance(layer, layers.BatchNormalization):
                gamma, beta, mean, var = (w.shape for w in layer.get_weights())
                layer.set_weights([r.uniform(0.5, 1.5, gamma), r.uniform(-0.2, 0.2, beta),
                                   r.uniform(-0.5, 0.5, mean), r.uniform(0.5, 1.5, var)])
                continue
            weights = []
            for w in layer.get_weights():          # kernels stay; vectors of 0 or 1 move
                if w.ndim == 1:
                    w = r.uniform(0.5, 1.5, w.shape) if np.all(w == 1) else \
                        r.uniform(-0.2, 0.2, w.shape)
                weights.append(w.astype(np.float32))
            layer.set_weights(weights)
        return model

    def freeze(name: str, family: str, concrete, inputs: Dict[str, np.ndarray],
               lower_control_flow: bool = True) -> dict:
        """Freeze the concrete function (variables to Const) taking ``inputs`` in order, and
        write ``NAME.pb``; the outputs are named by the frozen graph's fetched tensors
        (``Identity``, ``Identity_1``, ...)."""
        frozen = convert_variables_to_constants_v2(concrete,
                                                   lower_control_flow=lower_control_flow)
        graph_def = frozen.graph.as_graph_def()
        with open(os.path.join(HERE, name + ".pb"), "wb") as f:
            f.write(graph_def.SerializeToString())
        names = [t.name[:-2] if t.name.endswith(":0") else t.name for t in frozen.outputs]
        got = reference_graphdef(name + ".pb", inputs, names)
        want = tf.nest.flatten(concrete(*[tf.constant(v) for v in inputs.values()]))
        for o, w, g in zip(names, want, got.values()):  # the frozen graph is the model
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-6, err_msg=name + ":" + o)
        save_npz(os.path.join(HERE, name + ".inputs.npz"), inputs)
        save_npz(os.path.join(HERE, name + ".outputs.npz"), got)
        top = sorted({n.op for n in graph_def.node})
        inner = sorted({n.op for f in graph_def.library.function for n in f.node_def})
        entry = {"file": name + ".pb", "format": "graphdef", "family": family,
                 "source": f"{versions}; frozen GraphDef (convert_variables_to_constants_v2, "
                           f"lower_control_flow={lower_control_flow})",
                 "reference": f"TensorFlow {tf.__version__} (tf.compat.v1.Session on the .pb)",
                 "op_types": top}
        if inner:
            entry["function_op_types"] = inner
        return entry

    def reference_graphdef(file: str, inputs: Dict[str, np.ndarray], outputs: List[str]
                           ) -> Dict[str, np.ndarray]:
        """What TensorFlow computes for the GraphDef file as written."""
        graph_def = tf.compat.v1.GraphDef()
        with open(os.path.join(HERE, file), "rb") as f:
            graph_def.ParseFromString(f.read())
        with tf.Graph().as_default() as g:
            tf.graph_util.import_graph_def(graph_def, name="")
            with tf.compat.v1.Session(graph=g) as sess:
                got = sess.run([o if ":" in o else o + ":0" for o in outputs],
                               {k + ":0": v for k, v in inputs.items()})
        return dict(zip(outputs, got))

    def keras_frozen(name: str, family: str, model: "keras.Model",
                     inputs: Dict[str, np.ndarray], **kw) -> dict:
        specs = [tf.TensorSpec(v.shape, tf.as_dtype(v.dtype), name=k) for k, v in inputs.items()]
        fn = tf.function(lambda *xs: model(list(xs) if len(xs) > 1 else xs[0], training=False))
        return freeze(name, family, fn.get_concrete_function(*specs), inputs, **kw)

    def conv_bn(x, filters: int, kernel: int, stride: int = 1, relu: float = 0.0):
        x = layers.Conv2D(filters, kernel, stride, padding="same", use_bias=False)(x)
        x = layers.BatchNormalization()(x)
        return layers.ReLU(max_value=relu or None)(x)

    def resnet() -> "keras.Model":
        keras.utils.set_random_seed(SEED + 11)
        inp = keras.Input((32, 32, 3), batch_size=2, name="image")
        x = conv_bn(inp, 8, 3)
        x = layers.MaxPooling2D(2)(x)
        for filters, stride in ((8, 1), (16, 2), (32, 2)):
            y = conv_bn(x, filters, 3, stride)
            y = layers.Conv2D(filters, 3, padding="same", use_bias=False)(y)
            y = layers.BatchNormalization()(y)
            if stride != 1 or x.shape[-1] != filters:
                x = layers.Conv2D(filters, 1, stride, use_bias=False)(x)
                x = layers.BatchNormalization()(x)
            x = layers.ReLU()(layers.Add()([x, y]))
        x = layers.GlobalAveragePooling2D()(x)
        return trained_looking(keras.Model(inp, layers.Dense(10)(x)), 11)

    def mobilenet() -> "keras.Model":
        keras.utils.set_random_seed(SEED + 12)
        inp = keras.Input((32, 32, 3), batch_size=2, name="image")
        x = conv_bn(inp, 16, 3, 2, relu=6.0)
        for cout, stride, expand in ((8, 1, 1), (16, 2, 4), (16, 1, 4), (24, 2, 4)):
            cin = x.shape[-1]
            y = conv_bn(x, cin * expand, 1, relu=6.0) if expand != 1 else x
            y = layers.DepthwiseConv2D(3, stride, padding="same", use_bias=False)(y)
            y = layers.ReLU(6.0)(layers.BatchNormalization()(y))
            y = layers.BatchNormalization()(layers.Conv2D(cout, 1, use_bias=False)(y))
            x = layers.Add()([x, y]) if stride == 1 and cin == cout else y
        x = conv_bn(x, 64, 1, relu=6.0)
        x = layers.Dropout(0.2)(layers.GlobalAveragePooling2D()(x))
        return trained_looking(keras.Model(inp, layers.Dense(10)(x)), 12)

    def lstm() -> "keras.Model":
        keras.utils.set_random_seed(SEED + 13)
        inp = keras.Input((7, 8), batch_size=2, name="sequence")
        x = layers.LSTM(16, return_sequences=True)(inp)
        x = layers.LSTM(16)(x)
        return trained_looking(keras.Model(inp, layers.Dense(4)(x)), 13)

    def gru() -> "keras.Model":
        keras.utils.set_random_seed(SEED + 14)
        inp = keras.Input((7, 8), batch_size=2, name="sequence")
        x = layers.Bidirectional(layers.GRU(16, return_sequences=True))(inp)
        x = layers.GRU(16)(x)
        return trained_looking(keras.Model(inp, layers.Dense(4)(x)), 14)

    def attention() -> "keras.Model":
        keras.utils.set_random_seed(SEED + 15)
        inp = keras.Input((10, 16), batch_size=2, name="tokens")
        a = layers.MultiHeadAttention(num_heads=2, key_dim=8)(inp, inp)
        x = layers.LayerNormalization()(layers.Add()([inp, a]))
        f = layers.Dense(16)(layers.Dense(32, activation="gelu")(x))
        x = layers.LayerNormalization()(layers.Add()([x, f]))
        x = layers.GlobalAveragePooling1D()(x)
        return trained_looking(keras.Model(inp, layers.Dense(3, activation="softmax")(x)), 15)

    def text_cnn() -> "keras.Model":
        keras.utils.set_random_seed(SEED + 19)
        inp = keras.Input((20,), batch_size=2, dtype="int32", name="tokens")
        x = layers.Embedding(60, 12)(inp)
        x = layers.Conv1D(16, 3, activation="relu", padding="same")(x)
        x = layers.MaxPooling1D(2)(x)
        x = layers.Conv1D(8, 3, activation="relu", dilation_rate=2, padding="same")(x)
        x = layers.Conv1D(8, 2, dilation_rate=3)(x)
        x = layers.GlobalMaxPooling1D()(x)
        x = layers.Dropout(0.5)(x)
        return trained_looking(keras.Model(inp, layers.Dense(2, activation="softmax")(x)), 19)

    def unet() -> "keras.Model":
        keras.utils.set_random_seed(SEED + 20)
        inp = keras.Input((16, 16, 3), batch_size=2, name="image")
        c1 = layers.BatchNormalization()(layers.Conv2D(8, 3, padding="same",
                                                       activation="swish")(inp))
        c2 = layers.Conv2D(8, 3, padding="same", activation="relu", dilation_rate=2)(
            layers.MaxPooling2D()(c1))
        b = layers.Conv2D(8, 3, padding="same", activation="relu")(layers.AveragePooling2D(2)(c2))
        u2 = layers.Concatenate()([layers.Conv2DTranspose(8, 3, strides=2, padding="same")(b),
                                   c2])
        u1 = layers.Concatenate()([layers.UpSampling2D(interpolation="bilinear")(u2), c1])
        u1 = layers.Conv2D(4, 3, padding="same", activation="gelu")(u1)
        r = layers.Resizing(24, 20, interpolation="bilinear")(u1)
        n = layers.Resizing(12, 12, interpolation="nearest")(u1)
        out = layers.Conv2D(2, 1)(r)
        return trained_looking(keras.Model(inp, [out, layers.GlobalAveragePooling2D()(n)]), 20)

    def convnext() -> "keras.Model":
        """Two ConvNeXt blocks as keras.applications.ConvNeXt builds them: a 7x7 Conv2D with
        groups = channels (TensorFlow's grouped Conv2D), LayerNormalization, Dense, GELU, a
        layer scale and the residual; before them a Conv2D of 3 groups of 4 channels."""
        keras.utils.set_random_seed(SEED + 21)
        inp = keras.Input((16, 16, 3), batch_size=2, name="image")
        x = layers.LayerNormalization(epsilon=1e-6)(layers.Conv2D(12, 4, strides=4)(inp))
        x = layers.Conv2D(12, 3, padding="same", groups=3)(x)       # 4 channels per group
        for _ in range(2):
            y = layers.Conv2D(12, 7, padding="same", groups=12)(x)
            y = layers.LayerNormalization(epsilon=1e-6)(y)
            y = layers.Dense(4 * 12, activation="gelu")(y)
            y = layers.Dense(12)(y)
            y = layers.Rescaling(0.5)(y)
            x = layers.Add()([x, y])
        x = layers.GlobalAveragePooling2D()(x)
        return trained_looking(keras.Model(inp, layers.Dense(5)(x)), 21)

    def tf1_while_cond() -> dict:
        """A TF1 graph (graph mode, control flow v1: Enter/Merge/Switch/NextIteration/Exit) with
        a tf.while_loop over a fed trip count and a tf.cond on the loop's result, its
        variables frozen with tf.compat.v1.graph_util.convert_variables_to_constants."""
        name = "tf1_while_cond"
        v1 = tf.compat.v1
        v1.disable_control_flow_v2()
        try:
            r = rng(16)
            with tf.Graph().as_default() as g:
                x = v1.placeholder(tf.float32, [4, 6], name="x")
                steps = v1.placeholder(tf.int32, [], name="steps")
                w = v1.Variable(r.randn(6, 6).astype(np.float32) * 0.4, name="w",
                                use_resource=False)
                b = v1.Variable(r.uniform(-0.2, 0.2, 6).astype(np.float32), name="b",
                                use_resource=False)

                def body(i, h, total):
                    h = tf.tanh(tf.matmul(h, w) + b)
                    return i + 1, h, total + tf.reduce_sum(h, axis=1)

                _, h, total = tf.while_loop(lambda i, h, total: i < steps, body,
                                            [tf.constant(0), x, tf.zeros([4])])
                y = tf.cond(tf.reduce_mean(h) > 0.0, lambda: h * 2.0, lambda: h - 1.0)
                y = tf.identity(y, name="y")
                z = tf.cond(steps > 100, lambda: total * 0.0, lambda: tf.nn.softmax(total))
                z = tf.identity(z, name="z")
                with v1.Session(graph=g) as sess:
                    sess.run(v1.global_variables_initializer())
                    graph_def = v1.graph_util.convert_variables_to_constants(
                        sess, g.as_graph_def(), ["y", "z"])
        finally:
            v1.enable_control_flow_v2()
        with open(os.path.join(HERE, name + ".pb"), "wb") as f:
            f.write(graph_def.SerializeToString())
        inputs = {"x": f32(116, 4, 6), "steps": np.array(5, np.int32)}
        got = reference_graphdef(name + ".pb", inputs, ["y", "z"])
        save_npz(os.path.join(HERE, name + ".inputs.npz"), inputs)
        save_npz(os.path.join(HERE, name + ".outputs.npz"), got)
        return {"file": name + ".pb", "format": "graphdef",
                "family": "TF1 graph mode: tf.while_loop (fed trip count) and tf.cond, "
                          "control flow v1",
                "source": f"{versions}; tf.compat.v1 graph, control flow v1, frozen with "
                          "tf.compat.v1.graph_util.convert_variables_to_constants",
                "reference": f"TensorFlow {tf.__version__} (tf.compat.v1.Session on the .pb)",
                "op_types": sorted({n.op for n in graph_def.node})}

    def tf2_function_loop() -> dict:
        """A TF2 tf.function whose Python ``for i in tf.range(n)`` and ``if`` on tensors
        AutoGraph turns into functional While and If ops, frozen without lowering them."""
        r = rng(17)
        w = tf.Variable(r.randn(5, 5).astype(np.float32) * 0.5, name="w")
        b = tf.Variable(r.uniform(-0.2, 0.2, 5).astype(np.float32), name="b")

        @tf.function(input_signature=[tf.TensorSpec((3, 5), tf.float32, name="x"),
                                      tf.TensorSpec((), tf.int32, name="n")])
        def step(x, n):
            h = x
            acc = tf.zeros_like(x)
            for _ in tf.range(n):
                h = tf.tanh(tf.matmul(h, w) + b)
                if tf.reduce_mean(h) > 0.0:
                    acc = acc + h
                else:
                    acc = acc - 0.5 * h
            if n > 2:
                out = acc / tf.cast(n, tf.float32)
            else:
                out = acc
            return h, out

        inputs = {"x": f32(117, 3, 5), "n": np.array(4, np.int32)}
        return freeze("tf2_function_loop", "TF2 tf.function: a Python loop over tf.range "
                      "(While) with an if on tensors inside and after it (If), functional "
                      "control flow kept", step.get_concrete_function(), inputs,
                      lower_control_flow=False)

    def saved_model() -> dict:
        """tf.saved_model.save of a small Keras classifier with a serving_default signature:
        saved_model.pb and variables/ (the tensor bundle) as TensorFlow writes them."""
        import shutil
        name = "tf_saved_model"
        keras.utils.set_random_seed(SEED + 18)
        inp = keras.Input((12,), name="features")
        x = layers.Dense(32)(inp)
        x = layers.ReLU()(layers.BatchNormalization()(x))
        x = layers.Dropout(0.3)(layers.Dense(16, activation="tanh")(x))
        model = trained_looking(keras.Model(inp, layers.Dense(3, activation="softmax")(x)), 18)

        @tf.function(input_signature=[tf.TensorSpec((None, 12), tf.float32, name="features")])
        def serve(features):
            return {"probs": model(features, training=False)}

        module = tf.Module()
        module.model = model
        module.serve = serve
        folder = os.path.join(HERE, name)
        shutil.rmtree(folder, ignore_errors=True)
        tf.saved_model.save(module, folder, signatures={"serving_default": serve})
        inputs = {"features": f32(118, 5, 12)}
        loaded = tf.saved_model.load(folder).signatures["serving_default"]
        got = loaded(**{k: tf.constant(v) for k, v in inputs.items()})
        got = {k: v.numpy() for k, v in got.items()}
        np.testing.assert_allclose(got["probs"], model(inputs["features"]).numpy(), rtol=1e-5)
        save_npz(os.path.join(HERE, name + ".inputs.npz"), inputs)
        save_npz(os.path.join(HERE, name + ".outputs.npz"), got)
        return {"file": name, "format": "saved_model", "signature": "serving_default",
                "family": "SavedModel directory (tf.saved_model.save of a Keras classifier: "
                          "Dense, BatchNormalization, Dropout, softmax; weights in variables/)",
                "source": f"{versions}; tf.saved_model.save with signatures="
                          "{'serving_default': ...}",
                "reference": f"TensorFlow {tf.__version__} (tf.saved_model.load, the signature)"}

    return {
        "tf_resnet": lambda: keras_frozen(
            "tf_resnet", "ResNet-style CNN in Keras (Conv2D, BatchNormalization, ReLU, Add, "
            "pooling, Dense)", resnet(), {"image": f32(111, 2, 32, 32, 3)}),
        "tf_mobilenet": lambda: keras_frozen(
            "tf_mobilenet", "MobileNetV2-style CNN in Keras (DepthwiseConv2D, inverted "
            "residuals, ReLU6)", mobilenet(), {"image": f32(112, 2, 32, 32, 3)}),
        "tf_lstm": lambda: keras_frozen(
            "tf_lstm", "Keras LSTM (2 layers): While loops over TensorList ops",
            lstm(), {"sequence": f32(113, 2, 7, 8)}, lower_control_flow=False),
        "tf_gru": lambda: keras_frozen(
            "tf_gru", "Keras GRU (bidirectional GRU, then GRU): While loops over TensorList "
            "ops, ReverseV2", gru(), {"sequence": f32(114, 2, 7, 8)}, lower_control_flow=False),
        "tf_attention": lambda: keras_frozen(
            "tf_attention", "Keras MultiHeadAttention (Einsum) encoder block with GELU and "
            "LayerNormalization", attention(), {"tokens": f32(115, 2, 10, 16)}),
        "tf_text_cnn": lambda: keras_frozen(
            "tf_text_cnn", "Keras text CNN: Embedding, Conv1D (dilated: SpaceToBatchND, "
            "BatchToSpaceND), MaxPooling1D, GlobalMaxPooling1D, Dropout, softmax",
            text_cnn(), {"tokens": rng(119).randint(0, 60, (2, 20)).astype(np.int32)}),
        "tf_unet": lambda: keras_frozen(
            "tf_unet", "small Keras U-Net: Conv2D (swish: IdentityN; dilated), "
            "BatchNormalization, Conv2DTranspose, UpSampling2D and Resizing (ResizeBilinear, "
            "ResizeNearestNeighbor), Concatenate, two outputs", unet(),
            {"image": f32(120, 2, 16, 16, 3)}),
        "tf_convnext": lambda: keras_frozen(
            "tf_convnext", "ConvNeXt blocks in Keras: Conv2D(groups=channels) and "
            "Conv2D(groups=3) (grouped Conv2D), LayerNormalization, GELU, layer scale, residual", convnext(),
            {"image": f32(121, 2, 16, 16, 3)}),
        "tf1_while_cond": tf1_while_cond,
        "tf2_function_loop": tf2_function_loop,
        "tf_saved_model": saved_model,
    }


# --- driver ------------------------------------------------------------------------------------
def builders() -> Dict[str, Callable[[], dict]]:
    out = {}
    out.update(torch_models())
    out.update(tf_models())
    return out


def main(argv: List[str]) -> int:
    every = builders()
    unknown = [n for n in argv if n not in every]
    if unknown:
        print(f"unknown model(s): {', '.join(unknown)}; known: {', '.join(every)}", file=sys.stderr)
        return 2
    manifest = {"models": {}}
    if argv and os.path.exists(MANIFEST):
        with open(MANIFEST) as f:
            manifest = json.load(f)
    for name in argv or list(every):
        print(f"--- {name}", flush=True)
        entry = every[name]()
        entry.setdefault("rtol", RTOL)
        entry.setdefault("atol", ATOL)
        for part in ("inputs", "outputs"):
            with np.load(os.path.join(HERE, f"{name}.{part}.npz")) as arrays:
                entry[part] = {k: {"dtype": str(v.dtype), "shape": list(v.shape)}
                               for k, v in arrays.items()}
        manifest["models"][name] = entry
    manifest = {"about": ABOUT, "models": dict(sorted(manifest["models"].items()))}
    with open(MANIFEST, "w") as f:
        f.write(manifest_text(manifest))
    return 0


def manifest_text(manifest: dict) -> str:
    """JSON, one line per list of names and per input or output."""
    text = json.dumps(manifest, indent=1)
    text = re.sub(r"\[\s+([^\[\]{}]*?)\s+\]",
                  lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text)
    text = re.sub(r'\{\s+"dtype": ("[^"]*"),\s+"shape": (\[[^\]]*\])\s+\}',
                  r'{"dtype": \1, "shape": \2}', text)
    return text + "\n"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
