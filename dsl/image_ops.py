"""TF1's ``tf.image`` functions for input pipelines and models, built over ordinary ops as
TensorFlow builds them (``image_ops_impl.py``): flips and rotations (ReverseV2, Transpose),
crops and pads (Slice, Pad), dtype conversion with TF's int<->float scaling, brightness,
contrast, grayscale, standardization, total variation, image gradients, Sobel edges and
``resize_images``. Random ones draw from flowc's seeded random ops, so a graph or op seed
makes them repeatable.

Images are [height, width, channels] or [batch, height, width, channels] with a known rank.
TensorFlow checks some arguments with Assert ops at run time; flowc checks them here when they
are known while building (TF's ValueError and message), and otherwise the Slice or Pad they
feed fails at run time with its bounds error."""
from __future__ import annotations

from typing import Optional, Tuple, Union

import numpy as np

from dsl.array_ops import (_as_index, concat, expand_dims, identity, pad, reshape, reverse,
                           shape, slice, squeeze, stack, tile)
from dsl.array_ops import transpose as _transpose
from dsl.control_flow_ops import case
from dsl.math_ops import (abs, add, cast, divide, equal, floordiv, floormod, greater, less,
                          maximum, minimum, multiply, round, rsqrt, sqrt, square, subtract,
                          where_v2)
from dsl.ops import convert_to_tensor
from dsl.random_ops import random_uniform
from dsl.reduction_ops import reduce_mean, reduce_prod, reduce_sum
from dsl.tensor import Tensor
from runtime.dtypes import DType, as_dtype, numpy_kind

__all__ = ["flip_left_right", "flip_up_down", "random_flip_left_right", "random_flip_up_down",
           "rot90", "transpose_image", "transpose", "per_image_standardization",
           "convert_image_dtype", "adjust_brightness", "random_brightness", "adjust_contrast",
           "random_contrast", "rgb_to_grayscale", "grayscale_to_rgb", "central_crop",
           "crop_to_bounding_box", "pad_to_bounding_box", "resize_image_with_crop_or_pad",
           "resize_with_crop_or_pad", "total_variation", "image_gradients", "sobel_edges",
           "resize_images", "ResizeMethodV1", "rgb_to_hsv", "hsv_to_rgb", "adjust_saturation",
           "random_saturation", "adjust_hue", "random_hue"]

Int = Union[int, Tensor]


class ResizeMethodV1:
    """TF1's ``tf.compat.v1.image.ResizeMethod`` (integers); ``resize_images`` also takes
    TF2's names (``fl.image.ResizeMethod``)."""
    BILINEAR = 0
    NEAREST_NEIGHBOR = 1
    BICUBIC = 2
    AREA = 3


# --- shape checks ---------------------------------------------------------------------------
def _rank(image: Tensor) -> Optional[int]:
    return image.shape.ndims


def _at_least_3d(image, what: str = "image") -> Tensor:
    """TF's ``_AssertAtLeast3DImage`` (the static part): rank >= 3, inner 3 dims not 0."""
    image = convert_to_tensor(image)
    rank = _rank(image)
    if rank is None:
        raise ValueError(f"'{what}' has an unknown rank; flowc's image functions need it")
    if rank < 3:
        raise ValueError(f"'{what}' (shape {image.shape}) must be at least three-dimensional.")
    dims = image.shape.as_list()[-3:]
    if any(d == 0 for d in dims):
        raise ValueError(f"inner 3 dims of '{what}.shape' must be > 0: {image.shape}")
    return image


def _3d_or_4d(image, what: str = "image") -> Tuple[Tensor, int]:
    image = _at_least_3d(image, what)
    rank = _rank(image)
    if rank not in (3, 4):
        raise ValueError(f"'{what}' must have either 3 or 4 dimensions.")
    return image, rank


def _dims(image: Tensor):
    """Each dim of ``image``: its static int, or an int32 scalar read at run time."""
    static = image.shape.as_list()
    dyn = None
    out = []
    for i, d in enumerate(static):
        if d is None:
            dyn = shape(image) if dyn is None else dyn
            d = dyn[i]
        out.append(d)
    return out


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _check(cond, message: str) -> None:
    """TF's ``_assert``: a condition known now that fails raises ValueError(message)."""
    if isinstance(cond, (bool, np.bool_)) and not cond:
        raise ValueError(message)


def _int_arg(v) -> Int:
    if isinstance(v, Tensor):
        return cast(v, DType.i32) if v.dtype != DType.i32 else v
    if _is_int(v):
        return int(v)
    return int(np.asarray(v))


def _i32(v) -> Tensor:
    return v if isinstance(v, Tensor) else convert_to_tensor(np.int32(v))


