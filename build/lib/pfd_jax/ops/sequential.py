r"""Group-sequential tests of a family of claims: each claim looks at its draws at declared counts and stops once it
is decided; the family's error is kept by the graphical procedure, whose alpha passes from a decided claim to the
others.

**One claim** (:class:`Design`): looks at draw counts n_1 < ... < n_K (the last is the cap). At look k the statistic
is the paired t of the draws' differences, Z_k ~ N(theta sqrt(n_k), 1) with corr(Z_j, Z_k) = sqrt(n_j / n_k)
(Brownian motion in the information n). A two-sided symmetric boundary c_k spends the error an alpha-spending
function allows: P_0(|Z_1| < c_1, ..., |Z_{k-1}| < c_{k-1}, |Z_k| >= c_k) = A(t_k) - A(t_{k-1}), t_k = n_k / n_K,
A(1) = 2 alpha (alpha one-sided on each side: *holds* above, *does not reproduce* below, as the claims' verdicts).

* ``hsd``: Hwang, Shih and DeCani (1990), A(t) = 2 alpha (1 - e^{-gamma t}) / (1 - e^{-gamma}) (gamma = -4: close
  to O'Brien-Fleming's early conservatism; gamma = 0: linear, Pocock-like);
* ``obf``: Lan and DeMets' (1983) O'Brien-Fleming type, A(t) = 2 - 2 Phi(Phi^{-1}(1 - alpha) / sqrt(t)).

The boundaries are computed exactly, by numerical integration of the sub-density of the score S_k = Z_k sqrt(n_k)
over the continuation region (Jennison and Turnbull 2000, *Group Sequential Methods*, ch. 19; Simpson's rule on a
grid), not by simulation. With the variance estimated from the draws, the statistic at look k is Student's t with
n_k - 1 degrees of freedom and is compared with the boundary's nominal level (Jennison and Turnbull, section 11.4,
the 'significance level approach'): reject where the one-sided t p-value is at most 1 - Phi(c_k).

**The family** (:func:`graph_test`): the graphical procedure of Bretz, Maurer, Brannath and Posch (2009), each node
a claim with weight w_i (its level w_i alpha) and a transition matrix G (G_ij: the share of i's level passed to j
once i is decided); Holm is w_i = 1/m, G_ij = 1/(m-1). With group-sequential nodes (Maurer and Bretz 2013,
*Stat. Biopharm. Res.* 5:311-320): a node whose level rises is tested again at every look it has made with the
boundaries of its spending function at the new level, so a verdict does not depend on the order the looks came in.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Callable, Dict, Optional, Sequence, Tuple

import numpy as np
from scipy import stats as sps
from scipy.optimize import brentq

SPENDING = ("hsd", "obf")
GRID = 401  # Simpson points a stage (odd): boundaries and power to about 1e-9 (tests/test_sequential.py)


def spent(t, alpha: float, kind: str = "hsd", gamma: float = -4.0) -> np.ndarray:
  """A(t): the two-sided error spent by information fraction t in [0, 1] (alpha one-sided each side)."""
  t = np.clip(np.asarray(t, np.float64), 0.0, 1.0)
  if kind == "hsd":
    return 2 * alpha * (t if gamma == 0 else (1 - np.exp(-gamma * t)) / (1 - np.exp(-gamma)))
  if kind == "obf":
    with np.errstate(divide="ignore"):
      return np.where(t > 0, 2 - 2 * sps.norm.cdf(sps.norm.ppf(1 - alpha) / np.sqrt(np.maximum(t, 1e-300))), 0.0)
  raise ValueError(f"spending {kind!r}: expected one of {', '.join(SPENDING)}")


def _simpson(a: float, b: float) -> Tuple[np.ndarray, np.ndarray]:
  m = GRID
  x = np.linspace(a, b, m)
  w = np.ones(m)
  w[1:-1:2], w[2:-1:2] = 4.0, 2.0
  return x, w * (b - a) / (3 * (m - 1))


def _exits(x, fw, b: float, step: float, drift: float) -> Tuple[float, float]:
  """(upper, lower) probabilities of leaving (-b, b) at the next look from the sub-density fw (weighted) on x, the
  score's increment N(drift, step)."""
  sd = math.sqrt(step)
  upper = float(fw @ sps.norm.sf((b - x - drift) / sd))
  lower = float(fw @ sps.norm.cdf((-b - x - drift) / sd))
  return upper, lower


