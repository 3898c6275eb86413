"""TF1's tf.image functions (dsl/image_ops.py) and tf.random_crop: the programs of
tests/data/tf1_image/tf1_image_cases.py run on flowc with only the import changed, compiled C
against the numpy interpreter and both against TensorFlow's values (tf1_image.npz, recorded by
record_tf1_image.py there); a few worked out with numpy here; the random ones repeat under a
seed; and the errors TF1 gives."""
import os
import sys

import numpy as np
import pytest

import dsl as fl
from oracle import check_against_interpreter
from repo_paths import TESTS
from runtime.errors import FlowcError

CASES_DIR = os.path.join(TESTS, "data", "tf1_image")
sys.path.insert(0, CASES_DIR)
import tf1_image_cases  # noqa: E402

REF = np.load(os.path.join(CASES_DIR, "tf1_image.npz"))


def test_tf1_image_programs_match_tensorflow(graph):
    values = tf1_image_cases.inputs()
    ph, fetches = tf1_image_cases.build(fl, values)
    assert set(fetches) == set(REF.files)
    got = check_against_interpreter(graph, fetches, {ph[k]: v for k, v in values.items()})
    for name, want in ((k, REF[k]) for k in fetches):
        have = got[name]
        assert have.dtype == want.dtype and have.shape == want.shape, name
        if want.dtype.kind == "f":
            np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-5, err_msg=name)
        else:
            np.testing.assert_array_equal(have, want, err_msg=name)


def test_static_shapes_as_tf1_infers_them(graph):
    values = tf1_image_cases.inputs()
    _, f = tf1_image_cases.build(fl, values)
    assert f["flip_lr4"].shape.as_list() == [None, 5, 6, 3]
    assert f["transpose3"].shape.as_list() == [6, 5, 3]
    assert f["crop3"].shape.as_list() == [3, 4, 3]
    assert f["pad4"].shape.as_list() == [None, 6, 8, 3]
    assert f["crop_or_pad_grow"].shape.as_list() == [9, 11, 3]
    assert f["resize_bilinear"].shape.as_list() == [8, 10, 3]
    assert f["resize_bilinear"].dtype == fl.float32
    assert f["resize_same"].dtype == fl.uint8         # same size: the image itself
    assert f["gray_u8"].dtype == fl.uint8 and f["gray_u8"].shape.as_list()[-1] == 1
    assert f["sobel"].shape.as_list() == [None, 5, 6, 3, 2]
    assert f["tv4"].shape.as_list() == [None] and f["tv3"].shape.as_list() == []
    assert f["bicubic_up"].shape.as_list() == [None, 9, 13, 3]
    assert f["area_corners"].shape.as_list() == [3, 4, 3]
    assert f["area_corners"].dtype == fl.float32 and f["hue_u8"].dtype == fl.uint8


