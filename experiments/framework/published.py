"""What RESULTS.md publishes of a run, and whether a newcomer's run reproduces it.

A run's bits depend on the machine and packages too (:mod:`experiments.machine`). RESULTS.json beside the page
keeps, per run, its numerics, a fingerprint of its stored results (every field less wall times, paths and the
environment) and its table's cells, so that ``python -m experiments.report --check`` can tell whether each run
is bit-identical to the published one (required on the same configuration) or, on another configuration, within
the tolerance of every published cell (:func:`compare_cells`).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Optional

from experiments import machine


# Fields of results.json that say how, where and how long a run ran, not what it found (out of the fingerprint).
CIRCUMSTANCES = frozenset({"seconds", "wall_seconds", "env", "provenance", "command", "output", "data_dir",
                           "cache_dir", "shard_dir", "scan_seconds", "seconds_per_pass", "ms_per_1000_docs",
                           "latency"})
# How far a run on another configuration may move a table cell's mean: half the published seed-to-seed standard
# deviation, at least two units of the last digit shown. Another machine's rounding re-draws the trajectories'
# numerical noise, which moved means by at most 0.35 of their standard deviation (README, "Reproducing
# RESULTS.md"); the same configuration must give the same bits.
TOLERANCE_STD, TOLERANCE_FLOOR = 0.5, 0.002
CELL = re.compile(r"(-?\d+\.\d+) ± (\d+\.\d+)")


def _strip(o):
  if isinstance(o, dict):
    return {k: _strip(v) for k, v in o.items() if k not in CIRCUMSTANCES}
  if isinstance(o, list):
    return [_strip(v) for v in o]
  return o


def fingerprint(res: dict) -> str:
  """SHA-256 (16 hex digits) of what a run found: its results.json less CIRCUMSTANCES, keys sorted."""
  return hashlib.sha256(json.dumps(_strip(res), sort_keys=True).encode()).hexdigest()[:16]


def cells(table_md: str) -> list:
  """The 'mean ± std' cells of a table, in reading order, as (mean, std) strings."""
  return CELL.findall(table_md)


def compare_cells(mine: list, published: list) -> tuple:
  """(ok, detail): whether a table's cells equal the published ones, or each mean lies within
  max(TOLERANCE_STD x published std, TOLERANCE_FLOOR) of the published mean."""
  if len(mine) != len(published):
    return False, f"{len(mine)} cells where the published table has {len(published)}"
  if not published:  # a table of means without spreads (a sweep's relative NDCG, counts): nothing sets a tolerance
    return True, ("its table has no mean ± std cells to compare within a tolerance (only a run on the "
                  "published configuration, by its fingerprint, checks it)")
  if mine == published:
    return True, f"all {len(mine)} cells equal"
  shift = [(abs(float(a[0]) - float(b[0])) / max(TOLERANCE_STD * float(b[1]), TOLERANCE_FLOOR), a, b)
           for a, b in zip(mine, published)]
  worst, a, b = max(shift, key=lambda t: t[0])
  changed = sum(a != b for a, b in zip(mine, published))
  return round(worst, 9) <= 1, (f"{changed} of {len(mine)} cells differ; the largest move, {b[0]} ± {b[1]} -> "
                                f"{a[0]}, is {worst:.2f} of the tolerance (half the published std, at least "
                                f"{TOLERANCE_FLOOR})")


def published_record(run: dict, claims: list) -> dict:
  """What RESULTS.json keeps of a run (see the module docstring), with its claims' verdicts."""
  return dict(commit=run["prov"].get("code", {}).get("git_commit"),
              numerics=run["res"].get("env", {}).get("numerics"), fingerprint=fingerprint(run["res"]),
              cells=cells(_read(os.path.join(run["folder"], "table.md"))),
              verdicts={c.text: c.verdict for c in claims})


def _read(path: str) -> str:
  """A text file's contents, '' when it does not exist."""
  if not os.path.exists(path):
    return ""
  with open(path, encoding="utf-8") as f:
    return f.read()


VERDICT_ROW = re.compile(r"^\| (.+?) \| \*\*(.+?)\*\* \|", re.M)


def _page_record(page: str, anchor: str) -> Optional[dict]:
  """A run's cells and verdicts from its section of a RESULTS.md without RESULTS.json; None if it has none."""
  start = page.find(f'<a id="{anchor}"></a>')
  if start < 0:
    return None
  stop = page.find('<a id="', start + 1)
  section = page[start:stop if stop > 0 else len(page)]
  return dict(numerics=None, fingerprint=None, cells=cells(section), verdicts=dict(VERDICT_ROW.findall(section)))


def check_reproduction(results: str, page: str, expected: list, load_run, required: bool = False) -> tuple:
  """(ok, lines): each expected run present under `results` against the published page (RESULTS.md and the
  RESULTS.json beside it); load_run(results, entry) reads a run. Same numerics: the fingerprint must be equal. Other or unknown numerics: every
  table cell within the tolerance (compare_cells). A run absent from `results` is skipped (said so), or fails if
  `required`. Claims whose verdict differs from the published one are listed (they fail nothing)."""
  published = json.loads(_read(os.path.splitext(page)[0] + ".json") or "{}")
  text = _read(page)
  ok, lines = True, []
  for e in expected:
    key, run = e.key, load_run(results, e)
    if run is None:
      ok &= not required
      lines.append(f"{key}: FAILED: no run in {results}" if required else f"{key}: no run in {results} (skipped)")
      continue
    mine = published_record(run, e.claims_of(run["res"]))
    pub = published.get(key) or _page_record(text, e.anchor)
    if pub is None:
      lines.append(f"{key}: not on the published page (skipped)")
      continue
    same = bool(mine["numerics"]) and mine["numerics"] == pub["numerics"]
    if same:
      good = mine["fingerprint"] == pub["fingerprint"]
      why = ("bit-identical to the published run (same configuration)" if good else
             f"DIFFERENT from the published run on the same configuration (fingerprint {mine['fingerprint']} vs "
             f"{pub['fingerprint']}): a change in code, data or packages")
    else:
      good, detail = compare_cells(mine["cells"], pub["cells"])
      differs = ("the published run's configuration is not recorded" if not pub["numerics"] else
                 "another configuration (" + "; ".join(machine.differences(mine["numerics"] or {},
                                                                          pub["numerics"])) + ")")
      why = f"{differs}: {detail}"
    ok &= good
    unchecked = good and not same and not pub["cells"]
    lines.append(f"{key}: {'unchecked' if unchecked else 'ok' if good else 'FAILED'}: {why}")
    lines += [f"  verdict changed: {t}: {pub['verdicts'][t]} -> {v}" for t, v in mine["verdicts"].items()
              if t in pub["verdicts"] and pub["verdicts"][t] != v]
  return ok, lines
