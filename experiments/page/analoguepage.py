"""The page's section on the paper analogues (pfd_jax.data.analogues): each analogue's Table 1 shape beside the
paper's, and its teachers as calibrated (pfd_jax/data/analogues.json, written by experiments.calibrate) beside the
paper's Table 4. Read from those two files and experiments/framework/reported.py; no run of its own (a calibration's
candidates are its evidence, each kept where its record names)."""
from __future__ import annotations

import glob
import json
import os

from experiments.framework import tabulate, reported
from pfd_jax.data import analogues

LOSSES = analogues.LOSSES
EVIDENCE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "evidence")
ANCHOR = "the-paper-analogues"  # where a run's section before it ends (pagefiles.carried)


def _size(share: float) -> str:
  return "the paper's groups" if abs(share - 1) < 1e-9 else f"{share:g} of the paper's groups"


def _teachers(name: str, populations: dict) -> list:
  """One row per size calibrated and loss: Table 4's level and gains, the analogue's with their standard errors."""
  a, rows = analogues.ANALOGUES[name], []
  for key, entries in sorted(populations.items(), key=lambda kv: -float(kv[0])) or [("", {})]:
    for loss in LOSSES:
      level, pfd, gend = reported.teachers(loss, a.paper)
      m = entries[loss]["measured"][loss] if loss in entries else None
      if m is None:
        ours = ["not calibrated"] * 3
      else:
        se = m["se"]  # over a calibration's draws where it made two or more, else over its one draw's lists
        mark = "" if se.get("over") == "draws" else "\u2021"
        ours = [f"{m['level']:.3f} ± {se['level']:.3f}{mark}"] + [
            f"{m[n]:+.1f}% ± {se[n]:.1f}{mark}" for n in ("pfd_teacher", "gend_teacher")]
      rows.append([f"`{name}`", _size(float(key)) if key else "-", loss, f"{level:.3f}", ours[0], f"{pfd:+.1f}%",
                   ours[1], f"{gend:+.1f}%", ours[2]])
  return rows


def searched(name: str, evidence: str = EVIDENCE) -> str:
  """What the calibration runs kept in evidence/calibration-<name>*/ found so far: how many candidates, and the
  nearest of those measured on both losses ('' when none is kept)."""
  tried, folders = [], sorted(glob.glob(os.path.join(evidence, f"calibration-{name}*", "**", "results.json"),
                                        recursive=True))
  for path in folders:
    with open(path) as f:
      tried += json.load(f)["candidates"]
  both = [t for t in tried if set(t["measured"]) == set(LOSSES)]
  if not both:
    return f"; {len(tried)} candidates tried on one loss" if tried else ""
  best = min(both, key=lambda t: t["distance"])
  where = ", ".join(dict.fromkeys(os.path.relpath(os.path.dirname(os.path.dirname(p)), os.path.dirname(evidence))
                                  for p in folders))
  settings = ", ".join(f"{k}={v:g}" for k, v in best["settings"].items())
  cells = "; ".join(f"{loss}: {m['level']:.3f} / {m['pfd_teacher']:+.1f}% / {m['gend_teacher']:+.1f}%"
                    for loss, m in best["measured"].items())
  return (f"; the search so far ({where}): {len(tried)} candidates, {len(both)} on both losses, the nearest "
          f"{settings} at distance **{best['distance']:.2f}** tolerances ({_within(best['distance'])}; "
          f"no-distillation / PFD teacher / GenD teacher, {cells})")


def _within(distance: float) -> str:
  return "within" if distance <= 1 else "**outside**"


def _declared(a: analogues.Analogue, key: str) -> bool:
  return abs(float(key) - a.fraction) < 1e-9


def _calibration(name: str, populations: dict) -> str:
  """How `name` was calibrated: one clause per size and population (both losses' one, or each loss's own)."""
  a = analogues.ANALOGUES[name]
  if not populations:
    return (f"`{name}`: **not calibrated** (its teachers keep the module's uncalibrated defaults; "
            f"`python -m experiments.calibrate --dataset={name}` at the declared fraction, "
            f"`python -m experiments.accelerator --steps=calibrate_{name}` at the paper's groups); no student of it "
            "is trained before it is" + searched(name))
  sizes = []
  for key, entries in sorted(populations.items(), key=lambda kv: -float(kv[0])):
    grouped = {}
    for loss, record in entries.items():
      grouped.setdefault(json.dumps(record, sort_keys=True), []).append(loss)
    clauses = [_population(json.loads(text), losses) for text, losses in grouped.items()]
    missing = [loss for loss in LOSSES if loss not in entries]
    if missing:
      clauses.append(f"{' and '.join(missing)}: **not calibrated** (no student of it is trained before it is)")
    per_loss = (" calibrated per loss (each loss's Table 4 row met by a population of its own, docs/analogues.md; "
                "a run names its loss's: `--analogue=calibrated_for=<loss>`)" if len(grouped) > 1 or missing else "")
    runs = " (the declared fraction: the runs on two cores)" if _declared(a, key) else ""
    sizes.append(f"at {_size(float(key))}{runs}{per_loss}: " + "; ".join(clauses))
  if not any(_declared(a, key) for key in populations):
    sizes.append(f"at the declared fraction ({a.fraction:g} of the paper's groups, the runs on two cores): **not "
                 f"calibrated** (`python -m experiments.calibrate --dataset={name}`)")
  return f"`{name}` " + "; ".join(sizes)


