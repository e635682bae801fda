"""The modern ranker's options: the paper's model unchanged, padding invariance of every option,
batch norm's statistics over real documents only and carried through the seed-vmapped step."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pfd_jax.methods import distill
from pfd_jax.ops import models
from pfd_jax.ops import precision as precision_lib
from pfd_jax.ops.models import Arch
from pfd_jax import training as training_lib
from pfd_jax.config import ConfigError

from conftest import TINY, assert_close_at_scale, operand_roundoff

pytestmark = pytest.mark.numeric

OPTIONS = [Arch(hidden=8, layers=3), Arch(hidden=8, layers=3, norm="batch"), Arch(hidden=8, layers=3, norm="layer"),
           Arch(hidden=8, layers=3, norm="batch", dropout=0.3, noise=0.5, clip=1.5),
           Arch(hidden=8, layers=3, norm="batch", tower=1), Arch(hidden=8, layers=3, norm="batch", input_affine=False)]


def _lists(seed=0, q=3, n=6, d=4):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(q, n, d)).astype(np.float32) * 2
  m = rng.random((q, n)) > 0.3
  m[:, 0] = True
  return x, m


def _forward_error_bound(x, layers: list, roundoff: float) -> tuple:
  """(float64 output, a bound on each output's error) of the ReLU stack `layers` ([(kernel, bias)] in float64)
  computed with float32 products whose operands are rounded to `roundoff` (0: float32 operands), by running
  error analysis: a product of K terms of inputs carrying error e is off by at most |W| e + (2 r + r^2 + gamma_K)
  |h||W| (first-order operand rounding, float32 accumulation in any order: gamma_K = K u / (1 - K u)), plus one
  float32 rounding of the bias add; ReLU is 1-Lipschitz."""
  u = precision_lib.F32_ROUNDOFF
  h, err = x, np.zeros_like(x)
  for i, (w, b) in enumerate(layers):
    k = w.shape[0]
    terms = (np.abs(h) + err) @ np.abs(w)
    y = h @ w + b
    err = err @ np.abs(w) + (2 * roundoff + roundoff ** 2 + k * u / (1 - k * u)) * terms + u * (np.abs(y) + terms)
    h = np.maximum(y, 0) if i < len(layers) - 1 else y
  return h, err


@pytest.mark.parametrize("precision", ["highest", "tf32"])
def test_the_paper_model_is_a_plain_relu_stack(precision):
  """No option on: five Dense layers and nothing else, and apply = the ReLU stack in float64 NumPy, within the
  error the precision in force allows (float32 products, or TF32 operands under --tf32 or on a GPU): the bound of
  _forward_error_bound, not a tolerance picked to pass."""
  arch = Arch(matmul_precision=precision)
  params = arch.module().init(jax.random.PRNGKey(0), jnp.zeros((1, 7)))
  assert set(params) == {"params"} and sorted(params["params"]) == [f"Dense_{i}" for i in range(5)]
  x = np.random.default_rng(1).normal(size=(40, 7)).astype(np.float32)
  layers = [(np.asarray(params["params"][f"Dense_{i}"]["kernel"], np.float64),
             np.asarray(params["params"][f"Dense_{i}"]["bias"], np.float64)) for i in range(5)]
  want, bound = _forward_error_bound(x.astype(np.float64), layers, operand_roundoff(precision))
  got = np.asarray(arch.module().apply(params, jnp.asarray(x)), np.float64)
  assert np.all(np.abs(got - want[:, 0]) <= bound[:, 0]), np.max(np.abs(got - want[:, 0]) / bound[:, 0])


def test_the_error_bound_fails_an_error_the_precision_does_not_allow():
  """The bound is tight enough to tell TF32 from float32: the product of TF32-rounded operands breaks float32's."""
  from tf32 import round_tf32
  rng = np.random.default_rng(2)
  x, w = rng.normal(size=(64, 48)).astype(np.float32), rng.normal(size=(48, 1)).astype(np.float32)
  tf = round_tf32(x).astype(np.float64) @ round_tf32(w).astype(np.float64)
  want, f32_bound = _forward_error_bound(x.astype(np.float64), [(w.astype(np.float64), np.zeros(1))], 0.0)
  _, tf32_bound = _forward_error_bound(x.astype(np.float64), [(w.astype(np.float64), np.zeros(1))],
                                       precision_lib.TF32_ROUNDOFF)
  assert np.any(np.abs(tf - want) > f32_bound) and np.all(np.abs(tf - want) <= tf32_bound)


@pytest.mark.parametrize("precision", ["highest", "tf32"])
@pytest.mark.parametrize("arch", OPTIONS, ids=lambda a: f"{a.norm}-{a.dropout}-{a.tower}-{a.input_affine}")
def test_every_option_is_padding_invariant(arch, precision):
  """Scoring and a training forward pass give the real documents the same scores, and batch norm the same
  new statistics, whatever padding (arbitrary features) a list carries.

  At 'highest' (the default) to float32's rounding. Below it, on a GPU (or under --tf32) a layer's product is
  float32 or TF32 by its shape (pfd_jax.ops.precision): the tower model's first product is float32 for the 18
  unpadded documents ((18 + 8) 3 = 78 < 100) and TF32 for the 33 padded ones, so a score depends on its bucket by
  up to TF32's rounding: each of `layers` products perturbs a value by at most 2 r of its scale (r = 2^-11), on
  each side of the comparison, hence 4 r layers of the values' scale."""
  x, m = _lists()
  arch = arch._replace(matmul_precision=precision)
  rtol = max(1e-6, 4 * operand_roundoff(precision) * arch.layers)
  model = arch.module()
  params = model.init(jax.random.PRNGKey(0), jnp.zeros((1, x.shape[-1])))
  pad = np.concatenate([x, np.full((x.shape[0], 5, x.shape[-1]), 1e3, np.float32)], 1)
  pad_m = np.concatenate([m, np.zeros((x.shape[0], 5), bool)], 1)
  x2 = np.where(m[..., None], x, -7e2)  # the padded slots of the original lists hold other values too
  rngs = dict(noise=jax.random.PRNGKey(1), dropout=jax.random.PRNGKey(2))
  score = lambda f: np.asarray(model.apply(params, f))
  assert_close_at_scale(score(pad)[:, :x.shape[1]][m], score(x)[m], rtol)
  assert_close_at_scale(score(x2)[m], score(x)[m], rtol)
  train = lambda f, mask: model.apply(params, f, mask, train=True, rngs=rngs, mutable=["batch_stats"])
  # at the scale of the whole tree (scores and statistics of order 1): a statistic that is 0 in exact arithmetic
  # (the mean of a normalised layer) is rounding noise of order-1 terms, ~1e-9 here, and differs in its every bit
  # between CPUs (an AMD EPYC without AVX-512: -5.6e-9 against -6.3e-9); its own scale would demand 1e-14 of it
  scale = lambda b: max(float(np.max(np.abs(np.asarray(v)))) for v in jax.tree_util.tree_leaves(b))
  same = lambda a, b: jax.tree_util.tree_map(lambda u, v: assert_close_at_scale(u, v, max(rtol, 1e-5), scale(b)),
                                               a, b)
  (s1, st1), (s2, st2) = train(x, m), train(x2, m)
  same((np.asarray(s2)[m], st2), (np.asarray(s1)[m], st1))
  if not arch.stochastic:  # noise and dropout draw per slot: the longer list draws other numbers
    s3, st3 = train(pad, pad_m)
    same((np.asarray(s3)[:, :x.shape[1]][m], st3), (np.asarray(s1)[m], st1))


def test_padding_tolerance_is_the_scores_scale_not_each_score():
  """On an AMD EPYC without AVX-512, a score of 0.0062635 moved by 2e-8 (3.1e-6 relative) once its list was padded, among
  scores of order 1; that is rounding, and passes; an error of 1e-5 on it is not, and fails."""
  scores = np.array([0.0062635, -0.84, 1.37, 0.52], np.float32)
  moved = scores.copy()
  moved[0] += 2e-8
  with pytest.raises(AssertionError):
    np.testing.assert_allclose(moved, scores, rtol=1e-6)  # the old tolerance: one CPU's bits only
  assert_close_at_scale(moved, scores)
  moved[0] += 1e-5
  with pytest.raises(AssertionError):
    assert_close_at_scale(moved, scores)


def test_batch_norm_statistics_are_those_of_the_real_documents():
  x, m = _lists(2)
  mu, var = models.masked_moments(jnp.asarray(x), jnp.asarray(m))
  real = x[m].astype(np.float64)
  np.testing.assert_allclose(mu, real.mean(0), rtol=1e-5)
  np.testing.assert_allclose(var, real.var(0), rtol=1e-4)
  # a padded and an unpadded copy of the same documents: the same statistics
  mu2, var2 = models.masked_moments(jnp.asarray(real[None], jnp.float32))
  np.testing.assert_allclose(mu2, mu, rtol=1e-5)
  np.testing.assert_allclose(var2, var, rtol=1e-4)
  # the module: one training step moves the running statistics by (1 - momentum) towards them
  bn = models.MaskedBatchNorm()
  v = bn.init(jax.random.PRNGKey(0), jnp.asarray(x))
  _, new = bn.apply(v, jnp.asarray(x), jnp.asarray(m), train=True, mutable=["batch_stats"])
  np.testing.assert_allclose(new["batch_stats"]["mean"], 0.1 * real.mean(0), rtol=1e-5)
  np.testing.assert_allclose(new["batch_stats"]["var"], 0.9 + 0.1 * real.var(0), rtol=1e-5)


@pytest.fixture(scope="module")
def batch_norm_run(tiny_device):
  """(config, result) of 3 seeds of a batch-normalised MLP with dropout and noise, trained for 3 epochs."""
  cfg = training_lib.TrainConfig(epochs=3, batch_size=16, hidden=16, layers=3, norm="batch", dropout=0.1, noise=0.1)
  return cfg, distill.train_on_data(jax.random.split(jax.random.PRNGKey(0), 3), cfg, tiny_device, "x")


@pytest.mark.heavy
def test_batch_norm_runs_through_the_seed_vmapped_step(batch_norm_run, tiny_device):
  """Each seed keeps its own running statistics, moved away from their initial (0, 1), and the kept best
  parameters score exactly the recorded best NDCG (scoring uses the running statistics)."""
  cfg, res = batch_norm_run
  stats = res.params["batch_stats"]["MaskedBatchNorm_1"]  # a hidden layer's: depends on each seed's weights
  assert stats["mean"].shape[0] == 3 and not np.allclose(stats["mean"][0], stats["mean"][1])
  assert not np.allclose(stats["var"], 1.0)
  again = training_lib.evaluate(cfg, res.params, tiny_device.eval_sets["test"], "x")
  np.testing.assert_allclose(again, res.best["test"], rtol=1e-5)
  assert res.loss[:, -1, 0].mean() < res.loss[:, 0, 0].mean()


@pytest.mark.heavy
def test_a_seed_ensemble_scores_the_mean_logit_of_its_seeds(batch_norm_run, tiny_device):
  """distill.ensemble_lists = NDCG of the mean of the seeds' logits, list by list; one seed = its single model."""
  from experiments.framework import fold_data as fsetup
  from pfd_jax.methods import gbdt
  from pfd_jax.ops import metrics
  cfg, res = batch_norm_run
  ds = fsetup.load_dataset(TINY.data)
  ens, valid = distill.ensemble_lists(cfg, res, ds["test"], "x", max_buckets=2)
  logits = gbdt.doc_scores(cfg, res.params, ds["test"], "x", max_buckets=2)  # [S, N]
  g = ds["test"]
  want = []
  for q in range(g.num_queries):
    lo, hi = g.offsets[q], g.offsets[q + 1]
    if g.y[lo:hi].max() > 0:
      want.append(float(metrics.ndcg_at_k(jnp.asarray(logits[:, lo:hi].mean(0)), jnp.asarray(g.y[lo:hi]), k=8)))
  assert ens.shape[1] == valid.size and valid.sum() == len(want)
  np.testing.assert_allclose(np.sort(ens[0][valid]), np.sort(want), rtol=1e-5)
  one = jax.tree_util.tree_map(lambda a: a[:1], res.params)
  single, _ = training_lib.per_list_ndcg(cfg, one, tiny_device.eval_sets["test"], "x")
  alone, _ = distill.ensemble_lists(cfg, dataclasses.replace(res, params=one), ds["test"], "x", max_buckets=2)
  np.testing.assert_allclose(alone[0], single[0], rtol=1e-6)


@pytest.mark.slow
@pytest.mark.long
def test_table2_on_own_data_adds_ensemble_rows(tmp_path):
  """The ensemble rows reach results.json and table.md, each compared with LambdaMART's ensemble over queries."""
  from conftest import SMALL_GBDT, tiny
  from experiments.paper import table2
  from experiments.framework import outputs
  cfg = tiny(table2.Options(methods=("no_distill", "lambdamart"), gbdt=SMALL_GBDT, search=True, search_columns=1),
             run=dict(ensembles=True), train=dict(select_on="vali"))
  res = outputs.as_json(table2.run(cfg))
  lr = res["losses"]["rankbce"]
  fold = lr["folds"]["fold1"]
  rows = {"no_distill", "lambdamart", "pfd_searched"}
  assert set(fold["ensembles"]) == rows and set(fold["latency"]) == rows
  assert "vs_lambdamart" in lr["comparisons"]["ensembles"]["no_distill"]
  # the searched row is the search's chosen candidate: its validation NDCG is the candidate's, over the same lists
  s = fold["search"]
  # the own-data defaults' sequence, declared before any score is read: 3 subsets (all; the strongest alone; all but
  # it) x 3 alphas x 2 temperatures. Screened: no distillation, each subset at alpha 0.5, T 1, then the other 5
  # settings of the first subset the rule passes at that setting, if any (search.second_stage)
  plain = [c for c in s["order"] if c.endswith("], alpha 0.5, T 1")]
  grid = 5 * any(p in plain for p in s["passed"])
  assert len(s["order"]) == 3 * 6 and len(plain) == 3 and s["order"][0] == plain[0]
  assert len(s["candidates"]) == 1 + 3 + grid and s["chosen"] in s["candidates"]
  assert cfg.options.searching().candidates(fold["data"]["num_privileged"], 0.5) == 1 + 3 + 5  # at most, said before
  # the fallback procedure over the declared order, plain PFD first at half the level, on validation and 3
  # cross-fitted folds' held-out training lists; the rule's operating characteristics simulated at these sizes
  assert s["order"][0].count(",") > 2 and s["levels"][0] == pytest.approx(0.025)
  assert s["folds"] == 3 and s["pooled_lists"] > s["lists"]
  assert set(s["gains"]) == set(s["candidates"]) - {"no distillation"}  # every distilling candidate screened
  assert s["chosen"] == "no distillation" or s["chosen"] in s["passed"]
  assert 0 <= s["operating"]["false"] <= 1 and set(s["operating"]["power"]) == {"0.03", "0.05"}
  w = s["whole"]  # the whole rule's: the gain planted in each subset's plain setting in turn, plain PFD first
  assert w["planted"] == plain and set(w["power"]["0.05"]) == set(plain) and w["seed_bound"] >= w["seed_var"]
  # the searched row is the chosen candidate trained as its row is (every seed, the whole training split, its epoch
  # chosen on every validation list), not the screened model, whose score is over the scoring lists only: no
  # distillation chosen, it is the no-distillation row itself
  searched, base = (np.asarray(fold["rows"][n]["best"]["vali"]) for n in ("pfd_searched", "no_distill"))
  assert searched.shape == base.shape
  # the claimed gains against the test lists, scored after the choice: the best distilling candidate's on every test
  # list with a positive, its read gain the search's estimate
  f = s["fresh"]
  assert f["best"]["fresh_lists"] == int(np.sum(fold["test_lists_valid"])) and f["best"]["candidate"] in s["gains"]
  assert f["best"]["claimed"] == pytest.approx(s["gains"][f["best"]["candidate"]]["diff"] /
                                               s["gains"][f["best"]["candidate"]]["reference"])
  assert (f["chosen"] is None) == (s["chosen"] == "no distillation")
  if s["chosen"] == "no distillation":
    np.testing.assert_array_equal(*(fold["ensembles"][n]["vali_single_lists"] for n in ("pfd_searched", "no_distill")))
  # the deploy choice reads validation only: each candidate's validation NDCG is the row's own (its seeds' mean, the
  # ensemble's), from the per-list values it pairs; the chosen one is the best or tied with it (choice.tied_with_best)
  vali = {f"{n}/single": float(np.mean(np.asarray(fold["rows"][n]["best"]["vali"])[:, 0])) for n in fold["rows"]}
  vali.update({f"{n}/ensemble": fold["ensembles"][n]["vali_ndcg"][0] for n in fold["ensembles"]})
  d = lr["deploy"]
  assert d["vali_all"] == pytest.approx(vali, rel=1e-5) and d["best"] == max(vali, key=vali.get)
  assert f"{d['row']}/{d['kind']}" in d["within"] and d["gap"][0] <= d["threshold"] * d["gap"][1] + 1e-12
  md = table2.to_markdown(res)
  assert "No-distillation, seed ensemble" in md and "vs LambdaMART ensemble (queries)" in md
  assert "**Which to deploy**" in md and "p50 / p99" in md
  assert "**PFD searched on validation**" in md and "| PFD, searched on validation" in md
  assert "is found with probability" in md and "the smallest gain found with probability 0.8" in md
  assert "The whole rule as run" in md and "when another subset's plain setting has it" in md
  assert "Against the test lists, which the search never read" in md and "The search's selection bias" in md
  with pytest.raises(ConfigError, match="select_on=vali"):
    table2.run(cfg.replace(train=dict(select_on="test")))
  with pytest.raises(ConfigError, match="search_folds.*at least 2 folds"):
    table2.run(cfg.replace(options=dataclasses.replace(cfg.options, search_folds=1)))


def test_the_benchmarks_multiply_add_floor_counts_the_models_own_kernels():
  """bench_modern.training_macs: forward = the Dense kernels' sizes as the initialised model has them (96 regular
  features: 39,700 for the paper's MLP, 155,904 for the modern ranker), x 3 for training, less the first layer's
  input gradient where nothing before it trains: a floor ratio of 4.27 between the two."""
  from experiments.bench import modern as bench_modern
  for arch, forward in ((Arch(), 39_700), (bench_modern.ARCHS["modern"], 155_904)):
    params = arch.module().init({"params": jax.random.PRNGKey(0)}, jnp.zeros((1, 2, 96)))["params"]
    kernels = [v["kernel"] for k, v in sorted(params.items(), key=lambda kv: int(kv[0].split("_")[1]))
               if k.startswith("Dense")]
    assert sum(k.size for k in kernels) == forward
    first = 0 if arch.norm != "none" else kernels[0].size
    assert bench_modern.training_macs(arch, 96) == 3 * forward - first
  ratio = bench_modern.training_macs(bench_modern.ARCHS["modern"], 96) / bench_modern.training_macs(Arch(), 96)
  assert round(ratio, 2) == 4.27
  assert list(bench_modern.LADDER)[0] == "paper MLP" and bench_modern.LADDER["+ noise (modern)"] == \
      bench_modern.ARCHS["modern"]


def _naive_normalise(x, w, eps):
  """Batch norm's training forward pass as written (two masked moments), for autodiff."""
  mu, v = models.masked_moments(x, w > 0)
  return (x - mu) * jax.lax.rsqrt(v + eps), mu, v


def test_batch_norms_closed_form_gradient_is_float64_autodiffs():
  """models.normalise (float32, its VJP the closed form) against autodiff of the plain formula in float64, for
  cotangents on all three outputs (the normalised x, the mean and the variance), padded entries included with
  cotangents of their own; then the real documents' gradients do not see padding whose cotangents are zero."""
  rng = np.random.default_rng(3)
  x = (rng.normal(size=(2, 3, 5, 4)) * [1, 3, 0.2, 5] + [0, 4, -1, 20]).astype(np.float32)  # moments far from (0, 1)
  w = (rng.random((2, 3, 5)) > 0.3).astype(np.float32)
  w[0, 0, 0] = 1
  cots = [rng.normal(size=s).astype(np.float32) for s in (x.shape, (4,), (4,))]
  out, vjp = jax.vjp(lambda a: models.normalise(a, jnp.asarray(w), 1e-5), jnp.asarray(x))
  with jax.enable_x64(True):
    ref_out, ref_vjp = jax.vjp(lambda a: _naive_normalise(a, jnp.asarray(w, jnp.float64), 1e-5),
                               jnp.asarray(x, jnp.float64))
    (ref_dx,) = ref_vjp(tuple(jnp.asarray(c, jnp.float64) for c in cots))
    ref_out, ref_dx = jax.tree_util.tree_map(np.asarray, (ref_out, ref_dx))
  for got, want in zip(out, ref_out):
    assert_close_at_scale(np.asarray(got), want, 1e-5)
  (dx,) = vjp(tuple(jnp.asarray(c) for c in cots))
  assert_close_at_scale(np.asarray(dx), ref_dx, 1e-5)
  # a padded copy (5 more entries per list, zero weight and zero cotangent): the same gradient on the real ones
  pad = lambda a, v: np.concatenate([a, np.full(a.shape[:2] + (5,) + a.shape[3:], v, np.float32)], 2)
  _, vjp2 = jax.vjp(lambda a: models.normalise(a, jnp.asarray(pad(w, 0)), 1e-5), jnp.asarray(pad(x, 1e3)))
  (dx2,) = vjp2((jnp.asarray(pad(cots[0], 0)), jnp.asarray(cots[1]), jnp.asarray(cots[2])))
  assert_close_at_scale(np.asarray(dx2)[:, :, :5], np.asarray(dx), 1e-5)


def test_dropout_draws_four_decisions_per_hash_at_its_quantised_rate():
  """models.dropout: entry j of a row is dropped when byte j % 4 (little-endian) of the row's word j // 4 of
  jax.random.bits is below q = round(256 rate); kept entries are scaled by 256 / (256 - q), so the mean is kept."""
  assert [models.dropout_level(r) for r in (0.0, 0.001, 0.1, 0.3, 0.9)] == [0, 1, 26, 77, 230]
  key, x = jax.random.PRNGKey(7), jnp.ones((2048, 6), jnp.float32)  # 6 entries: the second word half used
  y = np.asarray(models.dropout(key, x, 0.3))
  octets = np.asarray(jax.random.bits(key, (2048, 2), jnp.uint32)).astype("<u4").view(np.uint8).reshape(2048, 8)
  np.testing.assert_array_equal(y, np.where(octets[:, :6] >= 77, np.float32(256 / 179), 0))
  big = np.asarray(models.dropout(jax.random.PRNGKey(1), jnp.ones((4096, 256)), 0.3))
  dropped = (big == 0).mean(0)  # each feature column: Binomial(4096, 77/256)
  assert abs(dropped.mean() - 77 / 256) < 5 * np.sqrt(77 / 256 * 179 / 256 / big.size)
  assert np.all(np.abs(dropped - 77 / 256) < 5 * np.sqrt(77 / 256 * 179 / 256 / 4096))
  assert abs(big.mean() - 1) < 0.01
  np.testing.assert_array_equal(np.asarray(models.dropout(key, x, 0.3)), y)  # same key, same bits
  assert not np.array_equal(np.asarray(models.dropout(jax.random.PRNGKey(8), x, 0.3)), y)
  assert models.dropout(key, x, 0.0) is x


def test_the_input_norm_without_affine_has_no_parameters_and_no_input_gradient():
  arch = Arch(hidden=8, layers=3, norm="batch", input_affine=False)
  params = arch.module().init(jax.random.PRNGKey(0), jnp.zeros((1, 2, 4)))
  assert "MaskedBatchNorm_0" not in params["params"] and "MaskedBatchNorm_0" in params["batch_stats"]
  assert set(params["params"]["MaskedBatchNorm_1"]) == {"scale", "bias"}
  from experiments.bench import modern as bench_modern
  assert bench_modern.training_macs(arch, 4) == 3 * (4 * 8 + 8 * 8 + 8) - 4 * 8
