"""The named structures a training step and the epoch program exchange (pytrees: NamedTuples, as optax's
states), so that no position carries a meaning."""
from __future__ import annotations

from typing import Any, Callable, Dict, NamedTuple, Optional, Protocol, Sequence

import jax
import numpy as np


class Bucket(NamedTuple):
  """One training bucket as the compiled program takes it (groups axis Q first)."""
  feats: Any                # f32[Q, L, D] the model's input (its view of x and z)
  y: Any                    # f32[Q, L] labels
  mask: Any                 # bool[Q, L] real documents
  data_w: Any               # f32[Q] each group's weight in the data loss (1 = in it, 0 = teacher term only)
  teacher: Any = None       # teacher inputs [S, (K,) Q, L] (:func:`teacher_inputs`), or None
  slots: Any = None         # on a mesh: [D, Q] each global group's row in this device's block, -1 elsewhere


class Batch(NamedTuple):
  """One seed's batch as indices into a bucket (on a mesh: into this device's block)."""
  idx: Any    # i32[B] groups
  valid: Any  # f32[B] 1 for a real member of the batch, 0 for padding


class Clock(NamedTuple):
  """Where in the run a step is: its number in the epoch (the teacher loss's samples) and whether the top-K
  warm-up is over."""
  step: Any
  phase: Any


class SeedBatch(NamedTuple):
  """What the loss of one seed's batch reads, inside the step (after the batch's groups are gathered)."""
  y: Any          # f32[B, L] labels
  mask: Any       # bool[B, L] real documents
  weight: Any     # f32[B] each group's weight in the data term (its data_w times valid)
  valid: Any      # f32[B] 1 for a real member of the batch
  teacher: Any    # the teacher inputs [(K,) B, L], or None (a data-only run)
  key: Any        # the seed's epoch key
  alpha: Any      # Eq. 1's weight of the data term (per model)
  step: Any       # the step's number in the epoch (folded into the key of a loss that draws randomness)
  phase: Any  # the teacher term's per-epoch state (pfd_jax.training.teaching; top-K: its warm-up is over)


class StepFns(NamedTuple):
  """The seed-vmapped functions of one :func:`step_key`."""
  init: Callable   # (keys [S], input dim) -> (params, opt_state), jitted
  vstep: Callable  # (params, opt_state, keys [S], Batch, Bucket, alpha [S], Clock) -> (params, opt_state, sums [S, 3])


class EpochScalars(NamedTuple):
  """What training emits after every epoch, per model (M = seeds, or variants x seeds), to its writers."""
  epoch: int          # 0-based
  epochs: int         # of the run
  loss: np.ndarray    # [M] the epoch's summed total loss
  metrics: Dict[str, np.ndarray]  # {split: [M, len(ks)]} mean NDCG@ks
  ks: tuple
  select_on: str      # the split of the best-epoch choice (metrics[select_on][:, 0])
  seconds: float      # since training began
  first_model: int = 0  # the models' index of metrics' first row (a LightGBM row reports seed after seed)
  unit: str = "epoch"   # what `epoch` counts (a LightGBM row: boosting rounds, over all its seeds)


class MetricWriter(Protocol):
  """Anything that takes an epoch's scalars (as CLU's metric writers take ``write_scalars``): a progress line,
  TensorBoard, a benchmark's timer."""

  def write_epoch(self, scalars: EpochScalars) -> None: ...


class Hooks(NamedTuple):
  """What a run reports to, and where it may be stopped."""
  writers: Sequence[MetricWriter] = ()  # given every epoch's :class:`EpochScalars`
  safe_point: Optional[Callable[[], None]] = None  # called after every epoch, once its state is consistent: the
  #   place to stop a run (it may raise, e.g. on a signal)


def by_draw(tree, draws: int):
  """[D * S, ...] leaves -> [D, S, ...]: a drawn run's draw-major model axis split (:mod:`pfd_jax.training.draws`)."""
  return jax.tree_util.tree_map(lambda a: a.reshape((draws, -1) + a.shape[1:]), tree)


def by_model(tree):
  """[D, S, ...] leaves -> [D * S, ...]."""
  return jax.tree_util.tree_map(lambda a: a.reshape((-1,) + a.shape[2:]), tree)
