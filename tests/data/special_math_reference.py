"""Record TensorFlow's values of its special functions into ``special_math_reference.npz``,
for ``tests/compiler/ops/test_math_special_functions.py`` (which never needs TensorFlow).

Run once with a Python that has TensorFlow: ``python special_math_reference.py``. Each op is
evaluated on inputs that include its edge cases (poles, 0, negatives, infinities, NaN, large
arguments), in float64 and float32; the npz holds ``<op>_in<i>``, ``<op>_f64`` and ``<op>_f32``.
"""
import itertools
import os

import numpy as np
import tensorflow.compat.v1 as tf

INF, NAN = np.inf, np.nan


def grid(*axes):
    cols = list(zip(*itertools.product(*axes)))
    return [np.array(c, np.float64) for c in cols]


UNARY = {
    "Lgamma": [-2.5, -1.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.7, 10.0, 1e-8, -1e-8, 100.25, 1e10,
               INF, -INF, NAN, -0.3, -7.9],
    "Digamma": [-2.5, -1.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.7, 10.0, 1e-8, -1e-8, 100.25, 1e10,
                INF, NAN, -0.3, -7.9, 0.25],
    "Erfinv": [-1.0, -0.999999, -0.9, -0.5, -1e-10, 0.0, 0.1, 0.3, 0.5, 0.77, 0.999, 1.0,
               1.5, -2.0, NAN],
    "Ndtri": [0.0, 1e-300, 1e-20, 1e-5, 0.02, 0.3, 0.5, 0.7, 0.975, 0.999999, 1.0, -0.1, 1.1,
              NAN, 0.49999],
    "BesselI0e": [-50.0, -20.5, -3.0, -1e-5, 0.0, 1e-5, 0.5, 3.0, 7.5, 19.9, 20.1, 30.0, 100.0,
                  1e4, INF, -INF, NAN],
    "BesselI1e": [-50.0, -20.5, -3.0, -1e-5, 0.0, 1e-5, 0.5, 3.0, 7.5, 19.9, 20.1, 30.0, 100.0,
                  1e4, INF, -INF, NAN],
}
GAMMA_A = [0.1, 0.5, 1.0, 3.5, 20.0, 100.0]
GAMMA_X = [0.0, 0.01, 0.5, 1.0, 3.0, 20.0, 120.0, INF]
BINARY = {
    "Igamma": grid(GAMMA_A, GAMMA_X),
    "Zeta": grid([0.5, 1.0, 1.5, 2.0, 3.3, 10.0, 30.0], [0.5, 1.0, 2.5, 10.0, -1.0, -1.5, 0.0]),
    "Polygamma": grid([0.0, 1.0, 2.0, 3.0, 1.5, -1.0], [0.3, 1.0, 2.5, 10.0, -1.5, 50.0]),
}
BINARY["Igamma"] = [np.append(BINARY["Igamma"][0], [-1.0, 1.0, 0.0, NAN, 2.0]),
                    np.append(BINARY["Igamma"][1], [1.0, -1.0, 1.0, 1.0, NAN])]
BINARY["Igammac"] = [c.copy() for c in BINARY["Igamma"]]
TERNARY = {
    "Betainc": grid([0.5, 1.0, 2.5, 30.0], [0.5, 3.0, 30.0],
                    [0.0, 0.01, 0.3, 0.5, 0.9, 1.0, 1.2, -0.1]),
}
TERNARY["Betainc"] = [np.append(TERNARY["Betainc"][0], [0.0, 1.0, NAN]),
                      np.append(TERNARY["Betainc"][1], [1.0, -1.0, 1.0]),
                      np.append(TERNARY["Betainc"][2], [0.5, 0.5, 0.5])]

FNS = {"Lgamma": tf.math.lgamma, "Digamma": tf.math.digamma, "Erfinv": tf.math.erfinv,
       "Ndtri": tf.math.ndtri, "BesselI0e": tf.math.bessel_i0e,
       "BesselI1e": tf.math.bessel_i1e, "Igamma": tf.math.igamma, "Igammac": tf.math.igammac,
       "Zeta": tf.math.zeta, "Polygamma": tf.math.polygamma, "Betainc": tf.math.betainc}


def main():
    tf.disable_eager_execution()
    cases = {k: [np.array(v, np.float64)] for k, v in UNARY.items()}
    cases.update(BINARY)
    cases.update(TERNARY)
    out = {}
    with tf.Session() as sess:
        for name, inputs in cases.items():
            for i, x in enumerate(inputs):
                out[f"{name}_in{i}"] = x
            for dt, tag in ((tf.float64, "f64"), (tf.float32, "f32")):
                args = [tf.constant(x, dt) for x in inputs]
                out[f"{name}_{tag}"] = sess.run(FNS[name](*args))
    here = os.path.dirname(os.path.abspath(__file__))
    np.savez(os.path.join(here, "special_math_reference.npz"), **out)


if __name__ == "__main__":
    main()
