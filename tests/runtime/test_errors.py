"""TensorFlow's error hierarchy in the runtime (``runtime/errors.py``): codes, the C runtime's
status codes and their classes, both constructors, pickling, and the trip of an error's class,
node and location through a task's gRPC trailing metadata (``runtime/transport.py``)."""
from __future__ import annotations

import json
import pickle
import re

import grpc
import pytest

from runtime import errors
from runtime.checkpoint import CheckpointError
from runtime.errors import (CANONICAL_CLASSES, FeedError, OpError, PeerUnavailableError,
                            RuntimeExecutionError, class_for_status,
                            error_code_from_exception_type, exception_type_from_error_code,
                            status_code_of)
from runtime import transport
from repo_paths import ROOT

TF_CODES = {"CANCELLED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3, "DEADLINE_EXCEEDED": 4,
            "NOT_FOUND": 5, "ALREADY_EXISTS": 6, "PERMISSION_DENIED": 7,
            "RESOURCE_EXHAUSTED": 8, "FAILED_PRECONDITION": 9, "ABORTED": 10,
            "OUT_OF_RANGE": 11, "UNIMPLEMENTED": 12, "INTERNAL": 13, "UNAVAILABLE": 14,
            "DATA_LOSS": 15, "UNAUTHENTICATED": 16}


def _class_name(code_name: str) -> str:
    name = "".join(w.capitalize() for w in code_name.split("_")) + "Error"
    return "CancelledError" if code_name == "CANCELLED" else name


def test_one_class_per_tensorflow_code():
    assert len(CANONICAL_CLASSES) == 16
    for code_name, code in TF_CODES.items():
        cls = getattr(errors, _class_name(code_name))
        assert getattr(errors, code_name) == code
        assert cls.error_code == code and issubclass(cls, OpError)
        assert exception_type_from_error_code(code) is cls
        assert error_code_from_exception_type(cls) == code
    with pytest.raises(KeyError):
        exception_type_from_error_code(0)


def test_every_c_status_code_has_its_class_and_back():
    """Each code of flowc_rt.h's enum is a class whose own status code it is, so an error
    raised in Python under a host call comes back from C as the same class."""
    with open(f"{ROOT}/runtime/csrc/flowc_rt.h") as f:
        header = f.read()
    start = header.index("enum { FLOWC_OK")
    block = header[start:header.index("};", start)]
    enum = {m.group(1): int(m.group(2)) for m in re.finditer(r"FLOWC_([A-Z_]+) = (\d+)", block)}
    with open(f"{ROOT}/codegen_templates/c_library/header.h.j2") as f:      # the C library's
        library = {m.group(1): int(m.group(2))
                   for m in re.finditer(r"FLOWC_STATUS_([A-Z_]+) = (\d+)", f.read())}
    assert library == enum
    assert enum.pop("OK") == 0
    assert enum.pop("ERROR") == errors.FLOWC_ERROR and class_for_status(1) is errors.UnknownError
    assert set(enum) == set(TF_CODES) - {"UNKNOWN"}
    for name, status in enum.items():
        assert getattr(errors, "FLOWC_" + name) == status
        cls = class_for_status(status)
        assert cls.error_code == TF_CODES[name], name
        assert cls.status_code == status
    assert class_for_status(10) is PeerUnavailableError          # a receive's lost peer
    assert class_for_status(999) is errors.UnknownError
    for cls in CANONICAL_CLASSES:
        assert issubclass(class_for_status(cls.status_code), cls) or cls is errors.UnknownError
    assert status_code_of(MemoryError()) == errors.FLOWC_RESOURCE_EXHAUSTED
    assert status_code_of(ValueError()) == errors.FLOWC_ERROR
    assert status_code_of(errors.FailedPreconditionError("x")) == errors.FLOWC_FAILED_PRECONDITION


def test_flowc_and_tensorflow_constructors():
    e = errors.InvalidArgumentError("a.flow:3:1: node 'g': bad index", "g", "a.flow:3:1", 3)
    assert (e.message, str(e), e.node_name, e.node, e.location, e.code) == \
        ("a.flow:3:1: node 'g': bad index", "a.flow:3:1: node 'g': bad index", "g", "g",
         "a.flow:3:1", 3)
    assert e.node_def == errors.NodeDef("g") and e.node_def.name == "g" and e.op is None
    assert e.error_code == 3
    tf = errors.OutOfRangeError(None, None, "End of sequence")
    assert (tf.message, tf.node_def, tf.op, tf.error_code) == ("End of sequence", None, None, 11)
    base = errors.OpError(errors.NodeDef("n", "MatMul"), None, "boom", errors.INTERNAL)
    assert base.error_code == 13 and base.node_def == errors.NodeDef("n", "MatMul")
    assert errors.OpError("x").error_code == errors.UNKNOWN


