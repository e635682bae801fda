"""How far another machine's numerics move a table's cells: the ratios of that perturbation to the seed variance,
estimated from runs made under two numerics, and the scale mixture of normals they define (the tolerance of
``experiments.report --check`` on another configuration: experiments/page/published.py, experiments/crossmachine.py)."""
from __future__ import annotations

import numpy as np
from scipy import stats as sps
from scipy.optimize import brentq


def perturbation_ratios(a, b, var) -> np.ndarray:
  r"""How far other numerics move each cell's runs, in units of the cell's seed variance.

  a, b [cells, n]: the same n runs (same seeds, data and code) of each table cell computed under two numerics
  (CPU, XLA flags, threads); var [cells]: each cell's seed variance. Another machine's rounding re-draws the
  numerical noise of each training trajectory, so a_ci = m_ci + e_ci and b_ci = m_ci + f_ci with e, f independent
  N(0, r_c var_c): the runs differ like two perturbed trainings of the same seeds, not like two samples of seeds
  (r_c = 1: training forgets its seed; r_c = 0: the bits are the seed's alone). Returns the estimates
  r_c = mean_i (a_ci - b_ci)^2 / (2 var_c) of the cells that differ at all: a cell equal bit for bit in every run
  was computed outside the perturbed numerics (a LightGBM row) and says nothing of r. Each estimate carries its
  own chi^2_n / n noise, so their spread over-states that of the true r_c (a conservative mixture)."""
  a, b, var = np.asarray(a, np.float64), np.asarray(b, np.float64), np.asarray(var, np.float64)
  if a.shape != b.shape or a.ndim != 2 or var.shape != a.shape[:1]:
    raise ValueError(f"perturbation_ratios needs a, b [cells, n] and var [cells]: {a.shape}, {b.shape}, {var.shape}")
  moved = (a != b).any(1) & (var > 0)
  return ((a - b)[moved] ** 2).mean(1) / (2 * var[moved])


def mixture_quantile(ratios, tail: float) -> float:
  """lambda with P(|T| > lambda) = tail for T ~ N(0, r), r drawn uniformly from `ratios` (a scale mixture of
  normals: cells moved by other numerics with their own measured ratios, :func:`perturbation_ratios`)."""
  r = np.asarray(ratios, np.float64)
  r = r[r > 0]
  if not r.size or not 0 < tail < 1:
    raise ValueError(f"mixture_quantile needs positive ratios and 0 < tail < 1 (got {r.size} ratios, {tail})")
  excess = lambda lam: float(np.mean(2 * sps.norm.sf(lam / np.sqrt(r)))) - tail
  return float(brentq(excess, 0.0, 40 * float(np.sqrt(r.max())) + 1e-12))
