"""Gradient functions, one module per op family (``*_grad.py``, found by name); importing
this package registers them."""
import importlib
import os
import pkgutil

_here = os.path.dirname(os.path.abspath(__file__))
for _module in sorted(m.name for m in pkgutil.iter_modules([_here]) if m.name.endswith("_grad")):
    importlib.import_module(f"dsl.grad.{_module}")
