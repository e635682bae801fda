"""pfd_jax.methods.search: PFD searched on validation: the privileged subsets, the column strengths,
the masks, and a search that reads nothing of test and trains each candidate as its own run would."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import TINY
from experiments.framework import setup
from pfd_jax.data.datasets import Dataset
from pfd_jax.training import device
from pfd_jax.methods import distill, search
from pfd_jax.ops import teacher
from pfd_jax.training import TrainConfig
from pfd_jax.training.evaluation import per_list_ndcg


def _dataset(queries=None, noise=0.5):
  """TINY's synthetic data (or `queries` train/vali/test queries) with two privileged columns: a copy of the
  binary label y and a noisy copy of the graded relevance, rel + N(0, noise^2)."""
  ds = setup.load_dataset(dataclasses.replace(TINY.data, synthetic_queries=queries or TINY.data.synthetic_queries))
  rng = np.random.default_rng(0)
  cols = lambda g: np.stack([g.y, g.rel + noise * rng.normal(size=g.rel.shape)], 1).astype(np.float32)
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
  np.testing.assert_allclose(teacher.get_transform("sigmoid", temperature=3.0)(t), 1 / (1 + np.exp(-np.linspace(
      -6, 6, 13) / 3.0)), rtol=1e-6)
  assert teacher.get_transform("sigmoid") is teacher.transform_sigmoid


@pytest.mark.heavy
def test_search_reads_no_test_label_and_trains_each_candidate_as_its_own_run():
  """Nested: the same choice and the same bits of every candidate's validation lists when the test labels are
  shuffled. Vmapped: a candidate's students, trained side by side in one program, equal the separate run with
  its alpha and temperature bit for bit. No distillation is a candidate; the choice is one the sequence passed."""
  ds = _dataset()
  cfg = TrainConfig(epochs=2, hidden=16, layers=3, select_on="vali")
  keys = jax.random.split(jax.random.PRNGKey(0), 2)
  dev = lambda d: device.to_device(d, 2)
  kw = dict(alphas=(0.5,), temperatures=(1.0, 3.0))
  res = search.search(keys, cfg, ds, dev, **kw)
  assert len(res.lists) == 1 + 3 * 2 and search.Candidate() in res.lists  # 3 subsets x 2 temperatures
  assert res.choice["chosen"] in [search.Candidate()] + res.choice["passed"]
  assert res.choice["order"][0] == search.Candidate((0, 1), 0.5, 1.0)  # plain PFD first
  # the whole grid at an alpha outside it: plain PFD is still a candidate, first, at half the level
  off = search.search(keys, dataclasses.replace(cfg, alpha=0.3), ds, dev, alphas=(0.5,), temperatures=(1.0,))
  assert off.choice["order"][0] == search.Candidate((0, 1), 0.3, 1.0) and off.choice["levels"][0] == 0.025
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


@pytest.mark.heavy
def test_the_cheap_search_screens_in_two_stages_on_fewer_seeds():
  """Two stages: every subset at the plain PFD setting (cfg.alpha, T = 1), then the grid for the best subset on
  validation only; screened on the first of two keys. No-distillation's screening lists are its first model's."""
  ds = _dataset()
  cfg = TrainConfig(epochs=3, hidden=16, layers=3, select_on="vali")
  keys = jax.random.split(jax.random.PRNGKey(0), 2)
  dev = lambda d: device.to_device(d, 2)
  res = search.search(keys, cfg, ds, dev, alphas=(0.2, 0.5), temperatures=(1.0, 3.0), seeds=1, patience=1, refine=1)
  plain = {c.columns: v.mean() for c, v in res.lists.items() if c.columns and (c.alpha, c.temperature) == (0.5, 1.0)}
  assert set(plain) == {(0, 1), (0,), (1,)}  # all; each alone; all but the strongest (the other alone, once)
  best = max(plain, key=plain.get)
  assert set(res.lists) == ({search.Candidate()} | {search.Candidate(c, 0.5, 1.0) for c in plain} |
                            {search.Candidate(best, a, t) for a in (0.2, 0.5) for t in (1.0, 3.0)})
  assert res.seeds == 1 and res.patience == 1
  base, valid = per_list_ndcg(cfg, res.baseline.params, dev(ds).eval_sets["vali"], "x")
  np.testing.assert_array_equal(res.lists[search.Candidate()], base[0][valid])
  assert jax.tree_util.tree_leaves(res.chosen.params)[0].shape[0] == 2  # the row: every seed


@pytest.mark.slow
@pytest.mark.long
def test_search_drops_a_copy_of_the_label_and_keeps_the_useful_column():
  """Column 0 copies the training label (|corr| 1): its teacher's targets are the labels again, no less noisy,
  and a teacher given both columns leans on it. Column 1 is rel + N(0, 0.1^2), weaker on the label
  (|corr| ~0.4, P(y = 1) = sigmoid(4 (rel - tau)) is noisy) but a teacher reading it predicts the label's
  expectation: the paper's variance reduction. With 40 training queries the student of column 1 alone must be
  chosen: validation (600 queries, 2 screening seeds) must find it better than no distillation, and its gain must be
  the largest of the candidates found better (the copy alone is tested at a quarter of the level: a gain of its
  own is not ruled out, only a larger one)."""
  ds = _dataset(queries=(40, 600, 20), noise=0.1)
  strength = search.column_strength(ds)
  assert strength[0] == pytest.approx(1.0) and strength[1] < 0.6
  cfg = TrainConfig(epochs=60, hidden=16, layers=3, select_on="vali", batch_size=8, lr=1e-2)
  keys = jax.random.split(jax.random.PRNGKey(0), 4)
  dev = lambda d: device.to_device(d, 4)
  # table2's own-data defaults: screened on 2 of the 4 seeds, patience 10, the grid for the best subset only
  res = search.search(keys, cfg, ds, dev, alphas=(0.5,), temperatures=(1.0,), seeds=2, patience=10, refine=1)
  assert set(c.columns for c in res.lists) == {(), (0, 1), (0,), (1,)}  # all; each alone; all but the copy
  assert res.candidate == search.Candidate((1,), 0.5, 1.0)
  # the fallback procedure: found better than no distillation, and the largest gain of those that were
  assert res.candidate in res.choice["passed"]
  assert res.candidate == max(res.choice["passed"], key=lambda c: res.estimates[c].diff)
  # the row is the chosen configuration trained as a PFD row is: every seed, every epoch
  d = dev(search.masked(ds, (1,)))
  teacher = distill.train_on_data(keys, cfg, d, "xz")
  alone = distill.train_student(keys, cfg, d, distill.teacher_targets(cfg, [(teacher, "xz")], d))
  np.testing.assert_array_equal(res.chosen.curves["vali"], alone.curves["vali"])


def test_the_searchs_complexity_order_is_declared():
  """Candidate.simplicity, the order the choice's 'simplest' reads: no distillation; fewer columns; at equal columns
  the setting closest to plain PFD (alpha nearest plain's, then T nearest 1, then of two alphas as near the
  larger); last the columns' indices."""
  C = search.Candidate
  order = [C(), C((0,), 0.5, 1.0), C((2,), 0.5, 1.0), C((0,), 0.5, 3.0), C((0,), 0.8, 1.0), C((0,), 0.2, 1.0),
           C((0,), 0.8, 3.0), C((0, 1), 0.5, 1.0)]
  shuffled = [order[i] for i in np.random.default_rng(0).permutation(len(order))]
  assert sorted(shuffled, key=lambda c: c.simplicity(0.5)) == order
  # plain PFD at another alpha moves the order with it
  assert sorted([C((0,), 0.5, 1.0), C((0,), 0.2, 1.0)], key=lambda c: c.simplicity(0.2))[0] == C((0,), 0.2, 1.0)


