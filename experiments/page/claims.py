"""Claims and their verdicts: each claim tested in the form its source states it, declared by the driver next to its
rows before any run (:mod:`experiments.page.declared`; ``claims(results) -> [Claim]``);
:mod:`experiments.report` renders them and controls the page's error rate.

**Forms** (the relative change = the mean paired difference / the reference mean; one-sided tests at ALPHA = 2.5%,
so a claim holds exactly when its 95% interval lies inside the region it claims):

* **superiority** (margin m >= 0): the row beats the reference by more than m; claimed region (m, +inf);
* **non-inferiority** (margin m > 0): the row is no worse than the reference by m or more; region (-m, +inf)
  ("better than or as good as");
* **equivalence** (margin m > 0): within +-m (two one-sided tests, TOST); region (-m, +m) ("not sensitive to");
* **trend**: the per-run least-squares slope of a gain over a sweep has the claimed sign;
* **shape** (an inverted U): the per-run quadratic's slopes at the sweep's two ends are > 0 and < 0 (the
  Lind-Mehlum test of an interior maximum);
* a claim over every point of a sweep is the intersection of the points' claims (it holds when every point holds,
  does not reproduce when one does not; its p is the largest);
* **check**: a computed property (the linear theory's), holds or not.

The claims over a sweep (every point, trend, shape) are built in :mod:`experiments.page.sweeps`.

**Verdicts, symmetric**: **holds** when the interval lies inside the claimed region, **does not reproduce** when it
lies outside it, **undecided at n <unit>** otherwise, with the units (crossed: test queries at the run's seeds) for
80% power at a MARGIN change. Its p: its test's one-sided p. **Vacuous** when every unit scores the same in both rows (a
model compared with itself): no p, no Holm family, a verdict of its own in every count. One rule for a zero standard
error otherwise (:class:`pfd_jax.ops.stats.Estimate`): an exact difference, its interval the point, a one-sided p 0 or
1 by the side of the threshold it lies on.

**Units**: one interval per claim (:func:`estimate_of`): over the data draws when the runs re-draw their data
(``--draws``); over seeds and test queries crossed when the data are fixed and the run kept each seed's per-query
NDCG (:func:`pfd_jax.ops.stats.crossed`); else over the runs. Run-level and per-query intervals are diagnostics.

**Sources**: a claim of a paper (``source``: "PFD", or the related paper's name) is *confirmatory*: the report
adjusts the family's p-values by Holm (:func:`adjust`), raw and adjusted verdicts side by side. A claim with no
source is ours (controls, the incumbent, debiasing): *exploratory*, shown raw.
"""
from __future__ import annotations

import math
import re
from typing import Any, Mapping, NamedTuple, Optional

import numpy as np

from experiments.framework import tabulate
from experiments.page import published
from pfd_jax.ops import choice, stats
from pfd_jax.ops import sequential as seq_lib

MARGIN = tabulate.POWER_CHANGE  # the relative change the tables' power columns are about (2%)
ALPHA = (1 - stats.LEVEL) / 2   # one-sided level of every claim's test (its 95% interval's bound)
RUN_UNITS = ("runs", "draws", "folds")  # units that are the runs of a run (folds: one run a fold)
QUERIES = "test queries at these seeds"  # what a crossed (seeds x queries) claim's count of units counts
FORMS = ("superiority", "non-inferiority", "equivalence", "trend", "shape", "check")
# A verdict's word, a value (its text adds where an undecided one stands: 'undecided at 22 draws').
HOLDS, AGAINST, UNDECIDED = "holds", "does not reproduce", "undecided"
VACUOUS = "vacuous"  # judge(): the rows are one model (every unit scores the same in both)
AFTER_HOLM, NOT_DECIDED = "undecided after Holm", "not decided"  # adjust(): a raw verdict Holm does not keep; no run
WORDS = (HOLDS, AGAINST, UNDECIDED, VACUOUS, AFTER_HOLM, NOT_DECIDED)
PFD = "PFD"  # the main paper (Yang et al., NeurIPS 2022) as a claim's source


