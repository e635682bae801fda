"""Draws as a vmapped axis: D re-drawn datasets (each its own training and evaluation lists) x S seeds of one row
trained in one compiled program, as seeds are (``jax.jit(jax.vmap(train))``).

**The layout.** Draws differ in their lists, so a layout shared by the draws gives their arrays one shape: the
bucket lengths are cut on every draw's lists together (:func:`pfd_jax.data.padding.bucket_cuts`, as the processes
of a multi-process run cut a split they share), and bucket b holds C_b groups, the most any draw has in it: draw
d's own groups first (``counts[d, b]`` of them), then empty groups (no document, weight 0). The layout is part of
a run's recipe: a draw trained alone on the same layout gives the same models (tests/test_draws.py); on a layout
of its own it gives other batches in another order (drawn from the same distribution).

**The plan** (:func:`pfd_jax.training.program.draw_plan`): every draw takes the layout's steps in one shared
order (so the program's switch over buckets stays a switch), each seed permuting its draw's own groups of a
bucket (the empty ones last); a step holding none of a draw's groups leaves that draw's models as they were (no
Adam update, its step count included). The learning-rate schedule counts the layout's steps per epoch.

Models are laid out draw-major, ``m = d * S + s`` (keys [D * S]), so a :class:`pfd_jax.training.loop.TrainResult`
of a drawn run is S seeds of draw 0, then draw 1's, and so on.
"""
from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from pfd_jax.data.padding import bucket_cuts, pad
from pfd_jax.data.preprocess import positive_groups
from pfd_jax.ops import metrics as metrics_lib
from pfd_jax.ops.scoring import features, scoring
from pfd_jax.training.structures import by_draw, by_model


class Draws(NamedTuple):
  """The training buckets of D draws on one layout."""
  buckets: list        # per bucket, a dict of device arrays, draw axis first: x [D, C, L, F], (z), y, mask, pos
  counts: np.ndarray   # i64[D, B] draw d's groups in bucket b (its first counts[d, b] rows)

  @property
  def num_draws(self) -> int:
    return int(self.counts.shape[0])


class DrawnEvalSet(NamedTuple):
  """An evaluation split of D draws on one layout: their lists with a positive, and each draw's count of lists
  (the denominator of empty_rule='zero')."""
  buckets: list
  num_lists: np.ndarray  # i64[D]


def layout(groups: Sequence, max_buckets: int = 8, query_index: Optional[Sequence] = None) -> Dict[str, tuple]:
  """The layout D draws' groups (all, or query_index[d] of draw d) share: {cuts: the bucket lengths, capacity: each
  bucket's groups}, for :func:`stack` (a draw trained alone on the layout of a run of several)."""
  _, counts, cuts = _counts(groups, max_buckets, query_index)
  return dict(cuts=cuts, capacity=counts.max(0))


def positive(groups: Sequence) -> list:
  """Each draw's lists with a y = 1 (what an evaluation split scores)."""
  return [np.flatnonzero(positive_groups(g)) for g in groups]


def _counts(groups: Sequence, max_buckets: int, query_index: Optional[Sequence], cuts=None) -> tuple:
  """(each draw's bucket of each of its groups, counts [D, B], cuts [B]); cuts None: cut over every draw's groups."""
  index = [np.arange(g.num_queries) if query_index is None else np.asarray(query_index[d], np.int64)
           for d, g in enumerate(groups)]
  sizes = [g.sizes[i] for g, i in zip(groups, index)]
  if cuts is None:
    cuts = bucket_cuts(np.concatenate(sizes), max_buckets)
  which = [(i, np.searchsorted(cuts, s)) for i, s in zip(index, sizes)]
  counts = np.array([np.bincount(w, minlength=len(cuts)) for _, w in which], np.int64).reshape(len(groups), len(cuts))
  return which, counts, np.asarray(cuts)


