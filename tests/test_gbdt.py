"""LightGBM LambdaMART rows and distillation across model families (pfd_jax.methods.gbdt)."""
import os

import numpy as np
import pytest

import pfd_jax
from conftest import SMALL_GBDT as SMALL, TINY, logs_data, written
from experiments import predict
from experiments.paper import table2
from experiments.framework import cli, fold_data, outputs, rowstore, schema
from pfd_jax import data as data_lib
from pfd_jax.methods import distill
from pfd_jax.methods import gbdt
from pfd_jax.methods import rows as rows_lib
from pfd_jax import serving
from pfd_jax import training as training_lib
from pfd_jax.training import teaching
from pfd_jax.config import ConfigError

lgb = pytest.importorskip("lightgbm")


def _groups(rng, sizes, positive=True, dim=5):
  """Flat groups with continuous features and 0/1 labels; every list has a positive when `positive`."""
  offsets = np.concatenate([[0], np.cumsum(sizes)])
  x = rng.normal(size=(offsets[-1], dim)).astype(np.float32)
  y = (x[:, 0] + rng.normal(size=offsets[-1]) > 1.0).astype(np.float32)
  if positive:
    for q in range(len(sizes)):
      y[offsets[q] + rng.integers(sizes[q])] = 1.0
  return data_lib.Groups(x=x, rel=y.copy(), qid=np.arange(len(sizes)), offsets=offsets, y=y,
                         z=rng.normal(size=(offsets[-1], 2)).astype(np.float32))


@pytest.mark.heavy
def test_our_ndcg_of_a_lambdamart_model_equals_lightgbms_own():
  """Binary labels (gain 2^y - 1 in both), every list with a positive, no tied scores: LightGBM's ndcg@k eval of
  its last round equals pfd_jax.ops.metrics on the same predictions. A list without a positive is where the
  definitions differ: LightGBM scores it 1, pfd_jax leaves it out (empty_rule=exclude)."""
  rng = np.random.default_rng(0)
  g = _groups(rng, rng.integers(3, 30, size=40))
  params = dict(objective="lambdarank", num_leaves=15, min_data_in_leaf=2, metric="ndcg", eval_at=[3, 8],
                verbosity=-1, num_threads=1, deterministic=True, force_row_wise=True)
  ds = lgb.Dataset(g.x, label=g.y, group=g.sizes)
  evals = {}
  model = lgb.train(params, ds, num_boost_round=40, valid_sets=[ds], valid_names=["v"],
                    callbacks=[lgb.record_evaluation(evals)], keep_training_booster=True)
  s = model.predict(g.x).astype(np.float32)[None]
  # no tie inside a list (tied documents may be ordered differently by the two sorts)
  assert all(np.unique(s[0, a:b]).size == b - a for a, b in zip(g.offsets[:-1], g.offsets[1:]))
  ours = gbdt.mean_ndcg(training_lib.TrainConfig(ks=(3, 8)), s, g, max_buckets=8)[0]
  np.testing.assert_allclose(ours, [evals["v"]["ndcg@3"][-1], evals["v"]["ndcg@8"][-1]], rtol=0, atol=2e-6)
  # one more list, without a positive: LightGBM's mean moves toward 1, ours does not move
  h = _groups(rng, [6], positive=False)
  h = data_lib.Groups(x=h.x, rel=h.rel * 0, y=h.y * 0, qid=np.array([99]), offsets=h.offsets, z=h.z)
  both = data_lib.Groups(x=np.concatenate([g.x, h.x]), rel=np.concatenate([g.rel, h.rel]), y=np.concatenate([g.y, h.y]),
                         qid=np.arange(41), offsets=np.concatenate([g.offsets, g.offsets[-1] + h.offsets[1:]]))
  s2 = model.predict(both.x).astype(np.float32)[None]
  np.testing.assert_allclose(gbdt.mean_ndcg(training_lib.TrainConfig(ks=(3, 8)), s2, both, max_buckets=8)[0], ours,
                             atol=1e-7)
  theirs = model.eval(lgb.Dataset(both.x, label=both.y, group=both.sizes, reference=ds), "b")
  lg8 = [v for _, name, v, _ in theirs if name == "ndcg@8"][0]
  assert lg8 == pytest.approx((ours[1] * 40 + 1.0) / 41, abs=2e-6)


@pytest.fixture(scope="module")
def synthetic():
  cfg = TINY
  ds, dd, tc, keys = fold_data.fold_setup(cfg, "rankbce", 1)
  return cfg, ds, dd, tc, keys


