"""Claims over a sweep (one run's points: alpha, tau_target, corr(z, y), ...), built from the point claims of
:mod:`experiments.page.claims`: **every** point (the intersection-union test), a **trend** of a gain over the
sweep (the per-run least-squares slope's sign) and a **shape** (an inverted U: the per-run quadratic's end slopes,
Lind and Mehlum 2010).

A trend's or shape's MDE is a slope's, read over the sweep: the smallest true change of the gain from one end of x's
span to the other at the slope its test finds with 80% power (shape: the larger of its two end slopes'), so that it
reads in the relative units of every other claim's MDE.
"""
from __future__ import annotations

import math
from typing import Mapping, Optional

import numpy as np

from experiments.framework import tabulate
from experiments.page.claims import (AGAINST, HOLDS, MARGIN, QUERIES, UNDECIDED, VACUOUS, Claim, against, claim,
                                          detectable, estimate_of, judge, stands)
from pfd_jax.ops import stats


def every(text: str, claims: Mapping[str, Claim], *, source: str = "") -> Optional[Claim]:
  """The claim that holds at every point of a sweep ({point: Claim}): the intersection-union test (holds when every
  point holds, does not reproduce when one does not; p = the largest)."""
  if not claims:
    return None
  found = {}
  for point, c in claims.items():
    found.setdefault(c.word, []).append(str(point))
  first = next(iter(claims.values()))
  if set(found) == {VACUOUS}:
    return Claim(text, VACUOUS, f"vacuous at every point ({', '.join(found[VACUOUS])})", form=first.form,
                 margin=first.margin, source=source, unit=first.unit)
  word = AGAINST if AGAINST in found else HOLDS if set(found) == {HOLDS} else UNDECIDED
  fragile = [str(k) for k, c in claims.items() if c.fragile]
  hardest = max((c for c in claims.values() if c.word == UNDECIDED), key=lambda c: c.need,
                default=None)
  need = hardest.need if hardest else 0
  unit = QUERIES if first.unit == "seeds x queries" else first.unit
  at = f"a {100 * MARGIN:.0f}% change or the observed one" if first.form == "superiority" else "no change within the margin"
  return Claim(text, word, "; ".join(f"{k} at {', '.join(v)}" for k, v in found.items()) +
               (_deciding(hardest, unit, at) if word == UNDECIDED else "") +
               (f"; fragile at {', '.join(fragile)} (another machine's rounding could move those points' verdicts)"
                if fragile else ""), fragile=bool(fragile), form=first.form, margin=first.margin, source=source,
               p=max(c.p for c in claims.values() if c.word != VACUOUS),
               p_against=_union([c.p_against for c in claims.values() if c.word != VACUOUS]), unit=first.unit,
               power=min(c.power for c in claims.values()),
               mde=float(np.max([c.mde for c in claims.values()])), need=need if word == UNDECIDED else 0,
               at=f"{len(found.get(UNDECIDED, []))} of {len(claims)} points" if word == UNDECIDED else "")


def _deciding(hardest: Optional[Claim], unit: str, at: str) -> str:
  """What would decide the sweep's hardest undecided point (the most units needed): more units, or none where it
  has them already ('' where unknown)."""
  if hardest is None or not hardest.need:
    return ""
  if hardest.need <= hardest.have:
    return f"; each undecided point's test already has 80% power at {at} with its {hardest.have:,} {unit}"
  return f"; ~{hardest.need:,} {unit} would give the hardest undecided point's test 80% power at {at}"


def sweep(text: str, records: Mapping[str, tabulate.ComparisonRecord], folds: int = 1, *, form: str = "superiority",
          margin: float = 0.0, source: str = "") -> Optional[Claim]:
  """The claim of `text` at every point of a sweep ({point: run-level comparison record}), in `form`."""
  return every(text, {p: claim(str(p), estimate_of(c), form=form, margin=margin, run=c, folds=folds)
                      for p, c in records.items()}, source=source)


