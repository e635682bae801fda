"""Flat groups -> padded ``[Q, L, ...]`` arrays in a few length buckets.

One padded array for a whole split wastes most of its slots on MSLR-like data (mean 120 documents, max
over 1000). Queries are therefore cut into at most ``max_buckets`` buckets of contiguous lengths, each padded
to its own longest query, and the cut points are chosen by dynamic programming to minimise the number of
padded slots (optimal for the given number of buckets, not a fixed geometric grid). Each bucket compiles
its own shapes once.
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import numpy as np

from pfd_jax.data.groups import Groups


@dataclasses.dataclass(frozen=True)
class Padded:
  """One length bucket of padded query groups (see the array conventions in the README).

  x: f32[Q, L, Dx]; z: f32[Q, L, Dz] or None; rel, y: f32[Q, L] (y None before labels);
  mask: bool[Q, L] True on real documents; qid: i64[Q]; index: i64[Q] positions of these groups in
  the flat split they came from, so per-group results can be mapped back.
  """
  x: np.ndarray
  z: Optional[np.ndarray]
  rel: np.ndarray
  y: Optional[np.ndarray]
  mask: np.ndarray
  qid: np.ndarray
  index: np.ndarray

  @property
  def list_size(self) -> int:
    return int(self.mask.shape[1])


def bucket_cuts(sizes: np.ndarray, max_buckets: int) -> np.ndarray:
  """Upper length bounds (inclusive) of at most `max_buckets` buckets minimising padded slots.

  Exact dynamic programme over the distinct lengths U with counts c: a bucket holding lengths
  U[i..j] costs U[j] * sum(c[i..j]) slots.
  """
  if max_buckets < 1:
    raise ValueError(f"max_buckets must be >= 1, got {max_buckets}")
  lengths, counts = np.unique(sizes, return_counts=True)
  n = lengths.size
  k_max = min(max_buckets, n)
  cum = np.concatenate([[0], np.cumsum(counts)]).astype(np.float64)
  i = np.arange(n)[:, None]
  j = np.arange(n)[None, :]
  seg = np.where(i <= j, lengths[None, :] * (cum[1:][None, :] - cum[:-1][:, None]), np.inf)  # [i, j]
  cost = [seg[0]]  # cost[k-1][j]: lengths[0..j] in exactly k buckets
  start = [None]  # start[k-1][j]: first length index of the last of those k buckets
  for _ in range(1, k_max):
    prev = np.concatenate([[np.inf], cost[-1][:-1]])  # prev[i] = cost of lengths[0..i-1], one bucket fewer
    total = prev[:, None] + seg
    arg = np.argmin(total, axis=0)
    cost.append(total[arg, np.arange(n)])
    start.append(arg)
  k = int(np.argmin([c[-1] for c in cost]))  # argmin takes the fewest buckets on ties
  cuts, j = [], n - 1
  while True:
    cuts.append(lengths[j])
    if k == 0:
      break
    j = start[k][j] - 1
    k -= 1
  return np.array(sorted(cuts), dtype=np.int64)


def pad(g: Groups, query_index: np.ndarray, list_size: Optional[int] = None) -> Padded:
  """Pads the groups `query_index` of `g` to `list_size` (default: their longest) documents."""
  query_index = np.asarray(query_index, np.int64)
  sizes = g.sizes[query_index]
  size = int(sizes.max(initial=0)) if list_size is None else int(list_size)
  if sizes.size and sizes.max() > size:
    raise ValueError(f"list_size={size} is shorter than a group of {sizes.max()} documents")
  q = query_index.size
  mask = np.arange(size)[None, :] < sizes[:, None]
  rows = (g.offsets[query_index][:, None] + np.arange(size)[None, :])[mask]

  def fill(a):
    if a is None:
      return None
    out = np.zeros((q, size) + a.shape[1:], a.dtype)
    out[mask] = a[rows]
    return out

  return Padded(x=fill(g.x), z=fill(g.z), rel=fill(g.rel), y=fill(g.y), mask=mask,
                qid=g.qid[query_index], index=query_index)


def bucketize(g: Groups, max_buckets: int = 8, query_index: Optional[np.ndarray] = None, comm=None) -> list:
  """Pads groups (all, or `query_index`) into at most `max_buckets` length buckets, shortest first.

  comm (:class:`pfd_jax.distributed.Comm`): the groups are this process's share; the buckets' lengths are
  those of all processes' groups together (what one process would choose for the whole split), and every
  bucket is returned, empty or not, so that bucket b has one shape on every process."""
  idx = np.arange(g.num_queries) if query_index is None else np.asarray(query_index, np.int64)
  if comm is not None and comm.count > 1:
    everyone = comm.concat(g.sizes[idx])
    if everyone.size == 0:
      return []
    cuts = bucket_cuts(everyone, max_buckets)
    which = np.searchsorted(cuts, g.sizes[idx])
    return [pad(g, idx[which == b], cuts[b]) for b in range(len(cuts))]
  if idx.size == 0:
    return []
  sizes = g.sizes[idx]
  cuts = bucket_cuts(sizes, max_buckets)
  which = np.searchsorted(cuts, sizes)  # bucket of each group
  return [pad(g, idx[which == b], cuts[b]) for b in range(len(cuts)) if np.any(which == b)]


def padded_slots(sizes: np.ndarray, max_buckets: int) -> int:
  """The document slots :func:`bucketize` pads groups of these sizes into (each group its bucket's length)."""
  sizes = np.asarray(sizes, np.int64)
  if sizes.size == 0:
    return 0
  cuts = bucket_cuts(sizes, max_buckets)
  return int(cuts[np.searchsorted(cuts, sizes)].sum())


def padding_ratio(buckets: Sequence[Padded]) -> float:
  """Padded slots / real documents over the buckets (1.0 means no padding)."""
  slots = sum(b.mask.size for b in buckets)
  real = sum(int(b.mask.sum()) for b in buckets)
  return slots / max(real, 1)
