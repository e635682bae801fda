"""The PFD search at a practitioner's size on constructed folders (_folder): its error on null folders
(tests/test_search_null.py) and its stated power on gain folders (tests/test_search_gain.py), two files so that
the slow tier's two workers run them side by side (each is some forty searches)."""
import jax
import numpy as np

from pfd_jax.data.datasets import Dataset
from pfd_jax.data.groups import Groups
from pfd_jax.training.device import to_device
from pfd_jax.training import TrainConfig

# The search as table2 runs it: 2 screening seeds, patience 10, two stages, 3 cross-fitted folds.
CFG = TrainConfig(epochs=30, hidden=16, layers=3, select_on="vali", batch_size=25, lr=1e-2, lr_halve_every=10, ks=(8,))
OPTS = dict(seeds=2, patience=10, refine=1, folds=3)
FOLDERS = 10  # re-drawn folders of each kind


def keys():
  return jax.random.split(jax.random.PRNGKey(0), 2)


def device(d):
  return to_device(d, 1)


def folder(seed: int, gain: bool) -> Dataset:
  """A constructed practitioner folder: 300 training and 70 validation lists, 40 regular features x, relevance
  rel = x'w + h (h hidden from x, sd 1), labels y ~ Bernoulli(sigmoid(3 (rel - tau))), two privileged columns.
  gain: lists of 24 documents at tau 3.6 (about 15% of the lists hold a positive: the teacher's few labelled groups,
  the student's many others, Theorem 2's n and m), z[0] = rel + N(0, 0.2^2) (it tells the hidden h), z[1] noise;
  measured on 2000 test lists (3 draws x 4 seeds, best epoch on test): the student of z[0] +6.9% over
  no-distillation, of both +7.6%, of the noise alone +3.7% (self-distillation's share of the unlabelled lists).
  Otherwise (the null): lists of 12 at tau 1 (nearly every list holds a positive: no unlabelled groups), both
  columns noise; measured the same way, +0.1% to +0.4%."""
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

  return Dataset(name="constructed", splits={"train": split(300), "vali": split(70)},
                 privileged=np.array([d_x, d_x + 1]), config=dict(seed=seed, gain=gain))
