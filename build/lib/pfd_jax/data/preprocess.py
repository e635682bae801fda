"""The paper's preprocessing (section 4.1, appendix A.1), each step a pure function over flat groups.

Order used by :func:`pfd_jax.data.prepare`: filter groups -> (optional query-level min-max) -> log1p ->
Gumbel binary labels (Eq. 2) -> regular / privileged split by |corr(feature, y)| on the training split.
"""
from __future__ import annotations

import dataclasses

from typing import Optional

import numpy as np

from pfd_jax.data.groups import DataError, Groups, group_any
from pfd_jax.data.labels import document_gumbel, gumbel_labels  # noqa: F401 (pfd_jax.data.preprocess's API)


def filter_groups(g: Groups, *, min_docs: int = 10, require_positive: bool = True) -> Groups:
  """Drops groups with fewer than `min_docs` documents or (if asked) no document with rel > 0."""
  keep = g.sizes >= min_docs
  if require_positive:
    keep &= group_any(g.rel > 0, g.offsets)
  return g.take(np.flatnonzero(keep))


def log1p_transform(x: np.ndarray, block: int = 1 << 16) -> np.ndarray:
  """sign(x) * log(1 + |x|), elementwise (appendix A.1), f32; a block of rows at a time, so that memory holds the
  result and one block's temporaries rather than four copies of x (the bits are the whole expression's)."""
  out = np.empty(x.shape, np.float32)
  for start in range(0, x.shape[0], block):
    xb = x[start:start + block]
    out[start:start + block] = np.sign(xb) * np.log1p(np.abs(xb))
  return out


def query_level_minmax(x: np.ndarray, offsets: np.ndarray) -> np.ndarray:
  """LETOR's QueryLevelNorm: each feature scaled to [0, 1] inside each query; constant -> 0."""
  starts = offsets[:-1]
  nonempty = np.diff(offsets) > 0
  lo = np.minimum.reduceat(x, starts[nonempty], axis=0)
  hi = np.maximum.reduceat(x, starts[nonempty], axis=0)
  rep = np.diff(offsets)[nonempty]
  lo, hi = np.repeat(lo, rep, axis=0), np.repeat(hi, rep, axis=0)
  span = hi - lo
  return np.where(span > 0, (x - lo) / np.where(span > 0, span, 1), 0).astype(np.float32)


def transform_features(x: np.ndarray, offsets: np.ndarray, *, log1p: bool = True,
                       query_norm: bool = False) -> np.ndarray:
  """The feature transforms of a recipe, in order: (query-level min-max), then (log1p).

  Both act column by column, so selecting columns before or after gives the same bits (a saved model
  transforms only the columns it reads).
  """
  if query_norm:
    x = query_level_minmax(x, offsets)
  if log1p:
    x = log1p_transform(x)
  return x


def draw_gumbel(rng: np.random.Generator, n: int):
  """Two independent standard Gumbel vectors (G0, G1), f32[n] each: G = -log(-log U)."""
  g = rng.gumbel(size=(2, n)).astype(np.float32)
  return g[0], g[1]


def with_document_labels(g: Groups, seed: int, *, t: float = 4.0, tau: float = 4.8) -> Groups:
  """:func:`with_labels` with each document's draws keyed by the document (:func:`document_gumbel`), not by
  its place in a split: the labels of files, whose documents recur across folds."""
  g0, g1 = document_gumbel(seed, g.qid[g.group_index], g.position)
  return dataclasses.replace(g, y=gumbel_labels(g.rel, g0, g1, t=t, tau=tau), g0=g0, g1=g1)


def with_labels(g: Groups, rng: np.random.Generator, *, t: float = 4.0, tau: float = 4.8) -> Groups:
  """Draws G0, G1 per document and sets y by Eq. 2, keeping the draws in the result."""
  g0, g1 = draw_gumbel(rng, g.num_docs)
  return dataclasses.replace(g, y=gumbel_labels(g.rel, g0, g1, t=t, tau=tau), g0=g0, g1=g1)


def with_labels_at(g: Groups, seed_seq, start: int, total: int, *, t: float = 4.0, tau: float = 4.8) -> Groups:
  """:func:`with_labels` for documents start..start+N-1 of a split of `total` documents whose generator is
  ``np.random.default_rng(seed_seq)``: the same draws that generator gives those documents (PCG64 advanced
  to their positions), so a process holding a share of the split labels it as the whole-split run does.

  Exact as long as each Gumbel draw consumes one 64-bit output, i.e. unless a uniform draw is exactly 0
  (numpy then redraws; probability 2^-53 per document)."""
  def draws(skip: int, n: int):
    bg = np.random.PCG64(np.random.SeedSequence(seed_seq))
    bg.advance(skip)
    return np.random.Generator(bg).gumbel(size=n).astype(np.float32)
  n = g.num_docs
  g0, g1 = draws(start, n), draws(total + start, n)  # draw_gumbel's [2, total]: row 0 then row 1
  return dataclasses.replace(g, y=gumbel_labels(g.rel, g0, g1, t=t, tau=tau), g0=g0, g1=g1)


