"""Padded lists, as every loss and teacher term reads them: which documents are real, and the reduction across lists."""
from __future__ import annotations

from typing import Callable, Optional

import jax
import jax.numpy as jnp

ReduceFn = Optional[Callable[[jax.Array], jax.Array]]  # across lists (None: the per-list values)


def real(scores, mask):
  """The mask of real documents (None: every document is real), boolean, in the scores' shape."""
  return jnp.ones(scores.shape, bool) if mask is None else mask.astype(bool)


def reduce_lists(per_list, reduce_fn: ReduceFn):
  """Per-list values reduced across lists by `reduce_fn` (None: the per-list values as they are)."""
  return per_list if reduce_fn is None else reduce_fn(per_list)
