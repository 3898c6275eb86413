"""``fl.data``: input pipelines as graph ops (TensorFlow 1.x's ``tf.data``); see
``docs/datasets.md``."""
from dsl.data.dataset_ops import AUTOTUNE, Dataset, DatasetV1
from dsl.data.iterator_ops import (Iterator, get_output_classes, get_output_shapes,
                                   get_output_types, make_initializable_iterator,
                                   make_one_shot_iterator)
from dsl.data import experimental

__all__ = ["AUTOTUNE", "Dataset", "DatasetV1", "Iterator", "experimental",
           "get_output_classes", "get_output_shapes", "get_output_types",
           "make_initializable_iterator", "make_one_shot_iterator"]