def _max(a: Int, b: Int) -> Int:
    if _is_int(a) and _is_int(b):
        return max(a, b)
    return maximum(_i32(a), _i32(b))


def _min(a: Int, b: Int) -> Int:
    if _is_int(a) and _is_int(b):
        return min(a, b)
    return minimum(_i32(a), _i32(b))


def _sub(a: Int, b: Int) -> Int:
    if _is_int(a) and _is_int(b):
        return a - b
    return subtract(_i32(a), _i32(b))


def _add(a: Int, b: Int) -> Int:
    if _is_int(a) and _is_int(b):
        return a + b
    return add(_i32(a), _i32(b))


def _floordiv2(a: Int) -> Int:
    return a // 2 if _is_int(a) else floordiv(a, _i32(2))


def _neg(a: Int) -> Int:
    return -a if _is_int(a) else subtract(_i32(0), a)


def _ge(a: Int, b: Int):
    return a >= b if _is_int(a) and _is_int(b) else None


# --- flips and rotations ----------------------------------------------------------------------
def _flip(image, axis: int, name: str) -> Tensor:
    image, rank = _3d_or_4d(image)
    return reverse(image, [axis + rank - 3], name=name)


def flip_left_right(image, name: Optional[str] = None) -> Tensor:
    """``tf.image.flip_left_right``: the width dim reversed (3-D or 4-D ``image``)."""
    return _flip(image, 1, name or "flip_left_right")


def flip_up_down(image, name: Optional[str] = None) -> Tensor:
    """``tf.image.flip_up_down``: the height dim reversed (3-D or 4-D ``image``)."""
    return _flip(image, 0, name or "flip_up_down")


def _random_flip(image, axis: int, seed, name: str) -> Tensor:
    image, rank = _3d_or_4d(image)
    flipped = reverse(image, [axis + rank - 3])
    if rank == 3:
        u = random_uniform([], 0, 1.0, seed=seed)
        return where_v2(less(u, 0.5), flipped, image, name=name)
    u = random_uniform(shape(image)[:1], 0, 1.0, seed=seed)
    choose = greater(u, 0.5)              # TF: flips = round(u), and round(0.5) is 0
    return where_v2(reshape(choose, [-1, 1, 1, 1]), flipped, image, name=name)


def random_flip_left_right(image, seed: Optional[int] = None) -> Tensor:
    """``tf.image.random_flip_left_right``: each image flipped left-right with probability
    1/2 (a 4-D batch: each image on its own draw)."""
    return _random_flip(image, 1, seed, "random_flip_left_right")


def random_flip_up_down(image, seed: Optional[int] = None) -> Tensor:
    """``tf.image.random_flip_up_down``: each image flipped upside down with probability 1/2."""
    return _random_flip(image, 0, seed, "random_flip_up_down")


def rot90(image, k=1, name: Optional[str] = None) -> Tensor:
    """``tf.image.rot90``: ``image`` rotated counter-clockwise by ``k`` quarter turns (a
    Python int, or an int32 scalar tensor chosen at run time)."""
    image, rank = _3d_or_4d(image)
    h, w = rank - 3, rank - 2
    perm = list(range(rank))
    perm[h], perm[w] = w, h

    def turn(q: int):
        if q == 1:
            return _transpose(reverse(image, [w]), perm)
        if q == 2:
            return reverse(image, [h, w])
        if q == 3:
            return reverse(_transpose(image, perm), [w])
        return image
    if not isinstance(k, Tensor):
        out = turn(int(k) % 4)
        return out if name is None else _named(out, name)
    if k.dtype not in (DType.i32, DType.i64):
        raise TypeError(f"rot90: k must be an integer tensor, got {k.dtype}")
    q = floormod(cast(k, DType.i32), _i32(4))
    return case([(equal(q, _i32(i)), (lambda i=i: turn(i))) for i in (1, 2, 3)],
                default=lambda: turn(0), exclusive=True, name=name or "rot90")


def _named(t: Tensor, name: str) -> Tensor:
    return identity(t, name=name)


def transpose_image(image, name: Optional[str] = None) -> Tensor:
    """``tf.image.transpose_image`` (TF2 ``tf.image.transpose``): height and width swapped."""
    image, rank = _3d_or_4d(image)
    return _transpose(image, [1, 0, 2] if rank == 3 else [0, 2, 1, 3],
                      name=name or "transpose_image")


transpose = transpose_image  # tf.image.transpose (TF2's name)


# --- dtype and intensity ----------------------------------------------------------------------
def _kind(dtype: DType) -> str:
    return numpy_kind(dtype.np)


def _limits(dtype: DType):
    return np.iinfo(dtype.np) if _kind(dtype) in "iu" else np.finfo(np.dtype(dtype.np))


