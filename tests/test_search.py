"""pfd_jax.methods.search: PFD searched on validation: the privileged subsets, the column strengths,
the masks, and a search that reads nothing of test and trains each candidate as its own run would."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats as sps

from conftest import TINY
from experiments.framework import costing, fold_data
from pfd_jax.data.datasets import Dataset
from pfd_jax.data.preprocess import positive_groups
from pfd_jax.training import device
from pfd_jax.methods import distill, rule, search
from pfd_jax.ops import stats, teacher
from pfd_jax.training import TrainConfig
from pfd_jax.training.evaluation import per_list_ndcg


def _dataset(queries=None, noise=0.5):
  """TINY's synthetic data (or `queries` train/vali/test queries) with two privileged columns: a copy of the
  binary label y and a noisy copy of the graded relevance, rel + N(0, noise^2)."""
  ds = fold_data.load_dataset(dataclasses.replace(TINY.data, synthetic_queries=queries or TINY.data.synthetic_queries))
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
  np.testing.assert_allclose(search.column_strength(g), want, rtol=1e-12)
  assert search.column_strength(g)[0] == pytest.approx(1.0)  # the copy of the label
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
  # a screened candidate is its own run on the validation part: fitted on the training lists less the selection
  # lists, its epoch chosen on those (the part's 'vali' slot), scored on the validation split (its 'test' slot)
  one = search.Candidate((1,), 0.5, 3.0)
  d = dev(search.masked(search.nested(ds)[1][0], one.columns))
  teacher = distill.train_on_data(keys, cfg, d, "xz")
  alone = distill.train_student(keys, dataclasses.replace(cfg, alpha=0.5, temperature=3.0), d,
                                distill.teacher_targets(cfg, [(teacher, "xz")], d))
  lists, valid = per_list_ndcg(cfg, alone.params, d.eval_sets["test"], "x")
  np.testing.assert_array_equal(lists.mean(0)[valid], res.lists[one])


def test_the_nested_parts_read_no_list_twice_for_choosing_and_scoring():
  """search.nested: the selection lists (half the validation lists with a positive) fit nothing and score nothing;
  every part's fitting and scoring lists are disjoint; the validation part fits on every training list and scores
  the other validation lists; the cross-fitted folds' scoring lists partition the training lists; the test split is
  in no part."""
  ds = _dataset()
  ids = lambda g: set(np.asarray(g.qid).tolist())
  train, vali = ids(ds["train"]), ids(ds["vali"])
  assert len(train) == ds["train"].num_queries and len(vali) == ds["vali"].num_queries and not train & vali
  select, parts = search.nested(ds, folds=3, seed=5)
  positive = set(np.asarray(ds["vali"].qid)[positive_groups(ds["vali"])].tolist())
  assert ids(select) <= positive and len(ids(select)) == round(0.5 * len(positive))
  scored = []
  for i, p in enumerate(parts):
    assert set(p.splits) == {"train", "vali", "test"} and ids(p["vali"]) == ids(select)
    assert not ids(p["train"]) & ids(select) and not ids(p["train"]) & ids(p["test"])
    assert not (ids(p["train"]) | ids(p["test"])) & ids(ds["test"])
    if i == 0:
      assert ids(p["train"]) == train and ids(p["test"]) == vali - ids(select)
    else:
      assert ids(p["train"]) | ids(p["test"]) == train
      scored.append(ids(p["test"]))
  assert set().union(*scored) == train and sum(map(len, scored)) == len(train)
  assert ids(search.nested(ds, folds=3, seed=5)[0]) == ids(select)  # seeded
  assert ids(search.nested(ds, folds=3, seed=6)[0]) != ids(select)
  with pytest.raises(ValueError, match="share"):
    search.nested(ds, share=1.0)


@pytest.mark.heavy
def test_a_planted_scoring_label_moves_no_screened_model_and_no_column_order():
  """Nested, the other way round: the labels of the validation lists that score (not the selection lists) shuffled
  within each list, a planted change that would bias any choice made on them, move only the validation part's
  scores: the column order and every screened model are chosen on the selection lists (the validation part's no
  distillation: the same bits), and the cross-fitted folds' scores of every candidate keep their bits."""
  ds = _dataset()
  cfg = TrainConfig(epochs=2, hidden=16, layers=3, select_on="vali")
  keys = jax.random.split(jax.random.PRNGKey(0), 2)
  dev = lambda d: device.to_device(d, 2)
  kw = dict(alphas=(0.5,), temperatures=(1.0,), folds=2, patience=1)
  res = search.search(keys, cfg, ds, dev, **kw)
  v, rng = ds["vali"], np.random.default_rng(1)
  scoring = ~np.isin(v.qid, search.nested(ds)[0].qid)
  y = v.y.copy()  # each scoring list's labels shuffled within it: the same lists hold a positive
  for q in np.flatnonzero(scoring):
    y[v.offsets[q]:v.offsets[q + 1]] = rng.permutation(y[v.offsets[q]:v.offsets[q + 1]])
  planted = dataclasses.replace(ds, splits=dict(ds.splits, vali=dataclasses.replace(v, y=y)))
  assert np.array_equal(search.nested(planted)[0].y, search.nested(ds)[0].y)  # the selection lists untouched
  again = search.search(keys, cfg, planted, dev, **kw)
  np.testing.assert_array_equal(again.strength, res.strength)
  for a, b in zip(jax.tree_util.tree_leaves(again.baseline.params), jax.tree_util.tree_leaves(res.baseline.params)):
    np.testing.assert_array_equal(a, b)
  assert set(again.scores) == set(res.scores) and len(res.scores[search.Candidate()]) == 3
  assert not np.array_equal(again.scores[search.Candidate()][0], res.scores[search.Candidate()][0])
  for c, parts in res.scores.items():
    for a, b in zip(again.scores[c][1:], parts[1:]):
      np.testing.assert_array_equal(a, b)


