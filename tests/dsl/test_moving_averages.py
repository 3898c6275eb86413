"""fl.train.ExponentialMovingAverage and assign_moving_average, as TF1's: shadow variables
named <var>/ExponentialMovingAverage starting at the variable's value, the num_updates decay
rule, zero debiasing, and variables_to_restore loading the averages into a new graph."""
import os

import numpy as np
import pytest

import dsl as fl


def test_apply_average_and_names(graph):
    v = fl.Variable([1.0, 2.0], name="v")
    w = fl.Variable(10.0, name="w")
    ema = fl.train.ExponentialMovingAverage(0.9)
    update = ema.apply([v, w])
    avg_v = ema.average(v)
    assert avg_v.name == "v/ExponentialMovingAverage:0"
    assert ema.average_name(w) == "w/ExponentialMovingAverage"
    assert not avg_v.trainable and avg_v in fl.global_variables()
    assert fl.moving_average_variables() == [v, w]
    assert update.name == "ExponentialMovingAverage"
    with fl.Session(backend="c") as s:
        s.run(fl.global_variables_initializer())
        np.testing.assert_allclose(s.run(avg_v), [1.0, 2.0])      # starts at the value
        s.run(v.assign([3.0, 4.0]))
        s.run(update)
        np.testing.assert_allclose(s.run(avg_v), [1.2, 2.2], rtol=1e-6)
        s.run(update)
        np.testing.assert_allclose(s.run(avg_v), [1.38, 2.38], rtol=1e-6)
        np.testing.assert_allclose(s.run(ema.average(w)), 10.0)


def test_num_updates_caps_the_decay(graph):
    v = fl.Variable(0.0, name="v")
    step = fl.Variable(0, name="step", trainable=False)
    ema = fl.train.ExponentialMovingAverage(0.999, num_updates=step)
    update = ema.apply([v])
    with fl.Session() as s:
        s.run(fl.global_variables_initializer())
        s.run(v.assign(10.0))
        s.run(update)                                   # decay min(0.999, 1/10) = 0.1
        np.testing.assert_allclose(s.run(ema.average(v)), 9.0, rtol=1e-6)
        s.run(step.assign(90))
        s.run(update)                                   # decay 91/100
        np.testing.assert_allclose(s.run(ema.average(v)), 9.0 + 0.09 * 1.0, rtol=1e-6)


def test_tensor_average_with_zero_debias(graph):
    x = fl.placeholder(fl.float32, [2], name="x")
    ema = fl.train.ExponentialMovingAverage(0.5, zero_debias=True)
    update = ema.apply([x])
    avg = ema.average(x)
    assert avg.name == "x/ExponentialMovingAverage:0"
    with fl.Session() as s:
        s.run(fl.global_variables_initializer())
        s.run(update, {x: [4.0, 8.0]})
        np.testing.assert_allclose(s.run(avg), [4.0, 8.0], rtol=1e-6)   # debiased: no pull to 0
        s.run(update, {x: [0.0, 0.0]})
        # biased = 0.5*(0.5*4) = 1 ; factor 1 - 0.25 -> 4/3
        np.testing.assert_allclose(s.run(avg), [4.0 / 3, 8.0 / 3], rtol=1e-6)


def test_assign_moving_average_both_ways(graph):
    a = fl.Variable(0.0, name="a")
    b = fl.Variable(0.0, name="b")
    ua = fl.train.assign_moving_average(a, 2.0, 0.75)                  # zero_debias=True
    ub = fl.train.assign_moving_average(b, 2.0, 0.75, zero_debias=False)
    names = {v.op.name for v in fl.global_variables()}
    assert {"a/biased", "a/local_step"} <= names
    with fl.Session(backend="c") as s:
        s.run(fl.global_variables_initializer())
        np.testing.assert_allclose(s.run(ua), 2.0, rtol=1e-6)
        np.testing.assert_allclose(s.run(ub), 0.5, rtol=1e-6)
        np.testing.assert_allclose(s.run(ub), 0.875, rtol=1e-6)


def test_variables_to_restore_loads_averages(tmp_path):
    g = fl.Graph()
    with g.as_default():
        v = fl.Variable([1.0, 1.0], name="v")
        step = fl.Variable(0, name="global_step", trainable=False)
        ema = fl.train.ExponentialMovingAverage(0.5)
        update = ema.apply()
        saver = fl.train.Saver()
        with fl.Session() as s:
            s.run(fl.global_variables_initializer())
            s.run(v.assign([3.0, 5.0]))
            s.run(update)                                # average [2, 3]
            s.run(step.assign(7))
            path = saver.save(s, os.path.join(tmp_path, "model"))
    g2 = fl.Graph()
    with g2.as_default():
        v2 = fl.Variable([0.0, 0.0], name="v")
        step2 = fl.Variable(0, name="global_step", trainable=False)
        ema2 = fl.train.ExponentialMovingAverage(0.5)
        mapping = ema2.variables_to_restore()
        assert mapping == {"v/ExponentialMovingAverage": v2, "global_step": step2}
        with fl.Session() as s:
            fl.train.Saver(mapping).restore(s, path)
            np.testing.assert_allclose(s.run(v2), [2.0, 3.0])
            assert s.run(step2) == 7


def test_refuses_integer_variables(graph):
    with pytest.raises(TypeError, match="half, float, or double"):
        fl.train.ExponentialMovingAverage(0.9).apply([fl.Variable(1, name="i")])