class Claim(NamedTuple):
  text: str
  word: str      # its verdict: HOLDS / AGAINST / UNDECIDED / VACUOUS
  detail: str
  queries: str = ""  # the per-test-query diagnostic verdict: "<verdict>: <detail>" ('' where the run has none)
  fragile: bool = False  # another machine's rounding could flip the verdict (:func:`fragility`)
  form: str = "superiority"
  margin: float = 0.0  # relative (0.01 = 1%)
  source: str = ""     # the paper that makes the claim ('' = ours, exploratory)
  p: float = math.nan  # one-sided p of the claim's test (holds iff p < ALPHA)
  p_against: float = math.nan  # one-sided p of the test against it (small: the evidence lies outside its region)
  unit: str = "runs"   # what its interval generalises over
  power: float = math.nan  # achieved: its test's power at a true MARGIN gain (non-inferiority: at no difference)
  mde: float = math.nan    # relative: the smallest true distance from the claim's threshold its test finds with 80%
                           # power (equivalence: the smallest margin it could establish); :func:`detectable`
  need: int = 0            # an undecided claim: the units that would decide it (80% power, :func:`_need`); 0 unknown
  have: int = 0            # an undecided claim: the units it has, counted as `need` counts them
  interval: tuple = ()     # its 95% interval of the relative change (lo, hi); () for a sweep, a check, a trend
  at: str = ""             # where an undecided verdict stands: '22 draws', '1 of 3 points' ('' where unknown)
  id: str = ""             # what the claim is, across runs and wordings ('<driver>:<what>'; declared.py)

  @property
  def verdict(self) -> str:
    """The verdict as the page says it: its word, and where an undecided one stands."""
    return self.word + (f" at {self.at}" if self.at else "")

  @property
  def confirmatory(self) -> bool:
    return bool(self.source)

  @property
  def form_text(self) -> str:
    return self.form + (f" ±{100 * self.margin:g}%" if self.form == "equivalence" else
                        f", margin {100 * self.margin:g}%" if self.margin else "")


