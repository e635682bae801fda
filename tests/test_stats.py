"""pfd_jax.ops.stats against SciPy and closed-form cases."""
import dataclasses
import math

import numpy as np
import pytest
from scipy import stats as sps

from pfd_jax.ops import choice, perturbation, stats

pytestmark = pytest.mark.numeric


def test_paired_t_matches_scipy():
  rng = np.random.default_rng(0)
  b = rng.normal(0.3, 0.02, 25)
  a = b + rng.normal(0.01, 0.01, 25)
  c = stats.paired(a, b)
  ref = sps.ttest_rel(a, b)
  ci = ref.confidence_interval(0.95)
  assert c.n == 25 and c.unit == "runs"
  np.testing.assert_allclose(c.t_p, ref.pvalue, rtol=1e-10)
  np.testing.assert_allclose(c.t_ci, (ci.low, ci.high), rtol=1e-10)
  np.testing.assert_allclose(c.wilcoxon_p, sps.wilcoxon(a - b).pvalue, rtol=1e-12)
  np.testing.assert_allclose(c.diff, np.mean(a - b))
  np.testing.assert_allclose(c.rel, np.mean(a - b) / np.mean(b))
  np.testing.assert_allclose(c.rel_ci, np.asarray(c.t_ci) / np.mean(b))
  assert c.significant == (ref.pvalue < 0.05)


def test_constant_difference_is_exact():
  b = np.array([0.25, 0.5, 0.375, 0.875])  # exact in binary: every difference is exactly 0.0625
  c = stats.paired(b + 0.0625, b)
  assert c.t_ci == (0.0625, 0.0625) and c.boot_ci == (0.0625, 0.0625) and c.sd == 0.0
  assert c.t_p == 0.0 and c.significant
  # Wilcoxon, all four differences positive: exact two-sided p = 2 / 2^4.
  np.testing.assert_allclose(c.wilcoxon_p, 2 / 16)
  same = stats.paired(b, b)
  assert same.diff == 0 and same.t_p == 1.0 and same.wilcoxon_p == 1.0 and not same.significant


def test_symmetric_null():
  d = np.array([-3.0, -2.0, -1.0, 1.0, 2.0, 3.0])
  c = stats.paired(d, np.zeros_like(d))
  assert c.diff == 0.0
  np.testing.assert_allclose(c.t_p, 1.0)
  np.testing.assert_allclose(c.wilcoxon_p, 1.0)
  np.testing.assert_allclose(c.t_ci[0], -c.t_ci[1])


def test_bootstrap_is_seeded_and_agrees_with_t_on_normal_data():
  rng = np.random.default_rng(1)
  d = rng.normal(0.5, 1.0, 400)
  assert stats.bootstrap_ci(d, seed=3) == stats.bootstrap_ci(d, seed=3)
  assert stats.bootstrap_ci(d, seed=3) != stats.bootstrap_ci(d, seed=4)
  c = stats.paired(d, np.zeros_like(d))
  np.testing.assert_allclose(c.boot_ci, c.t_ci, atol=0.02)  # n = 400: both near mean +- 1.96 sd / 20


@pytest.mark.parametrize("chunk", [1, 7 * 50, 2 ** 21])
def test_bootstrap_in_blocks_is_the_one_call_bootstrap(chunk):
  """Blocks of resamples (bounded memory) draw the same indices as one (resamples, n) call: the same bits."""
  d = np.random.default_rng(2).normal(0.1, 1.0, 50)
  idx = np.random.default_rng(5).integers(0, d.size, size=(999, d.size))
  expected = tuple(float(q) for q in np.quantile(d[idx].mean(axis=1), [0.025, 0.975]))
  assert stats.bootstrap_ci(d, seed=5, resamples=999, chunk=chunk) == expected


