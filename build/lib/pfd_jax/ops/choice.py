"""Choosing among candidates on noisy per-list scores, and what a rule could have found (NumPy + SciPy).

* :func:`tied_with_best`: the simplest candidate validation cannot tell from the best (the deploy choice of
  :mod:`experiments.framework.deploy`: no candidate is favoured, so the winner's curse is the danger);
* :func:`fallback`: candidates against a reference in a declared order with the family-wise error controlled (the
  PFD search of :mod:`pfd_jax.methods.search`: no distillation is favoured, a gain has to be shown);
* :func:`components`, :func:`crossed_power`, :func:`simulated_power`: the operating characteristics of the crossed
  seeds x lists test (:func:`pfd_jax.ops.stats.crossed`) at a user's own sizes, by closed form and by simulated
  studies; :func:`operating`: those of the search's first comparison.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, Mapping, Optional

import numpy as np
from scipy import stats as sps

from pfd_jax.ops import stats


def fallback(estimates, weights, level: float = 0.05) -> Dict[str, Any]:
  """The fallback procedure (Wiens 2003) over candidates declared in order, each one-sided (H0: no gain over the
  reference, :meth:`pfd_jax.ops.stats.Estimate.p_above` 0): candidate i is tested at level * weights[i] plus, when
  candidate i - 1 was found better, the level candidate i - 1 was tested at. Its family-wise error is at most
  `level` (the weights sum to at most 1), so choosing any candidate found better chooses one without a gain with
  probability at most `level`.
  Weights (1, 0, 0, ...) are the fixed sequence (every candidate at the full level until the first failure ends
  it); spreading them keeps a candidate late in the order within reach when an earlier one fails, at the price of
  the first one's level.

  A candidate whose Estimate is None was not measured (a search that screens a candidate only once the one before
  it passed): it counts as not found better, as a p-value of 1 would. The procedure is monotone (a larger p-value
  never adds a rejection: it can only withhold a carried level), so leaving candidates unmeasured keeps the
  family-wise error of the whole declared sequence, whatever decided which were measured.

  estimates: [(candidate, Estimate or None)] in the declared order. Returns {chosen: the candidate found better
  with the largest estimated gain (None: none), passed: [the candidates found better, in order], levels: [the level
  each was tested at], p: [their one-sided p; None where not measured]}."""
  weights = np.asarray(weights, np.float64)
  if weights.shape != (len(estimates),) or np.any(weights < 0) or weights.sum() > 1 + 1e-9:
    raise ValueError(f"fallback's weights: one per candidate, >= 0, summing to at most 1; got {weights}")
  passed, levels, p, carried = [], [], [], 0.0
  for (c, e), w in zip(estimates, weights):
    levels.append(level * float(w) + carried)
    p.append(None if e is None else e.p_above(0.0))
    carried = levels[-1] if p[-1] is not None and p[-1] < levels[-1] else 0.0
    if carried:
      passed.append((c, e))
  chosen = max(passed, key=lambda ce: ce[1].diff)[0] if passed else None
  return dict(chosen=chosen, passed=[c for c, _ in passed], levels=levels, p=p)


def components(d) -> tuple:
  """(seed, query, residual) variance components of one paired block d [S, Q] (the two-way ANOVA's unbiased moment
  estimates, clipped at 0: what a simulation of new studies draws from)."""
  d = np.asarray(d, np.float64)
  s, q = d.shape
  ms_s, ms_q, ms_e = stats.mean_squares(d)
  return max((ms_s - ms_e) / q, 0.0), max((ms_q - ms_e) / s, 0.0), ms_e


def crossed_power(shapes, parts, effect: float, level: float = 0.05, weights=None) -> float:
  """The closed form of :func:`simulated_power`: the one-sided test's power at the standard error the components
  give (Var = sum_f w_f^2 (a_f / S_f + b_f / Q_f + e_f / (S_f Q_f))) and Satterthwaite's degrees of freedom of the
  expected mean squares (noncentral t)."""
  w2 = np.full(len(shapes), 1.0 / len(shapes) ** 2) if weights is None else np.asarray(weights, np.float64) ** 2
  expected = [(e + q * a, e + s * b, e) for (s, q), (a, b, e) in zip(shapes, parts)]  # E[MS] of the two-way model
  var, df = (float(x) for x in stats.satterthwaite(expected, shapes, w2))
  if not var > 0:  # no spread: the difference is exact
    return float(effect > 0)
  return stats.Estimate(effect, 1.0, math.sqrt(var), df, "seeds x queries", 0).power(effect, level)


def simulated_power(shapes, parts, effect: float, level: float = 0.05, weights=None, *, trials: int = 4000,
                    seed: int = 0) -> float:
  """The probability that the one-sided crossed test (:func:`pfd_jax.ops.stats.crossed`, H0: no gain, at `level`)
  finds a true mean difference `effect` above 0, by simulating `trials` studies of the two-way model at the user's sizes: blocks of
  shapes [(S_f, Q_f)], each d_sq = effect + a_s + b_q + e_sq with normal effects of variances parts [(a, b, e)]
  (:func:`components` of measured blocks). At effect 0 it is the test's real false-positive rate, which
  Satterthwaite's degrees of freedom only approximate at few seeds."""
  rng, hits = np.random.default_rng(seed), 0
  for start in range(0, trials, 500):
    t = min(500, trials - start)
    blocks = [effect + math.sqrt(a) * rng.standard_normal((t, s, 1)) + math.sqrt(b) * rng.standard_normal((t, 1, q))
              + math.sqrt(e) * rng.standard_normal((t, s, q)) for (s, q), (a, b, e) in zip(shapes, parts)]
    mean, var, df = stats.crossed_moments(blocks, weights)
    with np.errstate(divide="ignore", invalid="ignore"):
      p = np.where(var > 0, sps.t.sf(mean / np.sqrt(np.where(var > 0, var, 1)), df), (mean <= 0).astype(float))
    hits += int((p < level).sum())
  return hits / trials