def runs_per_fold(n_runs: int, res: Mapping[str, Any]) -> int:
  """How many folds `n_runs` paired runs span (runs are folds x seeds); 1 for a run that re-drew its data, whose
  draws are its units (counted whole, :func:`in_draws`)."""
  return 1 if redrawn(res) else max(1, n_runs // res["config"]["run"]["seeds"])


def redrawn(res: Mapping[str, Any]) -> bool:
  """Whether the run re-drew its data with one seed a draw (--draws --seeds=1): its runs are draws."""
  cfg = res.get("config", {})
  draws = (cfg.get("data") or {}).get("draws") or (cfg.get("options") or {}).get("draws")
  return bool(draws) and cfg.get("run", {}).get("seeds") == 1


def in_draws(c: Claim) -> Claim:
  """A claim over runs of a re-drawn run (:func:`redrawn`) said in its unit, the draw."""
  if c.unit != "runs":
    return c
  said = lambda t: re.sub(r"([\d,~]+) (runs|seeds) ", r"\1 draws ", re.sub(r"([\d,~]+) runs\b", r"\1 draws", t)).replace(
      "(runs)", "(draws)")
  return c._replace(at=said(c.at), detail=said(c.detail), unit="draws")


def estimate_of(c: tabulate.ComparisonRecord) -> stats.Estimate:
  """The run-level (or per-query) estimate of a comparison record (tabulate.comparison_record)."""
  n = int(c["n"])
  se = c["sd"] / math.sqrt(n) if n > 1 and np.isfinite(c["sd"]) else math.nan
  return stats.Estimate(float(c["diff"]), float(c["reference"]), float(se), float(n - 1), c.get("unit", "runs"), n)


def _cell(e: stats.Estimate, p: float) -> str:
  lo, hi = e.interval()
  ref = e.reference or math.nan
  ptxt = "n/a" if not np.isfinite(p) else ("p<1e-4" if p < 1e-4 else f"p={p:.2g}" if p < 0.01 else f"p={p:.2f}")
  return f"{100 * e.diff / ref:+.1f}% [{100 * lo / ref:+.1f}%, {100 * hi / ref:+.1f}%] {ptxt}"


def _need(e: stats.Estimate, folds: int = 1, form: str = "superiority", margin: float = 0.0) -> tuple:
  """(units, units it has, text): the units that give the claim's test 80% power. Superiority: at a MARGIN change
  beyond its threshold, or the observed one if larger; non-inferiority: at no change, or the observed one if it lies
  below 0; equivalence: the two one-sided tests at the observed change (stats.units_for_tost_power). Crossed seeds x
  queries: test queries at the run's seeds (choice.queries_for_power). Where it has them already, the text says
  so: its test was powered for that change, and the change it leaves undecided is another. Where the observed
  change lies against the claim (on the wrong side of the threshold its test reads), the text says that instead
  of a count: more units would sharpen that estimate, and only a truth other than the estimate would decide the
  claim for it. (0, 0, '') where the spread is unknown."""
  if not np.isfinite(e.se) or (e.unit == "seeds x queries" and not e.queries):  # the spread is unknown
    return 0, 0, ""
  ref, alpha = abs(e.reference), 2 * ALPHA  # one-sided at ALPHA: runs_for_power's two-sided reading at 2 ALPHA
  low = {"superiority": margin * ref, "non-inferiority": -margin * ref}.get(form)
  if (e.diff <= low) if low is not None else (abs(e.diff) >= margin * ref):
    where = "outside the margin" if low is None else "at or below the threshold its test reads"
    return 0, 0, f"; the observed change lies against the claim ({where}): no count of units is said to detect it"
  if form == "superiority":
    effect = max(e.diff - low, MARGIN * ref)
    size = "the observed change" if e.diff - low > MARGIN * ref else f"a {100 * MARGIN:.0f}% change"
  elif form == "non-inferiority":
    effect = min(e.diff, 0.0) - low
    size = f"the observed change against the {100 * margin:g}% margin" if e.diff < 0 else \
        f"no change against the {100 * margin:g}% margin"
  else:
    effect, size = margin * ref - abs(e.diff), f"the observed change within the {100 * margin:g}% margin"
  if e.unit == "seeds x queries":  # None: no number of queries can
    need, have, what = choice.queries_for_power(e, effect, alpha=alpha), e.queries, QUERIES
    count = "no number of" if need is None else f"~{need:,}"
  else:
    what = {"queries": "test queries", "draws": "draws", "folds": "folds"}.get(e.unit, "seeds")
    per = folds if what == "seeds" else 1  # runs are folds x seeds; draws and queries are counted whole
    sd = e.se * math.sqrt(e.n)
    runs = (stats.units_for_tost_power(margin * ref, e.diff, sd) if form == "equivalence" else
            stats.runs_for_power(effect, sd, alpha=alpha))
    need, have = (None if runs is None else -(-runs // per)), e.n // per
    what += " per fold" if folds > 1 and what.startswith("seeds") else ""
    count = "more than 100,000" if need is None else f"~{need:,}"
  if need is not None and need <= have:
    return need, have, f"; its {have:,} {what} already give its test 80% power at {size}"
  unknown = 0 if e.unit == "seeds x queries" else 100_000  # no number of queries can; more runs than any has
  return unknown if need is None else need, have, f"; {count} {what} would detect {size} with 80% power"


def judge(e: stats.Estimate, form: str = "superiority", margin: float = 0.0) -> tuple:
  """(its verdict's word, one-sided p) of a superiority, non-inferiority or equivalence claim on the estimate `e`
  (an undecided one stands at :func:`stands`); VACUOUS (p nan: no test, no Holm family) when every unit scores the
  same in both rows, a model compared with itself (the PFD search that kept no distillation, against no
  distillation)."""
  if e.se == 0 and e.diff == 0:
    return VACUOUS, math.nan
  m = margin * e.reference
  lo, hi = e.interval()
  if not (np.isfinite(lo) and np.isfinite(hi)):
    return UNDECIDED, math.nan
  if form == "superiority":
    region, p = (m, math.inf), e.p_above(m)
  elif form == "non-inferiority":
    region, p = (-m, math.inf), e.p_above(-m)
  elif form == "equivalence":
    region, p = (-m, m), max(e.p_above(-m), e.p_below(m))
  else:
    raise ValueError(f"judge: form {form!r} is not one of superiority, non-inferiority, equivalence")
  if region[0] < lo and hi < region[1]:
    return HOLDS, p
  if hi <= region[0] or lo >= region[1]:
    return AGAINST, p
  return UNDECIDED, p


def stands(e: stats.Estimate) -> str:
  """Where an undecided verdict on `e` stands: its count of units ('' where its interval is unknown)."""
  return f"{e.n} {e.unit}" if np.all(np.isfinite(e.interval())) else ""


def against(e: stats.Estimate, form: str = "superiority", margin: float = 0.0) -> float:
  """The one-sided p of the test against the claim (H0: the claim is true; small when the estimate lies outside the
  region the claim makes): what a 'does not reproduce' reads, as p is what 'holds' reads (nan: no test)."""
  if e.se == 0 and e.diff == 0:
    return math.nan
  m = margin * e.reference
  return {"superiority": lambda: e.p_below(m), "non-inferiority": lambda: e.p_below(-m),
          "equivalence": lambda: min(e.p_below(-m), e.p_above(m))}[form]()


def diagnostic(c: tabulate.ComparisonRecord, folds: int = 1, margin: float = MARGIN, form: str = "superiority",
               claim_margin: float = 0.0) -> tuple:
  """(word, where an undecided one stands, detail) of a diagnostic claim in `form` with `claim_margin` on a
  comparison record (the per-query second verdict, in its claim's form); `margin` names the gain the detail says is
  ruled out. '(reversed)' marks an interval wholly below zero (two identical rows do not reproduce a superiority
  claim, unreversed)."""
  e = estimate_of(c)
  word, p = judge(e, form, claim_margin)
  if word == VACUOUS:
    return word, "", f"every one of {e.n} {e.unit} scores the same (one model); no test"
  detail = tabulate.change_cell(c)
  if word == UNDECIDED:
    detail += ((f" (a gain of {100 * margin:.0f}% or more is ruled out)" if form == "superiority" and
                e.interval()[1] < margin * e.reference else "") + _need(e, folds, form, claim_margin)[2])
  elif word == AGAINST and e.interval()[1] < 0:
    detail += " (reversed)"
  return word, stands(e) if word == UNDECIDED else "", detail


def reading(word: str, at: str = "") -> str:
  """A diagnostic's words for where its interval lies against the claim's region (at: where an undecided one
  stands): never a verdict's word (a diagnostic decides nothing; the claim's own unit does)."""
  if word == UNDECIDED:
    return "inconclusive" + (f" at {at}" if at else "")
  return {HOLDS: "inside the claimed region", AGAINST: "outside the claimed region"}.get(word, word)


def fragility(c: tabulate.ComparisonRecord, bounds: Optional[tuple] = None, thresholds: tuple = (0.0,)) -> str:
  """'' or why a verdict is fragile: a bound of its interval (`bounds`, default the run-level interval of the
  comparison record c) lies within the 95% spread by which another configuration moves the mean paired difference
  (lambda * sqrt(2 / n) * sd of c's runs, lambda from the measured ratios of paired differences,
  experiments/crossmachine.json) of a threshold the verdict reads (relative, times the reference). Such a verdict
  can differ on another CPU with the same code."""
  if c.get("unit", "runs") != "runs" or not (np.isfinite(c["sd"]) and np.isfinite(c["rel"])):
    return ""
  move = published.spread_quantile(1 - stats.LEVEL, "differences") * (2 / c["n"]) ** 0.5 * c["sd"]
  lo, hi = c["t_ci"] if bounds is None else bounds
  if all(abs(b - t * c["reference"]) >= move for b in (lo, hi) for t in thresholds):
    return ""
  return (f"fragile: another machine moves this change by up to ±{100 * move / c['reference']:.1f}% (95%), across "
          f"a bound the verdict reads")


def claim(text: str, e: stats.Estimate, *, form: str = "superiority", margin: float = 0.0, source: str = "",
          run: Optional[dict] = None, queries: str = "", folds: int = 1) -> Claim:
  """The claim `text` in `form` on the estimate `e` (its unit's interval); run: the run-level comparison record,
  shown as a diagnostic when `e` is another unit, and the basis of the fragility mark."""
  word, p = judge(e, form, margin)
  if word == VACUOUS:
    return Claim(text, word, f"vacuous: the two rows score the same on every one of {e.n} {e.unit} (as one model "
                 "compared with itself); no test", queries=queries, form=form, margin=margin, source=source, p=p,
                 unit=e.unit)
  mde = detectable(e, form)
  detail = _cell(e, p) + f" ({e.unit})" + (f"; MDE {100 * mde:.1f}%" if np.isfinite(mde) else "")
  need, have, needed = _need(e, folds, form, margin) if word == UNDECIDED else (0, 0, "")
  detail += needed
  if run is not None and (e.unit not in RUN_UNITS or e.n != run["n"]):  # another interval: a diagnostic
    detail += f"; runs: {tabulate.change_cell(run)}"
  thresholds = {"superiority": (margin,), "non-inferiority": (-margin,), "equivalence": (-margin, margin)}[form]
  why = fragility(run, e.interval() if e.unit in RUN_UNITS else None, thresholds) if run else ""
  interval = tuple(float(v / e.reference) for v in e.interval()) if e.reference else ()
  return Claim(text, word, detail + (f"; {why}" if why else ""), queries=queries, fragile=bool(why), form=form,
               margin=margin, source=source, p=p, p_against=against(e, form, margin), unit=e.unit,
               power=achieved_power(e, form, margin), mde=mde, need=need, have=have, interval=interval,
               at=stands(e) if word == UNDECIDED else "")


def detectable(e: stats.Estimate, form: str) -> float:
  """The claim's minimum detectable effect at 80% power, relative to the reference mean: how far beyond the
  threshold its test reads (superiority: above the margin; non-inferiority: above minus the margin) a true change
  must lie for the test to find it with 80% power; for equivalence, the smallest margin whose two one-sided tests
  find a true zero change equivalent with 80% power (:meth:`pfd_jax.ops.stats.Estimate.mde`)."""
  if form not in ("superiority", "non-inferiority", "equivalence") or not e.reference:
    return math.nan
  return e.mde(0.8, ALPHA, sides=2 if form == "equivalence" else 1) / abs(e.reference)


def achieved_power(e: stats.Estimate, form: str, margin: float) -> float:
  """The power the claim's test had at this standard error: to find a true MARGIN gain above a superiority margin,
  or no difference above a non-inferiority margin (nan for equivalence)."""
  gap = {"superiority": MARGIN - margin, "non-inferiority": margin}.get(form)
  return math.nan if gap is None or gap <= 0 else e.power(gap * e.reference, ALPHA)


def beats(text: str, rows: tabulate.Runs, a: str, b: str, folds: int = 1, col: int = 0, *,
          queries: Optional[Mapping[str, np.ndarray]] = None,
          form: str = "superiority", margin: float = 0.0, source: str = "",
          estimate: Optional[stats.Estimate] = None) -> Optional[Claim]:
  """The claim of `text` about rows[a] against rows[b] (paired by run) in `form`, or None when either row is
  absent. estimate: the claim's own unit's estimate (default: the runs'); queries: {row: [Q] per test query
  values, averaged over seeds}: adds the per-query diagnostic verdict."""
  if a not in rows or b not in rows:
    return None
  c = tabulate.compare({a: np.asarray(rows[a]), b: np.asarray(rows[b])}, b, col=col)[a]
  second = ""
  if queries and a in queries and b in queries:
    per_query = stats.paired(queries[a], queries[b], unit="queries", resamples=0)  # the verdict reads its t-test
    word, at, detail = diagnostic(tabulate.comparison_record(per_query), form=form, claim_margin=margin)
    second = f"{reading(word, at)}: {detail}"
  return claim(text, estimate or estimate_of(c), form=form, margin=margin, source=source, run=c, queries=second,
               folds=folds)


def check(text: str, ok: bool, detail: str, source: str = "") -> Claim:
  return Claim(text, HOLDS if ok else AGAINST, detail, form="check", source=source)


class Adjusted(NamedTuple):
  """A family member's verdict after Holm: its adjusted p (nan: no test), its word and its text."""
  p: float
  word: str
  verdict: str


def adjust(family: list, sequential: Optional[Mapping[int, tuple]] = None) -> list:
  """[Adjusted] of a declared family of claims (:mod:`experiments.page.family`; None: a
  member without a current run, 'not decided', counted at p = 1 so that it never drops out): Holm's step-down
  adjustment **in both directions**. Each claim's test reads the smaller of its two one-sided p-values (p: for the
  claim; p_against: against it), so the family is Holm's over two-sided tests at 2 x ALPHA with the verdict taking
  the side of the smaller p: a claim holds after Holm when that side is 'holds' and its adjusted p < ALPHA, does not
  reproduce when that side is 'does not reproduce' and its adjusted p < ALPHA; a raw verdict that does not survive
  reads 'undecided after Holm'. A wrong verdict of either kind somewhere in the family has probability at most
  2 x ALPHA (ALPHA where no true change sits exactly on a claim's threshold). A claim without a test (a check; a
  vacuous one) keeps its raw verdict (adjusted p nan) and is no member of the adjustment.

  sequential: {index: (test, at its cap)} of the group-sequential members (experiments.page.deciding; test:
  level -> +1 holds, -1 does not reproduce, 0 neither). With them the family is decided by the graphical procedure
  with Holm's graph (pfd_jax.ops.sequential.graph_test; without a sequential member decided it decides exactly
  Holm's set): a member decided passes its level on. A sequential member's adjusted p is nan (its test reads
  boundaries, not a p); one not decided is 'undecided' at its cap, else 'not decided' while its draws come in."""
  sequential = dict(sequential or {})
  sides = [(1.0, HOLDS) if c is None or i in sequential else
           (c.p, HOLDS) if not c.p_against < c.p else (c.p_against, AGAINST) for i, c in enumerate(family)]
  tested = [i for i, c in enumerate(family) if c is None or i in sequential or np.isfinite(c.p)]
  adj = dict(zip(tested, stats.holm([sides[i][0] for i in tested]))) if tested else {}
  decided = None
  if sequential:
    tests = [sequential[i][0] if i in sequential else (lambda level, i=i: sides[i][0] < level) for i in tested]
    w, g = seq_lib.holm_graph(len(tested))
    at, _ = seq_lib.graph_test(lambda j, level: bool(tests[j](level)), w, g, ALPHA)
    decided = {tested[j]: level for j, level in at.items()}
  out = []
  for i, c in enumerate(family):
    if i in sequential:
      test, capped = sequential[i]
      word = ({1: HOLDS, -1: AGAINST}[test(decided[i])] if i in decided else UNDECIDED if capped else NOT_DECIDED)
      at = f" at {c.at}" if c is not None and c.at and word == UNDECIDED else f" ({c.at})" if c and c.at else ""
      out.append(Adjusted(math.nan, word, word + at))
    elif c is None:
      out.append(Adjusted(math.nan, NOT_DECIDED, NOT_DECIDED))
    elif i not in adj:
      out.append(Adjusted(math.nan, c.word, c.verdict))
    else:
      p, side = float(adj[i]), sides[i][1]
      passes = p < ALPHA if decided is None else i in decided
      word = side if passes and c.word == side else AFTER_HOLM if c.word in (HOLDS, AGAINST) else c.word
      out.append(Adjusted(p, word, c.verdict if word == c.word else word))
  return out
