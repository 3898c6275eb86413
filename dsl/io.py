"""``tf.io`` (the parts flowc has): ``fl.io.gfile`` with TF2's lower-case names over
``dsl/gfile.py``."""
from __future__ import annotations

import types

from dsl import gfile as _g

__all__ = ["gfile"]

gfile = types.SimpleNamespace(
    GFile=_g.GFile, exists=_g.Exists, isdir=_g.IsDirectory, makedirs=_g.MakeDirs,
    mkdir=_g.MkDir, glob=_g.Glob, listdir=_g.ListDirectory, remove=_g.Remove,
    rmtree=_g.DeleteRecursively, rename=_g.Rename, copy=_g.Copy, stat=_g.Stat, walk=_g.Walk)
