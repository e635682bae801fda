"""SDR and Ranking Distillation pieces pinned to their equations (SDR Eq. 4, 8, 10; RD Eq. 4, 5, 8, 9, Alg. 1)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pfd_jax.ops import losses as L
from pfd_jax.ops import teacher as TT
from pfd_jax.ops import topk as RD
from pfd_jax.training.config import TopK

from conftest import assert_close_at_scale

pytestmark = pytest.mark.numeric


def test_affine_transform_eq10():
  t = jnp.array([-2.0, -0.5, 0.0, 0.7, 3.0])
  g = TT.get_transform("affine", a=2.0, b=0.5)
  np.testing.assert_allclose(g(t), np.maximum(2.0 * np.asarray(t) + 0.5, 0.0))
  assert float(jnp.min(g(t))) == 0.0  # the max(., 0) safeguard
  with pytest.raises(ValueError, match="slope a > 0"):
    TT.get_transform("affine", a=0.0)
  with pytest.raises(ValueError, match="unknown teacher transform"):
    TT.get_transform("cube")
  m = jnp.array([True, True, True, False, False])
  p = TT.get_transform("softmax", temperature=2.0)(t, m)
  e = np.exp(np.asarray(t[:3]) / 2.0)
  np.testing.assert_allclose(p, np.r_[e / e.sum(), 0, 0], rtol=1e-6)


def test_sdr_combined_loss_eq4():
  """SDR Eq. 4 with a on the distillation term = our Eq. 1 with alpha = 1 - a on the data term."""
  rng = np.random.default_rng(0)
  s, y, t = rng.normal(size=(3, 7)), rng.integers(0, 5, (3, 7)).astype(float), rng.normal(size=(3, 7))
  m = np.ones((3, 7), bool)
  m[1, 5:] = False
  a = 0.3

  def softmax_ce(labels, scores, mask):  # float64 reference of Eq. 8, labels not renormalised
    out = []
    for lab, sc, mk in zip(labels, scores, mask):
      sc, lab = sc[mk], lab[mk]
      logp = sc - np.log(np.exp(sc - sc.max()).sum()) - sc.max()
      out.append(-(lab * logp).sum())
    return np.array(out)

  g = np.maximum(1.5 * t - 0.2, 0.0)
  want = ((1 - a) * softmax_ce(y, s, m) + a * softmax_ce(g, s, m)).sum()
  got = TT.distillation_loss(L.softmax, jnp.asarray(s), jnp.asarray(y),
                            TT.get_transform("affine", a=1.5, b=-0.2)(jnp.asarray(t)), jnp.asarray(m), alpha=1 - a)
  np.testing.assert_allclose(got, want, rtol=1e-5)
  # pointwise distillation (SDR Eq. 12) under a listwise data loss: teacher_loss_fn replaces the teacher term
  got = TT.distillation_loss(L.softmax, jnp.asarray(s), jnp.asarray(y), jnp.asarray(g), jnp.asarray(m),
                            alpha=1 - a, teacher_loss_fn=L.mse)
  want = ((1 - a) * softmax_ce(y, s, m) + a * (np.where(m, (s - g) ** 2, 0)).sum(-1)).sum()
  np.testing.assert_allclose(got, want, rtol=1e-5)


def test_teacher_ranks_top_k_of_unlabelled():
  t = jnp.array([[5.0, 4.0, 3.0, 2.0, 1.0, 9.0]])
  y = jnp.array([[1.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
  m = jnp.array([[True, True, True, True, True, False]])  # the 9.0 is padding
  # the labelled document (5.0) and padding are skipped: ranks 1, 2, 3 go to 4.0, 3.0, 2.0
  np.testing.assert_array_equal(RD.teacher_ranks(t, y, m, 3), [[0, 1, 2, 3, 0, 0]])
  # fewer unlabelled documents than K: every one of them is ranked
  np.testing.assert_array_equal(RD.teacher_ranks(t, y, m, 10), [[0, 1, 2, 3, 4, 0]])


def _exact_student_ranks(s, t_rank, unl):
  """Rank of each teacher top-K document among the unlabelled documents by student score (1 = top)."""
  out = []
  for r in range(1, int(t_rank.max()) + 1):
    i = int(np.flatnonzero(t_rank == r)[0])
    out.append(1 + sum(1 for j in np.flatnonzero(unl) if j != i and s[j] > s[i]))
  return np.array(out, float)


@pytest.mark.heavy
def test_rank_estimate_algorithm1_converges_to_exact_rank():
  rng = np.random.default_rng(1)
  l, k = 40, 5
  s = rng.normal(size=l).astype(np.float32)
  y = np.zeros(l, np.float32)
  y[[3, 17]] = 1.0
  mask = np.ones(l, bool)
  mask[-4:] = False
  unl = mask & (y == 0)
  t_rank = np.asarray(RD.teacher_ranks(jnp.asarray(rng.normal(size=l)), y, mask, k))
  exact = _exact_student_ranks(s, t_rank, unl)
  n_other = unl.sum() - 1
  errs = []
  for eps in (2, 8, 20, int(n_other)):
    keys = jax.random.split(jax.random.PRNGKey(eps), 400)
    est = jax.vmap(lambda kk: RD.estimate_ranks(kk, jnp.asarray(s), jnp.asarray(t_rank), jnp.asarray(unl),
                                                k, eps)[0])(keys)
    errs.append(float(np.mean(np.abs(np.asarray(est) - exact))))
    if eps == n_other:  # every other unlabelled document drawn: the estimate is the exact rank
      np.testing.assert_array_equal(np.asarray(est[0]), exact)
  assert errs[0] > errs[1] > errs[2] > errs[3] == 0.0, errs
  # floor(n (N-1)/eps) + 1 is unbiased up to the floor: mean estimate within 1 of the exact rank at eps=8
  keys = jax.random.split(jax.random.PRNGKey(9), 2000)
  est = jax.vmap(lambda kk: RD.estimate_ranks(kk, jnp.asarray(s), jnp.asarray(t_rank), jnp.asarray(unl), k,
                                              8)[0])(keys)
  assert np.all(np.abs(np.asarray(est).mean(0) - exact) < 1.0)


def test_weights_eq8_eq9_and_schemes():
  r = jnp.arange(1.0, 5.0)
  present = jnp.array([True, True, True, False])
  r_hat = jnp.array([1.0, 9.0, 2.0, 0.0])
  wa = np.exp(-np.arange(1, 4) / 2.0)
  wa = np.r_[wa / wa.sum(), 0]
  wb = np.r_[np.tanh(np.maximum(0.3 * (np.array([1.0, 9.0, 2.0]) - np.arange(1, 4)), 0)), 0]
  np.testing.assert_allclose(RD.topk_weights(r, present, k=4, lam=2.0, scheme="position"), wa,
                             rtol=1e-6)
  np.testing.assert_allclose(RD.discrepancy_weights(r_hat[:3], r[:3], 0.3), wb[:3], rtol=1e-6)
  assert wb[0] == 0.0 and wb[2] == 0.0 and wb[1] > 0  # ranked at or above the teacher: no weight
  np.testing.assert_allclose(RD.topk_weights(r, present, r_hat, k=4, lam=2.0, mu=0.3), wa * wb / (wa * wb).sum(), rtol=1e-6)
  np.testing.assert_allclose(RD.topk_weights(r, present, k=4, scheme="uniform"), [.25, .25, .25, 0])
  np.testing.assert_allclose(RD.topk_weights(r, present, k=4, scheme="inverse"), [1, .5, 1 / 3, 0],
                             rtol=1e-6)
  with pytest.raises(ValueError, match="scheme"):
    TopK(scheme="best")


@pytest.mark.parametrize("scheme", ["uniform", "position", "hybrid"])
def test_topk_loss_eq5_padding_and_gradient(scheme):
  rng = np.random.default_rng(2)
  l, k = 12, 4
  s = jnp.asarray(rng.normal(size=(2, l)), jnp.float32)
  y = jnp.asarray((rng.random((2, l)) < 0.2).astype(np.float32))
  mask = jnp.ones((2, l), bool).at[1, 9:].set(False)
  t_rank = RD.teacher_ranks(jnp.asarray(rng.normal(size=(2, l))), y, mask, k)
  cfg = TopK(k=k, scheme=scheme, lam=3.0, eps=l - 1)
  key = jax.random.PRNGKey(0)
  got = RD.topk_loss(s, t_rank, mask, y, key=key, **cfg.loss_settings())
  # reference: -sum_r w_r log sigmoid(s_{pi_r}) with the weights of topk_weights (exact ranks: eps = N - 1)
  for q in range(2):
    tr = np.asarray(t_rank[q])
    unl = np.asarray(mask[q]) & (np.asarray(y[q]) == 0)
    idx = [int(np.flatnonzero(tr == r)[0]) for r in range(1, int(tr.max()) + 1)]
    rr = jnp.arange(1.0, k + 1)
    present = jnp.arange(k) < len(idx)
    r_hat = np.zeros(k)
    r_hat[:len(idx)] = _exact_student_ranks(np.asarray(s[q]), tr, unl)
    w = np.asarray(RD.topk_weights(rr, present, jnp.asarray(r_hat), k=cfg.k, scheme=cfg.scheme, lam=cfg.lam, mu=cfg.mu))
    want = -sum(w[i] * np.log(1 / (1 + np.exp(-float(s[q, j])))) for i, j in enumerate(idx))
    np.testing.assert_allclose(got[q], want, rtol=1e-5, atol=1e-6)
  # padding invariance: extra padded documents change neither the value nor the gradient
  pad = lambda a, v: jnp.concatenate([a, jnp.full((2, 5), v, a.dtype)], -1)
  f = lambda sc, tr, mk, yy: jnp.sum(RD.topk_loss(sc, tr, mk, yy, key=key, **cfg.loss_settings()))
  g1 = jax.grad(f)(s, t_rank, mask, y)
  g2 = jax.grad(f)(pad(s, 3.0), pad(t_rank, 0.0), pad(mask, False), pad(y, 0.0))
  assert_close_at_scale(f(pad(s, 3.0), pad(t_rank, 0.0), pad(mask, False), pad(y, 0.0)), f(s, t_rank, mask, y))
  assert_close_at_scale(g2[:, :l], g1)
  np.testing.assert_array_equal(g2[:, l:], 0.0)
  # only the teacher's top-K documents receive gradient, and only upward (Eq. 5 has positives alone)
  assert np.all((np.asarray(g1) != 0) <= (np.asarray(t_rank) > 0))
  assert np.all(np.asarray(g1) <= 0)


def test_hybrid_warmup_uses_position_weights():
  rng = np.random.default_rng(3)
  s = jnp.asarray(rng.normal(size=(1, 20)), jnp.float32)
  y = jnp.zeros((1, 20))
  m = jnp.ones((1, 20), bool)
  tr = RD.teacher_ranks(jnp.asarray(rng.normal(size=(1, 20))), y, m, 5)
  key = jax.random.PRNGKey(0)
  warm = RD.topk_loss(s, tr, m, y, key=key, k=5, scheme="hybrid", hybrid_on=False)
  pos = RD.topk_loss(s, tr, m, y, key=key, k=5, scheme="position")
  np.testing.assert_allclose(warm, pos, rtol=1e-6)


# ---------------------------------------------------------------- the drivers, end to end on a tiny config

from experiments.paper import pfd_teacher_loss  # noqa: E402
from experiments.related import rank_distill as rd_driver, sdr  # noqa: E402
from conftest import tiny, written  # noqa: E402


@pytest.mark.slow
def test_sdr_driver(tmp_path):
  res = sdr.run(tiny(sdr.Options(sdr_a=0.5, temperatures=(0.5, 2.0)), run=dict(loss="softmax")))
  js = written(tmp_path, res, sdr.DRIVER)
  assert js["data"]["labels"] == "graded" and js["data"]["num_privileged"] == 0
  want = {"pointwise teacher", "pointwise -> pointwise", "pointwise -> listwise", "listwise teacher",
          "listwise -> pointwise", "listwise -> listwise", "teacher-only objective (a = 1)",
          "softmax transform T = 0.5", "softmax transform T = 2.0"}
  assert set(js["rows"]) == want
  v = np.asarray(js["rows"]["listwise -> listwise"])
  assert v.shape == (2, 3) and np.all((v >= 0) & (v <= 1))
  # the teacher, the objective and the transform's temperature each reach the student
  for a, b in (("pointwise -> listwise", "listwise -> listwise"), ("listwise -> listwise", "listwise -> pointwise"),
               ("softmax transform T = 0.5", "softmax transform T = 2.0")):
    assert not np.array_equal(js["rows"][a], js["rows"][b]), (a, b)


@pytest.mark.slow
def test_rank_distill_driver(tmp_path):
  res = rd_driver.run(tiny(rd_driver.Options(teacher_hidden=32, student_hidden=8, rd_a=0.5,
                                             schemes=("uniform", "hybrid"))))
  js = written(tmp_path, res, rd_driver.DRIVER)
  assert list(js["rows"]) == ["teacher", "student", "uniform", "hybrid"]
  assert js["info"]["teacher"]["params"] > js["info"]["student"]["params"] == js["info"]["hybrid"]["params"]
  assert set(js["rows"]["hybrid"]) == {"NDCG@3", "NDCG@5", "NDCG@10", "P@3", "P@5", "P@10", "MAP"}
  assert all(i["ms_per_1000_docs"] > 0 for i in js["info"].values())
  # the distilled student (same shape, same keys) is another model than the student trained alone
  r = {k: np.asarray(v["NDCG@10"]) for k, v in js["rows"].items()}
  assert not np.array_equal(r["uniform"], r["student"])


@pytest.mark.slow
def test_pfd_teacher_loss_driver(tmp_path):
  from pfd_jax.training.config import TopK
  res = pfd_teacher_loss.run(tiny(pfd_teacher_loss.Options(teachings=("listwise", "topk")),
                                  train=dict(topk=TopK(k=5))))
  js = written(tmp_path, res, pfd_teacher_loss.DRIVER)
  assert list(js["rows"]) == ["no_distill", "pfd_teacher", "listwise", "topk", "lambdamart"]
  assert "| LambdaMART (regular features; LightGBM) [" in (tmp_path / "out" / "table.md").read_text()
  assert np.asarray(js["rows"]["topk"]).shape == (2, 3)
