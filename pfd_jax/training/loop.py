"""Seed-vmapped training with per-epoch evaluation and best-checkpoint keeping (appendix A.3 protocol): the
shape of a run (its parts: see :mod:`pfd_jax.training`). Every epoch's scalars go to metric writers.

``S`` seeds (times V variants of a sweep) lead every per-model array; the same keys give the same bits.
"""
from __future__ import annotations

import dataclasses
import functools
import time
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from pfd_jax.training.evaluation import keep_best, scorer
from pfd_jax.training.feed import make_feed
from pfd_jax.training import draws as draws_lib
from pfd_jax.training import teaching
from pfd_jax.training.step import SWEEPABLE
from pfd_jax.training.teaching import teacher_inputs
from pfd_jax.training.structures import EpochScalars, Hooks

if TYPE_CHECKING:
  from pfd_jax.training.config import TrainConfig


class EpochTimes(list):
  """A metric writer keeping every epoch's end, in seconds since training began (the benchmarks' timer)."""

  def write_epoch(self, scalars: EpochScalars) -> None:
    self.append(scalars.seconds)


@dataclasses.dataclass
class TrainResult:
  """Everything one seed-vmapped run produced (numpy, seed axis first).

  params: best-epoch parameters [S, ...] (device pytree); curves: {split: [S, E, len(ks)]} mean NDCG per
  epoch of the splits scored every epoch (all, or select_on's alone: cfg.curves); loss: [S, E, 3] summed (total,
  data term, teacher term) per epoch; best_epoch: [S] (0-based); best: {split: [S, len(ks)]} metrics at the best
  epoch; seconds: wall time.
  """
  params: object
  curves: Dict[str, np.ndarray]
  loss: np.ndarray
  best_epoch: np.ndarray
  best: Dict[str, np.ndarray]
  seconds: float

  def part(self, i: int, n: int) -> "TrainResult":
    """Models i*n .. (i+1)*n - 1 (variant i of a sweep of n seeds each)."""
    cut = lambda x: x[i * n:(i + 1) * n]
    return TrainResult(params=jax.tree_util.tree_map(cut, self.params),
                       curves={k: cut(v) for k, v in self.curves.items()},
                       loss=cut(self.loss), best_epoch=cut(self.best_epoch),
                       best={k: cut(v) for k, v in self.best.items()}, seconds=self.seconds)


def train(key, cfg: TrainConfig, train_buckets: list, view: str, eval_sets: Mapping[str, Any], *,
          teacher: Optional[list] = None, num_seeds: Optional[int] = None,
          hooks: Hooks = Hooks(), init_params=None, variants: Optional[Sequence[Mapping[str, Any]]] = None,
          chunk_steps: int = 0, patience: int = 0):
  """Trains `S` models (one per seed) and keeps each one's best epoch. Returns a :class:`TrainResult`
  (a list of them with `variants`).

  Args:
    key: PRNG key [S] (one per seed) from ``jax.random.split``; the same keys give the same bits.
    cfg: hyper-parameters.
    train_buckets: the groups an epoch visits: :func:`pfd_jax.training.evaluation.device_buckets` (resident: on one device, or on a
      ``cfg.mesh`` / across processes), :class:`pfd_jax.data.shards.ShardBucket` s (streamed from disk), or the
      :class:`pfd_jax.training.draws.Draws` of D re-drawn datasets (keys then D x S, draw-major; eval_sets
      :class:`pfd_jax.training.draws.DrawnEvalSet` s; no variants).
    view: model input, see :func:`pfd_jax.ops.scoring.features`.
    eval_sets: {split name: :class:`pfd_jax.training.evaluation.EvalSet`} evaluated after every epoch; must contain ``cfg.select_on``.
    teacher: per train bucket, teacher logits ``[S, Q, L]`` or ``[S, K, Q, L]`` (K teachers, multi-teacher
      PFD); None trains on the data loss alone. Teacher seed s teaches student s.
    hooks: the metric writers of every epoch and the safe point after it (:class:`Hooks`).
    init_params: seed-stacked parameters to start from (fine-tuning a pre-trained model); the optimizer
      state starts fresh. None initialises from the keys.
    chunk_steps: steps per call of the training program (0: a whole epoch per call; streamed data: one step
      per window on one device, 8 on a mesh). Any value gives the same bits.
    variants: a sweep of the teacher term trained in one program: V dicts of :data:`SWEEPABLE` settings
      (e.g. ``[{"alpha": 0.2}, {"alpha": 0.9}]`` or ``[{"teacher_transform": "softmax", "temperature": t}]``)
      give V x S models (variant v with seed s's key and teacher), and a list of V :class:`TrainResult` is
      returned, each equal to the run with ``dataclasses.replace(cfg, **variants[v])``. Alpha is a traced
      per-model argument of the step and each variant's teacher targets are computed before training, so
      every variant shares one compiled program.
    patience: early stopping on ``cfg.select_on`` (LightGBM's rule, for the models trained side by side): training
      ends after the first epoch at which no model has improved its selection metric for `patience` epochs (0:
      cfg.patience, whose default 0 runs every epoch of cfg.epochs). The models are those of the epochs run (each
      its best of them, the same bits as a full run's up to there); the curves and losses of the epochs not run
      are NaN.
  """
  if cfg.select_on not in eval_sets:
    raise ValueError(f"select_on={cfg.select_on!r} but eval_sets has {list(eval_sets)}")
  if not train_buckets:
    raise ValueError("no training group (is there any positive query group?)")
  keys = key if num_seeds is None else jax.random.split(key, num_seeds)
  patience = patience or cfg.patience
  seeds = keys.shape[0]
  keys, teacher, alpha, init_params = _models(cfg, keys, train_buckets, teacher, variants, init_params)
  feed = make_feed(cfg, train_buckets, view, teacher, keys, chunk_steps)
  state = feed.init(keys, alpha, init_params)
  scorers = {name: scorer(cfg, es, view) for name, es in eval_sets.items()}
  later = {} if cfg.curves == "all" else {n: scorers.pop(n) for n in list(scorers) if n != cfg.select_on}
  models = keys.shape[0]
  best_params = jax.tree_util.tree_map(jnp.copy, feed.local(state.params))  # params' buffers are donated
  best_val = jnp.full((models,), -jnp.inf)
  unrun = np.nan if patience else 0.0  # what an epoch that early stopping skips records
  curves = {name: np.full((models, cfg.epochs, len(cfg.ks)), unrun) for name in scorers}
  loss_hist = np.full((models, cfg.epochs, 3), unrun)
  best_epoch = np.zeros(models, np.int64)
  phase = teaching.of(cfg).part("phase")  # the teacher term's per-epoch state (top-K: its warm-up is over)
  t0 = time.time()
  for epoch in range(cfg.epochs):
    state, loss = feed.epoch(state, epoch, phase=phase(cfg, epoch))
    params = feed.local(state.params)
    m = {name: fn(params) for name, fn in scorers.items()}
    improved = m[cfg.select_on][:, 0] > best_val
    best_val = jnp.where(improved, m[cfg.select_on][:, 0], best_val)
    best_params = keep_best(improved, params, best_params)
    improved, loss, m = jax.device_get((improved, feed.local(loss), m))  # the epoch's one host sync
    for name, v in m.items():
      curves[name][:, epoch] = v
    best_epoch = np.where(improved, epoch, best_epoch)
    loss_hist[:, epoch] = loss
    scalars = EpochScalars(epoch, cfg.epochs, loss_hist[:, epoch, 0], m, tuple(cfg.ks), cfg.select_on,
                           time.time() - t0)
    for w in hooks.writers:
      w.write_epoch(scalars)
    if hooks.safe_point is not None:
      hooks.safe_point()
    if stopped(epoch, best_epoch, patience):
      break
  best = {name: c[np.arange(models), best_epoch] for name, c in curves.items()}
  best.update({name: np.asarray(fn(best_params)) for name, fn in later.items()})  # curves='select': bit for bit
  best = {name: best[name] for name in eval_sets}
  res = TrainResult(params=best_params, curves=curves, loss=loss_hist, best_epoch=best_epoch, best=best,
                    seconds=time.time() - t0)
  return res if variants is None else [res.part(i, seeds) for i in range(len(variants))]