def _saturate_cast(value: Tensor, dtype: DType) -> Tensor:
    """TF's ``saturate_cast``: clipped to ``dtype``'s range (in the input's type), then cast."""
    src, dst = _limits(value.dtype), _limits(dtype)
    if src.min < dst.min:
        value = maximum(value, convert_to_tensor(np.asarray(dst.min).astype(value.dtype.np)))
    if src.max > dst.max:
        value = minimum(value, convert_to_tensor(np.asarray(dst.max).astype(value.dtype.np)))
    return cast(value, dtype)


def convert_image_dtype(image, dtype, saturate: bool = False,
                        name: Optional[str] = None) -> Tensor:
    """``tf.image.convert_image_dtype``: floats are in [0, 1), integers span [0, MAX]; int to
    int shifts by the ratio of the ranges, int to float divides by MAX, float to int multiplies
    by MAX + 0.5 (``saturate``: clipped to the target's range first, not wrapped)."""
    image = convert_to_tensor(image)
    dtype = as_dtype(dtype)
    if _kind(dtype) not in "fiu":
        raise AttributeError("dtype must be either floating point or integer")
    if _kind(image.dtype) not in "fiu":
        raise AttributeError("image dtype must be either floating point or integer")
    if dtype == image.dtype:
        return identity(image, name=name or "convert_image")
    name = name or "convert_image"
    src_int, dst_int = _kind(image.dtype) in "iu", _kind(dtype) in "iu"
    if src_int and dst_int:
        scale_in, scale_out = int(_limits(image.dtype).max), int(_limits(dtype).max)
        if scale_in > scale_out:
            scale = (scale_in + 1) // (scale_out + 1)
            scaled = floordiv(image, convert_to_tensor(np.asarray(scale, image.dtype.np)))
            return _saturate_cast(scaled, dtype) if saturate else cast(scaled, dtype)
        converted = _saturate_cast(image, dtype) if saturate else cast(image, dtype)
        scale = (scale_out + 1) // (scale_in + 1)
        return multiply(converted, convert_to_tensor(np.asarray(scale, dtype.np)), name=name)
    if not src_int and not dst_int:
        return cast(image, dtype, name=name)
    if src_int:
        scale = 1.0 / float(_limits(image.dtype).max)
        return multiply(cast(image, dtype), convert_to_tensor(np.asarray(scale, dtype.np)),
                        name=name)
    scale = float(_limits(dtype).max) + 0.5
    scaled = multiply(image, convert_to_tensor(np.asarray(scale, image.dtype.np)))
    return _saturate_cast(scaled, dtype) if saturate else cast(scaled, dtype)


def _as_float(image: Tensor) -> Tensor:
    """TF's rule in adjust_*: float16/float32 images as they are, others as float32."""
    if image.dtype in (DType.f16, DType.f32):
        return image
    return convert_image_dtype(image, DType.f32)


def adjust_brightness(image, delta) -> Tensor:
    """``tf.image.adjust_brightness``: ``delta`` added to every value of the image (as a
    float in [0, 1)), converted back to its dtype with saturation."""
    image = convert_to_tensor(image)
    flt = _as_float(image)
    delta = cast(convert_to_tensor(delta), flt.dtype)
    return convert_image_dtype(add(flt, delta), image.dtype, saturate=True)


def random_brightness(image, max_delta, seed: Optional[int] = None) -> Tensor:
    """``tf.image.random_brightness``: ``adjust_brightness`` by a delta drawn uniformly from
    [-max_delta, max_delta)."""
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    delta = random_uniform([], -max_delta, max_delta, seed=seed)
    return adjust_brightness(image, delta)


def adjust_contrast(images, contrast_factor) -> Tensor:
    """``tf.image.adjust_contrast``: each channel of each image moved away from its mean over
    height and width by ``contrast_factor``: (x - mean) * factor + mean (TF's AdjustContrastv2,
    composed here from its definition)."""
    images = _at_least_3d(images, "images")
    flt = _as_float(images)
    factor = cast(convert_to_tensor(contrast_factor), flt.dtype)
    mean = reduce_mean(flt, axis=[-3, -2], keepdims=True)
    adjusted = add(multiply(subtract(flt, mean), factor), mean)
    return convert_image_dtype(adjusted, images.dtype, saturate=True)


def random_contrast(image, lower, upper, seed: Optional[int] = None) -> Tensor:
    """``tf.image.random_contrast``: ``adjust_contrast`` by a factor drawn uniformly from
    [lower, upper)."""
    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")
    factor = random_uniform([], lower, upper, seed=seed)
    return adjust_contrast(image, factor)


