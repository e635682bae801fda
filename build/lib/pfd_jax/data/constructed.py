"""Constructed practitioner folders: a team's small LETOR folder whose privileged columns carry a known amount, for
measuring the PFD search (:mod:`pfd_jax.methods.search`) where the truth is known: its error on null folders, its
power and its bias on folders with a planted column."""
from __future__ import annotations

import numpy as np

from pfd_jax.data.datasets import Dataset
from pfd_jax.data.groups import Groups


def folder(seed: int, gain: bool, test: int = 0) -> Dataset:
  """A constructed practitioner folder: 300 training and 70 validation lists (and `test` fresh lists, none by
  default), 40 regular features x, relevance rel = x'w + h (h hidden from x, sd 1), labels y ~
  Bernoulli(sigmoid(3 (rel - tau))), two privileged columns.
  gain: lists of 24 documents at tau 3.6 (about 15% of the lists hold a positive: the teacher's few labelled groups,
  the student's many others, Theorem 2's n and m), z[0] = rel + N(0, 0.2^2) (it tells the hidden h), z[1] noise;
  measured on 2000 test lists (3 draws x 4 seeds, best epoch on test): the student of z[0] +6.9% over
  no-distillation, of both +7.6%, of the noise alone +3.7% (self-distillation's share of the unlabelled lists).
  Otherwise (the null): lists of 12 at tau 1 (nearly every list holds a positive: no unlabelled groups), both
  columns noise; measured the same way, +0.1% to +0.4%. The fresh lists are drawn after the others, so a folder's
  training and validation lists keep their bits whatever `test` is."""
  rng = np.random.default_rng(seed)
  docs, tau, d_x = (24, 3.6, 40) if gain else (12, 1.0, 40)
  w = rng.normal(size=d_x) / np.sqrt(d_x)

  def split(q):
    n = q * docs
    x = rng.normal(size=(n, d_x)).astype(np.float32)
    rel = x @ w + rng.normal(size=n)
    y = (rng.random(n) < 1 / (1 + np.exp(-3 * (rel - tau)))).astype(np.float32)
    z0 = rel + 0.2 * rng.normal(size=n) if gain else rng.normal(size=n)
    return Groups(qid=np.arange(q), offsets=np.arange(q + 1, dtype=np.int64) * docs, x=x,
                  rel=rel.astype(np.float32), z=np.stack([z0, rng.normal(size=n)], 1).astype(np.float32), y=y)

  splits = {"train": split(300), "vali": split(70)}
  if test:
    splits["test"] = split(test)
  return Dataset(name="constructed", splits=splits, privileged=np.array([d_x, d_x + 1]),
                 config=dict(seed=seed, gain=gain))