def file_labels(rel: np.ndarray, positive_grade: Optional[float] = None, where: str = "") -> np.ndarray:
  """Binary training labels from a file's own labels: 0/1 as they are, else y = 1[rel >= positive_grade].

  Graded labels without `positive_grade` are refused: which grade counts as a positive (a purchase, a
  'relevant' judgement) is the user's decision, never a silent default.
  """
  if positive_grade is not None:
    return (rel >= positive_grade).astype(np.float32)
  grades = np.unique(rel)
  if not np.isin(grades, (0.0, 1.0)).all():
    shown = ", ".join(f"{g:g}" for g in grades[:8]) + (", ..." if grades.size > 8 else "")
    raise DataError(f"{where}labels are graded ({shown}), not 0/1: name the lowest positive grade with "
                     "--positive_grade=g (y = 1[label >= g])")
  return rel.astype(np.float32)


def positive_groups(g: Groups) -> np.ndarray:
  """bool[Q]: groups with at least one y = 1 (the paper's positive query groups)."""
  if g.y is None:
    raise ValueError("labels y have not been generated")
  return group_any(g.y, g.offsets)


def abs_correlation(x: np.ndarray, y: np.ndarray, chunk: int = 1 << 16, comm=None) -> np.ndarray:
  """|Pearson correlation| of every column of x with y, over real documents; constant columns -> 0.

  Centred sums accumulated in float64 over row chunks (no float64 copy of a Web30k-sized x). With `comm`
  (:class:`pfd_jax.distributed.Comm`), x and y are this process's rows and every sum is over all processes.
  """
  single = comm is None or comm.count == 1
  total = (lambda a: a) if single else comm.sum
  y = y.astype(np.float64)
  mx = np.zeros(x.shape[1])
  for i in range(0, x.shape[0], chunk):
    mx += x[i:i + chunk].sum(0, dtype=np.float64)
  if single:
    mx /= max(x.shape[0], 1)
    yc = y - y.mean()
  else:
    n = max(float(comm.sum(np.float64(x.shape[0]))), 1.0)
    mx = comm.sum(mx) / n
    yc = y - comm.sum(y.sum()) / n
  sxy = np.zeros(x.shape[1])
  sxx = np.zeros(x.shape[1])
  for i in range(0, x.shape[0], chunk):
    xc = x[i:i + chunk].astype(np.float64) - mx
    sxy += yc[i:i + chunk] @ xc
    sxx += (xc * xc).sum(0)
  denom = np.sqrt(total(sxx) * total(yc @ yc))
  sxy = total(sxy)
  ok = denom > 1e-12 * max(float(denom.max(initial=0)), 1.0)
  return np.abs(np.where(ok, sxy / np.where(ok, denom, 1), 0.0))


def privileged_columns(train: Groups, k: int, comm=None) -> np.ndarray:
  """Indices of the k columns most correlated (|Pearson|) with y on the training split, most first.

  Ties are broken by column index (stable sort) so the choice is deterministic. comm: the training split is
  spread over processes (:func:`abs_correlation`).
  """
  if not 0 <= k <= train.x.shape[1]:
    raise ValueError(f"num_privileged={k} must be in [0, {train.x.shape[1]}]")
  corr = abs_correlation(train.x, train.y, comm=comm)
  return np.argsort(-corr, kind="stable")[:k]


def split_features(g: Groups, privileged: np.ndarray, regular: Optional[np.ndarray] = None) -> Groups:
  """Moves the columns `privileged` from x to z (z keeps the given column order); x keeps the columns `regular`
  (default: every other column)."""
  regular = np.setdiff1d(np.arange(g.x.shape[1]), privileged) if regular is None else regular
  return dataclasses.replace(g, x=np.ascontiguousarray(g.x[:, regular]),
                             z=np.ascontiguousarray(g.x[:, privileged]))


PLACEBO_MODES = ("query", "split")


def permute_privileged(g: Groups, rng: np.random.Generator, within: str = "query") -> Groups:
  """The placebo control's data: z's rows permuted across documents, x, y and everything else kept.

  within='query': each document gets the privileged vector of a random document of its own query, so every
  query keeps its multiset of z rows (and, with query-level min-max, the very values a query-normalised file
  would give); the within-query link between z and the label, the only one a ranking loss can use, is broken.
  within='split': a random document of the whole split (also breaks query-level differences in z). Whole rows
  move, so the joint distribution of the privileged columns is kept; only their link to x and y is broken.
  """
  if g.z is None:
    raise ValueError("the placebo control permutes the privileged features z: this split has none")
  if within not in PLACEBO_MODES:
    raise ValueError(f"within must be one of {PLACEBO_MODES}, got {within!r}")
  draw = rng.random(g.num_docs)
  perm = np.argsort(draw, kind="stable") if within == "split" else np.lexsort((draw, g.group_index))
  return dataclasses.replace(g, z=g.z[perm])