def per_image_standardization(image) -> Tensor:
    """``tf.image.per_image_standardization``: each image (the last 3 dims) as float32 minus
    its mean, over max(stddev, 1/sqrt(number of values))."""
    image = cast(_at_least_3d(image), DType.f32)
    num = reduce_prod(shape(image)[-3:])
    mean = reduce_mean(image, axis=[-1, -2, -3], keepdims=True)
    centred = subtract(image, mean)
    std = sqrt(reduce_mean(square(centred), axis=[-1, -2, -3], keepdims=True))
    floor = rsqrt(cast(num, DType.f32))
    return divide(centred, maximum(std, floor), name="per_image_standardization")


def rgb_to_grayscale(images, name: Optional[str] = None) -> Tensor:
    """``tf.image.rgb_to_grayscale``: the weighted sum 0.2989 R + 0.587 G + 0.114 B, with a
    last dim of 1, in the images' dtype."""
    images = convert_to_tensor(images)
    if images.shape.ndims is not None and images.shape.ndims < 1:
        raise ValueError("'images' must have a channel dim")
    flt = convert_image_dtype(images, DType.f32)
    weights = convert_to_tensor(np.array([0.2989, 0.5870, 0.1140], np.float32))
    gray = reduce_sum(multiply(flt, weights), axis=-1, keepdims=True)
    return convert_image_dtype(gray, images.dtype, name=name or "rgb_to_grayscale")


def grayscale_to_rgb(images, name: Optional[str] = None) -> Tensor:
    """``tf.image.grayscale_to_rgb``: the one channel repeated three times."""
    images = convert_to_tensor(images)
    rank = _rank(images)
    if rank is None or rank < 2:
        raise ValueError(f"'images' (shape {images.shape}) must be at least two-dimensional.")
    if images.shape.as_list()[-1] not in (None, 1):
        raise ValueError("Last dimension of a grayscale image should be size 1.")
    return tile(images, [1] * (rank - 1) + [3], name=name or "grayscale_to_rgb")


# --- colour spaces (TF's RGBToHSV, HSVToRGB, AdjustSaturation, AdjustHue, composed) ---------
def _channels3(images, what: str) -> Tensor:
    images = convert_to_tensor(images)
    if _kind(images.dtype) != "f":
        raise TypeError(f"{what}: images must be float16, bfloat16, float32 or float64, got "
                        f"{images.dtype}")
    if images.shape.ndims is None or images.shape.ndims < 1:
        raise ValueError(f"{what}: input must be at least 1D")
    if images.shape.as_list()[-1] not in (None, 3):
        raise ValueError(f"{what}: input must have 3 channels but input only has "
                         f"{images.shape.as_list()[-1]} channels.")
    return images


def _split3(images: Tensor):
    return [images[..., i:i + 1] for i in range(3)]


def _const(value: float, like: Tensor) -> Tensor:
    return convert_to_tensor(np.asarray(value, like.dtype.np))


def _hsv(images: Tensor):
    """(h, s, v), each [..., 1], as TF's RGBToHSV kernel computes them."""
    r, g, b = _split3(images)
    zero = _const(0, images)
    v = maximum(maximum(r, g), b)
    rng = subtract(v, minimum(minimum(r, g), b))
    sat = where_v2(greater(v, zero), divide(rng, where_v2(greater(v, zero), v, _const(1, v))),
                   zero)
    norm = divide(_const(1.0 / 6.0, v), where_v2(greater(rng, zero), rng, _const(1, v)))
    hue = where_v2(equal(r, v), multiply(norm, subtract(g, b)),
                   where_v2(equal(g, v), add(multiply(norm, subtract(b, r)), _const(2 / 6, v)),
                            add(multiply(norm, subtract(r, g)), _const(4 / 6, v))))
    hue = where_v2(greater(rng, zero), hue, zero)
    hue = where_v2(less(hue, zero), add(hue, _const(1, v)), hue)
    return hue, sat, v


def _rgb(h: Tensor, s: Tensor, v: Tensor, name: str) -> Tensor:
    """TF's HSVToRGB kernel on (h, s, v), each [..., 1]."""
    one, two = _const(1, h), _const(2, h)
    dh = multiply(h, _const(6, h))

    def clip01(t):
        return minimum(maximum(t, _const(0, h)), one)
    dr = clip01(subtract(abs(subtract(dh, _const(3, h))), one))
    dg = clip01(subtract(two, abs(subtract(dh, two))))
    db = clip01(subtract(two, abs(subtract(dh, _const(4, h)))))
    one_s = subtract(one, s)
    return concat([multiply(add(one_s, multiply(s, d)), v) for d in (dr, dg, db)], -1,
                  name=name)


def rgb_to_hsv(images, name: Optional[str] = None) -> Tensor:
    """``tf.image.rgb_to_hsv``: hue, saturation and value in [0, 1] for RGB floats in [0, 1]
    (the last dim of 3); TF's RGBToHSV, composed here from elementwise ops."""
    images = _channels3(images, "rgb_to_hsv")
    return concat(list(_hsv(images)), -1, name=name or "rgb_to_hsv")


