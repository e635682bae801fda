"""Claims and their verdicts, derived from paired comparisons (:func:`experiments.framework.tabulate.compare`).

Each driver declares its claims next to its rows (``claims(results) -> [Claim]``) and its reproduced runs as
named :class:`Preset` s; :mod:`experiments.report` only renders them.

Verdicts (directional claims "A beats B", paired by run, 95% paired-t interval of the relative change):
* **holds**: the interval lies above 0;
* **does not reproduce**: the interval lies below +MARGIN (a gain of MARGIN or more is ruled out; "reversed"
  when it lies below 0);
* **undecided at n runs**: otherwise, with the seeds (per fold) a paired t-test would need for 80% power at the
  measured spread, for the observed change or MARGIN, whichever is larger.
"Comparable" claims hold when the interval lies within +-MARGIN and do not reproduce when it excludes 0.

The run is the unit of the papers' claims (a training procedure beats another: new seeds, new models). IR practice
also tests over topics: a claim may carry a **second verdict per test query** (:attr:`Claim.queries`, the same
rules over the test queries with a positive, each query's NDCG averaged over the seeds). It speaks about these
trained models on these queries, not about the procedure, and never replaces the run verdict.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from experiments.framework import published, tabulate
from pfd_jax.ops import stats

MARGIN = tabulate.POWER_CHANGE  # the relative change the tables' power columns are about (2%)


class Claim(NamedTuple):
  text: str
  verdict: str   # holds / does not reproduce / undecided at n runs / mixed
  detail: str
  queries: str = ""  # the second verdict, by test query: "<verdict>: <detail>" ('' where the run has none)
  fragile: bool = False  # another machine's rounding could flip the run verdict (:func:`fragility`)


class Preset(NamedTuple):
  """A reproduced run of a driver: ``python -m experiments.<driver> --preset=<name>`` runs it with `flags`; its
  results land in <results>/<driver>/<label>/latest (the dataset's name, or the folder's)."""
  name: str
  label: str
  flags: str          # the flags it stands for ('' = the driver's defaults)
  title: str          # its section's title on RESULTS.md
  headline: bool = False  # its claims go into the README's summary too
  before: str = ""    # a command to run first (e.g. one that writes the data folder)
  accelerator: str = ""  # where it needs an accelerator: its projected cost; absent from the page until run


def runs_per_fold(n_runs: int, res: dict) -> int:
  """How many folds `n_runs` paired runs span (runs are folds x seeds)."""
  return max(1, n_runs // res["config"]["run"]["seeds"])


def verdict(c: dict, folds: int = 1, margin: float = MARGIN) -> tuple:
  """(verdict, detail) of the claim "row beats reference" from its comparison record (tabulate.comparison_record;
  its unit, runs or queries, names what an undecided verdict counts)."""
  cell = tabulate.change_cell(c)
  lo, hi = c["rel_ci"]
  if not (np.isfinite(lo) and np.isfinite(hi)):
    return "undecided", f"{cell} (no interval)"
  if lo > 0:
    return "holds", cell
  if hi < margin:
    return "does not reproduce", cell + (" (reversed)" if hi < 0 else f" (a gain of {100 * margin:.0f}% or more is "
                                                                        "ruled out)")
  effect = max(c["diff"], margin * c["reference"])
  need = stats.runs_for_power(effect, c["sd"])
  size = "the observed change" if c["diff"] > margin * c["reference"] else f"a {100 * margin:.0f}% change"
  unit = c.get("unit", "runs")
  if unit == "queries":
    seeds = "more than 100,000 test queries" if need is None else f"~{need:,} test queries"
  else:
    seeds = "more than 100,000 runs" if need is None else (f"~{-(-need // folds):,} seeds" +
                                                            (" per fold" if folds > 1 else ""))
  return f"undecided at {c['n']} {unit}", f"{cell}; {seeds} would detect {size} with 80% power"


def fragility(c: dict, margin: float = MARGIN) -> str:
  """'' or why a run verdict is fragile: a bound of its interval lies within the 95% spread by which another
  configuration moves the mean paired difference (lambda * sqrt(2 / n) * sd, lambda from the measured ratios of
  paired differences, experiments/crossmachine.json) of a threshold the verdict reads (0 for the lower bound, the
  margin for the upper). Such a verdict can differ on another CPU with the same code."""
  if c.get("unit", "runs") != "runs" or not (np.isfinite(c["sd"]) and np.isfinite(c["rel"])):
    return ""
  move = published.spread_quantile(1 - stats.LEVEL, "differences") * (2 / c["n"]) ** 0.5 * c["sd"]
  lo, hi = c["t_ci"]
  if abs(lo) >= move and abs(hi - margin * c["reference"]) >= move:
    return ""
  return (f"fragile: another machine moves this change by up to ±{100 * move / c['reference']:.1f}% (95%), across "
          f"a bound the verdict reads")


def equivalence(c: dict, margin: float = MARGIN) -> tuple:
  """(verdict, detail) of the claim "row is comparable to reference" (within +-margin)."""
  cell = tabulate.change_cell(c)
  lo, hi = c["rel_ci"]
  if -margin < lo and hi < margin:
    return "holds", f"{cell} (within ±{100 * margin:.0f}%)"
  if lo > 0 or hi < 0:
    return "does not reproduce", f"{cell} (they differ)"
  need = stats.runs_for_power(margin * c["reference"], c["sd"])
  return (f"undecided at {c['n']} runs", f"{cell}; " + ("more than 100,000 runs" if need is None else f"~{need:,} runs")
          + f" would detect a {100 * margin:.0f}% difference with 80% power")


def beats(text: str, rows: dict, a: str, b: str, folds: int = 1, col: int = 0, *,
          queries: Optional[dict] = None) -> Optional[Claim]:
  """The claim "rows[a] beats rows[b]" (paired by run), or None when either row is absent. queries: {row: [Q]
  per test query values, averaged over seeds} (the queries to count only): adds the per-query verdict."""
  if a not in rows or b not in rows:
    return None
  c = tabulate.compare({a: np.asarray(rows[a]), b: np.asarray(rows[b])}, b, col=col)[a]
  second = ""
  if queries and a in queries and b in queries:
    second = ": ".join(verdict(tabulate.comparison_record(stats.paired(queries[a], queries[b], unit="queries"))))
  word, detail = verdict(c, folds)
  why = fragility(c)
  return Claim(text, word, detail + (f"; {why}" if why else ""), queries=second, fragile=bool(why))


def sweep(text: str, records: dict, folds: int = 1) -> Optional[Claim]:
  """One claim over a sweep ({point: comparison record}): where it holds, is undecided, does not reproduce."""
  if not records:
    return None
  found = {}
  for point, c in records.items():
    found.setdefault(verdict(c, folds)[0].split(" at ")[0], []).append(str(point))
  word = next(iter(found)) if len(found) == 1 else "mixed"
  fragile = [str(point) for point, c in records.items() if fragility(c)]
  return Claim(text, word, "; ".join(f"{k} at {', '.join(v)}" for k, v in found.items()) +
               (f"; fragile at {', '.join(fragile)} (another machine's rounding could move those points' verdicts)"
                if fragile else ""), fragile=bool(fragile))


def check(text: str, ok: bool, detail: str) -> Claim:
  return Claim(text, "holds" if ok else "does not reproduce", detail)
