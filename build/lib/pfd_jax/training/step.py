"""The model, the optimizer and one update: what a training step computes, for one seed, vmapped over seeds.

A step takes a batch as indices into a bucket (``idx [B]`` of groups, ``valid [B]``) and gathers its groups
inside the compiled program, so the host ships integers only. The loss of a batch is the *sum* over its
groups of the per-group losses (Eq. 1 sums over sets; PT-Ranking sums over the batch too). Compiled steps are
cached per :func:`step_key`, so runs that differ only in alpha, the teacher transform or the epochs share them.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Callable, Optional

import jax
import jax.flatten_util
import jax.numpy as jnp
import optax

from pfd_jax.ops import losses as losses_lib
from pfd_jax.ops import teacher as teacher_lib
from pfd_jax.ops.models import MLP
from pfd_jax.training.teaching import teacher_term
from pfd_jax.training.structures import Batch, Bucket, Clock, SeedBatch, StepFns

if TYPE_CHECKING:  # annotations only: a step reads its settings, it does not build or check them
  from pfd_jax.training.config import TrainConfig

# Settings a sweep may vary inside one program (train(variants=...)): the per-model alpha and the teacher
# transform, which turns teacher logits into targets before training. step_key normalises them away.
SWEEPABLE = ("alpha", "teacher_transform", "transform_a", "transform_b", "temperature")


def make_model(cfg: TrainConfig) -> MLP:
  return cfg.arch.module()


def loss_fn(cfg: TrainConfig, key=None) -> Callable:
  """The data loss of `cfg` (its registered :class:`pfd_jax.ops.losses.Loss`, hyper-parameters bound), called as
  (scores, labels, mask, reduce_fn=...). key: for a loss that draws randomness (ListMLE's tie-breaking: binary
  labels tie everywhere; rax's convention), one draw per step; ignored by the others."""
  fn = cfg.make_loss()
  return functools.partial(fn, key=key) if key is not None and losses_lib.REGISTRY[cfg.loss].needs_key else fn


def forward(model: MLP, params, feats, mask, key):
  """Training-mode logits [B, L] of one seed's batch and batch norm's new running statistics (None without
  batch norm). The paper's model (no option on) is a plain ``apply``: the reproduced runs keep their bits."""
  if model.norm != "batch" and not (model.noise or model.dropout):
    return model.apply(params, feats), None
  noise_key, dropout_key = jax.random.split(jax.random.fold_in(key, 0x5eed))
  rngs = dict(noise=noise_key, dropout=dropout_key)
  if model.norm != "batch":
    return model.apply(params, feats, mask, train=True, rngs=rngs), None
  s, state = model.apply(params, feats, mask, train=True, rngs=rngs, mutable=["batch_stats"])
  return s, state["batch_stats"]


def step_key(cfg: TrainConfig) -> TrainConfig:
  """The settings a training step is compiled for: those it does not need at trace time (alpha, epochs,
  selection, the teacher transform, the top-K warm-up) normalised away, so an alpha or temperature sweep
  compiles once."""
  return dataclasses.replace(cfg, alpha=0.0, epochs=1, select_on="test", empty_rule="exclude",
                             teacher_loss=cfg.teacher_loss or cfg.loss, teacher_transform="sigmoid", transform_a=1.0,
                             transform_b=0.0, temperature=1.0, topk=dataclasses.replace(cfg.topk, warmup=0),
                             mesh=(), order_stream=0)


@functools.lru_cache(maxsize=None)
def compiled(cfg: TrainConfig, has_teacher: bool, steps_per_epoch: int, data_axis: Optional[str] = None) -> StepFns:
  """Seed-vmapped init (jitted) and step (to be traced into a program) for one :func:`step_key`.

  data_axis: the step runs on one shard of a batch under ``shard_map`` (each shard its own groups, ``valid``
  per seed) and the gradient and loss sums are all-reduced over that mesh axis before the update.
  """
  model = make_model(cfg)
  schedule = lambda step: cfg.effective_lr * 0.5 ** (step // (cfg.lr_halve_every * steps_per_epoch))
  tx = optax.chain(optax.add_decayed_weights(cfg.weight_decay), optax.adam(schedule))

  def init(key, dim):
    params = model.init(key, jnp.zeros((1, dim)))
    return params, tx.init(params)

  draws = losses_lib.REGISTRY[cfg.loss].needs_key

  def terms(s, b: SeedBatch):
    """(total, (data, teacher)) loss sums of one seed's batch from its scores s [B, L]."""
    data_loss = loss_fn(cfg, jax.random.fold_in(b.key, b.step) if draws else None)
    data = data_loss(s, b.y, b.mask, reduce_fn=None) * b.weight
    if b.teacher is None:
      return jnp.sum(data), (jnp.sum(data), jnp.zeros(()))
    t_fn = teacher_term(cfg, jax.random.fold_in(b.key, b.step), b.y, b.phase)
    _, teach = teacher_lib.distillation_terms(data_loss, s, b.y, b.teacher, b.mask, teacher_loss_fn=t_fn)
    teach = teach * b.valid
    return jnp.sum(b.alpha * data + (1 - b.alpha) * teach), (jnp.sum(data), jnp.sum(teach))

  def grad(params, key, batch: Batch, bucket: Bucket, alpha, clock: Clock):
    """The gradient and (total, data, teacher) sums of one seed's batch; the bucket's teacher inputs are
    this seed's [(K,) Q, L] or None; key: the seed's epoch key."""
    idx, valid = batch
    f, yb, mb, w = bucket.feats[idx], bucket.y[idx], bucket.mask[idx], bucket.data_w[idx] * valid
    t = None if bucket.teacher is None else bucket.teacher[..., idx, :]
    # batch norm's statistics: the real documents of the batch's real members
    real = mb & (valid[:, None] > 0)

    def objective(p):
      s, stats = forward(model, p, f, real, jax.random.fold_in(key, clock.step))
      total, sums = terms(s, SeedBatch(y=yb, mask=mb, weight=w, valid=valid, teacher=t, key=key, alpha=alpha,
                                       step=clock.step, phase=clock.phase))
      return total, (sums, stats)
    (total, ((data, teach), stats)), grads = jax.value_and_grad(objective, has_aux=True)(params)
    return grads, jnp.stack([total, data, teach]), stats

  def update(params, opt_state, grads, stats):
    """Adam on every variable, then batch norm's running statistics replaced by the step's new ones (their
    gradient is 0; the optimizer's weight decay would only move them)."""
    updates, opt_state = tx.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    return (params if stats is None else dict(params, batch_stats=stats)), opt_state

  t_axes = 0 if has_teacher else None
  # alpha is per model (in_axes 0): an alpha sweep trains its students side by side in one program. On one
  # shard every seed's batch has the same valid entries; on a shard of a mesh each seed owns other groups.
  v_axes = None if data_axis is None else 0
  in_axes = (0, 0, Batch(0, v_axes), Bucket(None, None, None, None, t_axes, None), 0, Clock(None, None))
  # seed_batching='loop' computes the gradients model after model (lax.map): less memory at once, and for RankNet's
  # pair blocks it can be faster (experiments.bench.benchmark --losses=ranknet measures both), but XLA then sums in another
  # order, so its bits are not vmap's: the default stays vmap and every reproduced table keeps its bits.
  seeds_grad = _seed_map(grad, in_axes) if cfg.seed_batching == "loop" else jax.vmap(grad, in_axes=in_axes)

  def vstep(params, opt_state, *args):
    """One update of every seed (model axis first): the gradients, on a mesh one all-reduce of one vector (a
    collective per leaf costs a round trip each), then the vmapped Adam update."""
    grads, sums, stats = seeds_grad(params, *args)
    if data_axis is not None:
      flat, unflatten = jax.flatten_util.ravel_pytree((grads, sums))
      grads, sums = unflatten(jax.lax.psum(flat, data_axis))
      # each shard's batch statistics, averaged so that every replica keeps the same running statistics
      stats = None if stats is None else jax.lax.pmean(stats, data_axis)
    params, opt_state = jax.vmap(update)(params, opt_state, grads, stats)
    return params, opt_state, sums

  return StepFns(init=jax.jit(jax.vmap(init, in_axes=(0, None)), static_argnums=1), vstep=vstep)

def _leaf_axes(axes, arg) -> list:
  """The vmap axis of every leaf of `arg` given an in_axes prefix (ints / None, or tuples of them)."""
  if axes is None or isinstance(axes, int):
    return [axes] * len(jax.tree_util.tree_leaves(arg))
  return [a for ax, sub in zip(axes, arg) for a in _leaf_axes(ax, sub)]


def _seed_map(fn, in_axes: tuple):
  """``jax.vmap(fn, in_axes)`` computed one model after another (``lax.map``): per-model working sets."""
  def mapped(*args):
    leaves, tree = jax.tree_util.tree_flatten(args)
    axes = _leaf_axes(in_axes, args)

    def one(xs):
      it = iter(xs)
      return fn(*jax.tree_util.tree_unflatten(tree, [next(it) if ax == 0 else a for a, ax in zip(leaves, axes)]))
    return jax.lax.map(one, tuple(a for a, ax in zip(leaves, axes) if ax == 0))
  return mapped
