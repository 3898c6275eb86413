"""``tf.io`` (the parts flowc has): ``fl.io.gfile`` with TF2's lower-case names over
``dsl/gfile.py``."""
from __future__ import annotations

import types

from dsl import gfile as _g

__all__ = ["gfile", "tf_record_iterator"]

gfile = types.SimpleNamespace(
    GFile=_g.GFile, exists=_g.Exists, isdir=_g.IsDirectory, makedirs=_g.MakeDirs,
    mkdir=_g.MkDir, glob=_g.Glob, listdir=_g.ListDirectory, remove=_g.Remove,
    rmtree=_g.DeleteRecursively, rename=_g.Rename, copy=_g.Copy, stat=_g.Stat, walk=_g.Walk)


def tf_record_iterator(path, options=None):
    """The records (bytes) of the TFRecord file ``path`` (``tf.io.tf_record_iterator``;
    uncompressed files only)."""
    if options not in (None, "", "NONE"):
        raise NotImplementedError("tf_record_iterator reads uncompressed TFRecord files only")
    from compiler.interop.tfrecord import read_records
    return read_records(str(path))
