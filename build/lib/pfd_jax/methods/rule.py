"""The PFD search's rule as it runs on a screening, and what the whole rule could have found (NumPy + SciPy).

* :func:`second_stage`: the fallback procedure (:func:`pfd_jax.ops.choice.fallback`) over the declared order of
  every subset's every setting, a subset's settings grid screened once the rule finds its plain setting better;
* :func:`whole`: the probability that this rule, as run, chooses a distilling candidate when one subset's plain
  setting has a true gain and no candidate has any other, by studies simulated at the run's sizes and spreads.
  :func:`pfd_jax.ops.choice.operating` says the same of the first comparison alone (plain PFD against no
  distillation); this one has every subset, the carried levels and the grid as the search screens it.

The simulated studies. Each part's lists are resampled with replacement, the same lists for every candidate (the
candidates share no distillation's list noise and their subset's teacher, and keep those correlations); each
candidate's per-list differences lose their mean and their seeds' offsets (the null), and take new seed offsets,
independent across candidates, drawn at the seed spread pooled over every candidate and part (two screening seeds
give a block's seed term one degree of freedom; pooled, it has one per block). The spread is uncertain all the
same, so the power is said twice: at the pooled estimate and at its :data:`SEED_BOUND` upper confidence bound. The
planted gain is added to one plain setting's differences. A setting the run never screened counts as not found
better in every study (the procedure is monotone, so the rate is a lower bound of the rule's when such a setting
has a gain of its own; here none has).
"""
from __future__ import annotations

import math
from typing import Any, Dict, Optional, Sequence

import numpy as np
from scipy import stats as sps

from pfd_jax.methods.parts import Candidate
from pfd_jax.ops import choice, stats

GAINS = (0.03, 0.05)  # the relative gains whose power the search report states
SEED_BOUND = 0.8  # the one-sided confidence of the seed spread's upper bound the power is said at besides


def second_stage(sc, order, weights, level: float, rest: Sequence[dict], refine: Optional[int]) -> Dict[str, Any]:
  """The fallback procedure over the declared `order` on what `sc` (a screening: ``scores`` holds the candidates
  screened, ``estimate(c)`` and ``screen(columns, settings)``) has screened, a candidate not screened counting as
  not found better; with `refine`, first the `rest` settings of a subset screened once the rule finds its plain
  setting better, the first `refine` such subsets in the declared order, the rule run again after each. Returns the
  last run's dict (:func:`pfd_jax.ops.choice.fallback`)."""
  run = lambda: choice.fallback([(c, sc.estimate(c) if c in sc.scores else None) for c in order], weights, level)
  rule = run()
  for _ in range(refine or 0) if rest else ():
    cols = next((c.columns for c in rule["passed"] if Candidate(c.columns, **rest[0]) not in sc.scores), None)
    if cols is None:
      break
    sc.screen(cols, rest)
    rule = run()
  return rule


def seed_spread(blocks, bound: float = SEED_BOUND) -> tuple:
  """(the seed variance component, its `bound` upper confidence bound, its degrees of freedom), pooled over
  blocks [S, Q] (every candidate's difference on every part): the mean of (MS_seed - MS_res) / Q, clipped at 0; the
  bound scales the pooled MS_seed by df / chi2_(1 - bound)(df), df = the blocks' (S - 1) summed (blocks that share
  no distillation are not independent, so df is an upper bound and the confidence bound an approximation)."""
  squares = [stats.mean_squares(np.asarray(b, np.float64)) + (b.shape[1],) for b in blocks]
  df = sum(b.shape[0] - 1 for b in blocks)
  scale = df / sps.chi2.ppf(1 - bound, df)
  mean = lambda k: float(np.mean([(k * ms_s - ms_e) / q for ms_s, _, ms_e, q in squares]))
  return max(mean(1.0), 0.0), max(mean(scale), 0.0), df


def _studies(gains, weights, seed_var: float, trials: int, rng) -> Dict[Candidate, tuple]:
  """{candidate: (mean, variance, df) [trials]} of the crossed estimate in `trials` simulated null studies (the
  module docstring); gains: {candidate: [d [S, Q_p] per part]}."""
  parts = next(iter(gains.values()))
  lists = [rng.integers(d.shape[1], size=(trials, d.shape[1])) for d in parts]
  out = {}
  for c, blocks in gains.items():
    drawn = []
    for d, idx in zip(blocks, lists):
      r = np.asarray(d, np.float64) - np.mean(d, 1, keepdims=True)  # no mean, no seed offsets
      drawn.append(np.moveaxis(r[:, idx], 1, 0) + math.sqrt(seed_var) * rng.standard_normal((trials, d.shape[0], 1)))
    out[c] = stats.crossed_moments(drawn, weights)
  return out


