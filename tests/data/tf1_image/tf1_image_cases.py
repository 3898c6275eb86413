"""The tf.image programs whose TensorFlow 1.x values record_tf1_image.py records into
tf1_image.npz and tests/dsl/test_tf1_image.py checks flowc against: one function over the
module ``tf`` (TensorFlow's ``tensorflow.compat.v1`` or flowc's ``dsl``), so both run the
same program with only the import changed."""
import numpy as np


# greys (no hue), black, pure and mixed colours, ties between channels
EDGE_RGB = np.array([[[0, 0, 0], [0.5, 0.5, 0.5], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0],
                      [0, 1, 1], [1, 0, 1], [0.2, 0.2, 0.7], [0.7, 0.2, 0.7]]], np.float32)


def inputs():
    rng = np.random.default_rng(7)
    return {
        "img3": rng.random((5, 6, 3)).astype(np.float32),
        "img4": rng.random((3, 5, 6, 3)).astype(np.float32),
        "u8": rng.integers(0, 256, (5, 6, 3)).astype(np.uint8),
        "u8b": rng.integers(0, 256, (2, 4, 7, 3)).astype(np.uint8),
        "gray": rng.random((2, 5, 6, 1)).astype(np.float32),
        "big": rng.random((8, 4, 6, 6, 2)).astype(np.float32),
    }


