"""`fl.nn` convolution and pooling: conv2d, depthwise_conv2d, max_pool, avg_pool (NHWC) and the
convolution backprops."""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple, Union

from dsl.ops import apply_op, convert_to_tensor
from dsl.tensor import Tensor

__all__ = ["conv2d", "conv2d_transpose", "conv2d_backprop_input", "conv2d_backprop_filter", "depthwise_conv2d",
           "depthwise_conv2d_native", "depthwise_conv2d_native_backprop_input",
           "depthwise_conv2d_native_backprop_filter", "max_pool", "avg_pool"]

IntOrList = Union[int, Sequence[int]]


def _four(value: Optional[IntOrList], what: str, default: int = 1,
          data_format: str = "NHWC") -> List[int]:
    """An int, 2 (H, W) or 4 (in ``data_format`` order) values as the 4-list the ops take."""
    if value is None:
        value = default
    if isinstance(value, int):
        value = [value]
    v = [int(x) for x in value]
    if len(v) == 1:
        v = v * 2
    if len(v) == 2:
        return [1, 1, v[0], v[1]] if data_format == "NCHW" else [1, v[0], v[1], 1]
    if len(v) == 4:
        return v
    raise ValueError(f"{what} must be an int or a list of 1, 2 or 4 ints, got {value!r}")


def _padding(padding) -> Tuple[str, List[int]]:
    """(padding attr, explicit_paddings): a string, or [[0, 0], [t, b], [l, r], [0, 0]]."""
    if isinstance(padding, str):
        return padding.upper(), []
    pairs = [list(p) for p in padding]
    if len(pairs) != 4 or any(len(p) != 2 for p in pairs):
        raise ValueError(f"explicit padding must be 4 pairs (NHWC), got {padding!r}")
    return "EXPLICIT", [int(x) for p in pairs for x in p]


def _conv_attrs(strides, padding, data_format: str, dilations) -> dict:
    pad, explicit = _padding(padding)
    return {"strides": _four(strides, "strides"), "padding": pad, "explicit_paddings": explicit,
            "data_format": data_format, "dilations": _four(dilations, "dilations")}


def conv2d(input, filter, strides: IntOrList, padding, data_format: str = "NHWC",
           dilations: Optional[IntOrList] = None, name: Optional[str] = None) -> Tensor:
    """2-D convolution of NHWC ``input`` with an HWIO ``filter``, as ``tf.nn.conv2d``."""
    x = convert_to_tensor(input)
    f = convert_to_tensor(filter, dtype=x.dtype)
    return apply_op("Conv2D", [x, f], _conv_attrs(strides, padding, data_format, dilations),
                    name=name or "Conv2D")


def conv2d_backprop_input(input_sizes, filter, out_backprop, strides: IntOrList, padding,
                          data_format: str = "NHWC", dilations: Optional[IntOrList] = None,
                          name: Optional[str] = None) -> Tensor:
    """Gradient of conv2d with respect to its input (of shape ``input_sizes``)."""
    f = convert_to_tensor(filter)
    dy = convert_to_tensor(out_backprop, dtype=f.dtype)
    sizes = convert_to_tensor(input_sizes, dtype="int32")
    return apply_op("Conv2DBackpropInput", [sizes, f, dy],
                    _conv_attrs(strides, padding, data_format, dilations),
                    name=name or "Conv2DBackpropInput")


