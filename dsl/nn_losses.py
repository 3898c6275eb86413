"""`fl.nn` losses and dropout: softmax cross-entropy, l2_loss, dropout."""
from __future__ import annotations

__all__: list = []