def trend(text: str, x, gains, *, decreasing: bool = False, source: str = "") -> Claim:
  """The claim that a gain grows with x (decreasing: shrinks): gains [points, runs] (relative, paired by run across
  the points), x [points]; the per-run least-squares slopes' t interval, per unit of x."""
  slopes = stats.per_run_slopes(x, gains) * (-1 if decreasing else 1)
  e = stats.runs_estimate(slopes, 1.0)
  word, p = judge(e)
  lo, hi = e.interval()
  sign = -1 if decreasing else 1
  detail = (f"slope {sign * e.diff:+.3g} [{min(sign * lo, sign * hi):+.3g}, {max(sign * lo, sign * hi):+.3g}] per "
            f"unit over {len(x)} points, {e.n} runs, p={p:.2g}")
  need, needed = _slope_need([e], ["the observed slope"]) if word == UNDECIDED else (0, "")
  mde, said = _over_span([e], x)
  return Claim(text, word, detail + said + needed, form="trend", source=source, p=p, p_against=against(e),
               unit=e.unit, need=need, mde=mde, at=stands(e) if word == UNDECIDED else "")


def shape(text: str, x, gains, *, source: str = "") -> Claim:
  """The claim that a gain has an interior maximum over x (an inverted U): gains [points, runs] (paired by run),
  x [points]; the per-run quadratic's slopes at min(x) (> 0) and at max(x) (< 0), each with its t interval
  (Lind and Mehlum 2010; the intersection of the two one-sided tests)."""
  left, right = stats.end_slopes(x, gains)
  el, er = stats.runs_estimate(left, 1.0), stats.runs_estimate(-right, 1.0)
  (wl, pl), (wr, pr) = judge(el), judge(er)
  word = AGAINST if AGAINST in (wl, wr) else HOLDS if wl == wr == HOLDS else UNDECIDED
  (l0, l1), (r0, r1) = el.interval(), er.interval()
  detail = (f"slope at x = {np.min(x):.3g}: {el.diff:+.3g} [{l0:+.3g}, {l1:+.3g}] p={pl:.2g}; at x = "
            f"{np.max(x):.3g}: {-er.diff:+.3g} [{-r1:+.3g}, {-r0:+.3g}] p={pr:.2g} (quadratic per run)")
  ends = [f"the observed slope at x = {np.min(x):.3g}", f"the observed slope at x = {np.max(x):.3g}"]
  need, needed = _slope_need([el, er], ends) if word == UNDECIDED else (0, "")
  mde, said = _over_span([el, er], x)
  return Claim(text, word, detail + said + needed, form="shape", source=source, p=max(pl, pr),
               p_against=_union([against(el), against(er)]), unit=el.unit, need=need, mde=mde,
               at=f"{el.n} runs" if word == UNDECIDED else "")


def _over_span(estimates: list, x) -> tuple:
  """(MDE, text): the largest of the slope estimates' MDEs (80% power, one-sided) times x's span: the gain's
  smallest detectable end-to-end change (relative, like the gains)."""
  span = float(np.max(x) - np.min(x))
  mde = max(detectable(e, "superiority") for e in estimates) * span
  return mde, (f"; MDE {100 * mde:.1f}% across x's span of {span:.3g} (a slope of {mde / span:.3g} per unit)"
               if np.isfinite(mde) and span > 0 else "")


def _slope_need(estimates: list, names: list) -> tuple:
  """(runs, text): the runs at which every per-run slope estimate's one-sided test (in the claim's direction: each
  estimate signed so) finds its observed slope with 80% power (0: unknown). A slope observed against the claim
  (<= 0) is said so instead of a count: more runs would sharpen it, not turn it."""
  against_it = [n for e, n in zip(estimates, names) if not e.diff > 0]
  if against_it:
    return 0, f"; {' and '.join(against_it)} lies against the claim: no count of runs is said to detect it"
  needs = [stats.runs_for_power(e.diff, e.se * math.sqrt(e.n)) for e in estimates]
  if any(n is None for n in needs):
    return 0, ""
  both = "both observed end slopes (80% power each)" if len(estimates) > 1 else "the observed slope (80% power)"
  return max(needs), f"; ~{max(needs):,} runs would detect {both}"


def _union(ps: list) -> float:
  """The p against a claim that holds only where each of its parts holds: it fails where any part fails, so the
  parts' smallest p against, Bonferroni over the parts (the raw verdict reads any part's failure unadjusted)."""
  ps = [p for p in ps if np.isfinite(p)]
  return min(1.0, len(ps) * min(ps)) if ps else math.nan
