"""What the page lacks, and the commands that complete it, in as many runs as one likes:

  python -m experiments.report --plan        # every run the page lacks, in the page's order, with its expected time
  python -m experiments.report --plan_run    # runs them, in that order, one after another; again to go on

A run is lacking when it is missing, stale (:mod:`experiments.page.staleness`), carried from an older page, or
made with other settings than its preset has now (the preset changed since). The accelerator's runs are listed
apart (:mod:`experiments.accelerator`). Each driver resumes the rows it saved, so a run that stops loses at most
the row it was training; ``--plan_run`` stops at the first command that fails.

Expected times, on two CPU cores: a run the page has (or carried) takes its recorded wall time again; a
re-drawn preset that never ran (protocol.redrawn_preset) is its driver's fixed-data run scaled by draws per seed and
by the cost of a draw against a seed, measured on the page (Table 2's decisive run against the main job: a draw's
validation and test sets of 6,306 queries are scored at the kept epochs).
"""
from __future__ import annotations

import importlib
import os
import re
import shlex
import subprocess
import sys
from typing import Mapping, NamedTuple, Optional

import numpy as np
from absl import flags as absl_flags

import experiments
from experiments.framework import cli, lifecycle, protocol, schema
from experiments.page import claims, deciding, family, pagefiles
from experiments.framework.outputs import as_json
from experiments.page.staleness import staleness
from pfd_jax import config as config_lib

_WALL = re.compile(r"(?:(\d+) min )?(\d+) s$")


class Step(NamedTuple):
  key: str
  command: str
  why: str
  seconds: Optional[float]
  basis: str


def walls(page: str) -> dict:
  """{anchor: wall seconds} of the runs table of `page` (RESULTS.md's last column)."""
  out = {}
  for line in open(page).read().splitlines() if os.path.exists(page) else []:
    anchor = re.search(r"\]\(#([\w.-]+)\)", line)
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    wall = _WALL.match(cells[-1]) if anchor and len(cells) > 5 else None
    if wall and anchor.group(1) not in out:
      out[anchor.group(1)] = 60 * int(wall.group(1) or 0) + int(wall.group(2))
  return out


def changed(driver: schema.Driver, preset: str, res: dict) -> str:
  """'' or what the run's recorded settings differ in from its preset's now: the data and run groups where the driver
  has their flags, and its options (a group it has no flags for is the run's own doing: table3_logs records the
  data.draws it derives from its --draws)."""
  fv = absl_flags.FlagValues()
  cli.define_flags(driver, fv)
  fv(["prog"] + lifecycle.expand_preset(driver, ["prog", f"--preset={preset}"])[1:])
  cfg = cli.config_from_flags(driver, fv)
  now, was = as_json(cfg), res.get("config", {})
  groups = [g for g in ("data", "run") if g in driver.groups] + ["options"]
  same = {g: config_lib.same_numbers(getattr(cfg, g, None)) for g in groups}  # how it ran, never what it found
  diff = [f"{g}.{k}" for g in groups for k in set(now.get(g) or {}) | set(was.get(g) or {})
          if (now.get(g) or {}).get(k) != (was.get(g) or {}).get(k) and k not in same[g]]
  return ", ".join(sorted(diff))


def _redrawn_estimate(e, flags: str, times: dict, expected: list) -> tuple:
  """(seconds, basis) of a re-drawn preset that never ran (its `flags`): its driver's fixed run x draws/seeds x a
  draw's cost against a seed, the median of that ratio over the page's re-drawn ablation runs (each against its
  driver's fixed run), else Table 2's (its decisive run against the main job)."""
  draws = re.search(r"--draws=(\d+)", flags)
  base = _default(e.driver, expected)
  seeds = schema.RunConfig().seeds  # the default presets' (and the main job's)
  ratios = [(times[x.anchor] / int(n.group(1))) / (times[b.anchor] / seeds) for x in expected
            if x.label.endswith("-redrawn") and x.anchor in times and (b := _default(x.driver, expected)) is not None
            and b.anchor in times and (n := re.search(r"--draws=(\d+)", _preset(x)[1].flags))]
  main, decisive = times.get("table2-synthetic"), times.get("table2-synthetic-decisive_redrawn")
  if not (draws and base and base.anchor in times and (ratios or (main and decisive))):
    return None, "no basis on the page"
  per_draw = (float(np.median(ratios)) if ratios else (decisive / protocol.DECISIVE_DRAWS) / (main / seeds))
  seconds = times[base.anchor] / seeds * int(draws.group(1)) * per_draw
  return seconds, (f"{base.key}'s {times[base.anchor]:.0f} s / {seeds} seeds x {draws.group(1)} draws x {per_draw:.2f}"
                   f" (a draw against a seed: " + (f"the median over the page's {len(ratios)} re-drawn ablation runs"
                                                  if ratios else "Table 2's decisive run against the main job") + ")")


