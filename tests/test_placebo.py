"""The placebo control: PFD's teacher on privileged features permuted across documents.

The permutation keeps every value (per query, or per split) and breaks the link to the label; trained end to
end, the control agrees with PFD when z carries nothing and falls behind it when z carries the label's signal.
"""
import dataclasses

import jax
import numpy as np
import pytest

from conftest import TINY
from experiments.framework import fold_data
from pfd_jax import data as data_lib
from pfd_jax.training import device
from pfd_jax.methods import distill
from pfd_jax.ops import stats
from pfd_jax import training as training_lib


@pytest.fixture(scope="module")
def tiny_ds():
  return fold_data.load_dataset(TINY.data)


def _sorted_rows(a):
  return a[np.lexsort(a.T[::-1])]


def _within_query_corr(g: data_lib.Groups, col: int) -> float:
  """corr(z - query mean of z, y - query mean of y) over the documents: the link a ranking loss can use."""
  gi = g.group_index
  def centred(v):
    return v - (np.bincount(gi, v) / g.sizes)[gi]
  return float(np.corrcoef(centred(g.z[:, col].astype(np.float64)), centred(g.y.astype(np.float64)))[0, 1])


@pytest.mark.parametrize("within", data_lib.PLACEBO_MODES)
def test_permutation_keeps_the_values_and_the_other_fields(tiny_ds, within):
  g = tiny_ds["train"]
  p = data_lib.permute_privileged(g, np.random.default_rng(0), within)
  for name in ("x", "y", "rel", "qid", "offsets"):
    np.testing.assert_array_equal(getattr(p, name), getattr(g, name))
  assert not np.array_equal(p.z, g.z)
  if within == "query":  # every query keeps its multiset of privileged rows
    for q in range(g.num_queries):
      s = slice(g.offsets[q], g.offsets[q + 1])
      np.testing.assert_array_equal(_sorted_rows(p.z[s]), _sorted_rows(g.z[s]))
  else:
    np.testing.assert_array_equal(_sorted_rows(p.z), _sorted_rows(g.z))
    # rows cross queries: the per-query sums change
    assert not np.allclose(np.add.reduceat(p.z[:, 0], g.offsets[:-1]), np.add.reduceat(g.z[:, 0], g.offsets[:-1]))


@pytest.mark.parametrize("within", data_lib.PLACEBO_MODES)
def test_permuted_privileged_feature_is_uncorrelated_with_the_label(tiny_ds, within):
  """The most label-correlated privileged column: strongly linked to y before; after permutation, the
  correlation (within queries for 'query', over the split for 'split') averages to zero over seeds."""
  g = tiny_ds["train"]
  corr = _within_query_corr if within == "query" else (
      lambda h, c: float(np.corrcoef(h.z[:, c], h.y)[0, 1]))
  col = int(np.argmax([abs(corr(g, c)) for c in range(g.z.shape[1])]))
  before = corr(g, col)
  after = np.array([corr(data_lib.permute_privileged(g, np.random.default_rng(s), within), col) for s in range(200)])
  se = after.std(ddof=1) / np.sqrt(after.size)
  assert abs(before) > 0.1
  assert abs(after.mean()) < 3 * se, (before, after.mean(), se)
  assert abs(before) > 4 * after.std(), (before, after.std())  # one permutation already breaks the link


def test_placebo_dataset_is_seeded_and_recorded(tiny_ds):
  a = data_lib.with_placebo_privileged(tiny_ds, "query", seed=3)
  b = data_lib.with_placebo_privileged(tiny_ds, "query", seed=3)
  c = data_lib.with_placebo_privileged(tiny_ds, "query", seed=4)
  for s in tiny_ds.splits:
    np.testing.assert_array_equal(a[s].z, b[s].z)
    assert not np.array_equal(a[s].z, c[s].z)
  assert a.config["placebo"] == "query" and a.config["placebo_seed"] == 3
  with pytest.raises(ValueError, match="within"):
    data_lib.permute_privileged(tiny_ds["train"], np.random.default_rng(0), "document")
  with pytest.raises(ValueError, match="placebo rows need their data"):
    distill.run_methods(None, training_lib.TrainConfig(), None, ("placebo",))


@pytest.fixture(scope="module")
def sparse_ds():
  """Half the training groups without a positive (tau 3.0, 300 queries): the unlabelled groups the student
  learns from through the teacher (Theorem 2's all-data term), where privileged information can pay."""
  return fold_data.load_dataset(dataclasses.replace(TINY.data, tau=3.0, synthetic_queries=(300, 20, 150)))


def _pfd_vs_placebo(ds: data_lib.Dataset, seeds: int = 6):
  """PFD student vs placebo student, test NDCG@8 paired by seed (the same keys), on `ds`."""
  tc = training_lib.TrainConfig(epochs=15, hidden=32, layers=3, batch_size=16)
  dd = device.to_device(ds, 2, ("test",))
  placebo = device.to_device(data_lib.with_placebo_privileged(ds, "query", 0), 2, ("test",))
  keys = jax.random.split(jax.random.PRNGKey(0), seeds)
  rows = distill.run_methods(keys, tc, dd, ("pfd", "placebo"), placebo=lambda: placebo)
  return stats.paired(rows["pfd"].best["test"][:, 0], rows["placebo"].best["test"][:, 0])


def _with_z(ds: data_lib.Dataset, make) -> data_lib.Dataset:
  return dataclasses.replace(ds, splits={s: dataclasses.replace(g, z=make(g, i)) for i, (s, g) in
                                         enumerate(ds.splits.items())})


@pytest.mark.slow
def test_pfd_equals_placebo_when_z_is_noise(sparse_ds):
  """z pure noise: both teachers see x plus i.i.d. noise of one distribution; nothing separates them (the
  paired 95% interval of the difference holds 0)."""
  noise = _with_z(sparse_ds, lambda g, i: np.random.default_rng(i).normal(size=(g.num_docs, 4)).astype(np.float32))
  c = _pfd_vs_placebo(noise)
  assert c.t_ci[0] < 0 < c.t_ci[1], c


@pytest.mark.slow
def test_pfd_beats_placebo_when_z_carries_the_label_signal(sparse_ds):
  """z = the graded relevance behind y (P(y = 1 | r) = sigmoid(t (r - tau)) exactly): the PFD teacher's
  probabilities on the unlabelled groups carry the label's signal, the placebo teacher's do not."""
  c = _pfd_vs_placebo(_with_z(sparse_ds, lambda g, i: g.rel[:, None].astype(np.float32)))
  assert c.t_ci[0] > 0, c
