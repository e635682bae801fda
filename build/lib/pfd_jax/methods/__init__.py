"""The rows of the tables: the paper's distillation methods, the GBDT (LambdaMART) rows and
cross-family distillation, the Committee Perceptron family, and building a saved ranker from a trained row."""
from pfd_jax import lazy as _lazy

__getattr__, __dir__ = _lazy(__name__, {
    "pfd_jax.methods.distill": "METHODS run_methods",
    "pfd_jax.methods.ranker": "make_ranker",
})
