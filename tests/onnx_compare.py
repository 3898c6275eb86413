"""One ONNX node (or a few) as a model, run by flowc through compiled C and by the onnx
package's reference evaluator: the helpers of the ONNX lowering tests."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import dsl as fl
from dsl.onnx import import_graph
from oracle import NO_FOLDING


def elem_type(dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def node_model(nodes, feeds: Dict[str, np.ndarray], outputs: Sequence[str], opset: int,
               initializers: Dict[str, np.ndarray] = None,
               input_shapes: Dict[str, list] = None, domain: str = "") -> onnx.ModelProto:
    """A model of ``nodes`` whose graph inputs are ``feeds`` (their shapes, unless
    ``input_shapes`` gives symbolic ones) and whose outputs are ``outputs``."""
    input_shapes = input_shapes or {}
    nodes = nodes if isinstance(nodes, (list, tuple)) else [nodes]
    inputs = [helper.make_tensor_value_info(n, elem_type(v.dtype),
                                            input_shapes.get(n, list(np.shape(v))))
              for n, v in feeds.items()]
    outs = [helper.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None) for n in outputs]
    inits = [numpy_helper.from_array(np.asarray(v), n) for n, v in (initializers or {}).items()]
    graph = helper.make_graph(nodes, "g", inputs, outs, initializer=inits)
    imports = [helper.make_opsetid(domain, opset)]
    if domain:
        imports.append(helper.make_opsetid("", 21))
    return helper.make_model(graph, opset_imports=imports)


def run_flowc(model: onnx.ModelProto, feeds: Dict[str, np.ndarray],
              constant_inputs: Optional[Dict[str, np.ndarray]] = None) -> List[np.ndarray]:
    """The model's outputs, compiled to C (constant folding off: every kernel runs in C)."""
    imported = import_graph(model, "model.onnx", constant_inputs=constant_inputs)
    with fl.Session(graph=imported.graph, backend="c", options=NO_FOLDING) as sess:
        return sess.run(list(imported.outputs.values()),
                        {imported.inputs[n]: v for n, v in feeds.items()
                         if n in imported.inputs})


def run_both(model: onnx.ModelProto, feeds: Dict[str, np.ndarray],
             constant_inputs: Optional[Dict[str, np.ndarray]] = None
             ) -> Tuple[List[np.ndarray], List[np.ndarray]]:
    """(flowc's outputs, the reference evaluator's outputs)."""
    want = ReferenceEvaluator(model).run(None, {**feeds, **(constant_inputs or {})})
    return run_flowc(model, feeds, constant_inputs), want


def assert_close(got, want, rtol=1e-5, atol=1e-6):
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (k, g.dtype, g.shape, w.dtype, w.shape)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"output {k}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"output {k}")
