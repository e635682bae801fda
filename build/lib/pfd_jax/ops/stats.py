r"""Paired comparisons of two table rows: confidence intervals, tests and power (NumPy + SciPy).

Every row of a pfd_jax table is trained on the same (fold, seed) runs: seed s of the baseline, of each
teacher and of each student share their PRNG key (common random numbers) and every fold's data. A row and
its reference are therefore *paired*, and the paired difference d_i = a_i - b_i removes what the two runs
share (the data draw, the initialisation, the batch order), which two overlapping standard deviations cannot.

Two units of analysis:

* **runs** (:func:`paired`): one difference per (fold, seed) run of the headline metric;
* **queries** (:func:`per_query`): one difference per test query (pooled over folds), each the mean over
  seeds of the two rows' per-list NDCG, the standard unit of IR significance testing; far more samples, but
  they share the trained models, so they speak about these models on these queries, the runs about the
  training procedure.

For each: the mean difference and the relative change (difference / reference mean), a 95% confidence
interval from the paired t distribution and from a seeded percentile bootstrap over pairs, and two-sided
p-values of the paired t-test and of the Wilcoxon signed-rank test. :func:`runs_for_power` says how many
paired runs a paired t-test needs to detect a given change with a given power.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Optional

import numpy as np
from scipy import stats as sps
from scipy.optimize import brentq

LEVEL = 0.95
BOOTSTRAP = 10_000


@dataclasses.dataclass(frozen=True)
class Comparison:
  """A row against its reference over n pairs (all numbers plain floats, JSON-ready via asdict)."""
  unit: str             # "runs" or "queries"
  n: int                # pairs
  mean: float           # mean of the row
  reference: float      # mean of the reference row
  diff: float           # mean paired difference (row - reference)
  sd: float             # standard deviation of the differences (ddof = 1)
  rel: float            # diff / reference (nan when the reference mean is 0)
  t_ci: tuple           # LEVEL interval of diff, paired t
  boot_ci: tuple        # LEVEL interval of diff, percentile bootstrap over pairs
  t_p: float            # two-sided paired t-test p-value
  wilcoxon_p: float     # two-sided Wilcoxon signed-rank p-value (zero differences dropped)

  @property
  def rel_ci(self) -> tuple:
    """The t interval relative to the reference mean (the reference mean taken as known)."""
    return tuple(x / self.reference if self.reference else math.nan for x in self.t_ci)

  @property
  def significant(self) -> bool:
    """Paired t-test p < 1 - LEVEL."""
    return self.t_p < 1 - LEVEL


def _t_test(d: np.ndarray) -> tuple:
  """(CI, p) of the paired t-test on differences d; exact for a constant difference (sd = 0)."""
  n, mean = d.size, float(d.mean())
  if n < 2:
    return (math.nan, math.nan), math.nan
  sd = float(d.std(ddof=1))
  if sd == 0.0:  # every pair moved by the same amount: the interval is that amount, no doubt about its sign
    return (mean, mean), (1.0 if mean == 0.0 else 0.0)
  se = sd / math.sqrt(n)
  q = sps.t.ppf(0.5 + LEVEL / 2, n - 1)
  p = 2 * sps.t.sf(abs(mean) / se, n - 1)
  return (mean - q * se, mean + q * se), float(p)


def _wilcoxon(d: np.ndarray) -> float:
  if d.size == 0 or not np.any(d):
    return 1.0 if d.size else math.nan
  return float(sps.wilcoxon(d, zero_method="wilcox", alternative="two-sided").pvalue)


def bootstrap_ci(d: np.ndarray, seed: int = 0, resamples: int = BOOTSTRAP, chunk: int = 2 ** 21) -> tuple:
  """Percentile bootstrap LEVEL interval of mean(d), resampling the pairs; the same seed gives the same interval.
  Drawn `chunk` indices at a time: the draws of one (resamples, n) call, in bounded memory."""
  if d.size == 0 or resamples == 0:
    return (math.nan, math.nan)
  rng, rows = np.random.default_rng(seed), max(1, chunk // d.size)
  means = np.concatenate([d[rng.integers(0, d.size, size=(min(rows, resamples - a), d.size))].mean(axis=1)
                          for a in range(0, resamples, rows)])
  lo, hi = np.quantile(means, [0.5 - LEVEL / 2, 0.5 + LEVEL / 2])
  return (float(lo), float(hi))


def paired(a, b, *, unit: str = "runs", seed: int = 0, resamples: int = BOOTSTRAP) -> Comparison:
  """Row `a` against reference `b`, paired element by element (same shape: [runs] or any shape, flattened);
  resamples=0: no bootstrap (boot_ci nan), for a caller that reads the t-test only."""
  a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
  if a.shape != b.shape:
    raise ValueError(f"paired rows need the same runs: {a.size} vs {b.size} values")
  d = a - b
  ref = float(b.mean()) if b.size else math.nan
  diff = float(d.mean()) if d.size else math.nan
  t_ci, t_p = _t_test(d)
  return Comparison(unit=unit, n=int(d.size), mean=float(a.mean()) if a.size else math.nan, reference=ref,
                    diff=diff, sd=float(d.std(ddof=1)) if d.size > 1 else math.nan,
                    rel=diff / ref if ref else math.nan, t_ci=t_ci, boot_ci=bootstrap_ci(d, seed, resamples), t_p=t_p,
                    wilcoxon_p=_wilcoxon(d))


def per_query(a, b, valid=None, *, seed: int = 0) -> Comparison:
  """Per-query comparison: a, b [S, Q] per-list metrics of the two rows (seed s of both on the same Q test
  queries); valid [Q] the queries to count (those with a positive). Each query's value is its mean over
  seeds."""
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  if a.shape != b.shape:
    raise ValueError(f"per-query rows need the same seeds and queries: {a.shape} vs {b.shape}")
  a, b = a.reshape(-1, a.shape[-1]).mean(0), b.reshape(-1, b.shape[-1]).mean(0)
  if valid is not None:
    keep = np.asarray(valid, bool)
    a, b = a[keep], b[keep]
  return paired(a, b, unit="queries", seed=seed)


def unpaired(a, b) -> tuple:
  """(LEVEL interval of mean(a) - mean(b), p) of Welch's two-sample t-test: what one gets by ignoring the
  pairing (for contrast; the tables use :func:`paired`)."""
  a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
  va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
  diff, se = a.mean() - b.mean(), math.sqrt(va + vb)
  df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
  q = sps.t.ppf(0.5 + LEVEL / 2, df)
  return (float(diff - q * se), float(diff + q * se)), float(2 * sps.t.sf(abs(diff) / se, df))


def power(n: int, effect: float, sd: float, alpha: float = 1 - LEVEL) -> float:
  """Power of a two-sided paired t-test with n pairs to detect a true mean difference `effect` when the
  differences have standard deviation `sd` (noncentral t)."""
  if n < 2:
    return 0.0
  if sd == 0.0:
    return 1.0 if effect else alpha
  df, nc = n - 1, abs(effect) / (sd / math.sqrt(n))
  q = sps.t.ppf(1 - alpha / 2, df)
  return float(sps.nct.sf(q, df, nc) + sps.nct.cdf(-q, df, nc))


def tost_power(n: int, margin: float, true: float, sd: float, alpha: float = (1 - LEVEL) / 2) -> float:
  """Power of the two one-sided paired t-tests of an equivalence claim |difference| < `margin`, each at `alpha`,
  with n pairs whose differences have mean `true` and standard deviation `sd`: the probability that both reject,
  P(upper) + P(lower) - 1 (their failures nearly exclude each other; 0 when that is negative) (noncentral t)."""
  if n < 2 or not abs(true) < margin:
    return 0.0
  if sd == 0.0:
    return 1.0
  df, se = n - 1, sd / math.sqrt(n)
  q = sps.t.ppf(1 - alpha, df)
  return max(0.0, float(sps.nct.sf(q, df, (margin - true) / se) + sps.nct.sf(q, df, (margin + true) / se)) - 1.0)


def units_for_tost_power(margin: float, true: float, sd: float, target: float = 0.8,
                         alpha: float = (1 - LEVEL) / 2, limit: int = 100_000) -> Optional[int]:
  """Fewest pairs n >= 2 with :func:`tost_power` >= target (None beyond `limit`, and where no number can: a true
  difference on or outside the margin)."""
  if not (math.isfinite(sd) and abs(true) < margin):
    return None
  return _fewest(lambda n: tost_power(n, margin, true, sd, alpha), target, limit)


def _fewest(power_at, target: float, limit: int) -> Optional[int]:
  """Fewest n >= 2 with power_at(n) >= target, power_at growing with n (None beyond `limit`)."""
  lo, hi = 2, 2
  while power_at(hi) < target:
    if hi >= limit:
      return None
    lo, hi = hi, min(2 * hi, limit)
  while lo < hi:
    mid = (lo + hi) // 2
    if power_at(mid) >= target:
      hi = mid
    else:
      lo = mid + 1
  return hi


def runs_for_power(effect: float, sd: float, target: float = 0.8, alpha: float = 1 - LEVEL,
                   limit: int = 100_000) -> Optional[int]:
  """Fewest pairs n >= 2 with :func:`power` >= target (None beyond `limit`)."""
  if not math.isfinite(sd) or effect == 0.0:
    return None
  return _fewest(lambda n: power(n, effect, sd, alpha), target, limit)


def variance_components(d, clip: bool = True) -> tuple:
  """(seed variance, query variance) of paired per-list differences d [S, Q] (seed s of both rows on test query
  q), by the ANOVA (method of moments) estimators of the two-way model d_sq = mu + a_s + b_q + e_sq. Over a fixed
  test set of Q' such queries the run-level difference (mean over the queries) varies from seed to seed with
  variance ``seed + query / Q'``: the query term shrinks with the test set, the seed term only with what each
  model learns (training size). clip: the seed estimate clipped at 0 (a variance); unclipped it is unbiased (its
  mean over repeated studies is the true component, which a power calculation needs: clipping biases it up when
  the truth is small, and dropping the clipped points biases it down). At Q' = Q the sum is the measured
  variance."""
  d = np.asarray(d, np.float64)
  s, q = d.shape
  if s < 2 or q < 2:
    raise ValueError(f"variance components need >= 2 seeds and >= 2 queries, got {d.shape}")
  seed_means, query_means, grand = d.mean(1), d.mean(0), d.mean()
  ms_seed = q * float(((seed_means - grand) ** 2).sum()) / (s - 1)
  ms_res = float(((d - seed_means[:, None] - query_means[None, :] + grand) ** 2).sum()) / ((s - 1) * (q - 1))
  seed = (ms_seed - ms_res) / q
  return (max(seed, 0.0) if clip else seed), ms_res


def mean_squares(d: np.ndarray) -> tuple:
  """(MS seeds, MS queries, MS residual) of the two-way layout d [..., S, Q] without replication (each over the
  leading axes)."""
  s, q = d.shape[-2:]
  rm, cm, g = d.mean(-1, keepdims=True), d.mean(-2, keepdims=True), d.mean((-2, -1), keepdims=True)
  return (q * ((rm - g) ** 2).sum((-2, -1)) / (s - 1), s * ((cm - g) ** 2).sum((-2, -1)) / (q - 1),
          ((d - rm - cm + g) ** 2).sum((-2, -1)) / ((s - 1) * (q - 1)))


@dataclasses.dataclass(frozen=True)
class Estimate:
  """A mean paired difference with its standard error and degrees of freedom (t reference): what every claim
  form reads (:mod:`experiments.page.claims`)."""
  diff: float       # the estimate (row - reference)
  reference: float  # the reference row's mean (relative changes divide by it)
  se: float
  df: float
  unit: str         # what it generalises over: "runs", "draws", "folds", "seeds x queries", "queries"
  n: int            # independent units (runs, draws, queries) or seeds x queries cells
  queries: int = 0       # crossed: the test queries of every block
  seed_var: float = 0.0  # crossed: the variance's seed term, (MS_seed - MS_res) / (S Q) weighted as the variance

  def interval(self, level: float = LEVEL) -> tuple:
    if self.se == 0:
      return (self.diff, self.diff)
    if not (self.se > 0 and self.df > 0):
      return (math.nan, math.nan)
    q = sps.t.ppf(0.5 + level / 2, self.df)
    return (self.diff - q * self.se, self.diff + q * self.se)

  def power(self, effect: float, alpha: float = (1 - LEVEL) / 2) -> float:
    """Power of the one-sided test at `alpha` (the claims': the 95% interval's bound) to find a true difference
    `effect` > 0 above 0, at this standard error and degrees of freedom (noncentral t)."""
    if not (self.se > 0 and self.df > 0):
      return math.nan
    return float(sps.nct.sf(sps.t.ppf(1 - alpha, self.df), self.df, effect / self.se))

  def mde(self, target: float = 0.8, alpha: float = (1 - LEVEL) / 2, sides: int = 1) -> float:
    """The minimum detectable effect: the smallest distance between the true difference and the threshold a
    one-sided test at `alpha` reads that the test finds with probability `target`, at this standard error and
    degrees of freedom (the noncentral t quantile, so exact for a t-test's own spread). sides=2: both one-sided
    tests of an equivalence claim (TOST at a true difference of 0: each side needs power (1 + target) / 2, since
    their failures nearly exclude each other; the smallest margin the test could establish). Absolute, like se;
    0 for an exact difference (se 0, as :meth:`interval`)."""
    if self.se == 0:
      return 0.0
    if not (self.se > 0 and self.df > 0):
      return math.nan
    need = target if sides == 1 else (1 + target) / 2
    crit = sps.t.ppf(1 - alpha, self.df)
    f = lambda nc: sps.nct.sf(crit, self.df, nc) - need
    hi = crit + 2 * sps.norm.ppf(need) + 2
    while f(hi) < 0:
      hi *= 2
    return float(brentq(f, 0.0, hi, xtol=1e-10) * self.se)

  def p_above(self, threshold: float) -> float:
    """One-sided p of H0: true difference <= threshold (small: the difference lies above it)."""
    if self.se == 0:
      return 0.0 if self.diff > threshold else 1.0
    return float(sps.t.sf((self.diff - threshold) / self.se, self.df)) if self.se > 0 else math.nan

  def p_below(self, threshold: float) -> float:
    """One-sided p of H0: true difference >= threshold (small: the difference lies below it)."""
    if self.se == 0:
      return 0.0 if self.diff < threshold else 1.0
    return float(sps.t.cdf((self.diff - threshold) / self.se, self.df)) if self.se > 0 else math.nan


def runs_estimate(d, reference: float, unit: str = "runs") -> Estimate:
  """The paired t estimate over independent units d [n] (runs, draws of the data, queries)."""
  d = np.asarray(d, np.float64).ravel()
  se = float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else math.nan
  return Estimate(float(d.mean()) if d.size else math.nan, float(reference), se, float(d.size - 1), unit,
                  int(d.size))


def redrawn_components(lists) -> tuple:
  """(run variance, query variance) of paired per-query differences when every run has data of its own: lists, one
  [Q_k] per run k (its test queries with a positive). The run-level difference (mean over its Q queries) varies
  with variance run + query / Q: query = the mean of the runs' within-run variances over queries, run = the
  variance of the runs' means less the mean of query_k / Q_k. Both unbiased; the run component is not clipped at
  0 (a power calculation needs its mean, not a variance's floor)."""
  lists = [np.asarray(d, np.float64) for d in lists]
  if len(lists) < 2 or any(d.size < 2 for d in lists):
    raise ValueError(f"redrawn_components needs >= 2 runs of >= 2 queries, got {[d.size for d in lists]}")
  within = np.array([d.var(ddof=1) for d in lists])
  means = np.array([d.mean() for d in lists])
  return float(means.var(ddof=1) - np.mean(within / [d.size for d in lists])), float(within.mean())


def crossed(blocks, reference: float, weights=None) -> Estimate:
  r"""The mean paired difference over seeds and test queries *crossed*: it generalises to new seeds and new queries.

  blocks: one d [S, Q_f] per fold (seed s of both rows on test query q of fold f; the folds fixed, their seeds and
  queries random). Within a fold, d_sq = mu + a_s + b_q + e_sq (seed, query and residual effects), and the fold's
  grand mean varies with Var = s_a^2 / S + s_b^2 / Q + s_e^2 / (S Q), estimated without bias by
  (MS_seed + MS_query - MS_res) / (S Q) (the two-way ANOVA mean squares: E[MS_seed] = s_e^2 + Q s_a^2,
  E[MS_query] = s_e^2 + S s_b^2, E[MS_res] = s_e^2). The estimate is the weighted mean of the folds' means
  (weights: one per fold, summing to 1; None: 1 / F each), its variance the sum of theirs times their weights
  squared, with Satterthwaite's degrees of freedom. A fold's estimate below its residual term alone (possible by
  chance) is raised to that term, MS_res / (S Q). The run-level interval leaves out the query term, the per-query
  one the seed term; this one has both. Its seed term (more queries at these seeds never shrink it) is kept."""
  blocks = [np.asarray(b, np.float64) for b in blocks]
  if not blocks or any(b.ndim != 2 or min(b.shape) < 2 for b in blocks):
    raise ValueError(f"crossed needs [seeds, queries] blocks of at least 2 x 2, got {[b.shape for b in blocks]}")
  mean, var, df = crossed_moments(blocks, weights)
  w2 = [1.0 / len(blocks) ** 2] * len(blocks) if weights is None else np.asarray(weights, np.float64) ** 2
  seed = sum(wf * max(m[0] - m[2], 0.0) / b.size for wf, b, m in zip(w2, blocks, map(mean_squares, blocks)))
  return Estimate(float(mean), float(reference), math.sqrt(float(var)), float(df), "seeds x queries",
                  int(sum(b.size for b in blocks)), int(sum(b.shape[1] for b in blocks)), min(float(seed), float(var)))


def crossed_moments(blocks, weights=None) -> tuple:
  """:func:`crossed`'s (estimate, variance, degrees of freedom), each over the blocks' leading axes (a block
  [..., S, Q]: :func:`pfd_jax.ops.choice.simulated_power` draws many studies at once)."""
  if weights is None:
    w2, means = [1.0 / len(blocks) ** 2] * len(blocks), np.mean([b.mean((-2, -1)) for b in blocks], 0)
  else:
    w = np.asarray(weights, np.float64)
    if w.shape != (len(blocks),) or abs(w.sum() - 1) > 1e-9 or np.any(w < 0):
      raise ValueError(f"crossed's weights: one per block, >= 0, summing to 1; got {weights}")
    w2, means = w ** 2, sum(wi * b.mean((-2, -1)) for wi, b in zip(w, blocks))
  return (means,) + satterthwaite([mean_squares(b) for b in blocks], [b.shape[-2:] for b in blocks], w2)


def satterthwaite(squares, shapes, w2) -> tuple:
  """(variance, degrees of freedom) of the weighted mean of blocks' grand means from each block's two-way mean
  squares (MS seeds, MS queries, MS residual; arrays over any leading axes, or their expectations) at its shape
  (S, Q) and squared weight: Var = sum_f w_f^2 (MS_seed + MS_query - MS_res) / (S Q), a block whose estimate falls
  below its residual term raised to that term (:func:`crossed`), and Satterthwaite's df of the terms."""
  var = denom = 0.0
  for wf, (s, q), (ms_s, ms_q, ms_e) in zip(w2, shapes, squares):
    c = wf / (s * q)
    low = ms_s + ms_q - ms_e < ms_e  # raised to the residual term alone
    var = var + np.where(low, c * ms_e, c * ms_s + c * ms_q + -c * ms_e)
    for v, k, alone in ((c * ms_s, s - 1, 0.0), (c * ms_q, q - 1, 0.0), (-c * ms_e, (s - 1) * (q - 1), c * ms_e)):
      denom = denom + np.where(low, alone * alone / k, v * v / k)  # the terms summed in order, as one list
  with np.errstate(divide="ignore", invalid="ignore"):
    df = np.where(denom > 0, var ** 2 / np.where(denom > 0, denom, 1), np.inf)  # identical rows: exact
  return var, df


def rank_correlation(a, b, level: float = LEVEL) -> tuple:
  """(Spearman's rho of paired values a, b, its `level` interval by Fisher's z with standard error
  1.06 / sqrt(k - 3) (Fieller, Hartley and Pearson 1957)); the interval NaN below 4 pairs, all NaN for a constant
  side."""
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  if a.size < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
    return math.nan, (math.nan, math.nan)
  rho = float(sps.spearmanr(a, b)[0])
  if a.size < 4:
    return rho, (math.nan, math.nan)
  half = sps.norm.ppf(0.5 + level / 2) * 1.06 / math.sqrt(a.size - 3)
  z = np.arctanh(np.clip(rho, -1 + 1e-12, 1 - 1e-12))
  return rho, (float(np.tanh(z - half)), float(np.tanh(z + half)))


def holm(p) -> np.ndarray:
  """Holm's step-down adjusted p-values of a family (the family-wise error rate controlled at any level; the
  values of statsmodels' multipletests(method='holm')). NaN p-values are no member of the family and stay NaN."""
  p = np.asarray(p, np.float64)
  out = np.full(p.shape, np.nan)
  ok = np.flatnonzero(np.isfinite(p))
  running = 0.0
  for i, j in enumerate(ok[np.argsort(p[ok], kind="stable")]):
    running = max(running, min(1.0, (ok.size - i) * p[j]))
    out[j] = running
  return out


def per_run_slopes(x, y) -> np.ndarray:
  """The least-squares slope of y [points, runs] on x [points], one per run (column)."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  xc = x - x.mean()
  return (xc[:, None] * (y - y.mean(0))).sum(0) / (xc ** 2).sum()


def end_slopes(x, y) -> tuple:
  """Per run (column of y [points, runs]): the slopes at min(x) and at max(x) of the least-squares quadratic in x,
  the two quantities of the Lind-Mehlum test of an interior extremum (an inverted U: the first > 0, the second
  < 0)."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  if np.unique(x).size < 3:
    raise ValueError(f"a quadratic needs at least 3 distinct points, got {np.unique(x).size}")
  c2, c1, _ = np.polyfit(x, y, 2)  # each [runs]
  return c1 + 2 * c2 * x.min(), c1 + 2 * c2 * x.max()