def test_pairing_matters():
  """Runs share a large run-to-run effect (the seed); the row adds a small, consistent gain. Paired: clearly
  significant; ignoring the pairing (Welch): the gain is lost in the spread."""
  rng = np.random.default_rng(2)
  base = rng.normal(0.3, 0.05, 10)
  a = base + 0.01 + rng.normal(0, 0.002, 10)
  assert stats.paired(a, base).t_p < 1e-6
  ci, p = stats.unpaired(a, base)
  ref = sps.ttest_ind(a, base, equal_var=False)
  np.testing.assert_allclose(p, ref.pvalue, rtol=1e-10)
  np.testing.assert_allclose(ci, tuple(ref.confidence_interval(0.95)), rtol=1e-10)
  assert p > 0.3 and ci[0] < 0 < ci[1]


def test_per_query_averages_seeds_then_pairs_valid_queries():
  rng = np.random.default_rng(3)
  a, b = rng.random((5, 40)), rng.random((5, 40))
  valid = rng.random(40) < 0.6
  c = stats.per_query(a, b, valid)
  expect = stats.paired(a.mean(0)[valid], b.mean(0)[valid])
  assert c.unit == "queries" and c.n == valid.sum()
  assert (c.t_p, c.t_ci, c.boot_ci) == (expect.t_p, expect.t_ci, expect.boot_ci)
  with pytest.raises(ValueError, match="same"):
    stats.paired(a[0], b[0, :30])


def test_power_and_sample_size():
  # Textbook value (e.g. G*Power, paired t, two-sided, alpha 0.05, power 0.8): effect size 0.5 -> 34 pairs.
  assert stats.runs_for_power(0.5, 1.0) == 34
  assert stats.power(34, 0.5, 1.0) >= 0.8 > stats.power(33, 0.5, 1.0)
  # Monte-Carlo check of the noncentral-t power at n = 12, effect 0.8 sd.
  rng = np.random.default_rng(4)
  d = rng.normal(0.8, 1.0, (20000, 12))
  t = d.mean(1) / (d.std(1, ddof=1) / math.sqrt(12))
  mc = np.mean(np.abs(t) > sps.t.ppf(0.975, 11))
  np.testing.assert_allclose(stats.power(12, 0.8, 1.0), mc, atol=0.01)
  assert stats.runs_for_power(0.0, 1.0) is None
  assert stats.runs_for_power(1e-6, 1.0, limit=1000) is None


def test_variance_components_closed_form_and_unbiased():
  rng = np.random.default_rng(5)
  s, q = 6, 50
  a, b = rng.normal(0, 0.1, s), rng.normal(0, 0.3, q)
  seed, query = stats.variance_components(a[:, None] + b[None, :])  # additive: no query-by-seed noise
  np.testing.assert_allclose([seed, query], [a.var(ddof=1), 0.0], atol=1e-15)
  e = rng.normal(size=(s, q))
  e -= e.mean(1, keepdims=True) + e.mean(0, keepdims=True) - e.mean()  # double-centred: only the residual term
  seed, query = stats.variance_components(a[:, None] + b[None, :] + e)
  np.testing.assert_allclose(query, (e ** 2).sum() / ((s - 1) * (q - 1)), rtol=1e-12)
  # The identity the power study rests on: over this test set, the seed-to-seed variance of the run-level
  # difference is seed + query / Q.
  d = a[:, None] + b[None, :] + rng.normal(0, 0.2, (s, q))
  seed, query = stats.variance_components(d)
  assert seed > 0  # not clipped
  np.testing.assert_allclose(d.mean(1).var(ddof=1), seed + query / q, rtol=1e-12)
  # Unbiased for the model's components (sigma_seed^2 = 0.01, sigma_query^2 = 0.04), averaged over draws.
  est = np.array([stats.variance_components(rng.normal(0, 0.1, (s, 1)) + rng.normal(0, 0.3, (1, q)) +
                                            rng.normal(0, 0.2, (s, q))) for _ in range(4000)])
  np.testing.assert_allclose(est.mean(0), [0.01, 0.04], rtol=0.05)
  with pytest.raises(ValueError, match="2 seeds"):
    stats.variance_components(np.zeros((1, 5)))