def _default(driver: str, expected: list):
  return next((x for x in expected if x.command == f"python -m {experiments.module(driver)}"), None)


def _preset(e) -> tuple:
  """(the entry's driver, its preset)."""
  driver = importlib.import_module(experiments.module(e.driver)).DRIVER
  return driver, next(p for p in driver.presets if p.label == e.label)


def _sequential(e, preset: str, settled: Mapping[tuple, set]) -> Optional[Step]:
  """A sequential run's step: its committed draws and the rows its next ones need (deciding.next_draws, at the least
  level the family gives a member, less the members `settled` after the graph); None for another preset."""
  of = deciding.of_preset(preset)
  if of is None:
    return None
  state, extra = deciding.next_draws(*of, claims.ALPHA / len(family.FAMILY), settled=settled.get(deciding.store(*of), ()))
  return Step(e.key, e.command + extra, f"not run: {state}", None, deciding.COST)


def needed(results: str, page: str, expected: list, root: str, settled: Optional[Mapping[tuple, set]] = None) -> list:
  """[Step] of every run `page` lacks (module docstring), in the page's order; the accelerator's last. settled:
  {a sequential run's draw store: the versus rows of its members the family has decided after the graph}."""
  times, steps, text = walls(page), [], open(page).read() if os.path.exists(page) else ""
  archive = os.path.join(os.path.dirname(os.path.abspath(page)), pagefiles.ARCHIVE)
  for e in expected:
    run = pagefiles.load_run(results, e, archive)
    driver, preset = _preset(e)
    section = text.split(f'<a id="{e.anchor}"></a>', 1)[1].split('<a id="', 1)[0] if f'<a id="{e.anchor}"></a>' in text else ""
    if run is None:
      why = (f"not run: needs {e.needs}" if e.accelerator else
             "carried from an older page" if pagefiles.CARRIED in section else "missing")
    else:
      why = staleness(run["prov"].get("code", {}), e.driver, root)
      why = f"stale: {why}" if why else ""
      if not why:
        diff = changed(driver, preset.name, run["res"])
        why = f"its preset changed since it ran ({diff})" if diff else ""
    if not why:
      continue
    if e.accelerator:
      step = _sequential(e, preset.name, settled or {})
      if step is None or not step.why.endswith(deciding.COMPLETE):  # a finished sequential run lacks nothing
        steps.append(step or Step(e.key, e.command, why, None, e.accelerator))
      continue
    seconds, basis = ((times[e.anchor], "its last wall time on the page" + (
        ", made with other settings: no more than a guess" if why.startswith("its preset changed") else ""))
                      if e.anchor in times else _redrawn_estimate(e, preset.flags, times, expected))
    steps.append(Step(e.key, e.command, why, seconds, basis))
  return sorted(steps, key=lambda s: s.why.startswith("not run"))


def show(steps: list) -> str:
  total = sum(s.seconds or 0 for s in steps if not s.why.startswith("not run"))
  lines = [f"{len(steps)} runs the page lacks; about {total / 3600:.1f} h on two cores (the accelerator's apart):"]
  for s in steps:
    t = "?" if s.seconds is None else f"{s.seconds / 60:.0f} min"
    lines.append(f"  {s.key}: {s.why}\n    {s.command}\n    " +
                 (s.basis if s.why.startswith("not run") else f"expected {t} on two cores ({s.basis})"))
  return "\n".join(lines)


def run(steps: list) -> int:
  """Runs the steps' commands in order (the accelerator's skipped); the first failing one's exit code, else 0."""
  for s in steps:
    if s.why.startswith("not run"):
      continue
    print(f"=== {s.key} ({s.why}; expected {'?' if s.seconds is None else f'{s.seconds / 60:.0f} min'}): "
          f"{s.command}", flush=True)
    code = subprocess.call(["bash", "-c", s.command.replace("python -m ", shlex.quote(sys.executable) + " -m ")])
    if code:
      return code
  return 0