def conv2d_transpose(value=None, filter=None, output_shape=None, strides: IntOrList = None,
                     padding="SAME", data_format: str = "NHWC", name: Optional[str] = None,
                     input=None, filters=None, dilations: Optional[IntOrList] = None) -> Tensor:
    """The transpose of conv2d (``tf.nn.conv2d_transpose``, TF1's arguments): ``value`` is
    [batch, height, width, in_channels], ``filter`` [h, w, output_channels, in_channels],
    ``output_shape`` the 4 dims of the result (a list or a 1-D int tensor). It is the gradient
    of a conv2d of the result shape, ``Conv2DBackpropInput``."""
    if value is None:
        value = input
    elif input is not None:
        raise ValueError("conv2d_transpose takes value or input, not both")
    if filter is None:
        filter = filters
    elif filters is not None:
        raise ValueError("conv2d_transpose takes filter or filters, not both")
    if value is None or filter is None or output_shape is None or strides is None:
        raise ValueError("conv2d_transpose needs value, filter, output_shape and strides")
    from dsl.tensor import static_shape
    x = convert_to_tensor(value)
    f = convert_to_tensor(filter, dtype=x.dtype)
    shape = convert_to_tensor(output_shape, dtype="int32")
    channel = 1 if data_format == "NCHW" else 3
    x_shape, f_shape, out_shape = static_shape(x), static_shape(f), static_shape(shape)
    if out_shape is not None and out_shape[0] is not None and out_shape[0] != 4:
        raise ValueError(f"output_shape must have shape (4,), got {list(out_shape)}")
    if x_shape is not None and f_shape is not None and len(x_shape) == 4 and len(f_shape) == 4:
        if None not in (x_shape[channel], f_shape[3]) and x_shape[channel] != f_shape[3]:
            raise ValueError(f"input channels does not match filter's input channels, "
                             f"{x_shape[channel]} != {f_shape[3]}")
    known = _constant_list(output_shape)
    if known is not None and f_shape is not None and len(known) == 4 and len(f_shape) == 4:
        if f_shape[2] is not None and known[channel] != f_shape[2]:
            raise ValueError(f"output_shape does not match filter's output channels, "
                             f"{known[channel]} != {f_shape[2]}")
    return apply_op("Conv2DBackpropInput", [shape, f, x],
                    _conv_attrs(strides, padding, data_format, dilations),
                    name=name or "conv2d_transpose")


def _constant_list(value) -> Optional[List[int]]:
    """``value``'s ints when it is a Python list or a constant tensor, else None."""
    from dsl.tensor import Tensor as _Tensor
    if isinstance(value, _Tensor):
        node = value.op.node
        if node.op == "Const":
            return [int(v) for v in node.attrs["value"].reshape(-1)]
        return None
    try:
        return [int(v) for v in value]
    except TypeError:
        return None


def conv2d_backprop_filter(input, filter_sizes, out_backprop, strides: IntOrList, padding,
                           data_format: str = "NHWC", dilations: Optional[IntOrList] = None,
                           name: Optional[str] = None) -> Tensor:
    """Gradient of conv2d with respect to its filter (of shape ``filter_sizes``)."""
    x = convert_to_tensor(input)
    dy = convert_to_tensor(out_backprop, dtype=x.dtype)
    sizes = convert_to_tensor(filter_sizes, dtype="int32")
    return apply_op("Conv2DBackpropFilter", [x, sizes, dy],
                    _conv_attrs(strides, padding, data_format, dilations),
                    name=name or "Conv2DBackpropFilter")


def _depthwise_attrs(strides, padding, data_format: Optional[str], dilations) -> dict:
    fmt = data_format or "NHWC"
    pad, explicit = _padding(padding)          # explicit pairs: in data_format's order
    return {"strides": _four(strides, "strides", data_format=fmt), "padding": pad,
            "explicit_paddings": explicit, "data_format": fmt,
            "dilations": _four(dilations, "dilations", data_format=fmt)}


