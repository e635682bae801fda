import jax
import numpy as np
import pytest

from pfd_jax.ops import theory as th

pytestmark = pytest.mark.numeric

KEY = jax.random.PRNGKey(0)


@pytest.mark.parametrize("n,d_x", [(12, 3), (40, 8)])
def test_theorem1_against_monte_carlo(n, d_x):
  p = th.Problem(n=n, m=10, d_z=0, w=np.ones(d_x), v=np.array([2.0, 1.0]), sigma=1.5)
  r = th.monte_carlo(KEY, p, "regression", trials=4096, reduce_noise=True)
  cf = th.theorem1_regression(n, d_x, 1.5, 5.0)
  assert abs(r.mean - cf) < 3 * r.stderr, (r.mean, r.stderr, cf)


@pytest.mark.slow
def test_noise_averaged_estimator_agrees_with_plain():
  p = th.Problem.example1(d_z=4)
  for method in ("regression", "pfd"):
    a = th.monte_carlo(KEY, p, method, trials=2048)
    b = th.monte_carlo(jax.random.PRNGKey(1), p, method, trials=2048, reduce_noise=True)
    assert abs(a.mean - b.mean) < 3 * np.hypot(a.stderr, b.stderr), (method, a, b)
    assert b.stderr < a.stderr
  # alpha > 0 takes the column-by-column path
  a = th.monte_carlo(KEY, p, "pfd", trials=1024, alpha=0.4)
  b = th.monte_carlo(jax.random.PRNGKey(1), p, "pfd", trials=1024, alpha=0.4, reduce_noise=True)
  assert abs(a.mean - b.mean) < 3 * np.hypot(a.stderr, b.stderr)


@pytest.mark.slow
def test_theorem2_within_two_percent_at_n300():
  p = th.Problem(n=300, m=3000, d_z=10, w=np.random.default_rng(0).normal(size=10),
                 v=np.arange(10, 0, -1.0), sigma=15.0)
  r = th.monte_carlo(KEY, p, "pfd", trials=512, reduce_noise=True)
  cf = th.theorem2_pfd(300, 3000, 10, 10, 15.0, p.v)
  assert abs(r.mean / cf.total - 1) < 0.02, (r.mean, cf)
  assert cf.total == pytest.approx(cf.labelled + cf.all_data)


@pytest.mark.slow
def test_placebo_closed_form_matches_monte_carlo_at_n100():
  p = th.Problem(n=100, m=1000, d_z=10, w=np.random.default_rng(0).normal(size=10),
                 v=np.arange(10, 0, -1.0), sigma=15.0)
  r = th.monte_carlo(KEY, p, "placebo", trials=1024, reduce_noise=True)
  cf = th.theorem2_placebo(100, 1000, 10, 10, 15.0, p.v)
  # sampling error, plus 1% for the dropped O(d_x d_z / (n (n + m))) term (~0.7% here)
  assert abs(r.mean - cf.total) < 3 * r.stderr + 0.01 * cf.total, (r.mean, r.stderr, cf)
  # Theorem 2 with v_z* = 0: the whole noise in the labelled term, nothing from the unlabelled rows
  assert cf.all_data == 0 and cf.total == pytest.approx(th.theorem2_pfd(100, 1000, 10, 10, 15.0, np.r_[np.zeros(10),
                                                                                                      p.v]).total)


@pytest.mark.slow
def test_placebo_teacher_never_helps_in_the_linear_model():
  """Noise columns in place of z: the same as regression at d_z = 0, worse for every d_z >= 1 (the teacher
  pays for the extra columns and its predictions carry no information beyond x), and worse than PFD."""
  reg = th.monte_carlo(KEY, th.Problem.example1(), "regression", trials=512, reduce_noise=True)
  assert th.monte_carlo(KEY, th.Problem.example1(d_z=0), "placebo", trials=512,
                        reduce_noise=True).mean == pytest.approx(reg.mean, rel=1e-4)
  for dz in (3, 10):
    pl = th.monte_carlo(KEY, th.Problem.example1(d_z=dz), "placebo", trials=512, reduce_noise=True)
    pfd = th.monte_carlo(KEY, th.Problem.example1(d_z=dz), "pfd", trials=512, reduce_noise=True)
    assert pl.mean - 3 * pl.stderr > reg.mean and pl.mean > pfd.mean, (dz, pl, reg, pfd)


@pytest.mark.slow
def test_example1_pfd_error_is_minimised_strictly_inside():
  errs = [th.monte_carlo(KEY, th.Problem.example1(d_z=dz), "pfd", trials=1024, reduce_noise=True).mean
          for dz in range(11)]
  assert 0 < int(np.argmin(errs)) < 10, errs
  # and PFD beats regression everywhere but at d_z = 0, where it is regression
  reg = th.monte_carlo(KEY, th.Problem.example1(), "regression", trials=1024, reduce_noise=True).mean
  assert errs[0] == pytest.approx(reg, rel=1e-4) and max(errs[1:]) < reg


