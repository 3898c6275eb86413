"""``fl.layers``: TensorFlow 1.x's ``tf.layers`` (functions and classes). See
``dsl/layers/base.py`` for how layers name and share their variables and how ``training``
works."""
from dsl.layers.base import InputSpec, Layer
from dsl.layers.convolutional import Conv2D, Convolution2D, conv2d
from dsl.layers.conv1d import Conv1D, Convolution1D, conv1d
from dsl.layers.conv_transpose import (Conv2DTranspose, Convolution2DTranspose,
                                         conv2d_transpose)
from dsl.layers.core import Dense, Dropout, Flatten, dense, dropout, flatten
from dsl.layers.normalization import BatchNormalization, batch_normalization
from dsl.layers.pooling import (AveragePool2D, AveragePooling2D, MaxPool2D, MaxPooling2D,
                                average_pooling2d, max_pooling2d)

__all__ = ["Layer", "InputSpec", "Dense", "Dropout", "Flatten", "Conv2D", "Convolution2D",
           "MaxPooling2D", "AveragePooling2D", "MaxPool2D", "AveragePool2D",
           "BatchNormalization", "dense", "dropout", "flatten", "conv2d", "max_pooling2d",
           "average_pooling2d", "batch_normalization", "Conv2DTranspose",
           "Convolution2DTranspose", "conv2d_transpose", "Conv1D", "Convolution1D", "conv1d"]