@pytest.mark.heavy
def test_the_cheap_search_screens_in_two_stages_on_fewer_seeds():
  """Two stages: every subset at the plain PFD setting (cfg.alpha, T = 1), then the grid only for the first subset
  the rule found better (search.second_stage); screened on the first of two keys. No-distillation's screening lists
  are the validation part's screened model's; the chosen one is a row of every seed."""
  ds = _dataset()
  cfg = TrainConfig(epochs=3, hidden=16, layers=3, select_on="vali")
  keys = jax.random.split(jax.random.PRNGKey(0), 2)
  dev = lambda d: device.to_device(d, 2)
  res = search.search(keys, cfg, ds, dev, alphas=(0.2, 0.5), temperatures=(1.0, 3.0), seeds=1, patience=1, refine=1)
  plain = {c.columns for c in res.lists if c.columns and (c.alpha, c.temperature) == (0.5, 1.0)}
  assert plain == {(0, 1), (0,), (1,)}  # all; each alone; all but the strongest (the other alone, once)
  passed = [c.columns for c in res.choice["passed"]][:1]
  assert set(res.lists) == ({search.Candidate()} | {search.Candidate(c, 0.5, 1.0) for c in plain} |
                            {search.Candidate(c, a, t) for c in passed for a in (0.2, 0.5) for t in (1.0, 3.0)})
  assert len(res.choice["order"]) == 3 * 4  # every subset's every setting is declared
  assert res.selection == search.nested(ds)[0].num_queries
  assert res.seeds == 1 and res.patience == 1
  base, valid = per_list_ndcg(cfg, res.baseline.params, dev(search.nested(ds)[1][0]).eval_sets["test"], "x")
  np.testing.assert_array_equal(res.lists[search.Candidate()], base[0][valid])
  assert jax.tree_util.tree_leaves(res.chosen.params)[0].shape[0] == 2  # the row: every seed


@pytest.mark.slow
@pytest.mark.long
def test_search_drops_a_copy_of_the_label_and_keeps_the_useful_column():
  """Column 0 copies the training label (|corr| 1): its teacher's targets are the labels again, no less noisy,
  and a teacher given both columns leans on it. Column 1 is rel + N(0, 0.1^2), weaker on the label
  (|corr| ~0.4, P(y = 1) = sigmoid(4 (rel - tau)) is noisy) but a teacher reading it predicts the label's
  expectation: the paper's variance reduction. With 40 training queries the student of column 1 alone must be
  chosen: validation (600 queries, half of them choosing the epochs, 2 screening seeds) must find it better than no
  distillation, and its gain must be the largest of the candidates found better (the copy alone is tested at a
  quarter of the level: a gain of its own is not ruled out, only a larger one)."""
  ds = _dataset(queries=(40, 600, 20), noise=0.1)
  strength = search.column_strength(ds["train"])
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


