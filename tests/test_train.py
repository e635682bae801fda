import dataclasses
import os

import jax
import numpy as np
import pytest

from experiments.paper import table2
from experiments.framework import schema
from pfd_jax import config as config_lib
from pfd_jax.methods import distill
from pfd_jax.methods import rows as rows_lib
from pfd_jax import training as training_lib

from conftest import SMALL_GBDT, assert_same_program_bits, tiny, written

pytestmark = pytest.mark.numeric


def test_training_learns_and_keeps_best_epoch(tiny_device):
  cfg = training_lib.TrainConfig(epochs=8, batch_size=16, lr=3e-3)
  res = distill.train_on_data(jax.random.split(jax.random.PRNGKey(1), 2), cfg, tiny_device, "xz")
  assert res.loss[:, -1, 0].mean() < res.loss[:, 0, 0].mean()
  # the kept parameters score exactly the best epoch's test NDCG
  again = training_lib.evaluate(cfg, res.params, tiny_device.eval_sets["test"], "xz")
  np.testing.assert_allclose(again, res.best["test"], rtol=1e-5)
  np.testing.assert_array_equal(res.best["test"][:, 0], res.curves["test"][:, :, 0].max(1))


def test_validation_selection_picks_the_best_vali_epoch(tiny_device):
  cfg = training_lib.TrainConfig(epochs=4, batch_size=16, select_on="vali")
  res = distill.train_on_data(jax.random.split(jax.random.PRNGKey(3), 2), cfg, tiny_device, "x")
  np.testing.assert_array_equal(res.best_epoch, res.curves["vali"][:, :, 0].argmax(1))
  np.testing.assert_array_equal(res.best["test"], res.curves["test"][[0, 1], res.best_epoch])


def test_scoring_only_the_selection_split_per_epoch_keeps_every_best_epoch_bit(tiny_device):
  """curves='select': only validation is scored per epoch; test is scored once, on each model's kept parameters,
  by the same compiled scorer: the best epochs, parameters and best-epoch metrics of every split are the per-epoch
  run's bits."""
  cfg = training_lib.TrainConfig(epochs=5, batch_size=16, select_on="vali")
  keys = jax.random.split(jax.random.PRNGKey(3), 2)
  full = distill.train_on_data(keys, cfg, tiny_device, "x")
  cheap = distill.train_on_data(keys, dataclasses.replace(cfg, curves="select"), tiny_device, "x")
  assert set(cheap.curves) == {"vali"} and set(cheap.best) == set(full.best) == {"vali", "test"}
  assert_same_program_bits(cheap.curves["vali"], full.curves["vali"])
  np.testing.assert_array_equal(cheap.best_epoch, full.best_epoch)
  for split in ("vali", "test"):
    assert_same_program_bits(cheap.best[split], full.best[split])
  for x, y in zip(jax.tree_util.tree_leaves(cheap.params), jax.tree_util.tree_leaves(full.params)):
    assert_same_program_bits(np.asarray(x), np.asarray(y))


def test_student_with_alpha_one_ignores_teacher(tiny_device):
  cfg = training_lib.TrainConfig(epochs=2, batch_size=16, alpha=1.0)
  keys = jax.random.split(jax.random.PRNGKey(2), 2)
  t = [jax.numpy.zeros((2,) + b["y"].shape) for b in tiny_device.train_all]
  t2 = [x + 5.0 for x in t]
  a = distill.train_student(keys, cfg, tiny_device, t)
  b = distill.train_student(keys, cfg, tiny_device, t2)
  np.testing.assert_array_equal(a.curves["test"], b.curves["test"])