@pytest.mark.heavy
def test_per_document_scores_evaluate_as_the_mlp_rows(synthetic):
  """An MLP's per-document scores through gbdt's evaluation give train.evaluate's numbers and per_list_ndcg's
  lists, and back into buckets they are the teacher targets distill builds for that MLP."""
  cfg, ds, dd, tc, keys = synthetic
  r = distill.train_on_data(keys, tc, dd, "xz")
  test = ds["test"]
  sc = gbdt.doc_scores(tc, r.params, test, "xz", max_buckets=cfg.data.max_buckets)
  np.testing.assert_allclose(gbdt.mean_ndcg(tc, sc, test, max_buckets=cfg.data.max_buckets),
                             training_lib.evaluate(tc, r.params, dd.eval_sets["test"], "xz"), atol=1e-6)
  lists, valid = gbdt.list_ndcg(tc, sc, test, max_buckets=cfg.data.max_buckets)
  ref, ref_valid = training_lib.per_list_ndcg(tc, r.params, dd.eval_sets["test"], "xz")
  np.testing.assert_allclose(lists[:, 0], ref, atol=1e-6)
  np.testing.assert_array_equal(valid, ref_valid)
  tr = ds["train"]
  per_doc = gbdt.doc_scores(tc, r.params, tr, "xz", max_buckets=cfg.data.max_buckets)
  buckets = data_lib.bucketize(tr, cfg.data.max_buckets)
  ours = gbdt.to_buckets(per_doc, buckets, tr.offsets)
  for a, b, pb in zip(ours, distill.teacher_targets(tc, [(r, "xz")], dd), buckets):
    np.testing.assert_allclose(np.asarray(a)[:, pb.mask], np.asarray(b)[:, pb.mask], atol=1e-6)
    assert not np.asarray(a)[:, ~pb.mask].any()
  np.testing.assert_array_equal(gbdt.from_buckets(ours, buckets, tr.offsets), per_doc)


def test_out_of_fold_scores_never_come_from_a_model_that_saw_the_list():
  rng = np.random.default_rng(1)
  g = _groups(rng, rng.integers(2, 9, size=23))
  fitted_on = []

  def fit_fn(query_index):
    fitted_on.append(set(query_index.tolist()))
    return fitted_on[-1]

  def score_fn(seen, held):  # 1 + 1000 * (this held-out list was among the model's training lists)
    return np.repeat([1.0 + 1000.0 * (int(q) in seen) for q in held.qid], held.sizes)

  out = gbdt.out_of_fold(fit_fn, score_fn, g, 4, seed=7)
  np.testing.assert_array_equal(out, 1.0)  # every document scored, none by a model that saw its list
  assert len(fitted_on) == 4 and all(len(s) < g.num_queries for s in fitted_on)
  which = gbdt.fold_of_groups(g.num_queries, 4, 7)
  assert sorted(np.bincount(which).tolist()) == [5, 6, 6, 6]
  assert not np.array_equal(which, gbdt.fold_of_groups(g.num_queries, 4, 8))


def test_real_out_of_fold_teacher_differs_from_in_sample(synthetic):
  cfg, ds, dd, tc, keys = synthetic
  seen = []
  writer = type("W", (), {"write_epoch": lambda self, s: seen.append(s.first_model)})()
  oof = gbdt.teacher_scores_oof(SMALL, tc, ds, "xz", 1, max_buckets=cfg.data.max_buckets,
                                hooks=training_lib.Hooks(writers=(writer,)))[0]
  assert seen and seen == sorted(seen) and set(seen) <= set(range(SMALL.oof_folds))  # fit after fit
  tr = ds["train"]
  which = gbdt.fold_of_groups(tr.num_queries, SMALL.oof_folds, 0)
  # fold 0's documents are scored by the model fitted on folds 1 and 2: refit it and compare
  model = gbdt.fit(SMALL, tr, "xz", ds[tc.select_on], 0, tc, query_index=np.flatnonzero(which != 0),
                   max_buckets=cfg.data.max_buckets)
  held = np.flatnonzero(which == 0)
  rows = np.concatenate([np.arange(tr.offsets[q], tr.offsets[q + 1]) for q in held])
  np.testing.assert_array_equal(oof[rows], gbdt.predict(model, tr.take(held), "xz"))
  full = gbdt.fit(SMALL, tr, "xz", ds[tc.select_on], 0, tc, max_buckets=cfg.data.max_buckets)
  assert not np.allclose(oof, gbdt.predict(full, tr, "xz"))


