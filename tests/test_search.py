"""pfd_jax.methods.search: PFD searched on validation (issue 48): the privileged subsets, the column strengths,
the masks, and a search that reads nothing of test and trains each candidate as its own run would."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import TINY
from experiments.framework import setup
from pfd_jax.data.datasets import Dataset
from pfd_jax.methods import distill, search
from pfd_jax.ops import losses
from pfd_jax.training import TrainConfig
from pfd_jax.training.evaluation import per_list_ndcg


def _dataset():
  """TINY's synthetic data with two privileged columns: a copy of the label and a noisy copy of the relevance."""
  ds = setup.load_dataset(TINY.data)
  rng = np.random.default_rng(0)
  cols = lambda g: np.stack([g.y, g.rel + 0.5 * rng.normal(size=g.rel.shape)], 1).astype(np.float32)
  return Dataset(name=ds.name, splits={s: dataclasses.replace(g, z=cols(g)) for s, g in ds.splits.items()},
                 privileged=ds.privileged, config=ds.config)


def test_subsets_strengths_and_masks():
  assert search.subsets([2, 0, 1]) == ((0, 1, 2), (2,), (0,), (1,), (0, 1))  # all; each alone; minus the strongest
  assert search.subsets([1, 0]) == ((0, 1), (1,), (0,))  # all but the strongest is the other alone: once
  assert search.subsets([3, 0, 2, 1], top=1) == ((0, 1, 2, 3), (3,), (0, 1, 2))
  ds = _dataset()
  g = ds["train"]
  want = [abs(np.corrcoef(g.z[:, j].astype(np.float64), g.y.astype(np.float64))[0, 1]) for j in range(2)]
  np.testing.assert_allclose(search.column_strength(ds), want, rtol=1e-12)
  assert search.column_strength(ds)[0] == pytest.approx(1.0)  # the copy of the label
  m = search.masked(ds, (1,))
  for s in ds.splits:
    assert np.all(m[s].z[:, 0] == 0) and np.array_equal(m[s].z[:, 1], ds[s].z[:, 1])
  # the teacher's softening: sigmoid(t / T); T = 1 is the paper's transform itself
  t = jnp.linspace(-6, 6, 13)
  np.testing.assert_allclose(losses.get_transform("sigmoid", temperature=3.0)(t), 1 / (1 + np.exp(-np.linspace(
      -6, 6, 13) / 3.0)), rtol=1e-6)
  assert losses.get_transform("sigmoid") is losses.transform_sigmoid


def test_search_reads_no_test_label_and_trains_each_candidate_as_its_own_run():
  """Nested: the same choice and the same bits of every candidate's validation lists when the test labels are
  shuffled. Vmapped: a candidate's students, trained side by side in one program, equal the separate run with
  its alpha and temperature bit for bit. No distillation is a candidate; the choice is tied with the best."""
  ds = _dataset()
  cfg = TrainConfig(epochs=2, hidden=16, layers=3, select_on="vali")
  keys = jax.random.split(jax.random.PRNGKey(0), 2)
  dev = lambda d: distill.to_device(d, 2)
  kw = dict(alphas=(0.5,), temperatures=(1.0, 3.0))
  res = search.search(keys, cfg, ds, dev, **kw)
  assert len(res.lists) == 1 + 3 * 2 and search.Candidate() in res.lists  # 3 subsets x 2 temperatures
  assert res.choice["chosen"] in res.choice["within"] and res.choice["best"] in res.choice["within"]
  rng = np.random.default_rng(1)
  shuffled = dict(ds.splits, test=dataclasses.replace(ds["test"], y=rng.permutation(ds["test"].y)))
  again = search.search(keys, cfg, Dataset(name=ds.name, splits=shuffled, privileged=ds.privileged,
                                           config=ds.config), dev, **kw)
  assert again.choice["chosen"] == res.choice["chosen"]
  for c, v in res.lists.items():
    np.testing.assert_array_equal(again.lists[c], v)
  one = search.Candidate((1,), 0.5, 3.0)
  d = dev(search.masked(ds, one.columns))
  teacher = distill.train_on_data(keys, cfg, d, "xz")
  alone = distill.train_student(keys, dataclasses.replace(cfg, alpha=0.5, temperature=3.0), d,
                                distill.teacher_targets(cfg, [(teacher, "xz")], d))
  lists, valid = per_list_ndcg(cfg, alone.params, d.eval_sets["vali"], "x")
  np.testing.assert_array_equal(lists.mean(0)[valid], res.lists[one])