def build(tf, values):
    """(placeholders by input name, fetches by case name) in the default graph."""
    ph = {
        "img3": tf.placeholder(tf.float32, [5, 6, 3], name="img3"),
        "img4": tf.placeholder(tf.float32, [None, 5, 6, 3], name="img4"),
        "u8": tf.placeholder(tf.uint8, [5, 6, 3], name="u8"),
        "u8b": tf.placeholder(tf.uint8, [None, None, None, 3], name="u8b"),
        "gray": tf.placeholder(tf.float32, [2, 5, 6, 1], name="gray"),
        "big": tf.placeholder(tf.float32, [None, 4, 6, 6, 2], name="big"),
    }
    img3, img4, u8, u8b = ph["img3"], ph["img4"], ph["u8"], ph["u8b"]
    im = tf.image
    dyn = tf.placeholder_with_default(img3, [None, None, 3])
    f = {
        "flip_lr3": im.flip_left_right(img3), "flip_lr4": im.flip_left_right(img4),
        "flip_ud3": im.flip_up_down(img3), "flip_ud4": im.flip_up_down(u8b),
        "rot90_1": im.rot90(img3), "rot90_2": im.rot90(img4, 2), "rot90_3": im.rot90(u8, k=3),
        "rot90_neg": im.rot90(img4, -1), "rot90_t": im.rot90(img4, tf.constant(3)),
        "transpose3": im.transpose_image(img3), "transpose4": im.transpose_image(u8b),
        "standardize3": im.per_image_standardization(img3),
        "standardize4": im.per_image_standardization(u8b),
        "standardize_flat": im.per_image_standardization(tf.zeros([2, 2, 3])),
        "u8_to_f32": im.convert_image_dtype(u8, tf.float32),
        "f32_to_u8": im.convert_image_dtype(img3, tf.uint8),
        "f32_to_u8_sat": im.convert_image_dtype(img3 * 1.5 - 0.25, tf.uint8, saturate=True),
        "u8_to_i32": im.convert_image_dtype(u8, tf.int32),
        "i32_to_u8": im.convert_image_dtype(im.convert_image_dtype(u8, tf.int32), tf.uint8),
        "u8_to_i8": im.convert_image_dtype(u8, tf.int8),
        "u8_to_i8_sat": im.convert_image_dtype(u8, tf.int8, saturate=True),
        "i8_to_u8": im.convert_image_dtype(tf.constant([[[-128, -1, 0, 1, 127]]], tf.int8),
                                           tf.uint8),
        "f32_to_f64": im.convert_image_dtype(img3, tf.float64),
        "u8_to_f64": im.convert_image_dtype(u8, tf.float64),
        "brightness": im.adjust_brightness(img3, 0.25),
        "brightness_u8": im.adjust_brightness(u8, -0.3),
        "contrast": im.adjust_contrast(img4, 1.7),
        "contrast_u8": im.adjust_contrast(u8, 0.4),
        "contrast_u8_up": im.adjust_contrast(u8b, 2.5),
        "gray3": im.rgb_to_grayscale(img3), "gray_u8": im.rgb_to_grayscale(u8b),
        "to_rgb": im.grayscale_to_rgb(ph["gray"]),
        "central_3": im.central_crop(img3, 0.5), "central_4": im.central_crop(img4, 0.7),
        "central_dyn": im.central_crop(dyn, 0.6), "central_all": im.central_crop(img3, 1.0),
        "crop3": im.crop_to_bounding_box(img3, 1, 2, 3, 4),
        "crop4": im.crop_to_bounding_box(u8b, 0, 3, 2, 4),
        "crop_t": im.crop_to_bounding_box(img4, tf.constant(2), 1, 3, tf.constant(5)),
        "pad3": im.pad_to_bounding_box(img3, 1, 2, 8, 9),
        "pad4": im.pad_to_bounding_box(u8b, 2, 0, 6, 8),
        "pad_t": im.pad_to_bounding_box(img4, tf.constant(1), 0, 7, tf.constant(6)),
        "crop_or_pad_grow": im.resize_image_with_crop_or_pad(img3, 9, 11),
        "crop_or_pad_shrink": im.resize_image_with_crop_or_pad(img4, 2, 3),
        "crop_or_pad_mixed": im.resize_image_with_crop_or_pad(u8b, 7, 2),
        "crop_or_pad_dyn": im.resize_image_with_crop_or_pad(dyn, 4, 8),
        "tv3": im.total_variation(img3), "tv4": im.total_variation(img4),
        "tv_u8": im.total_variation(tf.cast(u8b, tf.int32)),
        "grad_dy": im.image_gradients(img4)[0], "grad_dx": im.image_gradients(img4)[1],
        "sobel": im.sobel_edges(img4),
        "resize_bilinear": im.resize_images(img3, [8, 10]),
        "resize_nearest": im.resize_images(img4, [3, 9], im.ResizeMethod.NEAREST_NEIGHBOR),
        "resize_corners": im.resize_images(img4, [7, 4], align_corners=True),
        "resize_u8": im.resize_images(u8b, [3, 3]),
        "resize_same": im.resize_images(u8, [5, 6]),
        "resize_aspect": im.resize_images(img4, [10, 20], preserve_aspect_ratio=True),
        "resize_aspect_nn": im.resize_images(u8, [4, 30], im.ResizeMethod.NEAREST_NEIGHBOR,
                                             preserve_aspect_ratio=True),
        "to_hsv3": im.rgb_to_hsv(img3), "to_hsv4": im.rgb_to_hsv(img4),
        "to_hsv_edges": im.rgb_to_hsv(tf.constant(EDGE_RGB)),
        "hsv_round_trip": im.hsv_to_rgb(im.rgb_to_hsv(img4)),
        "from_hsv": im.hsv_to_rgb(img3),
        "saturation": im.adjust_saturation(img4, 0.4),
        "saturation_up": im.adjust_saturation(img3, 3.0),
        "saturation_u8": im.adjust_saturation(u8, 1.7),
        "hue": im.adjust_hue(img4, 0.3), "hue_neg": im.adjust_hue(img3, -0.45),
        "hue_u8": im.adjust_hue(u8b, 0.1),
        "bicubic_up": im.resize_images(img4, [9, 13], im.ResizeMethod.BICUBIC),
        "bicubic_down": im.resize_images(img3, [3, 4], 2),
        "bicubic_corners": im.resize_images(u8, [8, 5], 2, align_corners=True),
        "area_down": im.resize_images(img4, [2, 4], im.ResizeMethod.AREA),
        "area_up": im.resize_images(img3, [7, 11], 3),
        "area_corners": im.resize_images(u8, [3, 4], 3, align_corners=True),
        "area_aspect": im.resize_images(img3, [20, 3], 3, preserve_aspect_ratio=True),
    }
    tf.set_random_seed(5)
    f.update({
        "random_lr3": im.random_flip_left_right(img3, seed=1),
        "random_ud4": im.random_flip_up_down(ph["big"][0], seed=2),
        "random_lr4": im.random_flip_left_right(ph["big"][1], seed=3),
        "random_brightness": im.random_brightness(img4, 0.4, seed=4),
        "random_contrast": im.random_contrast(u8, 0.3, 1.8, seed=5),
        "random_crop": tf.random_crop(ph["big"], [3, 2, 4, 5, 2], seed=6),
        "random_crop_img": tf.image.random_crop(img3, [2, 4, 3], seed=7),
        "random_saturation": im.random_saturation(img3, 0.2, 2.0, seed=8),
        "random_hue": im.random_hue(img4, 0.4, seed=9),
    })
    return ph, f