def test_distilled_targets_are_eq1_for_binary_cross_entropy():
  rng = np.random.default_rng(2)
  y = (rng.random(50) < 0.3).astype(np.float64)
  t = rng.normal(size=50) * 2
  in_data = rng.random(50) < 0.6
  alpha = 0.3
  q, w = gbdt.distilled_targets(y, t, in_data, alpha)
  f = rng.normal(size=50)  # any student logit
  bce = lambda lab, f: -(lab * np.log(1 / (1 + np.exp(-f))) + (1 - lab) * np.log(1 - 1 / (1 + np.exp(-f))))
  p = 1 / (1 + np.exp(-t))
  eq1 = np.where(in_data, alpha * bce(y, f), 0.0) + (1 - alpha) * bce(p, f)
  np.testing.assert_allclose(w * bce(q, f), eq1, rtol=1e-12)
  np.testing.assert_array_equal(gbdt.grades(np.array([0.0, 0.12, 0.13, 0.5, 0.88, 1.0])), [0, 0, 1, 2, 4, 4])


def test_gbdt_config_flags_and_multi_process_refusal():
  assert table2.Options().methods_for(1) == table2.all_methods()
  assert table2.Options().methods_for(2) == distill.METHODS
  with pytest.raises(ConfigError, match="methods: lambdamart: LightGBM rows need the whole training split"):
    table2.Options(methods=("pfd", "lambdamart")).methods_for(2)
  names = {n for n, *_ in cli.flag_fields(table2.Options)}
  assert {"gbdt_trees", "gbdt_leaves", "gbdt_oof_folds"} <= names
  with pytest.raises(ConfigError, match="subsample"):
    gbdt.GBDTConfig(subsample=1.5)


@pytest.fixture
def folder(logs_folder):
  return logs_folder


@pytest.mark.slow
def test_driver_rows_saved_gbdt_models_reload_bit_for_bit_and_predict(folder, tmp_path):
  data = logs_data(folder)
  cfg = TINY.replace(data=data, run=dict(save_models=True), output=dict(out_dir=str(tmp_path)),
                     options=table2.Options(methods=distill.LIGHTGBM_METHODS, gbdt=SMALL))
  res = table2.run(cfg)
  written(tmp_path, res, table2.DRIVER)  # a canary of the cross-family rows
  rows = res["losses"]["rankbce"].folds["fold1"].rows  # typed records (experiments.framework.records)
  lightgbm = {n for n, r in rows_lib.REGISTRY.items() if r.recipe.one_process and not r.when}
  assert set(rows) == lightgbm | {"no_distill", "pfd_teacher"} and rows["lambdamart"].curves == {}
  md = table2.to_markdown(outputs.as_json(res))
  for name in ("LambdaMART teacher*", "PFD student (LambdaMART teacher)", "LambdaMART student, teacher grades"):
    assert f"| {name}" in md
  models = tmp_path / "letor" / "models"
  assert sorted(os.listdir(models / "lambdamart")) == ["lightgbm_seed0.txt", "lightgbm_seed1.txt", "model.json"]

  ds = fold_data.load_dataset(data)
  raw = data_lib.load_serving(os.path.join(folder, "serve.txt"), 23)
  for row in ("lambdamart", "lambdamart_from_pfd"):
    ranker = pfd_jax.load_model(str(models / row))
    assert isinstance(ranker, serving.GBDTRanker) and ranker.recipe["model"]["kind"] == "lightgbm"
    assert ranker.input_ids == list(range(1, 21))
    # the reloaded model scores the serving file as LightGBM scores the training run's test inputs
    direct = lgb.Booster(model_file=str(models / row / "lightgbm_seed1.txt")).predict(ds["test"].x)
    np.testing.assert_array_equal(ranker.score_groups(raw, seed=1), direct.astype(np.float32))
    np.testing.assert_allclose(gbdt.mean_ndcg(training_lib.TrainConfig(), ranker.score_groups(raw, seed=1)[None],
                                              ds["test"],
                                              max_buckets=2),
                               np.asarray(rows[row].best["test"])[1:2], atol=1e-6)
  teacher = pfd_jax.load_model(str(models / "lambdamart_teacher"))
  assert teacher.input_ids == list(range(1, 24))

  out = tmp_path / "s.tsv"  # predict's own run (the command line around it is the MLPs', test_serving)
  summary = predict.run(schema.Config(options=predict.Options(model=str(models / "lambdamart"),
                                                              data=f"{folder}/serve.txt", out=str(out))))
  vals = [float(ln.split("\t")[2]) for ln in open(out)]
  np.testing.assert_array_equal(np.float32(vals), pfd_jax.load_model(str(models / "lambdamart")).score_groups(raw))
  best = pfd_jax.load_model(str(models / "lambdamart")).best_seed
  assert summary["ndcg"][0][8] == pytest.approx(np.asarray(rows["lambdamart"].best["test"])[best, 0], abs=1e-6)
  never = predict.Options(model=str(models / "lambdamart_teacher"), data=f"{folder}/serve.txt",
                          out=str(tmp_path / "never.tsv"))
  with pytest.raises(data_lib.DataError, match="feature ids 21,22,23 that appear on no line.*privileged"):
    predict.run(schema.Config(options=never))
  assert not (tmp_path / "never.tsv").exists()

  # a damaged model file is named
  bad = tmp_path / "bad"
  serving.save_model(str(bad), pfd_jax.load_model(str(models / "lambdamart")))
  (bad / "lightgbm_seed0.txt").write_text("tree\nversion=v4\nnot a model")
  with pytest.raises(serving.ModelError, match="lightgbm_seed0.txt: not a LightGBM model"):
    pfd_jax.load_model(str(bad))