@pytest.mark.slow
def test_gend_no_better_than_regression_when_z_independent_of_x():
  # Remark 2: the GenD teacher's predictions z'theta are independent of x, so its student learns ~0
  p = th.Problem(n=300, m=3000, d_z=5, w=np.random.default_rng(1).normal(size=10), v=np.full(5, 0.5), sigma=1.0)
  gend = th.monte_carlo(KEY, p, "gend", trials=256, reduce_noise=True)
  reg = th.monte_carlo(KEY, p, "regression", trials=256, reduce_noise=True)
  assert gend.mean > reg.mean
  assert gend.mean == pytest.approx(float(np.sum(p.w ** 2)), rel=0.05)  # ||w_gend|| ~ 0


@pytest.mark.heavy
def test_self_distillation_with_alpha_zero_is_regression():
  p = th.Problem.example1(d_z=3)
  a = th.monte_carlo(KEY, p, "self", trials=256)
  b = th.monte_carlo(KEY, p, "regression", trials=256)
  np.testing.assert_allclose(a.errors, b.errors, rtol=1e-3)


def test_undefined_closed_forms_raise():
  with pytest.raises(ValueError, match="undefined"):
    th.theorem1_regression(11, 10, 1.0, 1.0)
  with pytest.raises(ValueError, match="undefined"):
    th.theorem2_pfd(20, 100, 10, 9, 1.0, np.ones(10))
  with pytest.raises(ValueError, match="GenD"):
    th.monte_carlo(KEY, th.Problem.example1(d_z=0), "gend", trials=4)


def test_same_key_same_bits():
  p = th.Problem.example1(d_z=5)
  a = th.monte_carlo(KEY, p, "pfd", trials=64)
  b = th.monte_carlo(KEY, p, "pfd", trials=64)
  assert a.errors.tobytes() == b.errors.tobytes()


@pytest.mark.slow
def test_theory_driver_end_to_end(tmp_path):
  from conftest import written
  from experiments.paper import theory
  from experiments.framework import schema
  res = theory.run_config(schema.Config(options=theory.Options(trials=8)))
  js = written(tmp_path, res, theory.DRIVER)
  assert js["setup"]["trials"] == 8 and len(js["fig6"]) > 0
  assert "Theorem 2" in (tmp_path / "out" / "table.md").read_text()
  assert "placebo CF" in (tmp_path / "out" / "table.md").read_text() and "placebo_mc" in js["fig6"][3]
  # a Figure 6 cell is the library's Monte-Carlo and closed forms for Example 1 at that d_z, called directly
  c = js["setup"]
  p = th.Problem.example1(c["w_seed"])._replace(d_z=5)
  row = js["fig6"][5]
  assert row["d_z"] == 5 and row["pfd_cf"] == pytest.approx(th.theorem2_pfd(p.n, p.m, 10, 5, p.sigma, p.v).total)
  assert row["placebo_cf"] == pytest.approx(th.theorem2_placebo(p.n, p.m, 10, 5, p.sigma, p.v).total)
  mc = th.monte_carlo(jax.random.PRNGKey(c["seed"]), p, "pfd", trials=8, reduce_noise=c["reduce_noise"])
  assert row["pfd_mc"] == pytest.approx(mc.mean, rel=1e-6) and row["pfd_se"] == pytest.approx(mc.stderr, rel=1e-6)


def test_predicted_gain_recovers_theorem2_on_section5_data():
  """theory.predicted_gain on documents drawn from Section 5's model (x, u standard normal, z the first d_z
  coordinates of u, y = x'w + u'v + eps; the first n documents labelled): its plug-in risks are Theorem 1's and
  Theorem 2's at the true sigma and v within sampling error; a column of pure noise predicts a loss (it costs a
  degree of freedom and explains nothing), a column x determines is dropped (it adds nothing beyond x)."""
  rng = np.random.default_rng(0)
  n, m, d_x, sigma = 4000, 12000, 10, 0.5
  v = np.array([1.0, 0.6, 0.3])
  x, u = rng.normal(size=(n + m, d_x)), rng.normal(size=(n + m, v.size))
  y = x @ rng.normal(size=d_x) + u @ v + sigma * rng.normal(size=n + m)
  labelled = np.arange(n + m) < n
  z = np.concatenate([u, rng.normal(size=(n + m, 1)), x[:, :1] * 2 + 1], 1)  # u's 3, noise, a copy of x
  for cols in ((0,), (0, 1), (0, 1, 2)):
    got = th.predicted_gain(x, z, y, labelled, cols)
    want_reg = th.theorem1_regression(n, d_x, sigma, float(v @ v))
    want_pfd = th.theorem2_pfd(n, m, d_x, len(cols), sigma, v).total
    assert got.regression == pytest.approx(want_reg, rel=0.05) and got.pfd == pytest.approx(want_pfd, rel=0.05)
    assert got.gain == pytest.approx(1 - want_pfd / want_reg, abs=0.02) and (got.n, got.m) == (n, m)
  assert th.predicted_gain(x, z, y, labelled, (3,)).gain < 0  # noise: n - d_z degrees of freedom, nothing explained
  assert th.predicted_gain(x, z, y, labelled, (4,)).gain == 0.0  # x determines it
  with pytest.raises(ValueError, match="labelled documents"):
    th.predicted_gain(x, z, y, np.arange(n + m) < 12, (0,))
