"""flowc's description of TensorFlow's wire formats (compiler/interop/tf_formats) against the
copies of TensorFlow's own protos that other packages ship: every field both describe has the
same number and kind, so files written by TensorFlow parse the same."""
from __future__ import annotations

import pytest

pytest.importorskip("google.protobuf")
tbx = pytest.importorskip("tensorboardX.proto.graph_pb2")

from compiler.interop.protos import tf_protos  # noqa: E402

PB = tf_protos()

SHARED = ["GraphDef", "NodeDef", "AttrValue", "NameAttrList", "TensorProto",
          "TensorShapeProto", "VersionDef", "ResourceHandleProto"]


def _theirs(name):
    from tensorboardX.proto import (attr_value_pb2, graph_pb2, node_def_pb2,
                                    resource_handle_pb2, tensor_pb2, tensor_shape_pb2,
                                    versions_pb2)
    for module in (graph_pb2, node_def_pb2, attr_value_pb2, tensor_pb2, tensor_shape_pb2,
                   versions_pb2, resource_handle_pb2):
        if hasattr(module, name):
            return getattr(module, name).DESCRIPTOR
    raise KeyError(name)


def _repeated(field) -> bool:
    if hasattr(field, "is_repeated"):              # protobuf 6.30 and newer
        return field.is_repeated
    return field.label == field.LABEL_REPEATED


def _compare(ours, theirs, path):
    for field in ours.fields:
        other = theirs.fields_by_number.get(field.number)
        if other is None:
            continue                      # a field newer than their copy
        assert other.name == field.name, f"{path}.{field.name}: their field {field.number} is {other.name}"
        assert other.type == field.type, f"{path}.{field.name}: kind differs"
        assert _repeated(other) == _repeated(field), f"{path}.{field.name}: repeated or not differs"
        if field.message_type is not None and not field.message_type.GetOptions().map_entry:
            _compare(field.message_type, other.message_type, f"{path}.{field.name}")


@pytest.mark.parametrize("name", SHARED)
def test_fields_match_tensorflows_numbers(name):
    _compare(getattr(PB, name).DESCRIPTOR, _theirs(name), name)


def test_data_type_numbers_match():
    from tensorboardX.proto import types_pb2
    theirs = types_pb2.DataType
    for value in PB.DataType.DESCRIPTOR.values:
        if value.name in theirs.keys():
            assert theirs.Value(value.name) == value.number, value.name


def test_function_library_round_trips():
    gd = PB.GraphDef()
    fn = gd.library.function.add()
    fn.signature.name = "body"
    fn.signature.input_arg.add(name="x", type=PB.DataType.Value("DT_FLOAT"))
    fn.node_def.add(name="y", op="Neg", input=["x"])
    fn.ret["y"] = "y:y:0"
    back = PB.GraphDef.FromString(gd.SerializeToString())
    assert back.library.function[0].ret["y"] == "y:y:0"
    # and the copy without a library field keeps it as an unknown field, losing nothing
    from tensorboardX.proto import graph_pb2
    assert graph_pb2.GraphDef.FromString(gd.SerializeToString()).SerializeToString() == \
        gd.SerializeToString()


def test_text_format_reads_ref_types():
    from google.protobuf import text_format
    gd = text_format.Parse('node { name: "v" op: "VariableV2" attr { key: "dtype" '
                           'value { type: DT_FLOAT_REF } } }', PB.GraphDef())
    assert gd.node[0].attr["dtype"].type == 101


# --- against TensorFlow's own descriptors --------------------------------------------------------
# tests/data/saved_models/tf_descriptors.json: the fields of every message and enum that
# tf_formats.proto names, as TensorFlow's own protos define them (make_saved_models.py wrote it
# with TensorFlow installed; these tests do not need it).
def _tf_descriptors():
    import json
    import os
    from repo_paths import ROOT
    with open(os.path.join(ROOT, "tests", "data", "saved_models", "tf_descriptors.json"),
              encoding="utf-8") as f:
        return json.load(f)


TF_DESCRIPTORS = _tf_descriptors()


def _our_message(path: str):
    parts = path.split(".")
    desc = getattr(PB, parts[0]).DESCRIPTOR
    for part in parts[1:]:
        desc = desc.nested_types_by_name[part]
    return desc


def _our_messages():
    out = []

    def walk(desc, prefix):
        name = f"{prefix}{desc.name}"
        out.append(name)
        for nested in desc.nested_types:
            if not nested.GetOptions().map_entry:
                walk(nested, name + ".")
    from compiler.interop.tf_formats import tf_formats_pb2
    for desc in tf_formats_pb2.DESCRIPTOR.message_types_by_name.values():
        walk(desc, "")
    return out


def test_every_message_of_ours_is_tensorflows():
    """Each message flowc describes is one of TensorFlow's (by name), so none is invented."""
    missing = [m for m in _our_messages() if m not in TF_DESCRIPTORS["messages"]]
    assert not missing, missing


@pytest.mark.parametrize("name", sorted(TF_DESCRIPTORS["messages"]))
def test_fields_match_tensorflows_own_protos(name):
    """Every field flowc declares has TensorFlow's number, kind, repetition and oneof."""
    theirs = TF_DESCRIPTORS["messages"][name]
    for field in _our_message(name).fields:
        assert field.name in theirs, f"{name}.{field.name}: TensorFlow has no such field"
        t = theirs[field.name]
        assert field.number == t["number"], f"{name}.{field.name}: number {field.number}, " \
                                            f"TensorFlow's is {t['number']}"
        assert field.type == t["type"], f"{name}.{field.name}: kind differs"
        assert _repeated(field) == t["repeated"], f"{name}.{field.name}: repetition differs"
        ours = field.containing_oneof.name if field.containing_oneof else None
        assert ours == t["oneof"], f"{name}.{field.name}: oneof {ours}, TensorFlow's {t['oneof']}"


@pytest.mark.parametrize("name", sorted(TF_DESCRIPTORS["enums"]))
def test_enum_values_match_tensorflows(name):
    from compiler.interop.tf_formats import tf_formats_pb2
    parts = name.split(".")
    if len(parts) == 1:
        desc = tf_formats_pb2.DESCRIPTOR.enum_types_by_name[name]
    else:
        desc = _our_message(".".join(parts[:-1])).enum_types_by_name[parts[-1]]
    theirs = TF_DESCRIPTORS["enums"][name]
    for value in desc.values:
        assert theirs.get(value.name) == value.number, f"{name}.{value.name}"
