"""TensorFlow-named reduction functions."""
from __future__ import annotations