def stopped(epoch: int, best_epoch: np.ndarray, patience: int) -> bool:
  """Early stopping's rule (LightGBM's, for models trained side by side): after 0-based `epoch`, no model's best
  epoch is fewer than `patience` epochs back (patience 0: never)."""
  return bool(patience) and bool(np.all(epoch - best_epoch >= patience))


def epochs_run(select: np.ndarray, patience: int) -> int:
  """How many epochs :func:`train` runs with `patience` on models whose selection NDCG per epoch would be `select`
  [models, epochs] (a full run's curve: the epochs of an early-stopped run are its bits up to there)."""
  select = np.asarray(select)
  best_val, best_epoch = np.full(select.shape[0], -np.inf, select.dtype), np.zeros(select.shape[0], np.int64)
  for epoch in range(select.shape[1]):
    improved = select[:, epoch] > best_val
    best_val, best_epoch = np.where(improved, select[:, epoch], best_val), np.where(improved, epoch, best_epoch)
    if stopped(epoch, best_epoch, patience):
      return epoch + 1
  return select.shape[1]


def _models(cfg: TrainConfig, keys, buckets, teacher, variants, init_params) -> tuple:
  """The run's models: (keys [M], teacher inputs per bucket [M, ...] or None, alpha [M], initial params),
  M = S seeds, or V x S for V variants (variant v, seed s at v * S + s, with seed s's key and teacher)."""
  drawn = isinstance(buckets, draws_lib.Draws)
  if variants is None:
    variants = [{}]
  elif drawn:
    raise ValueError("variants of a drawn run: train each variant's draws in a run of their own")
  elif teacher is None:
    raise ValueError("variants change the teacher term: give a teacher")
  bad = sorted({k for v in variants for k in v} - set(SWEEPABLE))
  if bad:
    raise ValueError(f"variants may set only {SWEEPABLE} (the settings one compiled step serves), got {bad}")
  cfgs = [dataclasses.replace(cfg, **v) for v in variants]
  tile = lambda t: jnp.concatenate([t] * len(cfgs), axis=0) if len(cfgs) > 1 else t
  if teacher is not None and drawn:
    targets = functools.partial(teaching.of(cfg).part("targets"), cfg)
    teacher = [draws_lib.teacher_inputs(targets, t, b, buckets.num_draws) for t, b in zip(teacher, buckets.buckets)]
  elif teacher is not None:
    masks = [b if isinstance(b, dict) else b.whole(("y", "mask")) for b in buckets]
    teacher = [jnp.concatenate([teacher_inputs(c, t, b) for c in cfgs], axis=0) if len(cfgs) > 1
               else teacher_inputs(cfg, t, b) for t, b in zip(teacher, masks)]
  alpha = jnp.repeat(jnp.asarray([c.alpha if teacher is not None else 1.0 for c in cfgs], jnp.float32),
                     keys.shape[0])
  if init_params is not None:
    init_params = jax.tree_util.tree_map(tile, init_params)
  return tile(keys), teacher, alpha, init_params