class _Planted:
  """A stand-in for search.Screening whose candidates' per-part gains over no distillation are drawn, not trained:
  estimate(c) is the crossed seeds x lists estimate of c's blocks, screen(cols, grid) marks grid's settings of
  subset cols screened (the plain settings of every subset are screened first, as search's first stage does)."""

  def __init__(self, blocks, plain):
    self.blocks, self.screened = blocks, []
    self.scores = {c: None for c in blocks if (c.alpha, c.temperature) == (plain["alpha"], plain["temperature"])}

  def estimate(self, c):
    return stats.crossed(self.blocks[c], 1.0)

  def screen(self, cols, grid):
    self.screened.append(cols)
    self.scores.update({search.Candidate(cols, v["alpha"], v["temperature"]): None for v in grid})


def _declared(subset_list, alphas=(0.2, 0.5, 0.8), temperatures=(1.0, 3.0)):
  """(the declared order, its weights, the plain setting, the other settings) of search's sequence over every
  subset's every setting at alpha 0.5."""
  plain, full = dict(alpha=0.5, temperature=1.0), search.settings(0.5, alphas, temperatures)
  order, weights = search.sequence([search.Candidate(c, v["alpha"], v["temperature"]) for c in subset_list
                                    for v in full], subset_list, plain, 0.5)
  return order, weights, plain, [v for v in full if v != plain]


def _blocks(rng, order, gains, shapes=((2, 60), (2, 80), (2, 80))):
  """Per-part difference blocks [S, Q] for every candidate, correlated as the search's are: every candidate's
  difference carries no distillation's list noise (shared by all), its subset's teacher noise (shared by the
  subset's settings), a seed effect and a residual; gains {candidate: true mean gain} (default 0)."""
  shared = [rng.normal(0, 0.05, (1, q)) for _, q in shapes]
  teacher = {c.columns: [rng.normal(0, 0.04, (1, q)) for _, q in shapes] for c in order}
  return {c: [gains.get(c, 0.0) + u + t + rng.normal(0, 0.01, (s, 1)) + rng.normal(0, 0.05, (s, q))
              for (s, q), u, t in zip(shapes, shared, teacher[c.columns])] for c in order}


def test_the_second_stage_screens_the_first_subsets_the_rule_passes_in_the_declared_order():
  """search.second_stage: the settings grid of a subset is screened only once its plain setting passes, the first
  `refine` of them in the declared order (not the best-scoring), and a setting never screened is not found better:
  its p is None and the carried level stops there."""
  C, subset_list = search.Candidate, [(0, 1), (0,), (1,)]
  order, weights, plain, rest = _declared(subset_list)
  rng = np.random.default_rng(0)
  # (0,) and (1,) gain at their plain setting, (1,) far more: the first in the declared order is refined
  blocks = _blocks(rng, order, {C((0,), 0.5, 1.0): 0.2, C((1,), 0.5, 1.0): 0.6})
  sc = _Planted(blocks, plain)
  rule = search.second_stage(sc, order, weights, 0.05, rest, refine=1)
  assert sc.screened == [(0,)]
  assert C((0,), 0.5, 1.0) in rule["passed"] and C((1,), 0.5, 1.0) in rule["passed"]
  unscreened = [i for i, c in enumerate(order) if c not in sc.scores]
  assert unscreened and all(rule["p"][i] is None for i in unscreened)
  assert all(c in sc.scores for c in rule["passed"])
  sc = _Planted(blocks, plain)  # refine 2: both passing subsets, in order; refine 0: none
  search.second_stage(sc, order, weights, 0.05, rest, refine=2)
  assert sc.screened == [(0,), (1,)]
  sc = _Planted(blocks, plain)
  assert search.second_stage(sc, order, weights, 0.05, rest, refine=None)["passed"] and sc.screened == []


@pytest.mark.slow
def test_the_rule_as_run_keeps_its_level_under_the_null_with_correlated_candidates():
  """The search's rule as it runs (the declared sequence of every subset's every setting, the second stage
  refining the first subset that passes) on candidates that share no distillation's list noise and their subset's
  teacher noise, none with a gain: a distilling candidate is chosen in at most 5% of 3000 simulated searches (plus
  three Monte-Carlo standard errors)."""
  subset_list = [(0, 1, 2), (0,), (1,), (2,), (1, 2)]
  order, weights, plain, rest = _declared(subset_list)
  rng, trials, chosen = np.random.default_rng(3), 3000, 0
  for _ in range(trials):
    rule = search.second_stage(_Planted(_blocks(rng, order, {}), plain), order, weights, 0.05, rest, refine=1)
    chosen += rule["chosen"] is not None
  assert chosen / trials <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / trials), chosen / trials


