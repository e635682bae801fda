"""Flat query groups: the file-side representation every preprocessing step works on.

A split is stored flat (one row per document) with group offsets, so that no statistic can ever see
padding: documents of query ``q`` are rows ``offsets[q]:offsets[q + 1]``. Padding happens only at the
end, in :mod:`pfd_jax.data.padding`, when arrays go to the device.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Optional

import numpy as np


class DataError(ValueError):
  """Bad input data (a malformed file, a label or split that cannot serve the run): the message names the
  file and line, or the split and the settings, so that the user can fix it. Drivers print it as one line."""


@dataclasses.dataclass(frozen=True)
class Groups:
  """One split of a ranking dataset, flat.

  Attributes:
    x: f32[N, Dx] regular features (all features before the privileged split).
    rel: f32[N] graded relevance from the file (None for a serving file without labels).
    qid: i64[Q] query ids, in file order.
    offsets: i64[Q + 1] group boundaries; group q is rows offsets[q]:offsets[q+1].
    z: f32[N, Dz] privileged features, or None before the split.
    y: f32[N] binary training label (Eq. 2), or None before label generation.
    g0, g1: f32[N] the Gumbel draws behind y (kept so a synthetic privileged feature can reuse them).
  """
  x: np.ndarray
  rel: Optional[np.ndarray]
  qid: np.ndarray
  offsets: np.ndarray
  z: Optional[np.ndarray] = None
  y: Optional[np.ndarray] = None
  g0: Optional[np.ndarray] = None
  g1: Optional[np.ndarray] = None

  def __post_init__(self):
    n = self.x.shape[0]
    if self.offsets.shape != (self.qid.shape[0] + 1,):
      raise ValueError(f"offsets must have Q+1={self.qid.shape[0] + 1} entries, got {self.offsets.shape}")
    if self.offsets[0] != 0 or self.offsets[-1] != n or np.any(np.diff(self.offsets) < 0):
      raise ValueError("offsets must start at 0, end at N and be non-decreasing")
    for name in ("rel", "y", "g0", "g1", "z"):
      a = getattr(self, name)
      if a is not None and a.shape[0] != n:
        raise ValueError(f"{name} has {a.shape[0]} rows, x has {n}")

  @property
  def num_queries(self) -> int:
    return int(self.qid.shape[0])

  @property
  def num_docs(self) -> int:
    return int(self.x.shape[0])

  @property
  def sizes(self) -> np.ndarray:
    """i64[Q] documents per query."""
    return np.diff(self.offsets)

  @property
  def group_index(self) -> np.ndarray:
    """i64[N] the query index (0..Q-1) of every document."""
    return np.repeat(np.arange(self.num_queries), self.sizes)

  @property
  def position(self) -> np.ndarray:
    """i64[N] every document's position within its query (0-based)."""
    return np.arange(self.num_docs) - np.repeat(self.offsets[:-1], self.sizes)

  def per_doc_fields(self) -> Dict[str, np.ndarray]:
    return {k: getattr(self, k) for k in ("x", "rel", "z", "y", "g0", "g1") if getattr(self, k) is not None}

  def rows(self, query_index: np.ndarray) -> np.ndarray:
    """i64[n]: the document rows of the groups `query_index`, group after group in that order."""
    query_index = np.asarray(query_index, dtype=np.int64)
    sizes = self.sizes[query_index]
    starts = self.offsets[:-1][query_index]
    return (np.repeat(starts - np.concatenate([[0], np.cumsum(sizes)[:-1]]), sizes)
            + np.arange(sizes.sum())) if sizes.size else np.zeros(0, np.int64)

  def take(self, query_index: np.ndarray) -> "Groups":
    """The groups `query_index` (indices into 0..Q-1, in that order), every per-document field kept."""
    query_index = np.asarray(query_index, dtype=np.int64)
    sizes = self.sizes[query_index]
    rows = self.rows(query_index)
    fields = {k: v[rows] for k, v in self.per_doc_fields().items()}
    return Groups(qid=self.qid[query_index], offsets=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
                  **fields)


def group_any(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
  """bool[Q]: whether any document of each group has a non-zero value (empty groups give False)."""
  counts = np.add.reduceat(np.asarray(values != 0, np.int64), offsets[:-1]) if values.size else np.zeros(0)
  counts = np.where(np.diff(offsets) > 0, counts, 0)  # reduceat returns values[i] for empty groups
  return counts > 0


# A dataset's splits by name ({"train": Groups, "vali": ..., "test": ...}).
Splits = Dict[str, Groups]