def test_saved_gbdt_row_resumes_with_the_same_bits(synthetic, tmp_path):
  cfg, ds, dd, tc, keys = synthetic
  r = gbdt.train(SMALL, tc, ds, "x", 2, eval_splits=("test",), max_buckets=cfg.data.max_buckets)
  path = str(tmp_path / "row.msgpack")
  rowstore.save_result(path, r)
  back = rowstore.load_result(path)
  assert isinstance(back, gbdt.Result) and back.models == r.models and back.params == r.params
  np.testing.assert_array_equal(back.best["test"], r.best["test"])
  np.testing.assert_array_equal(gbdt.scores(back, ds["test"]), gbdt.scores(r, ds["test"]))
  seen = []
  stops = []
  writer = type("W", (), {"write_epoch": lambda self, s: seen.append(s)})()
  again = gbdt.train(SMALL, tc, ds, "x", 2, eval_splits=("test",), max_buckets=cfg.data.max_buckets,
                     hooks=training_lib.Hooks(writers=(writer,), safe_point=lambda: stops.append(1)))
  assert again.models == r.models  # same seed, same model (deterministic=True); reporting changes nothing
  # every REPORT_EVERY rounds of each seed: the selection NDCG, as an MLP row's epochs (progress line, TensorBoard)
  rounds = [(s.first_model, s.epoch) for s in seen]
  assert rounds and all(s.unit == "round" and s.epochs == 2 * SMALL.trees for s in seen) and len(stops) == len(seen)
  assert [m for m, _ in rounds] == sorted(m for m, _ in rounds) and {m for m, _ in rounds} <= {0, 1}
  assert all((e - m * SMALL.trees + 1) % gbdt.REPORT_EVERY == 0 for m, e in rounds)
  assert all(0 < float(s.metrics[tc.select_on][0, 0]) <= 1 for s in seen)


@pytest.mark.slow
def test_benchmark_peer_lightgbm_and_the_time_to_reach_it(folder):
  from experiments import peers
  splits = peers.read_letor(folder)
  r = peers.lightgbm(splits["train"], splits["test"], threads=1, trees=5, leaves=7)
  assert r["trees"] == 5 and r["docs"] == splits["train"].num_docs and 0 < r["ndcg8"] <= 1
  assert r["docs_per_s"] == pytest.approx(r["docs"] * 5 / r["fit_s"])
  ours = dict(ndcg8_curve=[0.2, 0.35, 0.31, 0.5], epoch_s=[3.0, 1.0, 1.0, 1.0])
  assert peers.reach(ours, 0.3) == (2, 4.0)
  assert peers.reach(ours, 0.5) == (4, 6.0)
  assert peers.reach(ours, 0.51) is None


@pytest.mark.heavy
def test_gbdt_teacher_teaches_through_every_teacher_transform(synthetic):
  """The out-of-fold LambdaMART scores are teacher logits like an MLP's: every teacher transform trains a student."""
  cfg, ds, dd, tc, keys = synthetic
  cache, students = {}, {}
  for mode in ("listwise", "topk"):  # SDR's affine, top-K ranks (sigmoid: the drivers' tests of these rows)
    t = teaching.REGISTRY[mode].apply(tc)
    ctx = distill.Context(keys, t, dd, ds, lightgbm=SMALL, cache=cache)
    rows = distill.run_rows(ctx, [r for r in rows_lib.plan(["pfd_from_lambdamart"]) if not r.baseline])
    r = students[mode] = rows["pfd_from_lambdamart"].result
    assert np.isfinite(np.asarray(r.loss)).all() and np.asarray(r.best["test"]).shape == (2, 3), mode
  assert set(cache) == {"lambdamart_teacher", "lambdamart_teacher_oof"}  # fitted once for both students
  # the teacher term reaches the student, in each form: neither student is the model trained without it, and
  # the two transforms of the same out-of-fold scores train two other students
  alone = distill.train_on_data(keys, tc, dd, "x")
  for r in students.values():
    assert not np.array_equal(np.asarray(r.loss), np.asarray(alone.loss))
  assert not np.array_equal(np.asarray(students["listwise"].loss), np.asarray(students["topk"].loss))