@pytest.mark.slow
def test_table2_driver_end_to_end(tmp_path):
  # the paper's rows and LambdaMART (the cross-family rows: test_gbdt; the default method list: test_gbdt too)
  cfg = tiny(table2.Options(methods=distill.METHODS + ("lambdamart",), gbdt=SMALL_GBDT), run=dict(loss="both", seeds=3))
  res = table2.run(cfg)
  js = written(tmp_path, res, table2.DRIVER)
  assert sorted(os.listdir(tmp_path / "out")) == ["fig2_rankbce.png", "fig2_ranknet.png", "results.json", "table.md"]
  assert set(js["losses"]) == {"rankbce", "ranknet"}
  rows = js["losses"]["rankbce"]["folds"]["fold1"]["rows"]
  assert set(rows) == set(rows_lib.REGISTRY.names()[:8]) | {"lambdamart"}
  best = np.array(rows["pfd"]["best"]["test"])
  assert best.shape == (3, 3) and np.all((best >= 0) & (best <= 1))
  assert np.array(rows["pfd"]["curves"]["test"]).shape == (3, 2, 3)
  assert len(set(np.round(best[:, 0], 7))) > 1, "seeds must differ"
  assert js["env"]["jax"] and js["config"]["run"]["seeds"] == 3
  assert js["losses"]["ranknet"]["train_config"]["batch_size"] == 300  # the paper's, in force and recorded
  md = (tmp_path / "out" / "table.md").read_text()
  assert "PFD student" in md and "GenD teacher*" in md and "| LambdaMART |" in md and "vs LambdaMART" in md
  cmp = js["losses"]["rankbce"]["comparisons"]
  assert set(cmp["vs_pfd"]) == {"lambdamart"} and set(cmp["vs_lambdamart"]) == set(rows) - {"lambdamart"}
  assert set(cmp["vs_placebo"]) == {"no_distill", "self_distill", "gend", "pfd", "lambdamart"}
  assert "vs placebo student" in md and "| Placebo student |" in md
  # every row's per-query NDCG averages to its per-run NDCG (the same lists and inputs; the placebo teacher's
  # permuted z included)
  for name, r in rows.items():
    if name != "lambdamart":
      np.testing.assert_allclose(np.mean(r["test_lists"]), np.mean(np.array(r["best"]["test"])[:, 0]), rtol=1e-5)
  # the configuration round-trips through results.json
  assert schema.config_from_json(js["config"], table2.Options) == cfg
  again = table2.run(cfg)
  for loss in ("rankbce", "ranknet"):
    for name, r in again["losses"][loss].folds["fold1"].rows.items():
      first = res["losses"][loss].folds["fold1"].rows[name]
      np.testing.assert_array_equal(r.best["test"], first.best["test"])
      np.testing.assert_array_equal(r.loss, first.loss)


def _same_bits(a, b):
  assert_same_program_bits(a.loss, b.loss)
  assert_same_program_bits(a.curves["test"], b.curves["test"])
  np.testing.assert_array_equal(a.best_epoch, b.best_epoch)
  for x, y in zip(jax.tree_util.tree_leaves(a.params), jax.tree_util.tree_leaves(b.params)):
    assert_same_program_bits(np.asarray(x), np.asarray(y))


def _shards(tiny_device, folder):
  """tiny_device's training sets written as on-disk shards and opened for streaming: {name: set}."""
  from pfd_jax.data import shards
  for k in ("train_pos", "train_all"):
    host = [{f: np.asarray(v) for f, v in b.items()} for b in getattr(tiny_device, k)]
    shards.write_buckets(str(folder), k, [_padded(b) for b in host])
  return {k: shards.open_set(str(folder), k) for k in ("train_pos", "train_all")}


@pytest.mark.heavy
@pytest.mark.parametrize("loss", ["rankbce", pytest.param("ranknet", marks=pytest.mark.slow)])
def test_chunked_epochs_and_streamed_data_give_the_resident_bits(tiny_device, tmp_path, loss):
  """One program, three ways to feed it: a whole epoch per call, a chunk of 2 steps per call, and the same
  buckets streamed from on-disk shards, a window per step. Same plan, same arithmetic, same bits, for a
  data-only run (here) and a student with a teacher (the next test)."""
  cfg = training_lib.TrainConfig(loss=loss, epochs=3, batch_size=16, hidden=16, layers=3)
  keys = jax.random.split(jax.random.PRNGKey(4), 3)
  disk = _shards(tiny_device, tmp_path)
  runs = {c: training_lib.train(keys, cfg, tiny_device.train_pos, "xz", tiny_device.eval_sets,
                                chunk_steps=c) for c in (0, 2)}
  runs["disk"] = training_lib.train(keys, cfg, disk["train_pos"], "xz", tiny_device.eval_sets)
  _same_bits(runs[0], runs[2])
  _same_bits(runs[0], runs["disk"])
  # a view reading only the privileged columns reads only z from disk (GenD's teacher)
  _same_bits(training_lib.train(keys, cfg, tiny_device.train_pos, "z", tiny_device.eval_sets),
             training_lib.train(keys, cfg, disk["train_pos"], "z", tiny_device.eval_sets))


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["rankbce", "ranknet"])
def test_a_student_chunked_and_streamed_gets_the_resident_bits(tiny_device, tmp_path, loss):
  """The same three ways to feed a student, its teacher's targets windowed with its buckets."""
  cfg = training_lib.TrainConfig(loss=loss, epochs=3, batch_size=16, hidden=16, layers=3)
  keys = jax.random.split(jax.random.PRNGKey(4), 3)
  disk = _shards(tiny_device, tmp_path)
  teacher = training_lib.train(keys, cfg, tiny_device.train_pos, "xz", tiny_device.eval_sets)
  targets = distill.teacher_targets(cfg, [(teacher, "xz")], tiny_device)
  students = {c: training_lib.train(keys, cfg, tiny_device.train_all, "x", tiny_device.eval_sets, teacher=targets,
                                    chunk_steps=c)
              for c in (0, 2)}
  students["disk"] = training_lib.train(keys, cfg, disk["train_all"], "x", tiny_device.eval_sets, teacher=targets)
  _same_bits(students[0], students[2])
  _same_bits(students[0], students["disk"])