def test_perturbation_ratios_closed_form_and_unbiased():
  """r_c = mean_i (a_ci - b_ci)^2 / (2 var_c) over the cells that moved; unbiased for kappa^2 by Monte-Carlo."""
  a = np.array([[1.0, 2.0, 3.0], [5.0, 5.0, 5.0], [0.0, 1.0, 2.0]])
  b = a + np.array([[0.1, -0.1, 0.2], [0.0, 0.0, 0.0], [0.3, 0.0, 0.0]])  # the middle cell never moves
  r = perturbation.perturbation_ratios(a, b, np.array([0.5, 9.0, 1.5]))
  np.testing.assert_allclose(r, [(0.01 + 0.01 + 0.04) / 3 / (2 * 0.5), 0.09 / 3 / (2 * 1.5)], rtol=1e-12)
  assert perturbation.perturbation_ratios(a, a, np.ones(3)).size == 0
  rng = np.random.default_rng(0)
  kappa, sd = 0.6, rng.uniform(0.01, 0.05, size=2000)  # cells with their own seed spreads
  m = rng.normal(size=(2000, 5)) * sd[:, None]
  a, b = (m + kappa * sd[:, None] * rng.normal(size=m.shape) for _ in range(2))
  r = perturbation.perturbation_ratios(a, b, sd ** 2)
  assert abs(r.mean() / kappa ** 2 - 1) < 4 * np.sqrt(2 / 5 / 2000)  # 4 standard errors of a mean of chi^2_5 / 5


def test_mixture_quantile_closed_form_and_coverage():
  """One ratio: sqrt(r) times the normal quantile; a mixture: the tail of T ~ N(0, r), r drawn from the ratios."""
  assert perturbation.mixture_quantile([0.25], 0.05) == pytest.approx(0.5 * sps.norm.ppf(0.975), rel=1e-9)
  ratios = [0.01, 0.04, 0.5]
  lam = perturbation.mixture_quantile(ratios, 0.01)
  assert np.mean([2 * sps.norm.sf(lam / np.sqrt(r)) for r in ratios]) == pytest.approx(0.01, rel=1e-7)
  rng = np.random.default_rng(1)
  t = rng.normal(size=400_000) * np.sqrt(rng.choice(ratios, size=400_000))
  assert abs(np.mean(np.abs(t) > lam) - 0.01) < 4 * np.sqrt(0.01 * 0.99 / 400_000)
  with pytest.raises(ValueError):
    perturbation.mixture_quantile([], 0.05)


def test_weighted_crossed_estimate_and_its_variance_are_unbiased():
  """stats.crossed with weights: the estimate is the weighted mean of the blocks' means; over many simulated studies
  of the two-way model its mean variance matches the estimate's spread (and the closed form, Var = sum_f w_f^2
  (a / S + b / Q_f + e / (S Q_f))); equal weights are the unweighted estimate bit for bit."""
  rng = np.random.default_rng(0)
  shapes, parts, w = [(2, 30), (3, 80)], [(0.02, 0.5, 1.0), (0.01, 0.3, 0.5)], np.array([0.3, 0.7])
  blocks = [rng.normal(size=s) for s in shapes]
  e = stats.crossed(blocks, 1.0, w)
  assert e.diff == pytest.approx(0.3 * blocks[0].mean() + 0.7 * blocks[1].mean(), rel=1e-12)
  assert stats.crossed(blocks, 1.0, [0.5, 0.5]) == stats.crossed(blocks, 1.0)
  sims = [[math.sqrt(a) * rng.normal(size=(20000, s, 1)) + math.sqrt(b) * rng.normal(size=(20000, 1, q))
           + math.sqrt(c) * rng.normal(size=(20000, s, q)) for (s, q), (a, b, c) in zip(shapes, parts)]]
  mean, var, _ = stats.crossed_moments(sims[0], w)
  closed = sum(wf ** 2 * (a / s + b / q + c / (s * q)) for wf, (s, q), (a, b, c) in zip(w, shapes, parts))
  assert mean.var() == pytest.approx(closed, rel=0.05)
  assert var.mean() == pytest.approx(closed, rel=0.05)  # the raise to the residual term adds a little
  with pytest.raises(ValueError, match="weights"):
    stats.crossed(blocks, 1.0, [0.5, 0.6])