def hsv_to_rgb(images, name: Optional[str] = None) -> Tensor:
    """``tf.image.hsv_to_rgb``: the inverse of ``rgb_to_hsv`` (TF's HSVToRGB, composed)."""
    images = _channels3(images, "hsv_to_rgb")
    h, s, v = _split3(images)
    return _rgb(h, s, v, name or "hsv_to_rgb")


def adjust_saturation(image, saturation_factor, name: Optional[str] = None) -> Tensor:
    """``tf.image.adjust_saturation``: the HSV saturation times ``saturation_factor``, clipped
    to [0, 1] (TF's AdjustSaturation, composed over rgb_to_hsv / hsv_to_rgb)."""
    image = convert_to_tensor(image)
    flt = _channels3(_as_float(image), "adjust_saturation")
    h, s, v = _hsv(flt)
    factor = cast(convert_to_tensor(saturation_factor), flt.dtype)
    s = minimum(maximum(multiply(s, factor), _const(0, s)), _const(1, s))
    return convert_image_dtype(_rgb(h, s, v, "adjusted"), image.dtype,
                               name=name or "adjust_saturation")


def random_saturation(image, lower, upper, seed: Optional[int] = None) -> Tensor:
    """``tf.image.random_saturation``: ``adjust_saturation`` by a factor drawn uniformly
    from [lower, upper)."""
    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")
    return adjust_saturation(image, random_uniform([], lower, upper, seed=seed))


def adjust_hue(image, delta, name: Optional[str] = None) -> Tensor:
    """``tf.image.adjust_hue``: the HSV hue turned by ``delta`` (in [-1, 1]), wrapping around
    (TF's AdjustHue, composed over rgb_to_hsv / hsv_to_rgb)."""
    image = convert_to_tensor(image)
    flt = _channels3(_as_float(image), "adjust_hue")
    h, s, v = _hsv(flt)
    h = floormod(add(h, cast(convert_to_tensor(delta), flt.dtype)), _const(1, h))
    return convert_image_dtype(_rgb(h, s, v, "adjusted"), image.dtype,
                               name=name or "adjust_hue")


def random_hue(image, max_delta, seed: Optional[int] = None) -> Tensor:
    """``tf.image.random_hue``: ``adjust_hue`` by a delta drawn uniformly from
    [-max_delta, max_delta) (max_delta in [0, 0.5])."""
    if max_delta > 0.5:
        raise ValueError("max_delta must be <= 0.5.")
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    return adjust_hue(image, random_uniform([], -max_delta, max_delta, seed=seed))


# --- crops and pads ---------------------------------------------------------------------------
def _batched(image, what: str = "image") -> Tuple[Tensor, bool]:
    image = convert_to_tensor(image)
    rank = _rank(image)
    if rank is None:
        raise ValueError(f"'{what}' has an unknown rank; flowc's image functions need it")
    if rank not in (3, 4):
        raise ValueError(f"'{what}' (shape {image.shape}) must have either 3 or 4 dimensions.")
    _at_least_3d(image, what)
    return (image if rank == 4 else expand_dims(image, 0)), rank == 4


def crop_to_bounding_box(image, offset_height, offset_width, target_height,
                         target_width) -> Tensor:
    """``tf.image.crop_to_bounding_box``: the box of ``target_height`` x ``target_width``
    whose top-left corner is at (``offset_height``, ``offset_width``)."""
    image, is_batch = _batched(image)
    oh, ow = _int_arg(offset_height), _int_arg(offset_width)
    th, tw = _int_arg(target_height), _int_arg(target_width)
    _, height, width, _ = _dims(image)
    _check(_ge(ow, 0), "offset_width must be >= 0.")
    _check(_ge(oh, 0), "offset_height must be >= 0.")
    _check(_ge(tw, 1), "target_width must be > 0.")
    _check(_ge(th, 1), "target_height must be > 0.")
    _check(_ge(width, _add(tw, ow)), "width must be >= target + offset.")
    _check(_ge(height, _add(th, oh)), "height must be >= target + offset.")
    cropped = slice(image, _as_index([0, oh, ow, 0], DType.i32),
                    _as_index([-1, th, tw, -1], DType.i32), name="crop_to_bounding_box")
    cropped.set_shape([None, th if _is_int(th) else None, tw if _is_int(tw) else None,
                       image.shape.as_list()[3]])
    return cropped if is_batch else squeeze(cropped, [0])