def _stages(looks: Sequence[float], bounds: Optional[Sequence[float]] = None, increments=None, theta: float = 0.0):
  """Walk the looks on the score scale: with `bounds` (z) given, the (upper, lower) exit probabilities at each look
  at drift theta (a unit's mean / its sd); else solve each z bound for its spending `increments` at theta 0."""
  looks = np.asarray(looks, np.float64)
  out_bounds, exits = [], []
  x = fw = None
  for k, n in enumerate(looks):
    step = n - (looks[k - 1] if k else 0.0)
    drift = theta * step
    if x is None:  # the first look: the score is N(theta n_1, n_1)
      ex = lambda b: (float(sps.norm.sf((b - drift) / math.sqrt(n))), float(sps.norm.cdf((-b - drift) / math.sqrt(n))))
    else:
      ex = functools.partial(_exits, x, fw, step=step, drift=drift)
    if bounds is None:
      target = increments[k]
      if target <= 0:
        b = math.inf
      else:
        b = brentq(lambda b: sum(ex(b)) - target, 1e-9, 40 * math.sqrt(n), xtol=1e-12)
    else:
      b = bounds[k] * math.sqrt(n)
    out_bounds.append(b / math.sqrt(n))
    exits.append(ex(b) if math.isfinite(b) else (0.0, 0.0))
    if k + 1 < len(looks):  # the sub-density of the score where no bound was crossed
      hi = min(b, 12 * math.sqrt(n) + abs(theta) * n)
      nx, nw = _simpson(-hi, hi)
      if x is None:
        f = sps.norm.pdf((nx - drift) / math.sqrt(n)) / math.sqrt(n)
      else:
        sd = math.sqrt(step)
        f = (sps.norm.pdf((nx[:, None] - x[None, :] - drift) / sd) / sd) @ fw
      x, fw = nx, f * nw
  return np.array(out_bounds), np.array(exits)


@dataclasses.dataclass(frozen=True)
class Design:
  """One claim's group-sequential design, declared before its run: looks at these draw counts (the last: its cap),
  spending function `spending` (:data:`SPENDING`) with `gamma` (hsd only)."""
  looks: Tuple[int, ...]
  spending: str = "hsd"
  gamma: float = -4.0

  def __post_init__(self):
    if not self.looks or any(b <= a for a, b in zip(self.looks, self.looks[1:])) or self.looks[0] < 2:
      raise ValueError(f"looks {self.looks}: increasing draw counts from 2")
    spent(0.5, 0.025, self.spending, self.gamma)  # a ValueError names an unknown spending

  @property
  def cap(self) -> int:
    return self.looks[-1]

  def increments(self, alpha: float) -> np.ndarray:
    a = spent(np.asarray(self.looks, np.float64) / self.cap, alpha, self.spending, self.gamma)
    return np.diff(np.concatenate([[0.0], a]))

  def bounds(self, alpha: float) -> np.ndarray:
    """z boundaries c_k at one-sided level alpha each side (exact; inf where a look spends nothing)."""
    return _bounds(self, float(alpha))

  def nominal(self, alpha: float) -> np.ndarray:
    """Each look's nominal one-sided level 1 - Phi(c_k): a t p-value at or under it decides."""
    return sps.norm.sf(self.bounds(alpha))

  def crossing(self, alpha: float, theta: float) -> np.ndarray:
    """[K, 2]: P(first crossing at look k, above / below) when a draw's difference has mean theta x its sd."""
    return _stages(self.looks, self.bounds(alpha), theta=theta)[1]

  def power(self, alpha: float, theta: float) -> float:
    """P(holds at some look) at theta (the z design's; the t statistic's is close once the looks hold 6 draws)."""
    return float(self.crossing(alpha, theta)[:, 0].sum())

  def mde(self, alpha: float, sd: float, target: float = 0.8) -> float:
    """The smallest true mean difference the design finds with probability `target` at its cap, where one draw's
    difference has standard deviation sd."""
    theta = brentq(lambda th: self.power(alpha, th) - target, 1e-6, 20.0, xtol=1e-8)
    return theta * sd