def _population(record: dict, losses: list) -> str:
  tol, lists = record["tolerance"], record["test_scale"] * record["share"]  # test_scale: x the run's test groups
  return (f"{' and '.join(losses)}: weight={record['weight']:g}, leak={record['leak']:g}, noise={record['noise']:g}, "
          f"distance **{record['distance']:.2f}**" + (f" ± {record['distance_se']:.2f}" if "distance_se" in record
                                                       else "") +
          f" tolerances ({_within(record['distance'])}: gains ±{tol['gain']:g} "
          f"points, level ±{100 * tol['level']:g}%); measured at {_size(record['share'])}, {lists:g} x Table 1's test "
          f"groups, {record['seeds']} seeds, {record['epochs']} epochs, by commit "
          f"{str(record['code'].get('git_commit'))[:10]}")


def section(settings_file: str = analogues.SETTINGS_FILE) -> str:
  """'The paper analogues': Table 1 and Table 4 beside each analogue's, and how each was calibrated."""
  with open(settings_file) as f:
    chosen = json.load(f)
  shape = [[f"`{name}`", a.paper, f"{a.num_regular} / {a.num_privileged}", f"{a.queries[0]:,}", f"{a.mean_docs:.2f}",
            f"{a.positive_groups:.2f}%", f"{a.fraction:g}", f"{a.queries[0] * a.fraction * a.positive_groups / 100:.0f}",
            f"{s.fraction:.3g}", f"{s.train_groups:,}", f"{s.positive_train_groups:.0f}", f"{s.vali_lists}"]
           for name, a in analogues.ANALOGUES.items() for s in [analogues.sizing(name)]]
  teachers = [row for name in analogues.ANALOGUES for row in _teachers(name, chosen.get(name, {}))]
  return (f'\n<a id="{ANCHOR}"></a>\n\n## The paper analogues\n\n' +
          "Generated populations shaped like the paper's datasets (docs/analogues.md, "
          "pfd_jax/data/analogues.py): Table 1's columns are the analogue's by construction (feature and group "
          "counts exactly; documents per group and the share of positive training groups under Equation 2 checked "
          "by tests/test_analogues.py within 3% and 10%). A run on two cores generates the declared fraction of the "
          "groups (a training epoch of about 110,000-150,000 documents); `--synthetic_scale` = 1 / fraction gives "
          "the paper's, for an accelerator. The teachers move with the number of training groups, so each size "
          "has a calibration of its own.\n\n" +
          tabulate.markdown_table(["analogue", "the paper's", "regular / privileged", "training groups (Table 1)",
                                   "documents per group", "% positive training groups", "declared fraction",
                                   "positive training groups at it", "sized fraction (Table 2's members)",
                                   "training groups at it", "positive training groups at it",
                                   "validation lists with a positive"], shape) +
          "\n\nThe sized fraction (pfd_jax.data.analogues.sizing, from Table 1 alone) holds about 150 positive "
          "training groups a draw and 300 validation lists with a positive (scored lists: the only ones "
          "generated); the counts are expected ones, Table 1's share of the groups generated." +
          "\n\nTheir teachers, calibrated on the baseline and teacher rows only (experiments.calibrate, no student "
          "trained), beside the paper's Table 4: no-distillation's NDCG@8 and the PFD and GenD teachers' changes "
          "over it (± a standard error over the calibration's draws; \u2021: over the test lists of its one draw, "
          "which leaves out the training's and the data's variation and so understates the noise), at each size "
          "calibrated.\n\n" +
          tabulate.markdown_table(["analogue", "calibrated at", "loss", "no-distillation (Table 4)", "analogue",
                                   "PFD teacher (Table 4)", "analogue", "GenD teacher (Table 4)", "analogue"],
                                  teachers) +
          "\n\n" + "\n".join(f"- {_calibration(name, chosen.get(name, {}))}." for name in analogues.ANALOGUES) + "\n")
