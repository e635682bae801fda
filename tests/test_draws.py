"""Draws as a vmapped axis (pfd_jax.training.draws): D re-drawn datasets x S seeds in one compiled program equal
the same draws trained one at a time on the same layout; each model is scored on its own draw's lists."""
import functools
import json

import jax
import numpy as np
import pytest

from experiments.page import judged
from pfd_jax import data as data_lib
from pfd_jax import training as training_lib
from pfd_jax.data.config import DataConfig
from pfd_jax.training import draws

from conftest import assert_close_at_scale, assert_same_program_bits

pytestmark = pytest.mark.numeric

SEEDS = 2


@functools.lru_cache(maxsize=None)
def _data(d: int):
  """Draw d: its own training, validation and test lists (the generator's seed d); draw 2's lists are short, so
  it has no group in the layout's longest buckets (steps that hold none of its groups)."""
  kw = dict(num_queries=(40, 24, 24), mean_docs=14.0, max_docs=60, num_features=16, num_strong=4, seed=10 + d)
  if d == 2:
    kw.update(max_docs=14)
  return data_lib.prepare(DataConfig(tau=3.0, num_privileged=4), data_lib.synthetic.generate(**kw))


def _run(cfg, which, cuts, capacity, eval_layout, teacher=None):
  """Trains draws `which` (S seeds each) on the layout (cuts, capacity)."""
  sets = [_data(d) for d in which]
  tr = draws.draws([s["train"] for s in sets], cuts=cuts, capacity=capacity)
  evs = {split: draws.eval_set([s[split] for s in sets], **eval_layout[split]) for split in ("vali", "test")}
  keys = np.concatenate([jax.random.split(jax.random.PRNGKey(100 + d), SEEDS) for d in which])
  t = None if teacher is None else [np.concatenate([teacher(d, b) for d in which]) for b in range(len(cuts))]
  return training_lib.train(keys, cfg, tr, "x", evs, teacher=t), tr


def _layout(which):
  """The training layout of draws `which` (cuts, capacity), their counts [D, B], and their eval splits' layouts."""
  sets = [_data(d) for d in which]
  _, counts, _ = draws.stack([s["train"] for s in sets], max_buckets=3)
  train = draws.layout([s["train"] for s in sets], 3)
  ev = {p: draws.layout([s[p] for s in sets], 3, draws.positive([s[p] for s in sets])) for p in ("vali", "test")}
  return train["cuts"], train["capacity"], counts, ev


# One batch per bucket (the decisive protocol), and several (steps past a draw's groups mid-epoch); the draws looped
# inside the program (a CPU's default: the alone-run's bits) and batched (an accelerator's).
@pytest.mark.heavy
@pytest.mark.parametrize("batch,batching", [(64, "loop"), pytest.param(64, "vmap", marks=pytest.mark.slow),
                                            pytest.param(5, "loop", marks=pytest.mark.slow)])
def test_vmapped_draws_equal_draws_trained_one_at_a_time_on_their_layout(batch, batching, monkeypatch):
  """Looped: bit for bit. Batched: within docs/reproducing.md's tolerance for one computation in other shapes
  (assert_close_at_scale, 1e-6 of the values' scale), as the draw axis changes the shapes XLA blocks products by."""
  from pfd_jax.training import feed
  monkeypatch.setattr(feed.Drawn, "batching", batching)
  same = assert_same_program_bits if batching == "loop" else assert_close_at_scale
  which = (0, 1, 2)
  cuts, capacity, counts, ev = _layout(which)
  assert (counts == 0).any(), "a draw without a group in some bucket (the no-op steps) is part of the test"
  cfg = training_lib.TrainConfig(epochs=2, batch_size=batch, hidden=16, layers=3, select_on="vali", lr=3e-3)
  together, _ = _run(cfg, which, cuts, capacity, ev)
  assert together.params["params"]["Dense_0"]["kernel"].shape[0] == len(which) * SEEDS
  for i, d in enumerate(which):
    alone, _ = _run(cfg, (d,), cuts, capacity, ev)
    part = together.part(i, SEEDS)
    np.testing.assert_array_equal(part.best_epoch, alone.best_epoch)
    for split in ("vali", "test"):
      same(part.curves.get(split, part.best[split]), alone.curves.get(split, alone.best[split]))
    for x, y in zip(jax.tree_util.tree_leaves(part.params), jax.tree_util.tree_leaves(alone.params)):
      same(np.asarray(x), np.asarray(y))
    same(part.loss, alone.loss)
  # the draws learn from their own data: distinct models and metrics
  assert not np.allclose(together.best["test"][:SEEDS], together.best["test"][SEEDS:2 * SEEDS])


@pytest.mark.slow  # the default tier keeps the bit-exact training test; this one compiles 3 scorers
def test_each_model_is_scored_on_its_own_draws_lists():
  """The drawn scorer against the plain one of each draw's own split (another bucketing: float sums in another
  order), and the empty-list rule's denominator per draw; the same of the per-list NDCG."""
  which = (0, 1, 2)
  sets = [_data(d) for d in which]
  cfg = training_lib.TrainConfig(epochs=1, hidden=8, layers=2)
  init = training_lib.step.compiled(training_lib.step.step_key(cfg), False, 1).init
  params, _ = init(jax.random.split(jax.random.PRNGKey(0), len(which) * SEEDS), int(sets[0]["test"].x.shape[1]))
  for rule in ("exclude", "zero"):
    c = training_lib.TrainConfig(epochs=1, hidden=8, layers=2, empty_rule=rule)
    got = training_lib.evaluate(c, params, draws.eval_set([s["test"] for s in sets], 3), "x")
    for i, s in enumerate(sets):
      mine = jax.tree_util.tree_map(lambda a: a[i * SEEDS:(i + 1) * SEEDS], params)
      want = training_lib.evaluate(c, mine, training_lib.eval_set(s["test"]), "x")
      assert_close_at_scale(got[i * SEEDS:(i + 1) * SEEDS], want)
  # per list: each draw's lists with a positive, in the layout's order (another than its own buckets': compared sorted)
  lists = draws.per_list_ndcg(cfg, params, draws.eval_set([s["test"] for s in sets], 3), "x")
  for i, s in enumerate(sets):
    mine = jax.tree_util.tree_map(lambda a: a[i * SEEDS:(i + 1) * SEEDS], params)
    want, has = training_lib.per_list_ndcg(cfg, mine, training_lib.eval_set(s["test"]), "x")
    vals, valid = lists[i]
    assert valid.all() and vals.shape == (SEEDS, has.sum()) and has.sum() > 0
    assert_close_at_scale(np.sort(vals, -1), np.sort(want[:, has], -1))