@functools.lru_cache(maxsize=4096)
def _bounds(design: Design, alpha: float) -> np.ndarray:
  return _stages(design.looks, increments=design.increments(alpha))[0]


def t_statistic(d) -> float:
  """The paired t of differences d (nan with fewer than 2; +-inf for a constant nonzero difference)."""
  d = np.asarray(d, np.float64)
  if d.size < 2:
    return math.nan
  sd = float(d.std(ddof=1))
  if sd == 0:
    return 0.0 if d.mean() == 0 else math.copysign(math.inf, float(d.mean()))
  return float(d.mean() / (sd / math.sqrt(d.size)))


def look(design: Design, d, alpha: float) -> Tuple[int, int]:
  """(direction, look index) of the first of `design`'s looks that draws d (a claim's per-draw differences, in the
  order they were made) reach and at which the t-test crosses its boundary at level alpha: direction +1 (above:
  holds), -1 (below: does not reproduce), 0 (none yet; index -1)."""
  d = np.asarray(d, np.float64)
  for k, (n, p) in enumerate(zip(design.looks, design.nominal(alpha))):
    if d.size < n:
      break
    t = t_statistic(d[:n])
    if p > 0 and sps.t.sf(abs(t), n - 1) <= p:
      return (1 if t > 0 else -1), k
  return 0, -1


def holm_graph(m: int) -> Tuple[np.ndarray, np.ndarray]:
  """Holm's procedure as a graph: equal weights, a decided node's level split equally among the others."""
  g = np.full((m, m), 1.0 / max(m - 1, 1))
  np.fill_diagonal(g, 0.0)
  return np.full(m, 1.0 / m), g


def graph_test(rejects: Callable[[int, float], bool], weights, transitions,
               alpha: float) -> Tuple[Dict[int, float], np.ndarray]:
  """The graphical procedure (Bretz et al. 2009, algorithm 1): ({node: the level it was decided at}, every node's
  final weight), where rejects(i, level) says whether node i's test decides at that level (monotone in the level).
  The set does not depend on the order in which nodes are decided."""
  w, g = np.array(weights, np.float64), np.array(transitions, np.float64)
  open_, decided = list(range(w.size)), {}
  while True:
    i = next((i for i in open_ if w[i] > 0 and rejects(i, w[i] * alpha)), None)
    if i is None:
      return decided, w
    decided[i] = float(w[i] * alpha)
    open_.remove(i)
    nw, ng = w.copy(), np.zeros_like(g)
    for j in open_:
      nw[j] = w[j] + w[i] * g[i, j]
      for l in open_:
        if l != j:
          den = 1 - g[j, i] * g[i, j]
          ng[j, l] = (g[j, l] + g[j, i] * g[i, l]) / den if den > 0 else 0.0
    nw[i] = 0.0
    w, g = nw, ng


@dataclasses.dataclass(frozen=True)
class Verdict:
  """A member's state after a look: direction +1 holds, -1 does not reproduce, 0 not decided (undecided once its
  draws reach its design's cap); the draws it has (decided: the look it stopped at, index `look`; else -1), its
  level (decided: the one it was decided at; else the one it holds now) and its t there."""
  direction: int
  draws: int
  look: int
  level: float
  t: float


def decide(series: Sequence, designs: Sequence[Design], weights, transitions, alpha: float) -> list:
  """Each member's :class:`Verdict` from its committed draws (series[i]: its per-draw differences in order) under
  the graphical procedure over group-sequential members, each tested at every look its draws reach."""
  seen = [np.asarray(s, np.float64)[:d.cap] for s, d in zip(series, designs)]
  decided, w = graph_test(lambda i, level: look(designs[i], seen[i], level)[0] != 0, weights, transitions, alpha)
  out = []
  for i, (d, design) in enumerate(zip(seen, designs)):
    direction, k = look(design, d, decided[i]) if i in decided else (0, -1)
    n = design.looks[k] if k >= 0 else d.size
    out.append(Verdict(direction, n, k, decided.get(i, float(w[i] * alpha)), t_statistic(d[:n])))
  return out