def test_the_fallback_procedure_carries_its_level_and_controls_the_error():
  """stats.fallback: weights (1, 0, ...) are the fixed sequence; a failure stops the carry but not the test of a
  candidate with a weight of its own; under the global null (independent candidates) any candidate is passed with
  probability at most the level; the chosen one is the passed one with the largest gain."""
  est = lambda diff, se=1.0: stats.Estimate(diff, 1.0, se, 1e6, "queries", 100)
  z = sps.norm.isf
  out = choice.fallback([("a", est(z(0.04))), ("b", est(z(0.049))), ("c", est(5.0))], [1, 0, 0])
  assert out["passed"] == ["a", "b", "c"] and out["levels"] == pytest.approx([0.05] * 3) and out["chosen"] == "c"
  out = choice.fallback([("a", est(0.0)), ("b", est(10.0))], [1, 0])  # the fixed sequence ends at a
  assert out["passed"] == [] and out["chosen"] is None and out["levels"] == [0.05, 0.0]
  out = choice.fallback([("a", est(0.0)), ("b", est(z(0.02))), ("c", est(z(0.01))), ("d", est(z(0.03)))],
                       [0.5, 0.5, 0, 0])  # a fails, b keeps its own half, c inherits it, d (p 0.03) misses it
  assert out["passed"] == ["b", "c"] and out["levels"] == pytest.approx([0.025, 0.025, 0.025, 0.025])
  rng = np.random.default_rng(1)
  hits = 0
  for _ in range(4000):
    d = rng.normal(size=4)
    out = choice.fallback([(i, est(x)) for i, x in enumerate(d)], [0.5, 1 / 6, 1 / 6, 1 / 6])
    hits += out["chosen"] is not None
  assert hits / 4000 < 0.05 + 3 * math.sqrt(0.05 * 0.95 / 4000)
  with pytest.raises(ValueError, match="weights"):
    choice.fallback([("a", est(0.0))], [1.2])


def test_an_unmeasured_candidate_counts_as_not_found_better_and_never_adds_a_rejection():
  """choice.fallback with None for a candidate not measured: not passed, its p None, its level carried no further
  (as a p-value of 1 would); and the procedure is monotone: on random p-values, leaving any candidates unmeasured
  passes a subset of what measuring them all passes (the search's second stage relies on it)."""
  est = lambda diff, se=1.0: stats.Estimate(diff, 1.0, se, 1e6, "queries", 100)
  z = sps.norm.isf
  out = choice.fallback([("a", est(z(0.01))), ("b", None), ("c", est(z(0.01)))], [1, 0, 0])
  assert out["passed"] == ["a"] and out["p"][1] is None and out["levels"] == pytest.approx([0.05, 0.05, 0.0])
  rng = np.random.default_rng(2)
  for _ in range(2000):
    n = int(rng.integers(2, 9))
    weights = rng.dirichlet(np.ones(n)) * (rng.random(n) < 0.6)
    cands = [(i, est(x)) for i, x in enumerate(rng.normal(1.5, 1.5, size=n))]
    full = set(choice.fallback(cands, weights)["passed"])
    some = choice.fallback([(i, None if rng.random() < 0.3 else e) for i, e in cands], weights)["passed"]
    assert set(some) <= full


