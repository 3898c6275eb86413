"""fl.TensorShape and fl.Dimension behave as TF1's (v1 behaviour): what TF1 code does with
static shapes works unchanged, and the library's own tuple users still see tuples."""
import numpy as np
import pytest

import dsl as tf


def test_a_tensors_static_shape_reads_as_tf1_code_reads_it():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 3])
        assert x.get_shape().as_list() == [None, 3] and x.shape.ndims == 2
        assert x.shape[1].value == 3 and int(x.shape[-1]) == 3 and x.shape[0].value is None
        assert not x.get_shape().is_fully_defined() and x.shape[1:].is_fully_defined()
        assert x.shape == [None, 3] and x.shape == (None, 3) and x.shape != [2, 3]
        assert repr(x.shape) == "TensorShape([Dimension(None), Dimension(3)])"
        assert str(x.shape) == "(?, 3)"
        assert tf.placeholder(tf.float32, None).shape.ndims is None
        y = tf.reshape(x, [-1, x.shape[1] * 2])             # a Dimension in a shape list
        assert y.shape.as_list() == [None, 6]
        w = tf.get_variable("w", [x.shape[1], 4])            # and in a variable's shape
        assert w.shape == (3, 4) and w.get_shape().as_list() == [3, 4]
        assert tf.zeros(w.shape).shape == (3, 4)
        x.set_shape([5, None])
        assert x.shape.as_list() == [5, 3] and tf.matmul(x, w).shape == (5, 4)
        with pytest.raises(ValueError):
            x.set_shape([6, 3])


def test_dimension_arithmetic_and_comparison_follow_tf1():
    d, u = tf.Dimension(4), tf.Dimension(None)
    assert (d + 1).value == 5 and (2 * d).value == 8 and (d // 3).value == 1 and (d - 1) == 3
    assert (u + 1).value is None and (d * u).value is None
    assert d == 4 and (u == 4) is None and (u != 4) is None and (d < 5) is True
    assert d.merge_with(None).value == 4 and u.merge_with(4).value == 4
    with pytest.raises(ValueError):
        d.merge_with(5)
    with pytest.raises(TypeError):
        d / 2                                               # TF1: use //
    assert np.zeros(tf.TensorShape([2, d])).shape == (2, 4)
    assert tf.dimension_value(d) == 4 and tf.dimension_value(None) is None
    assert tf.compat.dimension_value(tf.TensorShape(None)[0]) is None


def test_shapes_merge_concatenate_and_check_ranks():
    a = tf.TensorShape([None, 3])
    assert a.merge_with([2, None]) == [2, 3] and a.concatenate([5]) == [None, 3, 5]
    assert (a + tf.TensorShape([1])).as_list() == [None, 3, 1]
    assert a.is_compatible_with([7, 3]) and not a.is_compatible_with([7, 4])
    assert a.most_specific_compatible_shape([2, 3]).as_list() == [None, 3]
    assert tf.TensorShape(None).merge_with(a) == a and tf.TensorShape(None).concatenate(a).ndims is None
    assert tf.unknown_shape(2).as_list() == [None, None] and a.num_elements() is None
    assert tf.TensorShape([2, 3]).num_elements() == 6 and a.with_rank(2) == a
    with pytest.raises(ValueError):
        a.merge_with([2, 4])
    with pytest.raises(ValueError):
        a.with_rank(3)
    with pytest.raises(ValueError):
        len(tf.TensorShape(None))
    with pytest.raises(ValueError):
        tf.TensorShape(None).as_list()
    assert [d.value for d in a] == [None, 3]               # iteration gives Dimensions
    assert hash(a) == hash(tf.TensorShape((None, 3)))


def test_tf1_conveniences_on_top_of_shapes():
    with tf.Graph().as_default():
        x = tf.constant([[1.0, 0.0, 3.0], [0.0, 0.0, 2.0]])
        p = tf.placeholder("float", [None, 2])              # TF's C dtype names
        assert p.dtype is tf.float32
        sess = tf.InteractiveSession()
        try:
            assert tf.count_nonzero(x).eval() == 3
            np.testing.assert_array_equal(tf.sequence_mask([1, 3], 4).eval(),
                                          [[1, 0, 0, 0], [1, 1, 1, 0]])
            np.testing.assert_array_equal(tf.boolean_mask(x, x > 0).eval(), [1.0, 3.0, 2.0])
            np.testing.assert_array_equal(tf.boolean_mask(x, [False, True]).eval(), [x.eval()[1]])
            top = tf.nn.in_top_k(tf.constant([[0.1, 0.5, 0.5], [0.3, np.nan, 0.1], [1, 2, 3.0]]),
                                 [2, 0, 5], 2)
            np.testing.assert_array_equal(top.eval(), [True, False, False])
        finally:
            sess.close()
