"""``fl.data.experimental``: the names TF1 programs use from ``tf.data.experimental``."""
from dsl.data.dataset_ops import AUTOTUNE  # noqa: F401