def tied_with_best(lists: Mapping[Any, np.ndarray], simplicity: Callable, alpha: float = 0.05) -> Dict[str, Any]:
  """The simplest candidate that validation cannot tell from the best one.

  lists: {candidate: f[Q]} each candidate's NDCG on the same Q validation lists (a single model's: the mean over
  its seeds). The candidate with the highest mean is the winner of m noisy scores, and with many candidates and
  few lists the winner is mostly its noise (the winner's curse). So a candidate counts as tied with the best unless
  a one-sided paired t-test over the lists (the per-list difference: the lists' shared difficulty cancels) finds it
  worse at level alpha, Bonferroni-adjusted over the m - 1 candidates the best was compared with (the best is
  itself the maximum of m); the simplest of the tied (the smallest `simplicity(candidate)`) is chosen. Twelve
  candidates equal in truth, on 42 lists (tests/test_deploy.py, with experiments.framework.deploy.simplicity):
  the plain maximum was no-distillation in 18 of 200 draws of the noise, this rule chose it in 196. Returns {chosen, best, means, within: [tied candidates, simplest first],
  gap: (best - chosen mean, its paired SE), threshold: the t quantile a gap must exceed, in SEs}."""
  means = {c: float(np.mean(v)) for c, v in lists.items()}
  best = max(means, key=means.get)
  n = len(lists[best])
  threshold = float(sps.t.ppf(1 - alpha / max(len(lists) - 1, 1), max(n - 1, 1)))
  gaps = {}
  for c, v in lists.items():
    d = np.asarray(lists[best], np.float64) - np.asarray(v, np.float64)
    gaps[c] = (float(d.mean()), float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else 0.0)
  within = sorted((c for c, (g, se) in gaps.items() if g <= threshold * se), key=simplicity)
  return dict(chosen=within[0], best=best, means=means, within=within, gap=gaps[within[0]], threshold=threshold)


def queries_for_power(e: stats.Estimate, effect: float, target: float = 0.8,
                      alpha: float = 1 - stats.LEVEL) -> Optional[int]:
  """Test queries that give a crossed seeds x queries estimate `e` (:func:`pfd_jax.ops.stats.crossed`) power `target` for a true
  difference `effect` (the one-sided test at alpha / 2; normal approximation) at its seeds: its variance's seed term
  stays, the rest shrinks as 1 / queries. None where the seed term alone is wider than that power allows (more
  seeds are needed, not queries)."""
  z = sps.norm.ppf
  var = (effect / (z(1 - alpha / 2) + z(target))) ** 2
  if var <= e.seed_var:
    return None
  return max(2, math.ceil(e.queries * (e.se ** 2 - e.seed_var) / (var - e.seed_var)))


def by_lists(blocks) -> np.ndarray:
  """The parts' weights in the pooled gain: each part's lists over all lists (blocks [S, Q_p])."""
  q = np.array([b.shape[-1] for b in blocks], np.float64)
  return q / q.sum()


def operating(blocks, reference: float, level: float, gains, trials: int = 4000) -> Dict[str, Any]:
  """The rule's operating characteristics at the user's sizes, for its first comparison (plain PFD against no
  distillation at its `level`; blocks: the paired per-list differences [S, Q_p] on every part): with the variance
  components measured there (:func:`components`), simulated studies of the same sizes give the
  probability that it is found better when its true gain is 0 (its real false rate; the whole rule's is at most the
  search's level by construction) and when it is each relative gain in `gains` (its power: the rule's power to find
  a gain that plain PFD has, before the later subsets add theirs), beside the closed form's power; and the smallest
  relative gain found with probability 0.8 (the measured estimate's MDE). The parts are weighted by their lists, as
  the search (:mod:`pfd_jax.methods.search`) weighs them."""
  shapes, weights = [b.shape for b in blocks], by_lists(blocks)
  parts = [components(b) for b in blocks]
  est = stats.crossed(blocks, reference, weights)
  sim = lambda g: simulated_power(shapes, parts, g * reference, level, weights, trials=trials)
  return dict(false=sim(0.0), power={f"{g:g}": sim(g) for g in gains},
              closed={f"{g:g}": crossed_power(shapes, parts, g * reference, level, weights) for g in gains},
              mde=est.mde(0.8, level) / reference if reference else math.nan, trials=trials, level=level,
              lists=int(sum(q for _, q in shapes)), seeds=int(shapes[0][0]))