@pytest.mark.slow
def test_a_teacher_teaches_the_students_of_its_own_draw():
  """Teacher inputs per draw (draws.predict, draws.teacher_inputs): the students of a drawn PFD run equal those
  trained one draw at a time with their draw's teacher logits."""
  which = (0, 1)
  cuts, capacity, _, ev = _layout(which)
  cfg = training_lib.TrainConfig(epochs=2, batch_size=64, hidden=16, layers=3, select_on="vali", alpha=0.5)
  teachers, tr = _run(cfg, which, cuts, capacity, ev)
  logits = draws.predict(cfg, teachers.params, tr, "x")  # [D * S, C, L] per bucket
  per_draw = lambda d, b: np.asarray(logits[b])[which.index(d) * SEEDS:(which.index(d) + 1) * SEEDS]
  together, _ = _run(cfg, which, cuts, capacity, ev, teacher=per_draw)
  for i, d in enumerate(which):
    alone, _ = _run(cfg, (d,), cuts, capacity, ev, teacher=per_draw)
    part = together.part(i, SEEDS)
    assert_close_at_scale(part.loss, alone.loss)
    assert part.loss[:, :, 2].sum() > 0  # the teacher term is on
  with pytest.raises(ValueError, match="below a draw's groups"):
    draws.draws([_data(0)["train"]], cuts=cuts, capacity=capacity - 1)


@pytest.mark.slow
def test_table2_trains_the_draws_of_a_chunk_side_by_side_and_records_each_as_its_fold(tmp_path):
  """--draws_per_program: 3 draws in chunks of 2 (a chunk of two, then one). Each draw is a fold whose rows' per-list
  test NDCG (its models split out of the chunk's, scored on the draw's own test lists by the plain scorer) averages
  to the best-epoch test NDCG the drawn scorer gave them: the draws are not mixed up. Options it cannot serve are
  refused before anything trains."""
  from experiments.paper import table2
  from experiments.framework import outputs
  from pfd_jax.config import ConfigError
  from conftest import tiny
  methods = ("no_distill", "pfd", "placebo")
  cfg = tiny(table2.Options(methods=methods, draws_per_program=2), data=dict(draws=3),
             train=dict(select_on="vali", curves="select"), run=dict(seeds=2, loss="rankbce"))
  run = table2.run(cfg)
  folds = run["losses"]["rankbce"].folds
  assert list(folds) == ["fold1", "fold2", "fold3"]
  fingerprints = {f.data["data_fingerprint"] for f in folds.values()}
  assert len(fingerprints) == 3
  for f in folds.values():
    valid = np.asarray(f.test_lists_valid, bool)
    assert set(f.rows) == {"no_distill", "pfd_teacher", "pfd", "placebo_teacher", "placebo"}
    for name, r in f.rows.items():
      lists = np.asarray(r.seed_lists)[:, valid]
      assert_close_at_scale(lists.mean(1), np.asarray(r.best["test"])[:, 0])
  md = outputs.write_outputs(str(tmp_path), run, table2.DRIVER)  # the pages read it as any re-drawn run
  assert "Population: re-drawn" in md and "Power on the re-drawn population" in md
  # every claim reads the draws (a vacuous one: two rows that score the same on every draw of these tiny sets)
  assert all("(draws)" in c.detail or (c.verdict == "vacuous" and "draws" in c.detail)
             for c in judged.of("table2").claims(json.loads((tmp_path / "results.json").read_text())) if c)
  with pytest.raises(ConfigError, match="draws_per_program"):
    table2.run(cfg.replace(options=table2.Options(methods=("no_distill", "lambdamart"), draws_per_program=2)))
  with pytest.raises(ConfigError, match="draws_per_program"):
    table2.run(cfg.replace(data=dict(draws=0)))


def test_a_chunks_draws_loaded_side_by_side_have_the_bits_each_has_loaded_alone():
  """drawn.load generates a chunk's draws on a thread pool (an accelerator's chunk holds 174): each draw, in chunk
  order, is bit for bit the draw fold_data.load_dataset gives alone, and no two draws are the same."""
  from experiments.paper import table2
  from experiments.framework import drawn, fold_data
  from conftest import tiny
  cfg = tiny(table2.Options(draws_per_program=3), data=dict(draws=3))
  together = drawn.load(cfg, [3, 1, 2])
  for k, ds in zip([3, 1, 2], together):
    alone = fold_data.load_dataset(cfg.data, k)
    assert ds.config == alone.config
    for split in ("train", "vali", "test"):
      np.testing.assert_array_equal(ds[split].x, alone[split].x)
      np.testing.assert_array_equal(ds[split].y, alone[split].y)
  assert len({ds.config["data_fingerprint"] for ds in together}) == 3
