"""Scoring models: the paper's fully connected ranker (appendix A.3)."""
from __future__ import annotations

from typing import Callable

import flax.linen as nn
import jax


class MLP(nn.Module):
  """A `layers`-layer fully connected scorer: (layers - 1) hidden ReLU layers of width `hidden` and a
  linear output unit. ``[..., D] -> [...]`` logits; the paper's score in [0, 1] is sigmoid(logit), and a
  ranking by logit equals the ranking by score. The paper's model is layers=5, hidden=100 (appendix A.3;
  "5-layer" read as five Dense layers, PT-Ranking's convention). No batch norm or dropout: the paper
  names none.
  """
  hidden: int = 100
  layers: int = 5
  activation: Callable = nn.relu

  @nn.compact
  def __call__(self, x):
    for _ in range(self.layers - 1):
      x = self.activation(nn.Dense(self.hidden)(x))
    return nn.Dense(1)(x)[..., 0]


def num_params(params) -> int:
  return int(sum(x.size for x in jax.tree_util.tree_leaves(params)))