def test_the_rules_simulated_power_matches_its_closed_form():
  """stats.simulated_power (studies drawn at the user's sizes) against stats.crossed_power (noncentral t at the
  expected mean squares' Satterthwaite df): within 0.05 at 2 seeds x hundreds of lists (the closed form takes the
  df at its expectation, and with 2 seeds per part the realised df varies: measured 0.267 against 0.300 at the
  middle effect, the reason the report simulates); at no effect it is the test's false-positive rate, near the
  level."""
  shapes, parts, w = [(2, 70), (2, 100), (2, 100)], [(1e-5, 0.003, 0.003)] * 3, [0.26, 0.37, 0.37]
  for effect in (0.0, 0.005, 0.01):
    sim = choice.simulated_power(shapes, parts, effect, 0.05, w, trials=4000)
    closed = choice.crossed_power(shapes, parts, effect, 0.05, w)
    assert sim == pytest.approx(closed, abs=0.05), effect
  assert choice.simulated_power(shapes, parts, 0.0, 0.05, w, trials=4000) < 0.065
  assert choice.crossed_power(shapes, [(0.0, 0.0, 0.0)] * 3, 0.01, 0.05, w) == 1.0


def test_the_test_queries_a_crossed_estimate_needs_at_its_seeds():
  """choice.queries_for_power against the closed form of the crossed variance, Var(Q) = s_a^2 / S + (s_b^2 +
  s_e^2 / S) / Q: the queries at which the one-sided 2.5% test has 80% power (normal approximation); None where the
  seed term s_a^2 / S alone is wider than that power allows. Components estimated from one large study."""
  rng = np.random.default_rng(7)
  s, q, sa, sb, se = 5, 4000, 0.005, 0.1, 0.05
  d = rng.normal(0, sa, (s, 1)) + rng.normal(0, sb, (1, q)) + rng.normal(0, se, (s, q))
  e = stats.crossed([d], 1.0)
  assert e.queries == q and 0 < e.seed_var < e.se ** 2  # the seed term: a part of the variance (4 df: loose)
  z = sps.norm.ppf(0.975) + sps.norm.ppf(0.8)
  effect = 0.03
  e_true = dataclasses.replace(e, se=math.sqrt(sa ** 2 / s + (sb ** 2 + se ** 2 / s) / q), seed_var=sa ** 2 / s)
  want = (sb ** 2 + se ** 2 / s) / ((effect / z) ** 2 - sa ** 2 / s)
  assert choice.queries_for_power(e_true, effect) == math.ceil(want)
  assert choice.queries_for_power(e_true, 0.5 * z * sa / math.sqrt(s)) is None  # the seed term alone is too wide
  assert choice.queries_for_power(e, effect) == pytest.approx(want, rel=0.3)  # from the estimated components


def test_tost_power_against_the_normal_closed_form_and_a_monte_carlo():
  """Two one-sided tests of |difference| < m, each at 2.5%: at large n, Phi((m - d)/se - z) + Phi((m + d)/se - z)
  - 1 (z the 97.5% normal quantile); at small n, the share of simulated paired samples both tests reject."""
  from scipy import stats as sps
  m, d, sd, n = 0.5, 0.1, 1.0, 400
  se, z = sd / np.sqrt(n), sps.norm.ppf(0.975)
  closed = sps.norm.cdf((m - d) / se - z) + sps.norm.cdf((m + d) / se - z) - 1
  assert stats.tost_power(n, m, d, sd) == pytest.approx(closed, abs=2e-3)
  rng = np.random.default_rng(1)
  n, reps = 30, 20000
  x = rng.normal(d, sd, (reps, n))
  mean, s = x.mean(1), x.std(1, ddof=1) / np.sqrt(n)
  q = sps.t.ppf(0.975, n - 1)
  both = np.mean((mean - q * s > -m) & (mean + q * s < m))
  assert stats.tost_power(n, m, d, sd) == pytest.approx(both, abs=0.015)
  assert stats.tost_power(n, m, 0.6, sd) == 0.0 and stats.units_for_tost_power(m, 0.6, sd) is None
  need = stats.units_for_tost_power(m, d, sd)
  assert stats.tost_power(need, m, d, sd) >= 0.8 > stats.tost_power(need - 1, m, d, sd)