def test_node_named_later_and_pickled():
    e = errors.OutOfRangeError("queue 'q' is closed")
    assert e.add_node("deq", "m.flow:2:5", "QueueDequeueV2") is e
    assert str(e) == "m.flow:2:5: node 'deq' (QueueDequeueV2): queue 'q' is closed"
    assert e.node_def == errors.NodeDef("deq", "QueueDequeueV2")
    e.add_node("other")                                        # it names its node already
    assert e.node_name == "deq"
    for err in (e, CheckpointError("no checkpoint at 'p'", errors.FLOWC_NOT_FOUND, "r", "f:1:1"),
                FeedError("you must feed 'x'", "x")):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and str(back) == str(err)
        assert (back.node_def, back.location, back.error_code) == \
            (err.node_def, err.location, err.error_code)


def test_flowc_names_fit_the_hierarchy():
    from compiler.errors import ExecutionError, node_error
    assert RuntimeExecutionError is OpError
    assert issubclass(FeedError, errors.InvalidArgumentError)
    assert issubclass(ExecutionError, errors.InvalidArgumentError)
    assert issubclass(PeerUnavailableError, errors.UnavailableError)
    for code, cls in ((errors.FLOWC_NOT_FOUND, errors.NotFoundError),
                      (errors.FLOWC_DATA_LOSS, errors.DataLossError),
                      (None, errors.InvalidArgumentError)):
        e = CheckpointError("checkpoint trouble", code)
        assert isinstance(e, CheckpointError) and isinstance(e, cls)
        assert e.error_code == cls.error_code

    class Node:                    # what node_error reads of an IR node
        name, op, location, device = "w/read", "ReadVariableOp", "m.py:4:2", ""
    e = node_error(errors.FailedPreconditionError, "variable 'w' is not initialized", Node())
    assert str(e) == "m.py:4:2: node 'w/read' (ReadVariableOp): variable 'w' is not initialized"
    assert e.node_def == errors.NodeDef("w/read", "ReadVariableOp") and e.location == "m.py:4:2"


def test_transport_errors_are_tensorflow_classes_with_their_grpc_codes():
    assert issubclass(transport.UnavailableError, errors.UnavailableError)
    assert issubclass(transport.UnauthenticatedError, errors.UnauthenticatedError)
    assert issubclass(transport.StepNotRegisteredError, errors.NotFoundError)
    assert issubclass(transport.MessageTooLargeError, errors.ResourceExhaustedError)
    assert issubclass(transport.WireFormatError, errors.InvalidArgumentError)
    assert transport.UnavailableError("x").status_code == errors.FLOWC_UNAVAILABLE
    for cls in CANONICAL_CLASSES:
        assert transport.grpc_code_of(cls("x")).value[0] == cls.error_code   # gRPC's = TF's
    assert transport.grpc_code_of(transport.WireFormatError("x")) == \
        grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize("cls", list(CANONICAL_CLASSES) + [PeerUnavailableError, FeedError,
                                                           transport.UnavailableError])
def test_an_error_crosses_a_task_boundary_as_itself(cls):
    """What a task's ``_fail`` sends (``error_metadata``) the client turns back into the same
    class with the same message, node, op type and location (``remote_error``)."""
    sent = cls("w.py:7:3: node 'g' (GatherV2): indices[1] = 7 is not in [0, 5)", "g", "w.py:7:3",
               op_type="GatherV2")
    metadata = dict(transport.error_metadata(sent))
    got = transport.remote_error(metadata[transport.ERROR_METADATA], str(sent),
                                 metadata[transport.ERROR_DETAIL_METADATA])
    assert type(got) is cls
    assert (str(got), got.node_def, got.location, got.error_code) == \
        (str(sent), sent.node_def, sent.location, sent.error_code)


def test_an_error_class_the_client_lacks_arrives_as_its_tensorflow_class():
    sent = CheckpointError("no checkpoint at 'p'", errors.FLOWC_NOT_FOUND, "restore", "s.py:1:1")
    metadata = dict(transport.error_metadata(sent))
    got = transport.remote_error(metadata[transport.ERROR_METADATA], str(sent),
                                 metadata[transport.ERROR_DETAIL_METADATA])
    assert type(got) is type(sent) and isinstance(got, errors.NotFoundError)   # known here
    newer = json.dumps({"class": "elsewhere.SomeNewerError", "error_code": errors.NOT_FOUND,
                        "node": "restore", "location": "s.py:1:1"}).encode()
    got = transport.remote_error("SomeNewerError", "no checkpoint at 'p'", newer)
    assert type(got) is errors.NotFoundError and got.node_name == "restore"
    old = transport.remote_error("DeadlineExceededError", "late", None)       # an older task
    assert type(old) is errors.DeadlineExceededError and str(old) == "late"
    garbled = transport.remote_error("NoSuchError", "what", b"{not json")
    assert type(garbled) is transport.TransportError and str(garbled) == "what"
