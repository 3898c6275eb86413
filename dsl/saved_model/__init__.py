"""``tf.saved_model`` as TF1 code uses it: ``loader.load(sess, tags, export_dir)`` loads a
TF1 SavedModel into a session to run or train (``dsl/saved_model/loader.py``), and the
constants of its tags and signatures."""
from dsl.saved_model import loader, signature_constants, tag_constants
from dsl.saved_model.loader import load, maybe_saved_model_directory

__all__ = ["loader", "load", "maybe_saved_model_directory", "tag_constants",
           "signature_constants"]