def pad_to_bounding_box(image, offset_height, offset_width, target_height,
                        target_width) -> Tensor:
    """``tf.image.pad_to_bounding_box``: ``image`` placed at (``offset_height``,
    ``offset_width``) in a zero image of ``target_height`` x ``target_width``."""
    image, is_batch = _batched(image)
    oh, ow = _int_arg(offset_height), _int_arg(offset_width)
    th, tw = _int_arg(target_height), _int_arg(target_width)
    _, height, width, _ = _dims(image)
    after_w = _sub(_sub(tw, ow), width)
    after_h = _sub(_sub(th, oh), height)
    _check(_ge(oh, 0), "offset_height must be >= 0")
    _check(_ge(ow, 0), "offset_width must be >= 0")
    _check(_ge(after_w, 0), "width must be <= target - offset")
    _check(_ge(after_h, 0), "height must be <= target - offset")
    paddings = [[0, 0], [oh, after_h], [ow, after_w], [0, 0]]
    if any(isinstance(v, Tensor) for row in paddings for v in row):
        paddings = stack([_as_index(row, DType.i32) for row in paddings])
    padded = pad(image, paddings, name="pad_to_bounding_box")
    padded.set_shape([None, th if _is_int(th) else None, tw if _is_int(tw) else None,
                      image.shape.as_list()[3]])
    return padded if is_batch else squeeze(padded, [0])


def resize_image_with_crop_or_pad(image, target_height, target_width) -> Tensor:
    """``tf.image.resize_image_with_crop_or_pad``: centrally cropped where the image is larger
    than the target and zero-padded evenly where it is smaller."""
    image, is_batch = _batched(image)
    th, tw = _int_arg(target_height), _int_arg(target_width)
    _check(_ge(tw, 1), "target_width must be > 0.")
    _check(_ge(th, 1), "target_height must be > 0.")
    _, height, width, _ = _dims(image)
    width_diff, height_diff = _sub(tw, width), _sub(th, height)
    crop_w, pad_w = _max(_floordiv2(_neg(width_diff)), 0), _max(_floordiv2(width_diff), 0)
    crop_h, pad_h = _max(_floordiv2(_neg(height_diff)), 0), _max(_floordiv2(height_diff), 0)
    cropped = crop_to_bounding_box(image, crop_h, crop_w, _min(th, height), _min(tw, width))
    resized = pad_to_bounding_box(cropped, pad_h, pad_w, th, tw)
    return resized if is_batch else squeeze(resized, [0])


resize_with_crop_or_pad = resize_image_with_crop_or_pad


def central_crop(image, central_fraction: float) -> Tensor:
    """``tf.image.central_crop``: the central ``central_fraction`` (in (0, 1]) of the height
    and the width."""
    if central_fraction <= 0.0 or central_fraction > 1.0:
        raise ValueError("central_fraction must be within (0, 1]")
    image = convert_to_tensor(image)
    if central_fraction == 1.0:
        return image
    image = _at_least_3d(image)
    rank = _rank(image)
    if rank not in (3, 4):
        raise ValueError("`image` should either be a Tensor with rank = 3 or rank = 4. Had "
                         f"rank = {rank}.")
    dims = _dims(image)
    h, w = dims[rank - 3], dims[rank - 2]

    def start(d):
        if _is_int(d):
            return int((float(d) - float(d) * central_fraction) / 2)
        df = cast(d, DType.f64)
        # TF converts the Python fraction to a float32 tensor before the float64 cast
        frac = convert_to_tensor(np.float64(np.float32(central_fraction)))
        return cast(multiply(subtract(df, multiply(df, frac)), convert_to_tensor(np.float64(0.5))),
                    DType.i32)
    hs, ws = start(h), start(w)
    hsize, wsize = _sub(h, _add(hs, hs)), _sub(w, _add(ws, ws))
    begin = [hs, ws, 0] if rank == 3 else [0, hs, ws, 0]
    size = [hsize, wsize, -1] if rank == 3 else [-1, hsize, wsize, -1]
    return slice(image, _as_index(begin, DType.i32), _as_index(size, DType.i32),
                 name="central_crop")


# --- measures and filters ---------------------------------------------------------------------
def total_variation(images, name: Optional[str] = None) -> Tensor:
    """``tf.image.total_variation``: the sum of absolute differences of neighbouring values
    along height and width (a scalar for one image, one per image for a batch)."""
    images = convert_to_tensor(images)
    rank = _rank(images)
    if rank == 3:
        d1 = subtract(images[1:, :, :], images[:-1, :, :])
        d2 = subtract(images[:, 1:, :], images[:, :-1, :])
        axis = None
    elif rank == 4:
        d1 = subtract(images[:, 1:, :, :], images[:, :-1, :, :])
        d2 = subtract(images[:, :, 1:, :], images[:, :, :-1, :])
        axis = [1, 2, 3]
    else:
        raise ValueError("'images' must be either 3 or 4-dimensional.")
    return add(reduce_sum(abs(d1), axis=axis), reduce_sum(abs(d2), axis=axis),
               name=name or "total_variation")


