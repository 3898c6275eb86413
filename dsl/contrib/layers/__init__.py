"""``fl.contrib.layers``: TensorFlow 1.x's ``tf.contrib.layers``: the layer functions slim
models are built with (``layers.py``: ``fully_connected``, ``conv2d``, ``batch_norm``, ...)
and the regularizers and initializers (``regularizers.py``)."""
from dsl.contrib.layers.regularizers import *  # noqa: F401,F403
from dsl.contrib.layers.regularizers import __all__ as _regularizers_all
from dsl.contrib.layers.layers import *  # noqa: F401,F403
from dsl.contrib.layers.layers import __all__ as _layers_all
from dsl.contrib.framework import arg_scope  # noqa: F401  (tf.contrib.layers.arg_scope)

__all__ = list(_regularizers_all) + list(_layers_all) + ["arg_scope"]
