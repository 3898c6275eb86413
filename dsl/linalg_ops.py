"""TensorFlow-named linalg functions."""
from __future__ import annotations
