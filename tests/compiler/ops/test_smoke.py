import numpy as np

import dsl as fl
from oracle import check_against_interpreter


def test_elementwise_chain_with_dynamic_batch(graph, rng):
    x = fl.placeholder(fl.float32, [None, 3], name="x")
    y = fl.nn.relu(x + fl.constant([1.0, 2.0, 3.0])) * 2.0
    z = fl.exp(-y)
    for batch in (0, 1, 5):
        got = check_against_interpreter(graph, {"y": y, "z": z},
                                        {x: rng.standard_normal((batch, 3)).astype(np.float32)})
        assert got["y"].shape == (batch, 3)
