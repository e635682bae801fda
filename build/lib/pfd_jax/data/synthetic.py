"""The embedded default dataset: a seeded synthetic LTR generator shaped like MSLR-WEB30K.

Generative model (every draw from one ``numpy.random.Generator`` seeded by ``seed``):

* Query q has ``n_q`` documents, ``n_q = clip(round(LogNormal(log(mean_docs) - s^2/2, s)), 2, max_docs)``
  with s = 0.6 (mean ``mean_docs``, long right tail like MSLR's) and a query effect ``c_q ~ N(0, 0.5^2)``.
* Document i has K = 8 latent factors ``u_i ~ N(0, I_K)`` and latent relevance
  ``a_i = u_i . beta + c_q + e_i``, ``beta = [2, 1.5, 1, .8, .6, .5, .4, .3]``, ``e_i ~ N(0, 0.7^2)`` (noise no
  feature sees). Graded relevance ``r_i in {0..4}`` thresholds ``a_i`` at the standard-normal quantiles giving
  grade shares ~ [50, 30, 13, 5, 2] % (MSLR-like: grade 4 rare).
* Feature j observes one factor ``k_j`` with loading ``lam_j``: ``f_ij = lam_j u_ik + 0.15 u_ik' +
  sqrt(1 - lam_j^2) eps_ij`` (k' a random other factor, a weak cross-talk). The two strongest factors are
  observed by only ``num_strong`` (default 24) features with lam in [0.6, 0.95]; the others observe factors
  2..7 with lam in [0.05, 0.8], and 10% are pure noise. So a few features are far more predictive than the
  rest, and after the paper's privileged split (top-k by |corr| with y) the privileged features carry
  information (factors 0, 1) that the regular ones see only through cross-talk: the paper's setting.
* Half of the features are count-like, ``round(exp(1.5 f + 2))`` (heavy-tailed, non-negative, like LETOR's
  tf / pagerank columns, so the log1p transform matters); the others are ``f`` itself.

Nothing is written anywhere. ``scale`` multiplies the query counts: the default (scale=1) is sized so the
Table 2 protocol runs in minutes on 2 CPU cores; ``web30k_scale()`` gives MSLR-WEB30K fold sizes
(18,919 / 6,306 / 6,306 queries before filtering, mean ~124 documents, 136 features).
"""
from __future__ import annotations

from typing import Any, Dict

import numpy as np

from pfd_jax.data.groups import Groups, Splits

_BETA = np.array([2.0, 1.5, 1.0, 0.8, 0.6, 0.5, 0.4, 0.3])
_GRADE_Z = np.array([0.0, 0.842, 1.476, 2.054])  # N(0,1) quantiles at 50, 80, 93, 98 %
QID_OFFSET = {"train": 0, "vali": 10 ** 6, "test": 2 * 10 ** 6}  # each split's first query id


def _sizes(rng, num_queries, mean_docs, max_docs):
  s = 0.6
  return np.clip(np.round(rng.lognormal(np.log(mean_docs) - s * s / 2, s, num_queries)), 2, max_docs).astype(np.int64)


def _split(rng, num_queries, mean_docs, max_docs, loading, other, count_like):
  sizes = _sizes(rng, num_queries, mean_docs, max_docs)
  n = int(sizes.sum())
  k = _BETA.size
  c = np.repeat(rng.normal(0, 0.5, num_queries), sizes)
  u = rng.normal(size=(n, k)).astype(np.float32)
  a = u @ _BETA + c + rng.normal(0, 0.7, n)
  a_std = np.sqrt((_BETA ** 2).sum() + 0.25 + 0.49)
  rel = np.searchsorted(_GRADE_Z * a_std, a).astype(np.float32)
  lam, fac = loading
  noise = rng.normal(size=(n, lam.size)).astype(np.float32)
  f = u[:, fac] * lam + 0.15 * u[:, other] + np.sqrt(1 - lam ** 2) * noise
  f[:, count_like] = np.round(np.exp(np.clip(1.5 * f[:, count_like] + 2, None, 30)))
  offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
  return f.astype(np.float32), rel, offsets


def generate(*, num_queries=(400, 200, 600), mean_docs: float = 40.0, max_docs: int = 1500,
             num_features: int = 136, num_strong: int = 24, scale: float = 1.0, seed: int = 0) -> Splits:
  """Raw splits {'train', 'vali', 'test'} -> :class:`Groups` (before any preprocessing).

  Args:
    num_queries: queries in train / vali / test before `scale`.
    mean_docs: mean documents per query.
    max_docs: longest list.
    num_features: feature columns (>= num_strong).
    num_strong: features observing the two strongest latent factors.
    scale: multiplies the query counts (web30k_scale() gives MSLR-WEB30K size).
    seed: the generator's seed; the same seed gives the same bits.
  """
  if num_features < num_strong:
    raise ValueError(f"num_features={num_features} must be >= num_strong={num_strong}")
  rng = np.random.default_rng(seed)
  lam, fac, other, count_like = _design(rng, num_features, num_strong)
  out = {}
  for name, nq in zip(("train", "vali", "test"), num_queries):
    nq = max(int(round(nq * scale)), 1)
    x, rel, offsets = _split(rng, nq, mean_docs, max_docs, (lam.astype(np.float32), fac), other, count_like)
    qid = np.arange(nq, dtype=np.int64) + QID_OFFSET[name]
    out[name] = Groups(x=x, rel=rel, qid=qid, offsets=offsets)
  return out


