"""TensorFlow DataTypes DT_HALF (19), DT_BFLOAT16 (14), DT_UINT16 (17), DT_UINT32 (22) and
DT_UINT64 (23) in GraphDefs: constants in each TensorProto form TensorFlow writes (the typed
``*_val`` fields, ``uint32_val``/``uint64_val`` included, and ``tensor_content``), placeholders
and attrs, import and run, and export round trips."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tensorboardX", reason="GraphDef support needs the tensorboard extra")

import dsl as fl  # noqa: E402
from compiler.interop.graphdef import (graph_to_graphdef, graphdef_to_graph,  # noqa: E402
                                       read_graphdef, write_graphdef)
from compiler.interop.protos import tf_protos  # noqa: E402
from compiler.ir.printer import print_graph  # noqa: E402
from dsl.tensor import Tensor  # noqa: E402
from runtime.dtypes import DType  # noqa: E402

PB = tf_protos()
DT_FLOAT, DT_BFLOAT16, DT_UINT16, DT_HALF, DT_UINT32, DT_UINT64 = 1, 14, 17, 19, 22, 23


def _varint(n: int) -> bytes:
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def tensor(dtype: int, shape, **fields):
    t = PB.tensor_pb2.TensorProto(dtype=dtype)
    for d in shape:
        t.tensor_shape.dim.add(size=d)
    packed = {}
    for k, v in fields.items():
        if k in ("uint32_val", "uint64_val"):      # fields 16 and 17 of TensorFlow's proto
            packed[16 if k == "uint32_val" else 17] = v
        elif k == "tensor_content":
            t.tensor_content = v
        else:
            getattr(t, k).extend(v)
    raw = t.SerializeToString()
    for number, values in packed.items():
        body = b"".join(_varint(v) for v in values)
        raw += _varint(number << 3 | 2) + _varint(len(body)) + body
    out = PB.tensor_pb2.TensorProto()
    out.ParseFromString(raw)
    return out


def attr(**kw):
    a = PB.attr_value_pb2.AttrValue()
    for k, v in kw.items():
        if k == "tensor":
            a.tensor.CopyFrom(v)
        elif k == "shape":
            for d in v:
                a.shape.dim.add(size=d)
        else:
            setattr(a, k, v)
    return a


def node(gd, name, op, inputs=(), **attrs):
    nd = gd.node.add(name=name, op=op)
    nd.input.extend(inputs)
    for k, v in attrs.items():
        nd.attr[k].CopyFrom(v)


def test_constants_of_the_new_dtypes_in_every_tensorproto_form(tmp_path):
    bf16 = DType.bf16.np
    half_bits = np.array([1.5, -2.0, 65504.0], np.float16).view(np.uint16)
    bf16_bits = np.array([1.5, 3e38, -0.0], bf16).view(np.uint16)
    consts = {
        "h": (DT_HALF, [3], dict(half_val=half_bits.tolist())),
        "b": (DT_BFLOAT16, [3], dict(half_val=bf16_bits.tolist())),
        "b_raw": (DT_BFLOAT16, [3], dict(tensor_content=bf16_bits.tobytes())),
        "u16": (DT_UINT16, [2], dict(int_val=[65535, 7])),
        "u32": (DT_UINT32, [3], dict(uint32_val=[4294967295, 1])),      # last one repeats
        "u64": (DT_UINT64, [2], dict(uint64_val=[2**64 - 1, 2**63])),
        "u64_raw": (DT_UINT64, [2], dict(tensor_content=np.array([5, 2**64 - 2], "<u8").tobytes())),
    }
    gd = PB.graph_pb2.GraphDef()
    for name, (dt, shape, fields) in consts.items():
        node(gd, name, "Const", value=attr(tensor=tensor(dt, shape, **fields)), dtype=attr(type=dt))
    node(gd, "x", "Placeholder", dtype=attr(type=DT_BFLOAT16), shape=attr(shape=[3]))
    node(gd, "sum", "AddV2", ["x", "b"], T=attr(type=DT_BFLOAT16))
    node(gd, "wide", "Cast", ["sum"], SrcT=attr(type=DT_BFLOAT16), DstT=attr(type=DT_FLOAT),
         Truncate=attr(b=False))
    node(gd, "twice", "AddV2", ["u32", "u32"], T=attr(type=DT_UINT32))
    path = tmp_path / "types.pb"
    path.write_bytes(gd.SerializeToString())
    graph = graphdef_to_graph(read_graphdef(str(path)), str(path))
    values = {n.name: n.attrs["value"] for n in graph if n.op == "Const"}
    assert values["h"].dtype == np.float16 and values["h"].tolist() == [1.5, -2.0, 65504.0]
    for k in ("b", "b_raw"):
        assert values[k].dtype == bf16
        np.testing.assert_array_equal(values[k].view(np.uint16), bf16_bits)
    assert values["u16"].dtype == np.uint16 and values["u16"].tolist() == [65535, 7]
    assert values["u32"].dtype == np.uint32 and values["u32"].tolist() == [2**32 - 1, 1, 1]
    assert values["u64"].tolist() == [2**64 - 1, 2**63]
    assert values["u64_raw"].tolist() == [5, 2**64 - 2]
    x = np.array([1.0, 1.0, 0.25], bf16)
    with fl.Session(graph=graph) as s:
        wide, twice = s.run([Tensor(graph.output("wide")), Tensor(graph.output("twice"))],
                            {Tensor(graph.output("x")): x})
    want = (x.astype(np.float32) + bf16_bits.view(bf16).astype(np.float32)).astype(bf16)
    np.testing.assert_array_equal(wide, want.astype(np.float32))
    assert twice.dtype == np.uint32 and twice.tolist() == [2**32 - 2, 2, 2]


def test_export_and_import_keep_the_new_dtypes(tmp_path):
    g = fl.Graph("types")
    with g.as_default():
        a = fl.placeholder(fl.bfloat16, [None, 2], name="a")
        h = fl.constant(np.array([[0.5, -1.0]], np.float16), name="h")
        u = fl.constant(np.array([2**64 - 1, 3], np.uint64), name="u")
        fl.cast(a, fl.float16, name="a16") * h
        fl.add(u, u, name="uu")
        fl.cast(fl.constant(np.array([1, 2], np.uint16)), fl.uint32, name="u32")
    for suffix in (".pb", ".pbtxt"):
        path = str(tmp_path / ("types" + suffix))
        write_graphdef(g, path)
        back = graphdef_to_graph(read_graphdef(path), path, name="types")
        assert print_graph(back) == print_graph(g)
    assert {19, 14, 23, 17, 22} <= {n.attr["DstT"].type for n in graph_to_graphdef(g).node
                                    if "DstT" in n.attr} | {n.attr["dtype"].type for n in
                                                            graph_to_graphdef(g).node
                                                            if "dtype" in n.attr}
