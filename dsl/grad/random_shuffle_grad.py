"""RandomShuffle has no gradient, as in TensorFlow (``NotDifferentiable``)."""
from dsl.gradients import NotDifferentiable

NotDifferentiable("RandomShuffle")