@pytest.mark.numeric
def test_the_whole_rules_simulated_power_agrees_with_the_rule_repeated_on_fresh_draws():
  """rule.whole, simulated from one search's screened differences (lists resampled, seed offsets drawn at the
  pooled spread), against brute force at toy size: the rule as run (search.second_stage, refine 1) repeated on
  fresh draws of the world, correlated candidates (_blocks), a gain of 0.012 (about 1.8 standard errors) in the
  second subset's plain setting. The simulation's mean over 16 searches agrees with the brute-force rate within
  three standard errors of their difference; its rate without a gain is within the level; the seed spread's
  bound is above its estimate, and its power there below."""
  subset_list = [(0, 1), (0,), (1,)]
  order, weights, plain, rest = _declared(subset_list)
  first = [c for c in order if (c.alpha, c.temperature) == (0.5, 1.0)]
  planted, gain, rng = first[1], 0.012, np.random.default_rng(5)
  reps = 800
  brute = np.mean([search.second_stage(_Planted(_blocks(rng, order, {planted: gain}), plain), order, weights, 0.05,
                                       rest, refine=1)["chosen"] is not None for _ in range(reps)])
  found = []
  for k in range(16):
    blocks = _blocks(rng, order, {planted: gain})
    sc = _Planted(blocks, plain)
    search.second_stage(sc, order, weights, 0.05, rest, refine=1)  # what this search screened
    found.append(rule.whole({c: blocks[c] for c in sc.scores}, [1 / 3] * 3, 1.0, order=order, level_weights=weights,
                            level=0.05, rest=rest, refine=1, first=first, effects=(gain,), trials=400, seed=k))
  power = np.array([w["power"][f"{gain:g}"][planted.label] for w in found])
  se = np.hypot(np.sqrt(brute * (1 - brute) / reps), power.std(ddof=1) / np.sqrt(power.size))
  assert abs(power.mean() - brute) <= 3 * se, (power.mean(), brute, se)
  assert np.mean([w["false"] for w in found]) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / (16 * 400))
  assert all(w["seed_bound"] >= w["seed_var"] for w in found)
  assert np.mean([w["bound_power"][f"{gain:g}"][planted.label] for w in found]) < power.mean()
  # the spread's closed form: one 2 x Q block of seed offsets +-delta, no residual: 2 delta^2 (1 df), the bound
  # 2 delta^2 / chi2_0.2(1)
  delta = 0.01
  spread, upper, df = rule.seed_spread([np.array([[delta] * 5, [-delta] * 5])])
  assert spread == pytest.approx(2 * delta ** 2) and df == 1
  assert upper == pytest.approx(2 * delta ** 2 / sps.chi2.ppf(0.2, 1))


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
  from experiments.paper import table2
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
  cfg = {"options": {}, "train": {"select_on": "vali", "alpha": 0.5, "epochs": 100}, "run": {"seeds": 5}}
  text = practice.search_offer(record, cfg, o)
  est = stats.crossed([pfd - base], base.mean())  # the reference: no distillation's mean
  assert "not run** (--search adds the row 'PFD, searched on validation': per fold " + costing.search_cost(
      o, 3, 0.5, [10.0, 20.0, 30.0], epochs=100, seeds=5) in text
  # a row's validation curve that last improves at epoch 29 (0-based): early stopping at patience 10 would have run
  # 40 epochs on it, the screened programs' expected length
  rising = np.where(np.arange(100) < 30, np.arange(100) / 100, 0.0)
  fold.rows["no_distill"].curves = {"vali": np.broadcast_to(rising[None, :, None], (3, 100, 1))}
  assert costing.search_cost(o, 3, 0.5, [10.0, 20.0, 30.0], epochs=100, seeds=5, stops=[40]) in \
      practice.search_offer(record, cfg, o)
  fold.rows["no_distill"].curves = {}
  assert f"a smallest detectable gain of {100 * est.mde(0.8, 0.025) / est.reference:.1f}%" in text
  assert table2._options({"options": {"search_columns": 1, "search": True}}).searching() == o._replace(top=1)
  assert practice.search_offer(record, dict(cfg, options={"search": True}), o) == ""
  assert practice.search_offer(record, dict(cfg, train={"select_on": "test", "alpha": 0.5, "epochs": 100}), o) == ""
  fold.data["labels"] = "gumbel"  # the paper's protocol: no practitioner's note
  assert practice.search_offer(record, cfg, o) == ""


