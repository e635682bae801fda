"""What a model sees and how seed-stacked scores become NDCG: the one view table and the one scoring builder.

A *view* names a model's input: ``x`` (regular features), ``z`` (privileged), ``xz`` (both, concatenated),
optionally restricted to some privileged columns (``xz:0``). :func:`features` builds it from a bucket (device
or host arrays) and :func:`input_ids` names the raw feature ids it reads, in input order, for saved models.

:func:`scoring` builds, once per model shape, the jitted seed-vmapped predict and NDCG functions that every
user shares: training's per-epoch evaluation, the full metric table, the per-list NDCG of the paired
statistics, saved models, and the export; :func:`ndcg_fn` is the same NDCG on scores given directly (the GBDT
rows). Lists without a positive are reduced by :func:`pfd_jax.ops.metrics.list_mean`, the one empty-list rule.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pfd_jax.ops import metrics
from pfd_jax.ops.models import Arch

VIEWS = ("x", "z", "xz")


def features(bucket: Mapping[str, Any], view: str, z_override=None):
  """The model input of a bucket: 'x' (regular), 'z' (privileged) or 'xz' (both, concatenated).

  A suffix ':i,j' keeps only those privileged columns ('xz:0' = regular + the first privileged feature), and a
  further '=v' sets them to the constant v: the input of a model trained with them (e.g. the display position)
  and served without them ('xz:0=1': every item at the top position; pfd_jax.methods.debias).
  z_override (broadcastable to z) replaces the privileged features, e.g. by an imputed constant (Table 6).
  Works on device arrays and on host (NumPy) arrays alike.
  """
  base, _, cols = view.partition(":")
  cols, _, const = cols.partition("=")
  if base not in VIEWS:
    raise ValueError(f"view must be one of {VIEWS} (optionally ':i,j' and '=v'), got {view!r}")
  if base == "x":
    return bucket["x"]
  if bucket.get("z") is None:
    raise ValueError(f"view {view!r} needs privileged features z")
  xp = jnp if isinstance(bucket["z"], jax.Array) else np
  z = bucket["z"] if z_override is None else xp.broadcast_to(z_override, bucket["z"].shape)
  if cols:
    z = z[..., [int(c) for c in cols.split(",")]]
  if const:
    z = xp.full(z.shape, float(const), z.dtype)
  return z if base == "z" else xp.concatenate([bucket["x"], z], axis=-1)


def served_constant(view: str) -> bool:
  """Whether a view feeds constants in place of privileged columns ('=v'): such a model reads no file column
  for them, so it is scored here but not saved as a servable model."""
  return "=" in view


def input_ids(view: str, regular_ids, privileged_ids) -> list:
  """The 1-based feature ids a model of `view` reads, in its input order (that of :func:`features`)."""
  base, _, cols = view.partition(":")
  cols = cols.partition("=")[0]
  priv = list(privileged_ids)
  if cols:
    priv = [priv[int(c)] for c in cols.split(",")]
  return {"x": list(regular_ids), "z": priv, "xz": list(regular_ids) + priv}[base]


class Scoring(NamedTuple):
  """Jitted functions of S seed-stacked parameters (leading axis S) of one model shape."""
  predict: Callable    # (params, feats [Q, L, D]) -> logits [S, Q, L]
  ndcg_sums: Callable  # (params, ((feats, y, mask), ...)) -> (NDCG sums over lists with a positive [S, K], count)
  per_list: Callable   # (params, feats, y, mask) -> NDCG@ks [S, K, Q]
  table: Callable      # (params, feats, y, mask) -> metric_table rows [S, M, Q] (cut-offs of `table_ks`)


@functools.lru_cache(maxsize=None)
def scoring(arch: Arch, ks: tuple, table_ks: tuple = (3, 5, 10)) -> Scoring:
  """The :class:`Scoring` of a model of this architecture (cached: every run and every saved model of the
  architecture shares the compiled functions). Scoring never trains: batch norm reads its running statistics,
  noise and dropout are off, so a document's score depends on its own features only."""
  model = arch.module()
  per_list = jax.vmap(lambda params, f, y, m: metrics.ndcg_table(model.apply(params, f), y, m, ks),
                      in_axes=(0, None, None, None))

  def ndcg_sums(params, triples):
    tot, cnt = 0.0, 0
    for f, y, m in triples:
      valid = metrics.has_relevant(y, m)
      tot = tot + jnp.sum(jnp.where(valid, per_list(params, f, y, m), 0.0), -1)
      cnt = cnt + jnp.sum(valid)
    return tot, cnt

  table = jax.vmap(lambda params, f, y, m: metrics.metric_table(model.apply(params, f), y, m, table_ks),
                   in_axes=(0, None, None, None))
  return Scoring(predict=jax.jit(jax.vmap(model.apply, in_axes=(0, None))), ndcg_sums=jax.jit(ndcg_sums),
                 per_list=jax.jit(per_list), table=jax.jit(table))


@functools.lru_cache(maxsize=None)
def ndcg_fn(ks: tuple) -> Callable:
  """Jitted NDCG@ks [S, K, Q] of seed-stacked scores [S, Q, L] given directly (labels, mask [Q, L])."""
  return jax.jit(jax.vmap(lambda s, y, m: metrics.ndcg_table(s, y, m, ks), in_axes=(0, None, None)))
