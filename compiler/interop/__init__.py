"""Formats of other systems: TensorFlow GraphDefs and TensorBoard event files."""
