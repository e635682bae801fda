"""An epoch's batch plan, and the one compiled program that trains any run of its steps.

**The plan.** An epoch visits every training group of every bucket once. Batches hold ``batch_size`` groups
of one bucket (fewer when the bucket is smaller); each seed permutes each bucket with its own key folded with
the epoch, so a seed's batches do not depend on which other seeds run beside it (a vmapped run equals
separate runs), and the order in which the buckets' batches interleave is shuffled per epoch with a key of
the epoch alone, shared by the seeds (they stay in lock-step).

**The program** trains a run of the plan's steps (a whole epoch, or a chunk of it): ``lax.scan`` over the
steps, ``lax.switch`` over the buckets, each branch the vmapped step of :mod:`pfd_jax.training.step` on its
bucket's own batch shape. It is the same function for every scale; what changes is where its arrays live:

* one device: the buckets are device arrays and each step gathers its groups by index;
* a mesh of devices, in one process or across N processes (``Shards``): each device holds a block of every
  bucket's groups; the plan is the one-device plan over global group indices; each device keeps the
  plan's groups it owns (compacted to a fixed width, the most any step of the run gives it), computes their
  loss, and the gradient is all-reduced: the one-device run's sum, up to float summation order;
* streamed data: the buckets are windows of on-disk shards holding just the groups of the chunk's steps,
  and the plan's indices point into the window (:mod:`pfd_jax.training.feed`).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

from pfd_jax.training.structures import Batch, Bucket, Clock, by_draw, by_model


def epoch_plan(order_keys, epoch, sizes: Sequence[int], batch: int, stream: int = 0, counts=None):
  """The batch plan of one epoch: bucket of each step [J], group indices [J, S, Bmax] (bucket b's batches
  in the first min(batch, Q_b) columns; the last batch of a bucket padded with index 0) and their validity
  [J, Bmax], in the epoch's shuffled interleaving (key PRNGKey(epoch), folded with `stream` when > 0).

  counts [B] (a draw on a layout shared by draws, :mod:`pfd_jax.training.draws`): bucket b's first counts[b]
  groups are the draw's own, the rest empty; each seed's permutation puts the own ones first (in a random
  order), and only they are valid, so a step past them holds none."""
  ep_keys = jax.vmap(lambda k: jax.random.split(jax.random.fold_in(k, epoch), len(sizes)))(order_keys)
  width = max(min(batch, q) for q in sizes)
  ids, idx, valid = [], [], []
  for b, q in enumerate(sizes):
    bb = min(batch, q)
    nb = -(-q // bb)
    if counts is None:
      perm, real = jax.vmap(lambda k: jax.random.permutation(k, q))(ep_keys[:, b]), q
    else:
      own = jnp.arange(q) < counts[b]
      perm = jax.vmap(lambda k: jnp.argsort(jnp.where(own, jax.random.uniform(k, (q,)), 2.0)))(ep_keys[:, b])
      real = counts[b]
    perm = jnp.concatenate([perm, jnp.zeros((perm.shape[0], nb * bb - q), perm.dtype)], 1)
    idx.append(jnp.pad(perm.reshape(-1, nb, bb), ((0, 0), (0, 0), (0, width - bb))))
    valid.append(jnp.pad((jnp.arange(nb * bb) < real).astype(jnp.float32).reshape(nb, bb), ((0, 0), (0, width - bb))))
    ids.append(jnp.full((nb,), b, jnp.int32))
  order_key = jax.random.PRNGKey(epoch)
  order = jax.random.permutation(jax.random.fold_in(order_key, stream) if stream else order_key,
                                 steps_per_epoch(sizes, batch))
  return (jnp.concatenate(ids)[order], jnp.concatenate(idx, 1)[:, order].transpose(1, 0, 2),
          jnp.concatenate(valid)[order])


plan = jax.jit(epoch_plan, static_argnums=(2, 3, 4))


@functools.partial(jax.jit, static_argnums=(2, 3, 4))
def draw_plan(order_keys, epoch, sizes: Sequence[int], batch: int, stream: int, counts):
  """The plan of an epoch of D draws on one layout (sizes: its capacities; counts [D, B]; order_keys [D, S, 2]):
  :func:`epoch_plan` per draw, whose steps' buckets and order the draws share: (bucket [J], group indices
  [J, D, S, Bmax], validity [J, D, Bmax])."""
  ids, idx, valid = jax.vmap(lambda k, c: epoch_plan(k, epoch, sizes, batch, stream, c))(order_keys, counts)
  return ids[0], idx.transpose(1, 0, 2, 3), valid.transpose(1, 0, 2)


def steps_per_epoch(sizes: Sequence[int], batch: int) -> int:
  return sum(-(-q // min(batch, q)) for q in sizes if q)


@dataclasses.dataclass(frozen=True)
class Shards:
  """How a mesh splits the data: each device holds a block of every bucket, and each bucket comes with a
  table ``slots [D, Q_b]`` (sharded over 'data') giving, for every global group, its row in this device's
  block, or -1 where another device owns it. width[b]: the most of a batch's groups any block owns in any
  step of the run (each device computes that many; the rest of the batch is the others')."""
  mesh: Mesh
  seeds: Optional[str]
  width: tuple


def _own(width: int, slots, idx, valid):
  """This device's groups of a batch: (rows of its block [S, W], validity [S, W]), owned groups first in
  batch order (a stable sort), the rest padding with weight 0. slots: [Q] this device's table."""
  loc = slots[idx]
  mine = (loc >= 0) & (valid > 0)[None, :]
  order = jnp.argsort(~mine, axis=1, stable=True)[:, :width]
  return (jnp.take_along_axis(jnp.where(mine, loc, 0), order, 1),
          jnp.take_along_axis(mine, order, 1).astype(jnp.float32))


@functools.lru_cache(maxsize=None)
def program(vstep, batch: int, teacher_ndim: int, sizes: tuple, shards: Optional[Shards] = None, *, draws: int = 0,
            draw_batching: str = "vmap"):
  """``fn(params, opt_state, loss, ep_keys, steps, buckets, alpha, phase) -> (params, opt_state, loss)``,
  jitted with params and optimizer state donated; loss [S, 3] carries the epoch's (total, data, teacher) sums
  from chunk to chunk, so that a chunked epoch adds its steps in the whole epoch's order (the same bits).

  vstep: the seed-vmapped step (:class:`pfd_jax.training.step.StepFns`, compiled for a mesh's 'data' axis
  when `shards` is given); batch: groups per batch; teacher_ndim: 0 (no teacher), 3 ([S, Q, L]) or 4 (K
  teachers); sizes: groups per bucket (global); steps: (bucket [C], idx [C, S, Bmax], valid [C, Bmax], step
  number [C]) of the steps to run; buckets: a :class:`pfd_jax.training.step.Bucket` per bucket (with its slot
  table on a mesh, :class:`Shards`).
  """
  widths = [min(batch, q) for q in sizes]

  def run(params, opt_state, loss, ep_keys, steps, buckets, alpha, phase):
    def body(carry, x):
      params, opt_state, acc = carry
      b, i, v, j = x

      def branch(k, p, o):
        ik, vk = i[:, :widths[k]], v[:widths[k]]
        if shards is not None:
          ik, vk = _own(shards.width[k], buckets[k].slots[0], ik, vk)
        return vstep(p, o, ep_keys, Batch(ik, vk), buckets[k], alpha, Clock(j, phase))

      branches = [functools.partial(branch, k) for k in range(len(sizes))]
      new = jax.lax.switch(b, branches, params, opt_state)
      if draws:  # a draw without a group in this step: no update (Adam's moments and count stay)
        new = jax.tree_util.tree_map(lambda n, o: jnp.where(jnp.any(v > 0), n, o), new, (params, opt_state, acc * 0))
      params, opt_state, l = new
      return (params, opt_state, acc + l), None

    (params, opt_state, loss), _ = jax.lax.scan(body, (params, opt_state, loss), steps)
    return params, opt_state, loss

  if shards is not None:
    s = P(shards.seeds)
    t = None if not teacher_ndim else P(shards.seeds, *([None] * (teacher_ndim - 3)), "data", None)
    bucket = Bucket(P("data"), P("data"), P("data"), P("data"), t, P("data"))
    run = jax.shard_map(run, mesh=shards.mesh, check_vma=False, out_specs=(s, s, s),
                        in_specs=(s, s, s, s, (P(), P(None, shards.seeds), P(), P()), (bucket,) * len(sizes), s, P()))
  if draws:
    inner = run

    def run(params, opt_state, loss, ep_keys, steps, buckets, alpha, phase):
      ids, idx, valid, js = steps  # the steps' buckets and numbers are shared; idx, valid per draw

      def one(draw):
        p, o, l, k, i, v, bs, a = draw
        return inner(p, o, l, k, (ids, i, v, js), bs, a, phase)
      params, opt_state, loss, ep_keys, alpha = by_draw((params, opt_state, loss, ep_keys, alpha), draws)
      per_draw = (params, opt_state, loss, ep_keys, idx.swapaxes(0, 1), valid.swapaxes(0, 1), buckets, alpha)
      return by_model(jax.lax.map(one, per_draw) if draw_batching == "loop" else jax.vmap(one)(per_draw))
  return jax.jit(run, donate_argnums=(0, 1))


def plan_stats(order_keys, epochs: int, sizes: Sequence[int], batch: int, offset: np.ndarray, *,
               chunk: int = 0, stream: int = 0) -> tuple:
  """Over every step of `epochs` epochs (the plans are recomputed: cheap next to training), for device
  blocks whose first global groups are offset[d, b] (block d holds groups up to the next block's first): (the
  most groups of one batch any block owns, the most distinct groups any block owns among a chunk of `chunk`
  steps (0: no chunks)), each per bucket. The first sizes each device's share of a step, the second a
  streamed window."""
  width, window = np.ones(len(sizes), np.int64), np.ones(len(sizes), np.int64)
  for epoch in range(epochs):
    ids, idx, valid = jax.device_get(plan(order_keys, jnp.int32(epoch), tuple(sizes), batch, stream))
    for b, q in enumerate(sizes):
      w = min(batch, q)
      i, v = idx[ids == b][:, :, :w], valid[ids == b][:, None, :w] > 0
      block = np.searchsorted(offset[:, b], i, side="right") - 1
      steps = np.flatnonzero(ids == b)
      for d in range(offset.shape[0]):
        mine = block == d
        width[b] = max(width[b], int((mine & v).sum(-1).max(initial=0)))
        if chunk:
          for c in np.unique(steps // chunk):
            window[b] = max(window[b], np.unique(i[steps // chunk == c][mine[steps // chunk == c]]).size)
  return tuple(int(w) for w in width), tuple(int(w) for w in window)