def _design(rng, num_features, num_strong):
  """The feature design shared by all splits: (loadings, factors, cross-talk factors, count-like columns)."""
  k = _BETA.size
  fac = np.concatenate([rng.integers(0, 2, num_strong), rng.integers(2, k, num_features - num_strong)])
  lam = np.concatenate([rng.uniform(0.6, 0.95, num_strong), rng.uniform(0.05, 0.8, num_features - num_strong)])
  noise_cols = rng.choice(np.arange(num_strong, num_features), size=(num_features - num_strong) // 10,
                          replace=False)
  lam[noise_cols] = 0.0
  other = (fac + rng.integers(1, k, num_features)) % k
  perm = rng.permutation(num_features)  # strong features are not simply the first columns
  fac, lam, other = fac[perm], lam[perm], other[perm]
  count_like = rng.random(num_features) < 0.5
  return lam, fac, other, count_like


def chunk_sizes(num_queries: int, *, chunk: int = 2000, mean_docs: float = 124.0, max_docs: int = 1300,
                seed: int = 0, stream: tuple = (), chunks=None) -> np.ndarray:
  """The list sizes :func:`generate_chunks` will give (the same arguments), without generating the documents."""
  starts = list(range(0, num_queries, chunk))
  return np.concatenate([np.zeros(0, np.int64)] + [
      _sizes(np.random.default_rng([seed, *stream, c]), min(chunk, num_queries - starts[c]), mean_docs, max_docs)
      for c in (range(len(starts)) if chunks is None else chunks)])


def generate_chunks(num_queries: int, *, chunk: int = 2000, mean_docs: float = 124.0, max_docs: int = 1300,
                    num_features: int = 136, num_strong: int = 24, seed: int = 0, stream: tuple = (),
                    chunks=None, qid_offset: int = 0):
  """A split of any size, `chunk` queries at a time (raw :class:`Groups`), in bounded memory: the same
  generative model and feature design as :func:`generate` (seed `seed`), each chunk drawn from its own
  generator ``default_rng([seed, *stream, chunk index])`` (so not the bits of :func:`generate`, and any chunk
  can be drawn without the others). chunks: the chunk indices to draw (default: all, in order)."""
  lam, fac, other, count_like = _design(np.random.default_rng(seed), num_features, num_strong)
  starts = list(range(0, num_queries, chunk))
  for c in range(len(starts)) if chunks is None else chunks:
    a = starts[c]
    nq = min(chunk, num_queries - a)
    x, rel, offsets = _split(np.random.default_rng([seed, *stream, c]), nq, mean_docs, max_docs,
                             (lam.astype(np.float32), fac), other, count_like)
    yield Groups(x=x, rel=rel, qid=np.arange(a, a + nq, dtype=np.int64) + qid_offset, offsets=offsets)


def generate_chunked(*, num_queries=(400, 200, 600), mean_docs: float = 40.0, max_docs: int = 1500,
                     num_features: int = 136, num_strong: int = 24, scale: float = 1.0, seed: int = 0,
                     chunk: int = 2000, share=(0, 1)) -> Splits:
  """Raw splits like :func:`generate`, each drawn `chunk` queries at a time from per-chunk generators
  (``default_rng([seed, split index, chunk index])``, :func:`generate_chunks`): the recipe for sizes where
  generating a split in one piece would hold several copies of it at once (Web30k: the F-wide noise, features
  and their transforms). share = (index, count): only this process's contiguous block of every split's
  chunks is drawn (its queries; the union over processes, in order, is the one-process data), so a multi-process
  run generates and holds only its share. Deterministic: the same arguments give the same bits."""
  index, count = share
  out = {}
  for i, (name, nq) in enumerate(zip(("train", "vali", "test"), num_queries)):
    nq = max(int(round(nq * scale)), 1)
    n_chunks = -(-nq // chunk)
    mine = range(n_chunks * index // count, n_chunks * (index + 1) // count)
    kw = dict(chunk=chunk, mean_docs=mean_docs, max_docs=max_docs, seed=seed, stream=(i,), chunks=mine)
    sizes = chunk_sizes(nq, **kw)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    x = np.empty((int(offsets[-1]), num_features), np.float32)  # filled in place: one chunk's work at a time
    rel, qid, q = np.empty(int(offsets[-1]), np.float32), np.empty(sizes.size, np.int64), 0
    for g in generate_chunks(nq, num_features=num_features, num_strong=num_strong,
                             qid_offset=QID_OFFSET[name], **kw):
      rows = slice(int(offsets[q]), int(offsets[q + g.num_queries]))
      x[rows], rel[rows], qid[q:q + g.num_queries] = g.x, g.rel, g.qid
      q += g.num_queries
    out[name] = Groups(x=x, rel=rel, qid=qid, offsets=offsets)
  return out


def web30k_scale() -> Dict[str, Any]:
  """Keyword arguments of :func:`generate` for MSLR-WEB30K Fold1 size (about 18k train queries x 124 docs)."""
  return dict(num_queries=(18919, 6306, 6306), mean_docs=124.0, max_docs=1300, num_features=136, scale=1.0)