def depthwise_conv2d(input, filter, strides: IntOrList, padding, rate=None,
                     name: Optional[str] = None, data_format: Optional[str] = None,
                     dilations: Optional[IntOrList] = None) -> Tensor:
    """Depthwise 2-D convolution, as TensorFlow 1.x's ``tf.nn.depthwise_conv2d``: input channel
    ``c`` convolved with its ``M`` filters ``filter[:, :, c, :]`` gives output channels
    ``c*M .. c*M+M-1`` (``filter`` is ``[KH, KW, C, M]``; the output has ``C*M`` channels).
    ``rate`` (or its alias ``dilations``) is the (height, width) dilation of the filter; one
    ``DepthwiseConv2dNative`` node does the whole convolution, dilated or not."""
    if rate is not None and dilations is not None:
        raise ValueError("depthwise_conv2d takes rate or dilations, not both")
    x = convert_to_tensor(input)
    f = convert_to_tensor(filter, dtype=x.dtype)
    return apply_op("DepthwiseConv2dNative", [x, f],
                    _depthwise_attrs(strides, padding, data_format,
                                     rate if rate is not None else dilations),
                    name=name or "depthwise")


def depthwise_conv2d_native(input, filter, strides: IntOrList, padding,
                            data_format: str = "NHWC", dilations: Optional[IntOrList] = None,
                            name: Optional[str] = None) -> Tensor:
    """The ``DepthwiseConv2dNative`` op (``tf.nn.depthwise_conv2d_native``)."""
    x = convert_to_tensor(input)
    f = convert_to_tensor(filter, dtype=x.dtype)
    return apply_op("DepthwiseConv2dNative", [x, f],
                    _depthwise_attrs(strides, padding, data_format, dilations),
                    name=name or "DepthwiseConv2dNative")


def depthwise_conv2d_native_backprop_input(input_sizes, filter, out_backprop, strides: IntOrList,
                                           padding, data_format: str = "NHWC",
                                           dilations: Optional[IntOrList] = None,
                                           name: Optional[str] = None) -> Tensor:
    """Gradient of depthwise_conv2d_native with respect to its input (of shape ``input_sizes``)."""
    f = convert_to_tensor(filter)
    dy = convert_to_tensor(out_backprop, dtype=f.dtype)
    sizes = convert_to_tensor(input_sizes, dtype="int32")
    return apply_op("DepthwiseConv2dNativeBackpropInput", [sizes, f, dy],
                    _depthwise_attrs(strides, padding, data_format, dilations),
                    name=name or "DepthwiseConv2dNativeBackpropInput")


def depthwise_conv2d_native_backprop_filter(input, filter_sizes, out_backprop, strides: IntOrList,
                                            padding, data_format: str = "NHWC",
                                            dilations: Optional[IntOrList] = None,
                                            name: Optional[str] = None) -> Tensor:
    """Gradient of depthwise_conv2d_native with respect to its filter (of shape
    ``filter_sizes``)."""
    x = convert_to_tensor(input)
    dy = convert_to_tensor(out_backprop, dtype=x.dtype)
    sizes = convert_to_tensor(filter_sizes, dtype="int32")
    return apply_op("DepthwiseConv2dNativeBackpropFilter", [x, sizes, dy],
                    _depthwise_attrs(strides, padding, data_format, dilations),
                    name=name or "DepthwiseConv2dNativeBackpropFilter")


def _pool(op: str, value, ksize, strides, padding: str, data_format: str, name) -> Tensor:
    attrs = {"ksize": _four(ksize, "ksize"), "strides": _four(strides, "strides"),
             "padding": padding.upper(), "data_format": data_format}
    return apply_op(op, [convert_to_tensor(value)], attrs, name=name or op)


def max_pool(value, ksize: IntOrList, strides: IntOrList, padding: str,
             data_format: str = "NHWC", name: Optional[str] = None) -> Tensor:
    """Max over each ksize window of NHWC ``value``, as ``tf.nn.max_pool``."""
    return _pool("MaxPool", value, ksize, strides, padding, data_format, name)


def avg_pool(value, ksize: IntOrList, strides: IntOrList, padding: str,
             data_format: str = "NHWC", name: Optional[str] = None) -> Tensor:
    """Mean over the in-range elements of each ksize window, as ``tf.nn.avg_pool``."""
    return _pool("AvgPool", value, ksize, strides, padding, data_format, name)
