"""fl.make_template, as TF1's: calls share the first call's variables, scopes are made
unique per template, kwargs are bound, and a later call creating a variable is refused."""
import numpy as np
import pytest

import dsl as fl


def _linear(x, units=2):
    w = fl.get_variable("w", [3, units], initializer=fl.ones_initializer())
    b = fl.get_variable("b", [units], initializer=fl.zeros_initializer())
    return fl.matmul(x, w) + b


def test_calls_share_variables(graph):
    layer = fl.make_template("linear", _linear, units=4)
    other = fl.make_template("linear", _linear)
    x = fl.placeholder(fl.float32, [None, 3])
    y1, y2 = layer(x), layer(x * 2.0)
    z = other(x)
    names = sorted(v.op.name for v in fl.trainable_variables())
    assert names == ["linear/b", "linear/w", "linear_1/b", "linear_1/w"]
    assert layer.variable_scope_name == "linear" and other.variable_scope_name == "linear_1"
    assert sorted(v.op.name for v in layer.trainable_variables) == ["linear/b", "linear/w"]
    assert z.shape.as_list() == [None, 2]
    with fl.Session() as s:
        s.run(fl.global_variables_initializer())
        a, b = s.run([y1, y2], {x: np.ones((1, 3), np.float32)})
    np.testing.assert_allclose(a, [[3.0] * 4])
    np.testing.assert_allclose(b, [[6.0] * 4])


def test_create_scope_now_and_refusing_new_variables(graph):
    t = fl.make_template("net", _linear, create_scope_now_=True)
    with fl.variable_scope("outer"):
        t(fl.zeros([1, 3]))                        # the scope made at creation, not "outer/net"
    assert sorted(v.op.name for v in fl.trainable_variables()) == ["net/b", "net/w"]

    def bad(x):
        return x + fl.Variable(1.0, name="v")
    tb = fl.make_template("bad", bad)
    tb(fl.constant(1.0))
    with pytest.raises(ValueError, match="Trainable variable created"):
        tb(fl.constant(1.0))
