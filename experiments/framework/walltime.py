"""A run's wall time as the page says it: the command's own, and for a run resumed from saved rows what those rows
(and searches) took in the earlier processes that trained them (results.json's ``resumed``: lifecycle records it,
rowstore counts it)."""
from __future__ import annotations

from typing import Optional

from pfd_jax.config import JsonObject


def duration(s: float) -> str:
  return f"{s:.0f} s" if s < 120 else f"{int(s // 60)} min {int(round(s % 60))} s"


def loaded(res: JsonObject) -> str:
  """' + <time> in <n> rows loaded from earlier processes' for a resumed run ('' otherwise): what its loaded rows
  (and searches) took when they were done."""
  r = res.get("resumed")
  return f" + {duration(r['seconds'])} in {r['rows']} rows loaded from earlier processes" if r else ""


def wall_time(res: JsonObject) -> str:
  """The command's wall time, and a resumed run's :func:`loaded` rows."""
  s = res.get("wall_seconds", res.get("seconds"))
  return "?" if s is None else duration(s) + loaded(res)


def seconds(res: JsonObject) -> Optional[float]:
  """A run's wall time, with what its loaded rows took when a resumed run's earlier processes trained them."""
  s = res.get("wall_seconds", res.get("seconds"))
  return None if s is None else s + (res.get("resumed") or {}).get("seconds", 0.0)


def total(runs: list) -> str:
  """The line under the runs table: the wall time of the runs the page has files of ([(entry, run or None)]), in
  all."""
  known = [s for s in (seconds(r["res"]) for _, r in runs if r is not None) if s is not None]
  hours, minutes = divmod(int(round(sum(known) / 60)), 60)
  whole = f"{hours} h {minutes} min" if hours else duration(sum(known))
  return (f"\nThe {len(known)} runs with results files took {whole} of wall time in all, each on the "
          "machine its section names; carried, missing and accelerator runs are not counted "
          "(`python -m experiments.report --plan` lists them with their expected times).\n")