def _padded(b):
  from pfd_jax.data.padding import Padded
  q = b["x"].shape[0]
  return Padded(x=b["x"], z=b.get("z"), rel=b["y"], y=b["y"], mask=b["mask"], qid=np.arange(q), index=np.arange(q))


def test_epoch_plan_visits_every_group_once_per_seed():
  keys = jax.random.split(jax.random.PRNGKey(7), 2)
  sizes, batch = (5, 12, 3), 4
  ids, idx, valid = jax.device_get(training_lib.program.plan(keys, 3, sizes, batch))
  assert ids.shape == (2 + 3 + 1,) and sorted(ids.tolist()) == [0, 0, 1, 1, 1, 2]
  for b, q in enumerate(sizes):
    w = min(batch, q)
    for s in range(2):
      seen = idx[ids == b][:, s, :w][valid[ids == b][:, :w] > 0]
      assert sorted(seen.tolist()) == list(range(q))
  assert not np.array_equal(idx[:, 0], idx[:, 1])  # each seed its own permutation
  alone = jax.device_get(training_lib.program.plan(keys[1:], 3, sizes, batch))
  np.testing.assert_array_equal(alone[1][:, 0], idx[:, 1])  # ... not depending on the other seeds


@pytest.mark.heavy
def test_variants_and_seeds_vmapped_equal_separate_runs(tiny_device):
  """Seeds and a sweep of the teacher term (Figure 3's alpha, SDR's softmax-transform temperature) vmapped in one
  program: a (variant, seed) other than the first equals its run alone, one seed of one variant."""
  cfg = training_lib.TrainConfig(loss="softmax", epochs=2, batch_size=16, hidden=16, layers=3, alpha=0.5)
  keys = jax.random.split(jax.random.PRNGKey(3), 2)
  teacher = distill.train_on_data(keys, cfg, tiny_device, "xz")
  targets = distill.teacher_targets(cfg, [(teacher, "xz")], tiny_device)
  sweep = [dict(alpha=0.2, teacher_transform="softmax", temperature=0.1),
           dict(alpha=0.9, teacher_transform="softmax", temperature=0.1),
           dict(alpha=0.9, teacher_transform="softmax", temperature=5.0)]
  together = distill.train_student(keys, cfg, tiny_device, targets, variants=sweep)
  alone = distill.train_student(keys[1:2], dataclasses.replace(cfg, **sweep[2]), tiny_device,
                                [t[1:2] for t in targets])  # the last variant's second seed (a wrong index fails)
  np.testing.assert_allclose(together[2].loss[1:2], alone.loss, rtol=1e-5)
  np.testing.assert_allclose(together[2].curves["test"][1:2], alone.curves["test"], rtol=1e-5, atol=1e-6)
  for i, j in ((0, 1), (1, 2)):  # alpha, then the temperature, each moves the run
    assert not np.allclose(together[i].loss, together[j].loss)
  assert not np.allclose(together[0].loss[0], together[0].loss[1])  # and the seeds differ from each other
  with pytest.raises(ValueError, match="variants may set only"):
    distill.train_student(keys, cfg, tiny_device, targets, variants=[dict(lr=0.1)])