def _p(mean, var, df):
  """:meth:`pfd_jax.ops.stats.Estimate.p_above` 0 over arrays (an exact difference: 0 above 0, else 1)."""
  with np.errstate(divide="ignore", invalid="ignore"):
    return np.where(var > 0, sps.t.sf(mean / np.sqrt(np.where(var > 0, var, 1)), df), (mean <= 0).astype(float))


class _Found:
  """One candidate's estimate in one simulated study, as the fallback procedure reads it."""
  __slots__ = ("diff", "p")

  def __init__(self, diff: float, p: float):
    self.diff, self.p = diff, p

  def p_above(self, threshold: float) -> float:
    """The one-sided p of no gain (the fallback procedure asks for threshold 0 only)."""
    return self.p


class _Study:
  """One simulated study as :func:`second_stage` reads a screening: `first` screened, a grid screened on request
  where the run screened it (`found`: {candidate: _Found})."""

  def __init__(self, found, first):
    self.found, self.scores = found, {c: None for c in first if c in found}

  def estimate(self, c):
    return self.found[c]

  def screen(self, cols, grid):
    self.scores.update({c: None for v in grid for c in [Candidate(cols, v["alpha"], v["temperature"])]
                        if c in self.found})


def _rate(moments, planted, shift: float, rule) -> float:
  """The share of the simulated studies in which `rule` (a study -> its fallback dict) chooses a distilling
  candidate, `shift` added to the `planted` candidate's differences (None: the null)."""
  p = {c: _p(m + (shift if c == planted else 0.0), v, df) for c, (m, v, df) in moments.items()}
  diff = {c: m + (shift if c == planted else 0.0) for c, (m, _, _) in moments.items()}
  trials = len(next(iter(p.values())))
  return sum(rule({c: _Found(float(diff[c][t]), float(p[c][t])) for c in p})["chosen"] is not None
             for t in range(trials)) / trials


def whole(gains, weights, reference: float, *, order, level_weights, level: float, rest: Sequence[dict],
          refine: Optional[int], first, effects: Sequence[float] = GAINS, trials: int = 2000, seed: int = 0,
          bound: float = SEED_BOUND) -> Dict[str, Any]:
  """The whole rule's operating characteristics at a run's sizes and spreads (the module docstring).

  gains: {candidate: [its paired differences from no distillation, d [S, Q_p], one per part]} for every distilling
  candidate the run screened (S >= 2); weights: the parts' (by their lists); reference: no distillation's pooled
  NDCG, which a relative gain multiplies; order, level_weights, level, rest, refine: the rule's
  (:func:`second_stage`); first: the candidates screened before the rule runs (every subset's plain setting).
  Returns {false: the rate of a distilling choice without any gain; power: {gain: {plain setting's label: the rate
  with that gain in it}}; bound_false, bound_power: the same at the seed spread's bound; planted: the plain
  settings in the declared order (plain PFD first); seed_var, seed_bound, seed_df, bound, trials, level, lists,
  seeds}."""
  spread, upper, df = seed_spread([d for blocks in gains.values() for d in blocks], bound)
  plains = [c for c in order if c in first and c in gains]
  rule = lambda found: second_stage(_Study(found, first), order, level_weights, level, rest, refine)
  out = {}
  for name, var in (("", spread), ("bound_", upper)):
    moments = _studies(gains, weights, var, trials, np.random.default_rng(seed))  # the same lists for both spreads
    out[f"{name}false"] = _rate(moments, None, 0.0, rule)
    out[f"{name}power"] = {f"{g:g}": {c.label: _rate(moments, c, g * reference, rule) for c in plains}
                           for g in effects}
  parts = next(iter(gains.values()))
  return dict(out, planted=[c.label for c in plains], seed_var=spread, seed_bound=upper, seed_df=df, bound=bound,
              trials=trials, level=level, lists=int(sum(d.shape[1] for d in parts)), seeds=int(parts[0].shape[0]))
