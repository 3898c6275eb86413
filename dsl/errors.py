"""``fl.errors``: TensorFlow's error classes and codes (``tf.errors``), which every failed step
raises, whichever backend ran it (C, GPU, the numpy interpreter) and across tasks.

    try:
        sess.run(batch)
    except fl.errors.OutOfRangeError:      # the input ran out
        ...

Each error has ``error_code``, ``message``, ``node_def`` (the failing node's ``name``, ``op``,
``device``), ``op`` (the ``fl.Operation``) and flowc's ``location`` of the node (``file:line:col``).
``docs/errors.md`` lists which class each failure raises. The classes live in the runtime
(``runtime/errors.py``), which raises them; the old top-level names (``fl.InvalidArgumentError``,
``fl.OutOfRangeError``, ...) are the same classes.
"""
from runtime.errors import (ABORTED, ALREADY_EXISTS, CANCELLED, CANONICAL_CLASSES,
                            DATA_LOSS, DEADLINE_EXCEEDED, FAILED_PRECONDITION, INTERNAL,
                            INVALID_ARGUMENT, NOT_FOUND, OK, OUT_OF_RANGE, PERMISSION_DENIED,
                            RESOURCE_EXHAUSTED, UNAUTHENTICATED, UNAVAILABLE, UNIMPLEMENTED,
                            UNKNOWN, AbortedError, AlreadyExistsError, CancelledError,
                            DataLossError, DeadlineExceededError, FailedPreconditionError,
                            InternalError, InvalidArgumentError, NodeDef, NotFoundError, OpError,
                            OutOfRangeError, PermissionDeniedError, ResourceExhaustedError,
                            UnauthenticatedError, UnavailableError, UnimplementedError,
                            UnknownError, error_code_from_exception_type,
                            exception_type_from_error_code)

__all__ = ["OpError", "CancelledError", "UnknownError", "InvalidArgumentError",
           "DeadlineExceededError", "NotFoundError", "AlreadyExistsError",
           "PermissionDeniedError", "ResourceExhaustedError", "FailedPreconditionError",
           "AbortedError", "OutOfRangeError", "UnimplementedError", "InternalError",
           "UnavailableError", "DataLossError", "UnauthenticatedError",
           "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
           "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
           "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
           "UNAUTHENTICATED", "exception_type_from_error_code", "error_code_from_exception_type",
           "CANONICAL_CLASSES", "NodeDef"]