@pytest.mark.heavy
def test_seeds_looped_equal_seeds_vmapped(tiny_device):
  """seed_batching='loop' (gradients model after model) trains the same models as the vmapped default, up to
  float summation order."""
  cfg = training_lib.TrainConfig(loss="ranknet", epochs=2, batch_size=16, hidden=16, layers=3)
  keys = jax.random.split(jax.random.PRNGKey(6), 3)
  a = distill.train_on_data(keys, cfg, tiny_device, "xz")
  b = distill.train_on_data(keys, dataclasses.replace(cfg, seed_batching="loop"), tiny_device, "xz")
  np.testing.assert_allclose(b.loss, a.loss, rtol=1e-5)
  np.testing.assert_allclose(b.curves["test"], a.curves["test"], atol=1e-5)


def test_early_stopping_ends_when_no_model_improves_and_keeps_the_full_runs_bits(tiny_device):
  """patience = p: training ends after the first epoch at which every model's best validation epoch is p or more
  epochs back; up to there the curves, losses and best epochs are the full run's bits, after it NaN, and the kept
  models are the best of the epochs run (scoring exactly their best validation NDCG)."""
  cfg = training_lib.TrainConfig(epochs=30, batch_size=16, hidden=16, layers=3, lr=3e-2, select_on="vali")
  keys = jax.random.split(jax.random.PRNGKey(7), 2)
  full = training_lib.train(keys, cfg, tiny_device.train_pos, "x", tiny_device.eval_sets)
  vali = full.curves["vali"][:, :, 0]
  running = np.maximum.accumulate(vali, axis=1)  # each model's best so far, its epoch: the first to reach it
  best_so_far = np.array([[int(np.argmax(v[:e + 1])) for e in range(cfg.epochs)] for v in vali])
  patience = 3
  stop = next(e for e in range(cfg.epochs) if np.all(e - best_so_far[:, e] >= patience))
  assert stop < cfg.epochs - 2  # the case tests an early end
  assert training_lib.epochs_run(vali, patience) == stop + 1  # the rule read off a full run's curves (the cost line's)
  early = training_lib.train(keys, cfg, tiny_device.train_pos, "x", tiny_device.eval_sets, patience=patience)
  ran = slice(0, stop + 1)
  assert_same_program_bits(early.curves["vali"][:, ran], full.curves["vali"][:, ran])
  assert_same_program_bits(early.loss[:, ran], full.loss[:, ran])
  assert np.all(np.isnan(early.curves["vali"][:, stop + 1:])) and np.all(np.isnan(early.loss[:, stop + 1:]))
  np.testing.assert_array_equal(early.best_epoch, best_so_far[:, stop])
  np.testing.assert_array_equal(early.best["vali"][:, 0], running[:, stop])
  np.testing.assert_allclose(training_lib.evaluate(cfg, early.params, tiny_device.eval_sets["vali"], "x")[:, 0],
                             running[:, stop], rtol=1e-5)
  # --patience (TrainConfig.patience) is the same rule for every row; at its default 0 a configuration records no
  # field, so the saved rows' fingerprints are those of before it existed
  by_config = training_lib.train(keys, dataclasses.replace(cfg, patience=patience), tiny_device.train_pos, "x",
                                 tiny_device.eval_sets)
  np.testing.assert_array_equal(by_config.best_epoch, early.best_epoch)
  assert "patience" not in config_lib.to_dict(cfg) and config_lib.to_dict(dataclasses.replace(cfg, patience=3))[
      "patience"] == 3


def test_an_evaluation_set_without_lists_scores_nan_as_the_empty_rule_says():
  """metrics.list_mean's rule: no list to average is NaN, here for a split with no list at all (a set too small to
  have one), not a ZeroDivisionError; [seeds, cut-offs] as any evaluation."""
  cfg = training_lib.TrainConfig(hidden=8, layers=2)
  params = jax.vmap(lambda k: cfg.arch.module().init(k, jax.numpy.zeros((1, 4))))(
      jax.random.split(jax.random.PRNGKey(0), 3))
  out = training_lib.evaluate(cfg, params, training_lib.EvalSet([], 0), "x")
  assert out.shape == (3, len(cfg.ks)) and np.all(np.isnan(out))