def stack(groups: Sequence, max_buckets: int = 8, query_index: Optional[Sequence] = None,
          capacity: Optional[Sequence[int]] = None, cuts: Optional[np.ndarray] = None) -> tuple:
  """(host buckets: dicts of NumPy arrays [D, C_b, L_b, ...], counts [D, B], cuts [B]) of the groups of D draws
  (all, or query_index[d] of draw d) on a shared layout; `cuts` and `capacity` (at least each draw's count; a
  :func:`layout`) fix the layout instead of these draws' own."""
  which, counts, cuts = _counts(groups, max_buckets, query_index, cuts)
  cap = counts.max(0) if capacity is None else np.asarray(capacity, np.int64)
  if np.any(cap < counts):
    raise ValueError(f"capacity {list(cap)} is below a draw's groups per bucket {counts.max(0).tolist()}")
  out = []
  for b, length in enumerate(cuts):
    parts = [pad(g, i[w == b], int(length)) for g, (i, w) in zip(groups, which)]
    fields = {"x": [p.x for p in parts], "y": [p.y for p in parts], "mask": [p.mask for p in parts]}
    if parts[0].z is not None:
      fields["z"] = [p.z for p in parts]
    bucket = {k: np.stack([np.concatenate([a, np.zeros((cap[b] - a.shape[0],) + a.shape[1:], a.dtype)])
                           for a in v]) for k, v in fields.items()}
    bucket["pos"] = ((bucket["y"] * bucket["mask"]).max(-1) > 0).astype(np.float32)
    out.append(bucket)
  return out, counts, cuts


def draws(groups: Sequence, max_buckets: int = 8, query_index: Optional[Sequence] = None, **fixed) -> Draws:
  """The training buckets of D draws (:func:`stack`; `fixed`: a :func:`layout`) on the device."""
  host, counts, _ = stack(groups, max_buckets, query_index, **fixed)
  return Draws([{k: jnp.asarray(v) for k, v in b.items()} for b in host], counts)


def eval_set(groups: Sequence, max_buckets: int = 8, **fixed) -> DrawnEvalSet:
  """A :class:`DrawnEvalSet` of D draws' labelled splits (their lists with a y = 1, :func:`positive`; a layout of
  them: ``layout(groups, max_buckets, positive(groups))``), on the device."""
  host, _, _ = stack(groups, max_buckets, positive(groups), **fixed)
  return DrawnEvalSet([{k: jnp.asarray(v) for k, v in b.items() if k != "pos"} for b in host],
                      np.array([g.num_queries for g in groups], np.int64))


def scorer(cfg, es: DrawnEvalSet, view: str):
  """``fn(params [D * S]) -> [D * S, len(ks)]``: each model's mean NDCG on its own draw's lists (cfg.empty_rule)."""
  sums = jax.vmap(scoring(cfg.arch, tuple(cfg.ks)).ndcg_sums)
  triples = tuple((features(b, view), b["y"], b["mask"]) for b in es.buckets)
  d = len(es.num_lists)

  def fn(params):
    tot, cnt = sums(by_draw(params, d), triples)  # [D, S, K], [D]
    mean = metrics_lib.list_mean(tot, cnt[:, None, None], es.num_lists[:, None, None], cfg.empty_rule)
    return by_model(mean)
  return fn


def per_list_ndcg(cfg, params, es: DrawnEvalSet, view: str) -> list:
  """Per draw d, (NDCG@ks[0] of each of its lists [S, Q_d], has-a-positive [Q_d]) of D x S draw-major models, each
  scored on its own draw's lists of the layout: the lists with a positive (those an eval set holds), in layout order
  (bucket by bucket, the same for every model of a run), its empty groups dropped. One vmapped call a bucket
  whatever D is (scoring draw by draw on its own buckets compiles anew for each draw's lengths)."""
  d = len(es.num_lists)
  fn = jax.vmap(scoring(cfg.arch, tuple(cfg.ks)).per_list)
  vals, valid = [], []
  for b in es.buckets:
    vals.append(np.asarray(fn(by_draw(params, d), features(b, view), b["y"], b["mask"]))[:, :, 0])  # [D, S, C_b]
    valid.append(np.asarray(metrics_lib.has_relevant(b["y"], b["mask"])))  # [D, C_b]
  vals, valid = np.concatenate(vals, -1), np.concatenate(valid, -1)
  return [(v[:, k], np.ones(int(k.sum()), bool)) for v, k in zip(vals, valid)]


def predict(cfg, params, d: Draws, view: str) -> list:
  """Logits [D * S, C_b, L_b] per bucket: each model's scores of its own draw's groups (a teacher's, for its
  students)."""
  fn = jax.vmap(scoring(cfg.arch, tuple(cfg.ks)).predict)
  return [by_model(fn(by_draw(params, d.num_draws), features(b, view))) for b in d.buckets]


def teacher_inputs(targets, logits, bucket: Dict[str, jax.Array], draws: int):
  """The teacher term's inputs of one bucket of a drawn run: `targets` (a teaching's (logits [S, Q, L], y, mask)
  -> inputs) applied per draw to its own labels."""
  return by_model(jax.vmap(targets)(by_draw(logits, draws), bucket["y"], bucket["mask"]))
