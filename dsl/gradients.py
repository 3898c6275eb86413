"""Automatic differentiation as a user-level library: `fl.gradients` and the gradient registry."""
from __future__ import annotations

__all__: list = []
