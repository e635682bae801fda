"""Pure array maths: losses, metrics, the top-K loss, models, views and scoring, statistics, the
linear theory. Functions of arrays with keyword settings (as rax's); no configuration objects, no I/O."""
from pfd_jax import lazy as _lazy

__getattr__, __dir__ = _lazy(__name__, {
    "pfd_jax.ops.losses": "get_loss",
    "pfd_jax.ops.teacher": "get_transform distillation_terms",
    "pfd_jax.ops.metrics": "mean_over_lists ndcg",
})
