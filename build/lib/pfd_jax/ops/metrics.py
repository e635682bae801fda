r"""Masked ranking metrics over padded lists: per-list values and an explicit rule for empty lists.

Every metric takes ``scores``, ``labels``, ``mask`` of shape ``[..., L]`` and returns per-list values
``[...]``; :func:`mean_over_lists` reduces them.

* **Ranking and ties**: documents are sorted by decreasing score with a *stable* sort, so equal scores keep
  their order in the list (earlier index ranks higher); padded documents always rank after real ones.
  This is deterministic and equals rax's default (no tie-breaking key).
* **NDCG@k** (the paper's section 4.1): gain :math:`2^y - 1`, discount :math:`1/\log_2(1 + \mathrm{rank})`,
  ideal DCG from sorting the labels; k larger than a list uses the whole list.
* **MAP, MRR, P@k** binarise labels as relevant = ``label >= threshold`` (default 1, as rax).
  P@k divides by k (rax's convention); AP divides by the number of relevant documents in the list.
* **Lists with no relevant document** (all gains 0): their metric is undefined. Metrics return 0 for them,
  and :func:`mean_over_lists` either excludes them from the mean (``rule="exclude"``, the paper's and most
  papers' protocol and our default) or counts them as 0 (``rule="zero"``, rax's and TF-Ranking's mean).
  Drivers print the rule next to every table.
"""
from __future__ import annotations

import jax.numpy as jnp

EMPTY_RULES = ("exclude", "zero")


def _mask(scores, mask):
  return jnp.ones(scores.shape, bool) if mask is None else mask.astype(bool)


def ranks(scores, mask=None):
  """1-based rank of every document (real documents 1..n by decreasing score, stable); padding after."""
  m = _mask(scores, mask)
  key = jnp.where(m, -scores, jnp.inf)
  order = jnp.argsort(key, axis=-1, stable=True)
  return jnp.argsort(order, axis=-1, stable=True) + 1


def _dcg_sorted(gains_sorted, k):
  pos = jnp.arange(1, gains_sorted.shape[-1] + 1)
  disc = jnp.where(pos <= k, 1.0 / jnp.log2(1.0 + pos), 0.0)
  return jnp.sum(gains_sorted * disc, axis=-1)


def dcg_at_k(scores, labels, mask=None, k: int | None = None):
  """DCG@k per list (gain 2^y - 1; k None = whole list)."""
  m = _mask(scores, mask)
  k = scores.shape[-1] if k is None else k
  gains = jnp.where(m, jnp.exp2(labels) - 1.0, 0.0)
  order = jnp.argsort(jnp.where(m, -scores, jnp.inf), axis=-1, stable=True)
  return _dcg_sorted(jnp.take_along_axis(gains, order, axis=-1), k)


def ndcg_at_k(scores, labels, mask=None, k: int | None = None):
  """NDCG@k per list; 0 where the list has no gain (see the module docstring for how to average)."""
  return ndcg_table(scores, labels, mask, (scores.shape[-1] if k is None else k,))[0]


def _relevant(labels, mask, threshold):
  return _mask(labels, mask) & (labels >= threshold)


def precision_at_k(scores, labels, mask=None, k: int = 10, *, threshold: float = 1.0):
  """P@k per list: relevant documents among the top k, divided by k."""
  rel = _relevant(labels, mask, threshold)
  r = ranks(scores, mask)
  return jnp.sum(rel & (r <= k), axis=-1) / k


def average_precision(scores, labels, mask=None, *, threshold: float = 1.0):
  """AP per list: mean over relevant documents of the precision at their rank; 0 with none relevant."""
  rel = _relevant(labels, mask, threshold)
  r = ranks(scores, mask)
  # relevant documents ranked at or above each document: count via the sorted order
  order = jnp.argsort(r, axis=-1)
  rel_sorted = jnp.take_along_axis(rel, order, axis=-1).astype(jnp.float32)
  prec = jnp.cumsum(rel_sorted, axis=-1) / jnp.arange(1, rel.shape[-1] + 1)
  n_rel = jnp.sum(rel_sorted, axis=-1)
  return jnp.where(n_rel > 0, jnp.sum(prec * rel_sorted, axis=-1) / jnp.maximum(n_rel, 1), 0.0)


def reciprocal_rank(scores, labels, mask=None, *, threshold: float = 1.0):
  """RR per list: 1 / rank of the first relevant document; 0 with none relevant."""
  rel = _relevant(labels, mask, threshold)
  r = ranks(scores, mask)
  best = jnp.min(jnp.where(rel, r, jnp.iinfo(r.dtype).max), axis=-1)
  return jnp.where(jnp.any(rel, axis=-1), 1.0 / best, 0.0)


def has_relevant(labels, mask=None, *, threshold: float = 0.0):
  """bool[...]: lists with at least one real document of label > threshold (NDCG's gain > 0)."""
  return jnp.any(_mask(labels, mask) & (labels > threshold), axis=-1)


def list_mean(total, count, num_lists, rule: str = "exclude"):
  """The one empty-list rule, on sums: `total` (a metric summed over the lists with a positive) over `count`
  (how many those are) with rule='exclude', or over `num_lists` (every list, the others counting 0) with
  'zero'. With no list to average under 'exclude' the result is NaN. NumPy or JAX values alike; the dtype is
  the operands' (pass counts as Python ints to keep float32 sums float32 in NumPy)."""
  if rule not in EMPTY_RULES:
    raise ValueError(f"rule must be one of {EMPTY_RULES}, got {rule!r}")
  return total / (num_lists if rule == "zero" else count)


def mean_over_lists(values, valid, rule: str = "exclude", axis=-1):
  """Mean of per-list `values` over lists by :func:`list_mean`'s rule: 'exclude' averages the lists where
  `valid`, 'zero' all lists with the invalid ones as 0 (NaN under 'exclude' with no valid list)."""
  v = jnp.where(valid, values, 0.0)
  return list_mean(jnp.sum(v, axis=axis), jnp.sum(valid, axis=axis), v.shape[axis], rule)


def ndcg_table(scores, labels, mask, ks=(8, 16, 32)):
  """[len(ks), ...] NDCG@k per list for several k in one call (sorting done once)."""
  m = _mask(scores, mask)
  gains = jnp.where(m, jnp.exp2(labels) - 1.0, 0.0)
  order = jnp.argsort(jnp.where(m, -scores, jnp.inf), axis=-1, stable=True)
  g_sorted = jnp.take_along_axis(gains, order, axis=-1)
  ideal_sorted = -jnp.sort(-gains, axis=-1)
  out = []
  for k in ks:
    ideal = _dcg_sorted(ideal_sorted, k)
    out.append(jnp.where(ideal > 0, _dcg_sorted(g_sorted, k) / jnp.where(ideal > 0, ideal, 1.0), 0.0))
  return jnp.stack(out)


def metric_names(ks=(3, 5, 10)) -> list:
  """Row names of :func:`metric_table`."""
  return [f"NDCG@{k}" for k in ks] + [f"P@{k}" for k in ks] + ["MAP"]


def metric_table(scores, labels, mask, ks=(3, 5, 10)):
  """[2 len(ks) + 1, ...] per-list NDCG@k, P@k (relevant = label >= 1) and AP, in :func:`metric_names` order."""
  rows = [ndcg_table(scores, labels, mask, ks)]
  rows.append(jnp.stack([precision_at_k(scores, labels, mask, k) for k in ks]))
  rows.append(average_precision(scores, labels, mask)[None])
  return jnp.concatenate(rows, 0)