def image_gradients(image) -> Tuple[Tensor, Tensor]:
    """``tf.image.image_gradients``: (dy, dx), the forward differences along height and width
    of a 4-D ``image``, with a zero last row (dy) and column (dx)."""
    image = convert_to_tensor(image)
    if _rank(image) != 4:
        raise ValueError("image_gradients expects a 4D tensor [batch_size, h, w, d], not "
                         f"{image.shape}.")
    dy = subtract(image[:, 1:, :, :], image[:, :-1, :, :])
    dx = subtract(image[:, :, 1:, :], image[:, :, :-1, :])
    dy = pad(dy, [[0, 0], [0, 1], [0, 0], [0, 0]])
    dx = pad(dx, [[0, 0], [0, 0], [0, 1], [0, 0]])
    dy.set_shape(image.shape)
    dx.set_shape(image.shape)
    return dy, dx


_SOBEL = (np.array([[-1, -2, -1], [0, 0, 0], [1, 2, 1]]),
          np.array([[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]]))


def sobel_edges(image) -> Tensor:
    """``tf.image.sobel_edges``: [batch, h, w, d, 2], the vertical (dy) and horizontal (dx)
    Sobel responses of a 4-D ``image`` padded by reflection (TF's depthwise convolution of the
    REFLECT-padded image, written here as the sum of its nine shifted, weighted copies)."""
    image = convert_to_tensor(image)
    if _rank(image) != 4:
        raise ValueError(f"sobel_edges expects a 4D tensor [batch, h, w, d], not {image.shape}")
    rows = concat([image[:, 1:2], image, image[:, -2:-1]], 1)
    padded = concat([rows[:, :, 1:2], rows, rows[:, :, -2:-1]], 2)
    dims = _dims(image)
    h, w = dims[1], dims[2]
    outs = []
    for kernel in _SOBEL:
        acc = None
        for i in range(3):
            for j in range(3):
                if kernel[i, j] == 0:
                    continue
                window = slice(padded, _as_index([0, i, j, 0], DType.i32),
                               _as_index([-1, h, w, -1], DType.i32))
                term = multiply(window, convert_to_tensor(
                    np.asarray(kernel[i, j], image.dtype.np)))
                acc = term if acc is None else add(acc, term)
        acc.set_shape(image.shape)
        outs.append(acc)
    return stack(outs, axis=-1, name="sobel_edges")


# --- resize ------------------------------------------------------------------------------------
_V1_METHODS = {0: "bilinear", 1: "nearest", 2: "bicubic", 3: "area"}
_CUBIC_TABLE = 1024          # TF's kCubicCoeffA table (A = -0.75, legacy resize_bicubic)


def _resize_scale(n_in: int, n_out: int, align_corners: bool) -> np.float32:
    if align_corners and n_out > 1:
        return np.float32(n_in - 1) / np.float32(n_out - 1)
    return np.float32(n_in) / np.float32(n_out)


def _bicubic_weights(n_in: int, n_out: int, align_corners: bool) -> np.ndarray:
    """[n_out, n_in]: ResizeBicubic's weights (its quantized coefficient table, the four
    taps clamped to the image) along one dim."""
    a = np.float32(-0.75)
    x = np.arange(_CUBIC_TABLE + 1, dtype=np.float32) / np.float32(_CUBIC_TABLE)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    x1 = x + np.float32(1)
    far = ((a * x1 - 5 * a) * x1 + 8 * a) * x1 - 4 * a
    scale = _resize_scale(n_in, n_out, align_corners)
    w = np.zeros((n_out, n_in), np.float64)
    for o in range(n_out):
        loc = np.float32(o) * scale
        base = int(np.floor(loc))
        off = int(np.rint(np.float32((loc - np.float32(base)) * np.float32(_CUBIC_TABLE))))
        taps = (far[off], near[off], near[_CUBIC_TABLE - off], far[_CUBIC_TABLE - off])
        for k, weight in enumerate(taps):
            w[o, min(n_in - 1, max(0, base - 1 + k))] += weight
    return w


def _area_weights(n_in: int, n_out: int, align_corners: bool) -> np.ndarray:
    """[n_out, n_in]: ResizeArea's weights along one dim (each output cell's overlap with the
    input cells, over the cell's size)."""
    scale = _resize_scale(n_in, n_out, align_corners)
    w = np.zeros((n_out, n_in), np.float64)
    for o in range(n_out):
        lo, hi = np.float32(o) * scale, np.float32(o + 1) * scale
        start, end = int(np.floor(lo)), int(np.ceil(hi))
        for i in range(start, end):
            if i < lo:
                part = scale if i + 1 > hi else np.float32(i + 1) - lo
            else:
                part = hi - np.float32(i) if i + 1 > hi else 1.0
            w[o, min(i, n_in - 1)] += float(part) / float(scale)
    return w