@pytest.mark.slow
def test_the_search_bias_driver_sets_the_claimed_gains_against_fresh_lists(tmp_path):
  """experiments.search_bias end to end on one null and one planted folder (2 epochs, 40 fresh lists): a row per
  folder with its best candidate (and its chosen one when it distils), each read - fresh in the summary the
  difference of its two means, fresh gains measured on at most the fresh lists there are."""
  from conftest import written
  from experiments import search_bias
  from experiments.framework import schema
  res = search_bias.run(schema.Config(options=search_bias.Options(folders=1, fresh_lists=40, epochs=2)))
  js = written(tmp_path, res, search_bias.DRIVER)
  assert [r["kind"] for r in js["rows"]] == ["null", "planted"] and js["search"]["epochs"] == 2
  for r in js["rows"]:
    assert r["best"]["candidate"] and 0 < r["best"]["fresh_lists"] <= 40
    assert r["chosen"] is None or r["chosen"]["candidate"]
  for e in js["summary"].values():
    assert e["of"] == 1 and all(e[p]["bias"] == pytest.approx(e[p]["read"] - e[p]["fresh"]) and e[p]["se"] is None
                                for p in ("validation", "claimed"))
  assert "null/best" in js["summary"] and "read - fresh" in (tmp_path / "out" / "table.md").read_text()


def test_a_folds_test_list_gains_are_said_once_when_the_chosen_candidate_is_the_best():
  """The search text's read-against-test sentence: the best distilling candidate and the chosen one each once, and
  one sentence for both when the search chose the best (fresh_record then keeps one record under both names)."""
  from experiments.framework import practice
  g = dict(candidate="z[0], alpha 0.5, T 1", claimed=0.023, validation=0.0, fresh=0.002, fresh_validation=-0.005,
           fresh_lists=255)
  same = practice._fresh(dict(best=g, chosen=dict(g)))
  assert same.count("+2.3%") == 1 and "the best distilling candidate, the one chosen (z[0]" in same
  other = practice._fresh(dict(best=g, chosen=dict(g, candidate="z[1], alpha 0.5, T 1", claimed=0.011)))
  assert other.count("+2.3%") == 1 and "; the chosen one (z[1], alpha 0.5, T 1) read +1.1%" in other
  none = practice._fresh(dict(best=g, chosen=None))
  assert "the best distilling candidate (z[0]" in none and "chosen" not in none.replace("scored after the choice", "")


def test_the_search_texts_column_table_averages_each_column_over_the_folds_that_screened_it():
  """Each fold orders and prunes its subsets on its own lists, so a column screened alone in one fold may not be in
  another: its teacher's gain is the mean over the folds that screened it, said with their count (the published
  simulated-logs run's fold, and a copy of it that did not screen z[1] alone)."""
  import copy
  import gzip
  import json
  import os
  from experiments.framework import practice
  from experiments.framework.records import LossRecord
  path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "published",
                      "table2-letor-logs_letor", "results.json.gz")
  if not os.path.exists(path):
    pytest.skip("no published simulated-logs run")
  loss = json.load(gzip.open(path))["losses"]["approxndcg"]
  one = loss["folds"]["fold1"]
  two = copy.deepcopy(one)
  del two["search"]["teachers"]["1"], two["search"]["single"]["1"]
  loss["folds"]["fold2"] = two
  text = practice.search_text(LossRecord.from_json(loss))
  s, base = one["search"], one["search"]["candidates"]["no distillation"]
  z1 = next(line for line in text.splitlines() if "(z[1])" in line)
  assert f"{s['teachers']['1'] - base:+.4f} (1 of 2 folds)" in z1
  z0 = next(line for line in text.splitlines() if "(z[0])" in line)
  assert f"{s['teachers']['0'] - base:+.4f} |" in z0 and "of 2 folds" not in z0
