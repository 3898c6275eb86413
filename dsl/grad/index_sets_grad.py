"""InvertPermutation and RandomShuffle have no gradient, as in TensorFlow
(``NotDifferentiable``); Bincount, DenseBincount and ListDiff register none there either."""
from dsl.gradients import NotDifferentiable

for _name in ("InvertPermutation", "RandomShuffle"):
    NotDifferentiable(_name)
