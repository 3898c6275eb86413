"""What a ``*.flow`` file declares for training (``loss``, ``metric``, ``optimizer``, ``data``,
``train(...)``), and the names those declarations and ``var`` initializers resolve to."""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from dsl import init_ops

# ``var w: f32[2, 3] = glorot_uniform(seed=1)``: initializer names (the shape and dtype come from
# the declared type), TensorFlow's ``tf.initializers.*``.
INITIALIZERS = {
    "zeros": init_ops.zeros_initializer,
    "ones": init_ops.ones_initializer,
    "constant": init_ops.constant_initializer,
    "random_uniform": init_ops.random_uniform_initializer,
    "random_normal": init_ops.random_normal_initializer,
    "truncated_normal": init_ops.truncated_normal_initializer,
    "glorot_uniform": init_ops.glorot_uniform_initializer,
    "glorot_normal": init_ops.glorot_normal_initializer,
    "variance_scaling": init_ops.variance_scaling_initializer,
}

# ``train(steps=2000, batch_size=64, eval_every=200, seed=0)``: defaults of ``flowc train``
# (``eval_every`` None: a fifth of the steps).
TRAIN_SETTINGS = {"steps": 1000, "batch_size": 32, "eval_every": None, "seed": 0}


def optimizers() -> Dict[str, Any]:
    """``optimizer = adam(learning_rate=0.01)``: the short names of ``fl.train``'s optimizer
    classes (``fl.train.OPTIMIZERS``); ``LookupError`` when ``dsl.train`` is missing."""
    try:
        train = importlib.import_module("dsl.train")
    except ImportError as e:
        raise LookupError(f"optimizers are not available ({e})") from None
    return dict(train.OPTIMIZERS)


@dataclass
class Declared:
    """A declared value and where (``file:line:col``) it was declared."""
    value: Any
    where: str


@dataclass
class TrainingDecl:
    """A model's training declarations; ``None`` where a file does not declare one."""
    loss: Optional[Declared] = None                       # a scalar tensor
    metrics: Dict[str, Declared] = field(default_factory=dict)   # scalar tensors, in order
    optimizer: Optional[Declared] = None                  # an optimizer object
    optimizer_name: Optional[str] = None                  # as written (``adam``)
    data: Optional[Declared] = None                       # absolute path of the data file
    data_shown: Optional[str] = None                      # the path as written in the file
    settings: Dict[str, Declared] = field(default_factory=dict)  # train(...) keywords

    def setting(self, key: str) -> Any:
        """A ``train(...)`` setting, or its default."""
        d = self.settings.get(key)
        return d.value if d is not None else TRAIN_SETTINGS[key]