def _resize_separable(kind: str, images: Tensor, size, align_corners: bool,
                      name: Optional[str]) -> Tensor:
    """Bicubic or area resize of [batch, h, w, c] as Wh @ image @ Ww^T per channel."""
    from dsl.linalg_ops import matmul
    _, h, w, c = images.shape.as_list()
    if h is None or w is None or size is None:
        raise NotImplementedError(f"resize_images: method {kind!r} needs the image's height "
                                  "and width and the new size known while building (flowc "
                                  "has no ResizeBicubic / ResizeArea kernels)")
    weights = _bicubic_weights if kind == "bicubic" else _area_weights
    wh = convert_to_tensor(weights(h, size[0], align_corners).astype(np.float32))
    ww = convert_to_tensor(weights(w, size[1], align_corners).astype(np.float32))
    x = _transpose(cast(images, DType.f32), [0, 3, 1, 2])              # [b, c, h, w]
    x = matmul(reshape(x, [-1, w]), ww, transpose_b=True)               # [b*c*h, new_w]
    x = _transpose(reshape(x, [-1, h, size[1]]), [0, 2, 1])             # [b*c, new_w, h]
    x = matmul(reshape(x, [-1, h]), wh, transpose_b=True)               # [b*c*new_w, new_h]
    x = reshape(x, _as_index([shape(images)[0], c if c is not None else -1, size[1],
                              size[0]], DType.i32))
    return _transpose(x, [0, 3, 2, 1], name=name or f"resize_{kind}")


def resize_images(images, size, method=ResizeMethodV1.BILINEAR, align_corners: bool = False,
                  preserve_aspect_ratio: bool = False, name: Optional[str] = None) -> Tensor:
    """``tf.compat.v1.image.resize_images``: ResizeBilinear (float32 result) or
    ResizeNearestNeighbor with TF1's legacy pixel rule (``align_corners`` as given); an image
    already of the size comes back as it is. ``preserve_aspect_ratio`` scales both sides by
    the smaller of the two ratios so the image fits in ``size``. BICUBIC and AREA (TF's
    ResizeBicubic and ResizeArea, legacy pixel rule) are linear and separable: with the
    image's height and width and ``size`` known while building, they are two matrix products
    by weights computed here as TF's kernels compute them; otherwise they are refused."""
    from dsl.image import _resize
    images = convert_to_tensor(images)
    rank = _rank(images)
    if rank is None:
        raise ValueError("'images' contains no shape.")
    if rank not in (3, 4):
        raise ValueError("'images' must have either 3 or 4 dimensions.")
    kind = _V1_METHODS.get(method, method) if _is_int(method) else method
    if kind not in ("bilinear", "nearest", "bicubic", "area"):
        raise ValueError(f"Resize method is not implemented: {method}")
    batched = images if rank == 4 else expand_dims(images, 0)
    _, height, width, _ = batched.shape.as_list()
    try:
        size_t = _as_index(size, DType.i32)
    except (TypeError, ValueError):
        raise ValueError("'size' must be a 1-D int32 Tensor") from None
    if size_t.shape.as_list() not in ([2], [None]):
        raise ValueError("'size' must be a 1-D Tensor of 2 elements: new_height, new_width")
    static_size = None if isinstance(size, Tensor) else [int(v) for v in np.asarray(size)]
    if preserve_aspect_ratio:
        dims = _dims(batched)
        cur_h, cur_w = (cast(_i32(d), DType.f32) for d in dims[1:3])
        size_f = cast(size_t, DType.f32)
        scale = minimum(divide(size_f[0], cur_h), divide(size_f[1], cur_w))
        size_t = stack([cast(round(multiply(scale, cur_h)), DType.i32),
                        cast(round(multiply(scale, cur_w)), DType.i32)])
        static_size = None
        if all(_is_int(d) for d in dims[1:3]) and not isinstance(size, Tensor):
            f = min(np.float32(size[0]) / np.float32(dims[1]),
                    np.float32(size[1]) / np.float32(dims[2]))
            static_size = [int(np.round(np.float32(f) * np.float32(dims[1]))),
                           int(np.round(np.float32(f) * np.float32(dims[2])))]
    if static_size is not None and static_size == [height, width]:
        return images
    if kind in ("bicubic", "area"):
        out = _resize_separable(kind, batched, static_size, align_corners, name)
    else:
        op = "ResizeBilinear" if kind == "bilinear" else "ResizeNearestNeighbor"
        out = _resize(op, batched, size_t, align_corners, False, name)
    if static_size is not None:
        out.set_shape([None] + static_size + [None])
    return out if rank == 4 else squeeze(out, [0])
