"""``tf.saved_model`` as TF1 code uses it: ``loader.load(sess, tags, export_dir)`` loads a
TF1 SavedModel into a session to run or train (``dsl/saved_model/loader.py``);
``simple_save`` and ``Builder`` write one TensorFlow loads (``dsl/saved_model/builder.py``);
the constants of its tags and signatures."""
from types import SimpleNamespace

from dsl.saved_model import builder, loader, signature_constants, tag_constants
from dsl.saved_model.builder import (Builder, SavedModelBuilder, build_signature_def,
                                     build_tensor_info, predict_signature_def, simple_save)
from dsl.saved_model.loader import load, maybe_saved_model_directory

signature_def_utils = SimpleNamespace(build_signature_def=build_signature_def,
                                      predict_signature_def=predict_signature_def)
utils = SimpleNamespace(build_tensor_info=build_tensor_info)

__all__ = ["loader", "load", "maybe_saved_model_directory", "tag_constants",
           "signature_constants", "builder", "Builder", "SavedModelBuilder", "simple_save",
           "build_tensor_info", "predict_signature_def", "build_signature_def",
           "signature_def_utils", "utils"]
