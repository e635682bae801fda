"""Saved rankers: load, check, score and export. Imports the maths and data layers only."""
from pfd_jax import lazy as _lazy

__getattr__, __dir__ = _lazy(__name__, {
    "pfd_jax.serving.model": "FORMAT GBDTRanker ModelError Ranker check_recipe input_ids load_model save_model serving_labels",
})