def test_the_searchs_candidates_counted_as_it_screens_them():
  """1 (no distillation) + every subset at the plain setting + the rest of the 3 x 2 alpha x temperature grid for the
  `refine` best subsets; refine None: the whole grid for every subset."""
  # 3 columns, top 4: all; each alone; all but the strongest (all but the two strongest is the third alone: once)
  assert search.SearchOptions(top=4, refine=1).candidates(3, 0.5) == 1 + 5 + 5
  assert search.SearchOptions(top=4, refine=None).candidates(3, 0.5) == 1 + 5 * 6
  assert search.SearchOptions(top=4, refine=1).candidates(3, 0.3) == 1 + 5 + 6  # alpha 0.3 adds the plain setting
  assert search.SearchOptions(top=1, refine=2).candidates(5, 0.5) == 1 + 3 + 2 * 5


def test_a_run_that_did_not_search_says_what_the_search_would_cost_and_could_show():
  """A team's run without --search: the search's candidates and programs at the mean row's seconds of the run, and
  plain PFD's smallest detectable gain over no distillation on the run's test lists at the search's first level
  (one-sided 2.5%), from the crossed seeds x lists estimate; only on file labels with validation selection."""
  from experiments import table2
  from experiments.framework import practice
  from experiments.framework.records import FoldRecord, LossRecord, RowRecord
  from pfd_jax.ops import stats
  rng = np.random.default_rng(0)
  base = rng.uniform(0.3, 0.6, size=(3, 40))
  pfd = base + 0.01 + rng.normal(0, 0.05, size=(3, 40)) + rng.normal(0, 0.01, size=(3, 1))
  row = lambda lists, s: RowRecord(best={"test": lists.mean(1, keepdims=True)}, seconds=s, seed_lists=lists,
                                   test_lists=lists.mean(0))
  fold = FoldRecord(rows={"no_distill": row(base, 10.0), "pfd_teacher": row(base, 20.0), "pfd": row(pfd, 30.0)},
                    data={"num_privileged": 3, "labels": "file"}, test_lists_valid=np.ones(40, bool))
  record, o = LossRecord(folds={"fold1": fold}), search.SearchOptions()
  cfg = {"options": {}, "train": {"select_on": "vali", "alpha": 0.5}}
  text = practice.search_offer(record, cfg, o)
  est = stats.crossed([pfd - base], base.mean())  # the reference: no distillation's mean
  assert f"not run** (--search adds the row 'PFD, searched on validation': per fold " + practice.search_cost(
      o, 3, 0.5, [10.0, 20.0, 30.0]) in text
  assert f"a smallest detectable gain of {100 * est.mde(0.8, 0.025) / est.reference:.1f}%" in text
  assert table2._options({"options": {"search_columns": 1, "search": True}}).searching() == o._replace(top=1)
  assert practice.search_offer(record, dict(cfg, options={"search": True}), o) == ""
  assert practice.search_offer(record, dict(cfg, train={"select_on": "test", "alpha": 0.5}), o) == ""
  fold.data["labels"] = "gumbel"  # the paper's protocol: no practitioner's note
  assert practice.search_offer(record, cfg, o) == ""