def test_against_numpy(graph, rng):
    x = rng.random((2, 5, 4, 3)).astype(np.float32)
    u = rng.integers(0, 256, (4, 6, 3)).astype(np.uint8)
    xp = fl.placeholder(fl.float32, [None, None, None, 3])
    up = fl.placeholder(fl.uint8, [4, 6, 3])
    im = fl.image
    f = {"flip": im.flip_left_right(xp), "rot": im.rot90(xp, 1), "tr": im.transpose_image(up),
         "std": im.per_image_standardization(xp), "f32": im.convert_image_dtype(up, fl.float32),
         "back": im.convert_image_dtype(im.convert_image_dtype(up, fl.float32), fl.uint8),
         "bright": im.adjust_brightness(xp, 0.1), "contrast": im.adjust_contrast(xp, 3.0),
         "crop": im.crop_to_bounding_box(xp, 1, 0, 3, 2),
         "pad": im.pad_to_bounding_box(up, 1, 2, 5, 9), "tv": im.total_variation(xp),
         "gray": im.rgb_to_grayscale(xp)}
    got = check_against_interpreter(graph, f, {xp: x, up: u})
    np.testing.assert_array_equal(got["flip"], x[:, :, ::-1])
    np.testing.assert_array_equal(got["rot"], np.rot90(x, 1, axes=(1, 2)))
    np.testing.assert_array_equal(got["tr"], u.transpose(1, 0, 2))
    mean = x.mean(axis=(1, 2, 3), keepdims=True)
    std = np.maximum(x.std(axis=(1, 2, 3), keepdims=True), 1 / np.sqrt(60))
    np.testing.assert_allclose(got["std"], (x - mean) / std, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got["f32"], u / np.float32(255), rtol=1e-6)
    np.testing.assert_array_equal(got["back"], u)       # x/255 * 255.5, truncated: x again
    np.testing.assert_allclose(got["bright"], x + np.float32(0.1), rtol=1e-6)
    m = x.mean(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(got["contrast"], (x - m) * 3 + m, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got["crop"], x[:, 1:4, 0:2])
    want = np.zeros((5, 9, 3), np.uint8)
    want[1:5, 2:8] = u
    np.testing.assert_array_equal(got["pad"], want)
    tv = np.abs(np.diff(x, axis=1)).sum((1, 2, 3)) + np.abs(np.diff(x, axis=2)).sum((1, 2, 3))
    np.testing.assert_allclose(got["tv"], tv, rtol=1e-5)
    np.testing.assert_allclose(got["gray"], (x * [0.2989, 0.587, 0.114]).sum(-1, keepdims=True),
                               rtol=1e-5)


def test_random_ones_repeat_under_a_seed_and_cover_both_outcomes(rng):
    """A new graph with the same seeds draws the same sequence (run after run, in either
    backend); successive runs draw anew, as TensorFlow's do."""
    x = rng.random((64, 2, 3, 1)).astype(np.float32)

    def run(backend):
        g = fl.Graph()
        with g.as_default():
            fl.set_random_seed(11)
            xp = fl.placeholder(fl.float32, [None, 2, 3, 1])
            flips = fl.image.random_flip_left_right(xp, seed=1)
            crop = fl.random_crop(xp, [64, 1, 2, 1], seed=2)
            with fl.Session(backend=backend) as s:
                return [s.run([flips, crop], {xp: x}) for _ in range(2)]
    c, i = run("c"), run("interpreter")
    for a, b in zip(c[0] + c[1], i[0] + i[1]):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(c[0][0], c[1][0])
    flipped = [np.array_equal(f, v[:, ::-1]) for f, v in zip(c[0][0], x)]
    kept = [np.array_equal(f, v) for f, v in zip(c[0][0], x)]
    assert all(a or b for a, b in zip(flipped, kept)) and 10 < sum(flipped) < 54


def test_gradients_flow_through_crops_and_flips(graph, rng):
    x = rng.random((1, 4, 5, 2)).astype(np.float32)
    xp = fl.placeholder(fl.float32, [1, 4, 5, 2])
    y = fl.image.resize_image_with_crop_or_pad(fl.image.flip_left_right(xp), 2, 7)
    loss = fl.reduce_sum(y * fl.constant(np.arange(28, dtype=np.float32).reshape(1, 2, 7, 2)))
    (dx,) = fl.gradients(loss, [xp])
    got = check_against_interpreter(graph, {"dx": dx}, {xp: x})["dx"]
    # rows 1:3 kept (cropped), columns placed at 1:6 of 7 (padded), after the flip
    want = np.zeros_like(x)
    want[:, 1:3] = np.arange(28, dtype=np.float32).reshape(1, 2, 7, 2)[:, :, 1:6][:, :, ::-1]
    np.testing.assert_array_equal(got, want)


def test_build_time_errors_as_tf1():
    im = fl.image
    g = fl.Graph()
    with g.as_default():
        img = fl.placeholder(fl.float32, [4, 5, 3])
        with pytest.raises(ValueError, match="must be at least three-dimensional"):
            im.flip_left_right(fl.placeholder(fl.float32, [4, 5]))
        with pytest.raises(ValueError, match="must have either 3 or 4 dimensions"):
            im.rot90(fl.placeholder(fl.float32, [1, 2, 4, 5, 3]))
        with pytest.raises(ValueError, match="must be > 0"):
            im.flip_up_down(fl.placeholder(fl.float32, [0, 5, 3]))
        with pytest.raises(ValueError, match="width must be >= target \\+ offset"):
            im.crop_to_bounding_box(img, 0, 2, 2, 4)
        with pytest.raises(ValueError, match="offset_height must be >= 0"):
            im.crop_to_bounding_box(img, -1, 0, 2, 2)
        with pytest.raises(ValueError, match="height must be <= target - offset"):
            im.pad_to_bounding_box(img, 1, 0, 4, 6)
        with pytest.raises(ValueError, match="target_height must be > 0"):
            im.resize_image_with_crop_or_pad(img, 0, 3)
        with pytest.raises(ValueError, match="central_fraction must be within"):
            im.central_crop(img, 1.5)
        with pytest.raises(ValueError, match="max_delta must be non-negative"):
            im.random_brightness(img, -0.1)
        with pytest.raises(ValueError, match="upper must be > lower"):
            im.random_contrast(img, 0.5, 0.5)
        with pytest.raises(ValueError, match="lower must be non-negative"):
            im.random_contrast(img, -0.5, 0.5)
        with pytest.raises(ValueError, match="Last dimension of a grayscale image"):
            im.grayscale_to_rgb(img)
        with pytest.raises(ValueError, match="Need value.shape >= size"):
            fl.random_crop(img, [5, 5, 3])
        with pytest.raises(ValueError, match="either 3 or 4-dimensional"):
            im.total_variation(fl.placeholder(fl.float32, [4, 5]))
        with pytest.raises(ValueError, match="expects a 4D tensor"):
            im.image_gradients(img)
        with pytest.raises(ValueError, match="1-D Tensor of 2 elements"):
            im.resize_images(img, [3, 3, 3])
        dyn = fl.placeholder(fl.float32, [None, None, 3])
        with pytest.raises(NotImplementedError, match="'bicubic' needs the image's height"):
            im.resize_images(dyn, [3, 3], im.ResizeMethod.BICUBIC)
        with pytest.raises(NotImplementedError, match="'area' needs .* the new size known"):
            im.resize_images(img, fl.placeholder(fl.int32, [2]), method=3)
        with pytest.raises(ValueError, match="Resize method is not implemented: 7"):
            im.resize_images(img, [3, 3], method=7)
        with pytest.raises(ValueError, match="must have 3 channels"):
            im.rgb_to_hsv(fl.placeholder(fl.float32, [2, 2, 4]))
        with pytest.raises(TypeError, match="must be float16, bfloat16, float32 or float64"):
            im.hsv_to_rgb(fl.placeholder(fl.int32, [2, 2, 3]))
        with pytest.raises(ValueError, match="max_delta must be <= 0.5"):
            im.random_hue(img, 0.6)
        with pytest.raises(ValueError, match="upper must be > lower"):
            im.random_saturation(img, 2.0, 1.0)
        with pytest.raises(AttributeError, match="dtype must be either floating point or integer"):
            im.convert_image_dtype(img, fl.bool)


@pytest.mark.parametrize("backend", ["c", "interpreter"])
def test_run_time_boxes_that_do_not_fit_fail_clearly(backend):
    g = fl.Graph()
    with g.as_default():
        img = fl.placeholder(fl.float32, [None, None, 3])
        off = fl.placeholder(fl.int32, [])
        crop = fl.image.crop_to_bounding_box(img, off, 0, 2, 2)
        rc = fl.random_crop(img, [3, 3, 3], seed=1)
        padded = fl.image.pad_to_bounding_box(img, off, 0, 5, 5)
        x = np.zeros((4, 4, 3), np.float32)
        with fl.Session(backend=backend) as s:
            assert s.run(crop, {img: x, off: 2}).shape == (2, 2, 3)
            with pytest.raises(FlowcError, match="crop_to_bounding_box.*Expected size"):
                s.run(crop, {img: x, off: 3})
            with pytest.raises(FlowcError, match="random_crop.*Expected size"):
                s.run(rc, {img: np.zeros((2, 5, 3), np.float32)})
            with pytest.raises(FlowcError, match="pad_to_bounding_box.*must be non-negative"):
                s.run(padded, {img: x, off: 3})
