"""``fl.contrib.slim`` (``slim = tf.contrib.slim``, or tf_slim): the layer functions of
``fl.contrib.layers`` with its regularizers and initializers, ``arg_scope`` and the variable
helpers of ``fl.contrib.framework``, and ``slim.losses`` (contrib's losses). Every layer
function takes its defaults from ``arg_scope``: ``with slim.arg_scope([slim.conv2d],
padding="SAME"): ...``. (``slim.learning``'s training loop is not provided: run the train op
in a ``Session``.)"""
from dsl.contrib import losses  # noqa: F401
from dsl.contrib.framework import *  # noqa: F401,F403
from dsl.contrib.framework import __all__ as _framework_all
from dsl.contrib.layers import *  # noqa: F401,F403
from dsl.contrib.layers import __all__ as _layers_all

__all__ = sorted(set(_framework_all) | set(_layers_all) | {"losses"})
