r"""What RESULTS.md publishes of a run, and whether a newcomer's run reproduces it.

A run's bits depend on the machine and packages too (:mod:`experiments.framework.machine`). RESULTS.json beside the page
keeps, per run, its numerics, a fingerprint of its stored results (every field less wall times, paths and the
environment) and its table's cells, so that ``python -m experiments.report --check`` can tell whether each run
is bit-identical to the published one (required on the same configuration) or, on another configuration, within
the tolerance of every published cell (:func:`compare_cells`).

**The tolerance on another configuration, and what it means.** Two runs of the same seeds, data and code on two
CPUs (or under two XLA ISA settings, or thread counts) are not two samples of seeds: each seed's training starts
from the same weights and sees the same batches, and only the rounding of its arithmetic differs, which training
amplifies into a perturbation of its trajectory. So run i of a cell c (a row's NDCG@k) is modelled as
x_ci = m_ci + e_ci: m_ci what the seed determines, e_ci numerical noise, independent between configurations, of
variance r_c s_c^2, s_c^2 the cell's seed variance (r_c = 1: training forgets its seed; r_c = 0: the bits are the
seed's alone). The mean of R runs then moves between two configurations by T_c sqrt(2 / R) s_c, T_c ~ N(0, r_c).
The ratios r_c are measured, not assumed: ``python -m experiments.crossmachine`` estimates them
(:func:`pfd_jax.ops.perturbation.perturbation_ratios`) from the main job made under several numerics, for the table's
cells and for the paired differences its claims read, and writes them to experiments/crossmachine.json. They are
far from one value (most cells barely move; a few move nearly as much as a new seed, a LightGBM student fit to a
perturbed MLP teacher's grades the most), so the tolerance takes them as they are, a scale mixture: lambda = the
mixture's two-sided quantile (:func:`pfd_jax.ops.perturbation.mixture_quantile`) at the Sidak tail
1 - (1 - FAMILY_ALPHA)^(1 / C) for a table of C cells, and a published cell "mean ± s" passes when the newcomer's
mean lies within

    lambda * sqrt(2 / R) * s  +  one unit of the mean's last printed digit (both means are rounded),

so that a faithful run on another machine passes the whole table with probability 95% (under the model, with the
measured ratios; each ratio is estimated from R runs and carries chi^2_R / R noise, which widens the mixture: the
tolerance errs on the lenient side). A real change of the code or protocol moves the means by its effect plus that
noise and fails once its effect on some cell exceeds the tolerance. The same spread of paired differences marks a
claim's verdict **fragile** when a bound of its interval lies within it (95%) of the threshold the verdict reads
(:func:`experiments.page.claims.fragility`): such a verdict may differ on another CPU, and the check says so
rather than flipping it silently. The ratios were measured on the main job (table2's MLP rows); the other drivers'
cells use them as they stand.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from typing import Any, Mapping, Optional

from experiments.framework import machine
from pfd_jax.ops import perturbation


# Fields of results.json that say how, where and how long a run ran, not what it found (out of the fingerprint).
CIRCUMSTANCES = frozenset({"seconds", "wall_seconds", "env", "provenance", "command", "output", "data_dir",
                           "cache_dir", "shard_dir", "scan_seconds", "seconds_per_pass", "ms_per_1000_docs",
                           "latency", "load_seconds", "resumed"}) | frozenset({
    # Values fixed by what the fingerprint already holds, kept out so that recording them left every run's
    # fingerprint as it was: the data's digest (its recipe is in the config) and each seed's per-list NDCG of the
    # best models (whose bits `best` and `curves` fix).
    "data_fingerprint", "seed_lists"})
# The measured cross-machine spread (python -m experiments.crossmachine), from which the tolerance is derived.
SPREAD_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "crossmachine.json")
# The chance that a faithful run on another configuration fails the check, over one whole table (Sidak).
FAMILY_ALPHA = 0.05
CELL = re.compile(r"(-?\d+\.\d+) ± (\d+\.\d+)")


def _strip(o):
  if isinstance(o, dict):
    return {k: _strip(v) for k, v in o.items() if k not in CIRCUMSTANCES}
  if isinstance(o, list):
    return [_strip(v) for v in o]
  return o


def fingerprint(res: Mapping[str, Any]) -> str:
  """SHA-256 (16 hex digits) of what a run found: its results.json less CIRCUMSTANCES, keys sorted."""
  return hashlib.sha256(json.dumps(_strip(res), sort_keys=True).encode()).hexdigest()[:16]


def cells(table_md: str) -> list:
  """The 'mean ± std' cells of a table, in reading order, as (mean, std) strings."""
  return CELL.findall(table_md)


@functools.lru_cache(maxsize=None)
def spread(path: str = SPREAD_FILE) -> dict:
  """The measured cross-machine spread (experiments/crossmachine.json; module docstring)."""
  with open(path) as f:
    return json.load(f)


def spread_quantile(tail: float, kind: str = "cells") -> float:
  """lambda: the measured mixture's two-sided `tail` quantile of a mean's move in units of sqrt(2 / runs) * std
  (:func:`pfd_jax.ops.perturbation.mixture_quantile` of experiments/crossmachine.json's ratios of `kind`)."""
  return perturbation.mixture_quantile(spread()["ratios"][kind], tail)


def tolerance(cell: tuple, runs: int, cells: int) -> float:
  """How far another configuration may move a published cell (mean, std) printed from `runs` runs, in a table
  of `cells` such cells (module docstring): lambda * sqrt(2 / runs) * std, lambda at the Sidak tail
  1 - (1 - FAMILY_ALPHA)^(1 / cells), plus the printing's rounding (one unit of the mean's last digit: both
  means are rounded)."""
  mean, std = cell
  lam = spread_quantile(1 - (1 - FAMILY_ALPHA) ** (1 / cells))
  return lam * (2 / runs) ** 0.5 * float(std) + 10.0 ** -len(mean.partition(".")[2])


def compare_cells(mine: list, published: list, runs: int) -> tuple:
  """(ok, detail): whether a table's cells equal the published ones, or each mean lies within its
  :func:`tolerance` of the published mean (`runs`: the runs behind each cell)."""
  mine, published = [tuple(c) for c in mine], [tuple(c) for c in published]  # RESULTS.json keeps them as lists
  if len(mine) != len(published):
    return False, f"{len(mine)} cells where the published table has {len(published)}"
  if not published:  # a table of means without spreads (a sweep's relative NDCG, counts): nothing sets a tolerance
    return True, ("its table has no mean ± std cells to compare within a tolerance (only a run on the "
                  "published configuration, by its fingerprint, checks it)")
  if mine == published:
    return True, f"all {len(mine)} cells equal"
  shift = [(abs(float(a[0]) - float(b[0])) / tolerance(b, runs, len(published)), a, b)
           for a, b in zip(mine, published)]
  worst, a, b = max(shift, key=lambda t: t[0])
  changed = sum(a != b for a, b in zip(mine, published))
  return bool(round(worst, 9) <= 1), (f"{changed} of {len(mine)} cells differ; the largest move, {b[0]} ± {b[1]} -> "
                                f"{a[0]}, is {worst:.2f} of its tolerance (the measured cross-machine spread of a "
                                f"mean of {runs} runs; {100 * (1 - FAMILY_ALPHA):.0f}% of faithful runs on another "
                                f"machine pass all {len(published)} cells)")


def runs_per_cell(res: Mapping[str, Any]) -> int:
  """The runs behind each mean ± std cell of a run's table: its seeds times its folds (1 where not recorded)."""
  seeds = (res.get("config", {}).get("run") or {}).get("seeds") or 1
  return seeds * max(1, _folds(res))


def _folds(o) -> int:
  """The number of folds of the first {"fold<k>": ...} mapping found in a results tree (0 if none)."""
  if isinstance(o, dict):
    if o and all(re.fullmatch(r"fold\d+", str(k)) for k in o):
      return len(o)
    for v in o.values():
      n = _folds(v)
      if n:
        return n
  return 0


def published_record(run: dict, claims: list) -> dict:
  """What RESULTS.json keeps of a run (see the module docstring), with its claims' verdicts."""
  return dict(commit=run["prov"].get("code", {}).get("git_commit"),
              numerics=run["res"].get("env", {}).get("numerics"),
              fingerprint=run.get("fingerprint") or fingerprint(run["res"]),  # an archived copy: its run's
              cells=cells(_read(os.path.join(run["folder"], "table.md"))),
              verdicts={c.text: c.verdict for c in claims}, words={c.text: c.word for c in claims})


def _read(path: str) -> str:
  """A text file's contents, '' when it does not exist."""
  if not os.path.exists(path):
    return ""
  with open(path, encoding="utf-8") as f:
    return f.read()


VERDICT_ROW = re.compile(r"^\| (.+?) \|(?: [^|*]+? \|)? \*\*(.+?)\*\* \|", re.M)  # a claim, [its form,] its verdict


def _page_record(page: str, anchor: str) -> Optional[dict]:
  """A run's cells and verdicts from its section of a RESULTS.md without RESULTS.json; None if it has none."""
  start = page.find(f'<a id="{anchor}"></a>')
  if start < 0:
    return None
  stop = page.find('<a id="', start + 1)
  section = page[start:stop if stop > 0 else len(page)]
  return dict(numerics=None, fingerprint=None, cells=cells(section), verdicts=dict(VERDICT_ROW.findall(section)))


def _word(pub: Mapping[str, Any], text: str) -> str:
  """The word of a published claim's verdict (claims.WORDS): RESULTS.json's, or, for a page published without it,
  read from its text without the unit count ('undecided at 5 runs' and 'undecided at 380 seeds x queries' agree)."""
  return pub.get("words", {}).get(text) or pub["verdicts"][text].split(" at ")[0]


def check_reproduction(results: str, page: str, expected: list, load_run, required: bool = False) -> tuple:
  """(ok, lines): each expected run present under `results` against the published page (RESULTS.md and the
  RESULTS.json beside it); load_run(results, entry) reads a run. The published fingerprint: bit-identical, on any
  configuration. Same numerics: the fingerprint must be equal. Other or unknown numerics: every table cell within
  its tolerance (compare_cells). A run absent from `results` is skipped (said so), or fails if `required`. Claims
  whose verdict differs from the published one are listed, fragile ones marked (they fail nothing)."""
  published = json.loads(_read(os.path.splitext(page)[0] + ".json") or "{}")
  text = _read(page)
  ok, lines = True, []
  for e in expected:
    key, run = e.key, load_run(results, e)
    if run is None:
      ok &= not required
      lines.append(f"{key}: FAILED: no run in {results}" if required else f"{key}: no run in {results} (skipped)")
      continue
    claims = e.claims_of(run["res"])
    mine = published_record(run, claims)
    pub = published.get(key) or _page_record(text, e.anchor)
    if pub is None:
      lines.append(f"{key}: not on the published page (skipped)")
      continue
    same = bool(mine["numerics"]) and mine["numerics"] == pub["numerics"]
    if not same and mine["fingerprint"] == pub["fingerprint"]:  # another machine that computes the same bits
      why = ("bit-identical to the published run on another configuration (" +
             "; ".join(machine.differences(mine["numerics"] or {}, pub["numerics"] or {})) + ")")
      lines.append(f"{key}: ok: {why}")
      continue
    if same:
      good = mine["fingerprint"] == pub["fingerprint"]
      why = ("bit-identical to the published run (same configuration)" if good else
             f"DIFFERENT from the published run on the same configuration (fingerprint {mine['fingerprint']} vs "
             f"{pub['fingerprint']}): a change in code, data or packages")
    else:
      good, detail = compare_cells(mine["cells"], pub["cells"], runs_per_cell(run["res"]))
      differs = ("the published run's configuration is not recorded" if not pub["numerics"] else
                 "another configuration (" + "; ".join(machine.differences(mine["numerics"] or {},
                                                                          pub["numerics"])) + ")")
      why = f"{differs}: {detail}"
    ok &= good
    unchecked = good and not same and not pub["cells"]
    lines.append(f"{key}: {'unchecked' if unchecked else 'ok' if good else 'FAILED'}: {why}")
    lines += [f"  verdict changed: {c.text}: {pub['verdicts'][c.text]} -> {c.verdict}" + (
        " (fragile: within the machine spread)" if c.fragile else "")
        for c in claims if c.text in pub["verdicts"] and _word(pub, c.text) != c.word]
  return ok, lines
