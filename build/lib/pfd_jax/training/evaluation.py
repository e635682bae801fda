"""Scoring and evaluating seed-stacked models on bucketed splits: predictions, per-epoch NDCG, the full
metric table, per-list NDCG, and best-checkpoint keeping.

Buckets are dicts of device arrays (:func:`device_buckets`) or on-disk shards
(:class:`pfd_jax.data.shards.ShardBucket`, read in blocks of groups). In a multi-process run each process
scores its own lists and the sums and counts are added across processes.
"""
from __future__ import annotations

from typing import Dict, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from pfd_jax import distributed
from pfd_jax.data.padding import Padded, bucketize
from pfd_jax.data.preprocess import positive_groups
from pfd_jax.ops import metrics as metrics_lib
from pfd_jax.ops.scoring import features, scoring
from pfd_jax.training import draws
from pfd_jax.training.config import TrainConfig


class EvalSet(NamedTuple):
  """An evaluation split: buckets of its lists that have a positive, and how many lists the split has in
  all. Lists without a positive have NDCG 0 under every rule, so they are not scored; they only enter the
  denominator under empty_rule='zero'."""
  buckets: list
  num_lists: int


def eval_buckets(groups, max_buckets: int = 8) -> list:
  """Host buckets of the lists of a labelled split that have at least one y = 1."""
  return bucketize(groups, max_buckets, np.flatnonzero(positive_groups(groups)))


def eval_set(groups, max_buckets: int = 8) -> EvalSet:
  """An :class:`EvalSet` of a labelled split on the device (:func:`eval_buckets`)."""
  return EvalSet(device_buckets(eval_buckets(groups, max_buckets)), groups.num_queries)


def device_buckets(buckets: Sequence[Padded]) -> list:
  """Host buckets -> dicts of device arrays: x, z, y, mask, pos (f32[Q], group has a y = 1)."""
  out = []
  for b in buckets:
    d = dict(x=jnp.asarray(b.x), y=jnp.asarray(b.y), mask=jnp.asarray(b.mask),
             pos=jnp.asarray((b.y * b.mask).max(-1) > 0, jnp.float32))
    if b.z is not None:
      d["z"] = jnp.asarray(b.z)
    out.append(d)
  return out


def blocks(buckets, view: str, z_override=None, fields=("y", "mask")):
  """(features, *fields) of every bucket, on the device: one tuple per bucket, or per block of groups of an
  on-disk bucket (so that memory holds one block)."""
  for b in buckets:
    parts = [b] if isinstance(b, dict) else b.blocks()
    for p in parts:
      yield (jnp.asarray(features(p, view, z_override)),) + tuple(jnp.asarray(p[f]) for f in fields)


def scorer(cfg: TrainConfig, es: EvalSet, view: str, z_override=None):
  """``fn(params) -> [S, len(ks)]`` NDCG averaged over the lists of a split, cfg.empty_rule applied.

  Lists without a positive score 0; 'exclude' leaves them out of the mean, 'zero' counts them among the
  `num_lists` lists of the split. Device buckets are scored in one jitted call (their inputs made once);
  on-disk buckets block by block; across processes, the sums and counts of every process are added.
  """
  if isinstance(es, draws.DrawnEvalSet):  # each model on its own draw's lists
    return draws.scorer(cfg, es, view)
  sums = scoring(cfg.arch, tuple(cfg.ks)).ndcg_sums
  resident = all(isinstance(b, dict) for b in es.buckets)
  triples = tuple(blocks(es.buckets, view, z_override)) if resident else None
  comm = distributed.comm()
  num_lists = es.num_lists if comm.count == 1 else int(comm.sum(es.num_lists))

  def fn(params):
    # no list at all (a split too small to have one): 0 / 0 = NaN per seed and cut-off, list_mean's empty rule
    seeds = jax.tree_util.tree_leaves(params)[0].shape[0]
    empty = (np.zeros((seeds, len(cfg.ks)), np.float32), 0)
    if triples is not None:
      tot, cnt = sums(params, triples) if triples else empty
    else:
      tot, cnt = empty
      for triple in blocks(es.buckets, view, z_override):
        t, c = sums(params, (triple,))
        tot, cnt = tot + t, cnt + c
    if comm.count == 1:
      return metrics_lib.list_mean(tot, cnt, num_lists, cfg.empty_rule)
    both = np.zeros((seeds, len(cfg.ks) + 1))  # the sums and the count in one collective
    both[:, :-1], both[:, -1] = np.asarray(tot, np.float64), np.asarray(cnt)
    both = comm.sum(both)
    return metrics_lib.list_mean(both[:, :-1], both[:, -1:], num_lists, cfg.empty_rule)

  return fn


def evaluate(cfg: TrainConfig, params, es: EvalSet, view: str, z_override=None) -> np.ndarray:
  """[S, len(ks)] mean NDCG (cfg.empty_rule) of S seed-stacked models on an :class:`EvalSet`."""
  return np.asarray(scorer(cfg, es, view, z_override)(params))


def predict(cfg: TrainConfig, params, buckets: list, view: str, z_override=None) -> list:
  """Logits [S, Q, L] per bucket of S seed-stacked models (NumPy for on-disk buckets; the draws of a layout,
  :class:`pfd_jax.training.draws.Draws`: each model's of its own draw's groups)."""
  if isinstance(buckets, draws.Draws):
    if z_override is not None:
      raise ValueError("z_override: not for a drawn run's buckets")
    return draws.predict(cfg, params, buckets, view)
  fn = scoring(cfg.arch, tuple(cfg.ks)).predict
  out = []
  for b in buckets:
    if isinstance(b, dict):
      out.append(fn(params, features(b, view, z_override)))
    else:
      out.append(np.concatenate([np.asarray(fn(params, f)) for (f,) in blocks([b], view, z_override, ())], -2))
  return out


def full_metrics(cfg: TrainConfig, params, es: EvalSet, view: str, ks=(3, 5, 10)) -> Dict[str, np.ndarray]:
  """{name: [S]} NDCG@k, P@k and MAP (:func:`pfd_jax.ops.metrics.metric_table`) of S seed-stacked models on an
  :class:`EvalSet`, averaged over lists by cfg.empty_rule."""
  fn = scoring(cfg.arch, tuple(cfg.ks), tuple(ks)).table
  tot, cnt = 0.0, 0.0
  for f, y, m in blocks(es.buckets, view):
    valid = metrics_lib.has_relevant(y, m)
    tot = tot + jnp.sum(jnp.where(valid, fn(params, f, y, m), 0.0), -1)
    cnt = cnt + jnp.sum(valid)
  mean = np.asarray(metrics_lib.list_mean(tot, cnt, es.num_lists, cfg.empty_rule))  # [S, M]
  return dict(zip(metrics_lib.metric_names(ks), mean.T))


def per_list_ndcg(cfg: TrainConfig, params, es: EvalSet, view: str) -> tuple:
  """(NDCG@ks[0] of every list [S, Q], has-a-positive [Q]) of S seed-stacked models on an :class:`EvalSet`,
  lists in bucket order (the same order for every model on the same set: rows pair by position)."""
  fn = scoring(cfg.arch, tuple(cfg.ks)).per_list
  s_count = jax.tree_util.tree_leaves(params)[0].shape[0]
  vals, valid = [np.zeros((s_count, 0), np.float32)], [np.zeros(0, bool)]
  for f, y, m in blocks(es.buckets, view):
    vals.append(np.asarray(fn(params, f, y, m))[:, 0])  # [S, K, Q_b] -> [S, Q_b]
    valid.append(np.asarray(metrics_lib.has_relevant(y, m)))
  comm = distributed.comm()  # several processes: every process's lists, in process order
  return comm.concat(np.concatenate(vals, -1).T).T, comm.concat(np.concatenate(valid))


@jax.jit
def keep_best(improved, new, old):
  """Per seed: `new` where improved[s], else `old` (pytrees with a leading seed axis)."""
  return jax.tree_util.tree_map(
      lambda a, b: jnp.where(improved.reshape((-1,) + (1,) * (a.ndim - 1)), a, b), new, old)
