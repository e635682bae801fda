r"""The paper analogues' teachers, calibrated to the paper's Table 4 on teacher and no-distillation rows only.

  python -m experiments.calibrate --dataset=web30k_like
  python -m experiments.calibrate --dataset=yahoo_like --weights=0.5,0.6,0.7 --leaks=0,0.05 --noises=0.7

For every candidate setting of the analogue's teachers (weight x leak x noise, pfd_jax.data.analogues), the
table2 protocol with --teachers_only: no-distillation, the PFD teacher and the GenD teacher, per loss, and no
student (a calibration that read a student's score could tune the outcome under test). Each candidate's distance
to Table 4 is its largest deviation over the targets in units of their tolerance: no-distillation's NDCG@8 (within
--level_tolerance, relative) and the two teachers' gains over it (within --gain_tolerance, in points). The chosen
candidate is the nearest; with --write_settings it is written to pfd_jax/data/analogues.json (with this run's
folder and commit), where the analogue reads its teachers' settings from. Writes
results/calibrate/<dataset>/latest/.
"""
import dataclasses
import itertools
import json
import os
import time
from typing import Optional, Tuple

import numpy as np

from experiments.paper import table2
from experiments.framework import lifecycle, outputs, protocol, rundir, schema, tabulate, reported
from experiments.framework.records import RunRecord
from pfd_jax.config import ConfigError, option
from pfd_jax.data import analogues

# Table 4 of the paper: (no-distillation NDCG@8, PFD teacher's gain %, GenD teacher's gain %) per loss.
TABLE4 = {name: {loss: reported.teachers(loss, a.paper) for loss in ("rankbce", "ranknet")}
          for name, a in analogues.ANALOGUES.items()}
TEACHERS = ("pfd_teacher", "gend_teacher")


@dataclasses.dataclass(frozen=True)
class Options:
  weights: Tuple[float, ...] = option((0.3, 0.45, 0.6, 0.75), "Candidate weights (the privileged factor's share).",
                                      lo=0, hi=1)
  leaks: Tuple[float, ...] = option((0.0, 0.1, 0.2), "Candidate leaks (how much regular columns see of it).", lo=0)
  noises: Tuple[float, ...] = option((0.7,), "Candidate noises (relevance no column sees).", lo=0)
  gain_tolerance: float = option(3.0, "A teacher's gain within this many points of Table 4's.", lo=0, lo_open=True)
  level_tolerance: float = option(0.10, "No-distillation's NDCG@8 within this share of Table 4's.", lo=0,
                                  lo_open=True)
  test_scale: Optional[float] = option(None, "Measure on this many times the run's test groups (the same "
                                       "population; a teacher's gain on Table 1's test set alone has a standard error "
                                       "near the tolerance). Default: as many test lists as the Table 2 runs on an "
                                       "analogue have (protocol.ANALOGUE_TEST_LISTS[<dataset>] x Table 1's, at any "
                                       "size).", lo=1)
  scored: bool = option(False, "Generate validation and test as lists with a positive only (the analogue setting "
                        "scored=1; pfd_jax.data.analogues.scored_lists).", omit_default=True)
  write_settings: bool = option(False, "Write the chosen candidate to pfd_jax/data/analogues.json.")


def candidates(o: Options) -> list:
  return [dict(weight=w, leak=l, noise=n) for w, l, n in itertools.product(o.weights, o.leaks, o.noises)]


def test_scale(cfg: schema.Config) -> float:
  """--test_scale, or by default the Table 2 runs' on an analogue: ANALOGUE_TEST_LISTS[dataset] x Table 1's test
  lists at the run's size (a population is measured on as many test lists as the runs that decide its claims)."""
  name = cfg.data.dataset
  return cfg.options.test_scale or protocol.ANALOGUE_TEST_LISTS[name] / analogues.share(name, cfg.data.synthetic_scale)


def settings_text(s: dict) -> str:
  return ",".join(f"{k}={s[k]:g}" for k in analogues.TEACHER_SETTINGS)


def clustered_se(r: np.ndarray, unit: np.ndarray) -> float:
  """Standard error of the mean of residuals r [N] (about their mean) whose units `unit` [N] are the independent
  draws: sqrt(C / (C - 1) * sum over the C units of (the unit's sum of r - its share of the mean)^2) / N, the
  cluster-robust form; with every element its own unit it is std(r, ddof=1) / sqrt(N)."""
  r = r - r.mean()
  sums = np.bincount(np.unique(unit, return_inverse=True)[1], weights=r)
  c = sums.size
  if c < 2:
    return float("nan")
  return float(np.sqrt(c / (c - 1) * np.sum(sums ** 2)) / r.size)


def measure(record: table2.RunRecord) -> dict:
  """{loss: {level, pfd_teacher, gend_teacher, se, queries}}: no-distillation's NDCG@8 (the mean over folds x seeds
  of each run's best epoch) and each teacher's change over it in % (mean over the same runs); se: their standard
  errors from the test lists (each list's NDCG the mean over seeds; a teacher's gain by the delta method from the
  lists' paired differences, in points), the measurement's noise beside the tolerance, clustered by draw where the
  run made two or more (se["over"] == "draws": each draw's data and training vary, so its lists are not
  independent) and else over the lists of its one draw ("lists": the training's and the data's variation left
  out, so it understates the noise); queries: the test lists with a positive, over folds."""
  out = {}
  for loss, lr in record["losses"].items():
    folds = list(lr.folds.values())
    best = {n: np.concatenate([np.asarray(f.rows[n].best["test"])[:, 0] for f in folds])
            for n in ("no_distill",) + TEACHERS}
    valid = [np.asarray(f.test_lists_valid, bool) for f in folds]
    lists = {n: np.concatenate([np.asarray(f.rows[n].test_lists)[v] for f, v in zip(folds, valid)])
             for n in ("no_distill",) + TEACHERS}
    level, base, q = float(best["no_distill"].mean()), lists["no_distill"], lists["no_distill"].size
    over = "draws" if len(folds) > 1 else "lists"
    unit = np.repeat(np.arange(len(folds)), [int(v.sum()) for v in valid]) if over == "draws" else np.arange(q)
    se = dict(level=clustered_se(base, unit), over=over, units=int(np.unique(unit).size))
    mean = base.mean()  # NumPy's: a baseline at 0 (a cost probe's few epochs) gives nan, not an error
    for n in TEACHERS:  # ratio of means: d(a/b - 1) ~ (a_q - (a/b) b_q) / b
      ratio = lists[n].mean() / mean
      se[n] = float(100 * clustered_se(lists[n] - ratio * base, unit) / mean)
    out[loss] = dict(level=level, **{n: float(100 * (best[n].mean() / level - 1)) for n in TEACHERS}, se=se,
                     queries=int(q))
  return out


def distance(measured: dict, target: dict, o: Options) -> float:
  """The largest deviation from Table 4 over the losses measured and the three targets, in tolerances."""
  worst = 0.0
  for loss, m in measured.items():
    level, pfd, gend = target[loss]
    worst = max(worst, abs(m["level"] / level - 1) / o.level_tolerance,
                abs(m["pfd_teacher"] - pfd) / o.gain_tolerance, abs(m["gend_teacher"] - gend) / o.gain_tolerance)
  return worst


def distance_se(measured: dict, target: dict, o: Options) -> float:
  """The standard error of :func:`distance`: its largest deviation's standard error in the same tolerances (nan
  where the measurement has none)."""
  worst, se = -1.0, float("nan")
  for loss, m in measured.items():
    level, pfd, gend = target[loss]
    e = m.get("se") or {}
    for dev, err in ((abs(m["level"] / level - 1) / o.level_tolerance, e.get("level", np.nan) / level /
                      o.level_tolerance),
                     (abs(m["pfd_teacher"] - pfd) / o.gain_tolerance, e.get("pfd_teacher", np.nan) / o.gain_tolerance),
                     (abs(m["gend_teacher"] - gend) / o.gain_tolerance, e.get("gend_teacher", np.nan) /
                      o.gain_tolerance)):
      if dev > worst:
        worst, se = dev, float(err)
  return se


def within_noise(tried: list) -> list:
  """The candidates whose distance is within noise of the nearest's (the choice rule declared before the sized
  search): |d - d_nearest| < 2 sqrt(se^2 + se_nearest^2). More than one: the next stage refines around them (or
  the record says the choice is among candidates the measurement cannot tell apart)."""
  best = min(tried, key=lambda t: t["distance"])
  return [t for t in tried if abs(t["distance"] - best["distance"]) <
          2 * np.hypot(t.get("distance_se", np.nan), best.get("distance_se", np.nan))]


def run(cfg: schema.Config) -> RunRecord:
  name = cfg.data.dataset
  if name not in TABLE4:
    raise ConfigError("dataset", f"calibrates a paper analogue ({', '.join(TABLE4)}), not {name}")
  t0 = time.time()
  cfg = cfg.replace(options=dict(test_scale=test_scale(cfg)))  # recorded resolved: the test lists it measured on
  o = cfg.options
  teachers_only = table2.Options(methods=("gend", "pfd"), teachers_only=True)
  tried = []
  for s in candidates(o):
    # each candidate's rows in a folder of its own: the resume store knows a row by its name and training, not
    # by its data, and every candidate trains the same three rows on other data
    own = dict(run_dir=os.path.join(cfg.output.run_dir, "candidates", settings_text(s))) if cfg.output.run_dir else {}
    measured_on = f"test_scale={o.test_scale:g}" + (",scored=1" if o.scored else "")
    c = cfg.replace(data=dict(analogue=f"{settings_text(s)},{measured_on}"), options=teachers_only,
                    output=own)
    m = measure(table2.run(c))
    tried.append(dict(settings=s, measured=m, distance=distance(m, TABLE4[name], o),
                      distance_se=distance_se(m, TABLE4[name], o)))
  best = min(tried, key=lambda t: t["distance"])
  out = RunRecord(config=cfg, env=rundir.environment(), analogue=dataclasses.asdict(analogues.ANALOGUES[name]),
                  table4={k: list(v) for k, v in TABLE4[name].items()}, candidates=tried, chosen=best,
                  within_tolerance=best["distance"] <= 1.0, seconds=time.time() - t0)
  if o.write_settings:
    write_settings(out)
  return out


def to_markdown(res: RunRecord) -> str:
  name, o = res["config"]["data"]["dataset"], res["config"]["options"]
  rows = []
  for t in sorted(res["candidates"], key=lambda t: t["distance"]):
    cells = [settings_text(t["settings"])]
    for loss, m in t["measured"].items():
      se = m.get("se")  # absent from a calibration recorded before it was measured
      over = f" over {se['units']} draws" if se and se.get("over") == "draws" else ""
      cells.append(f"{loss}: {m['level']:.3f} / {m['pfd_teacher']:+.1f}% / {m['gend_teacher']:+.1f}%" +
                   (f" (se{over} {se['level']:.3f} / {se['pfd_teacher']:.1f} / {se['gend_teacher']:.1f}; "
                    f"{m['queries']:,} lists)" if se else ""))
    rows.append(cells + [f"{t['distance']:.2f}" + (f" ± {t['distance_se']:.2f}" if np.isfinite(
        t.get("distance_se", np.nan)) else "")])
  losses = list(res["chosen"]["measured"])
  target = "; ".join(f"{loss}: {v[0]:.3f} / {v[1]:+.1f}% / {v[2]:+.1f}%" for loss, v in res["table4"].items()
                     if loss in losses)
  head = (f"# Calibration of {name}'s teachers (no student trained)\n\nTable 4 (no-distillation NDCG@8 / PFD "
          f"teacher / GenD teacher): {target}. Tolerances: gains ±{o['gain_tolerance']:g} points, level "
          f"±{100 * o['level_tolerance']:g}%. Distance: the largest deviation in tolerances (<= 1: within). "
          f"Chosen: **{settings_text(res['chosen']['settings'])}** (distance {res['chosen']['distance']:.2f}, "
          f"{'within' if res['within_tolerance'] else '**outside**'} tolerance).\n\n")
  near = [settings_text(t["settings"]) for t in within_noise(res["candidates"])] if all(
      "distance_se" in t for t in res["candidates"]) else []
  tail = (f"\nWithin noise of the nearest (|d - d_nearest| < 2 se of the difference): {'; '.join(near)}: the "
          "measurement cannot tell them apart.\n" if len(near) > 1 else "")
  return head + tabulate.markdown_table(["settings"] + losses + ["distance ± se"], rows) + tail


def write_settings(res, loss: Optional[str] = None) -> str:
  """Writes the chosen candidate to pfd_jax/data/analogues.json (the file the analogues read), at the share of the
  paper's groups it was measured at, under each loss it was measured on (pfd_jax.data.analogues.populations), with
  its distance, the losses and seeds it was measured on and the code that measured it (commit, dirty, sources'
  digest); returns the file's path.

  res: this driver's RunRecord, or its results.json as loaded (a calibration made on another machine, the
  accelerator's: ``calibrate.write_settings(json.load(open(<its results.json>)))``), whose run's code is the one
  its provenance recorded. loss: choose for that loss's Table 4 row alone (the nearest of the candidates measured
  on it, by its distance under the run's tolerances) and write it under that loss only: an analogue whose two
  losses' teachers one population does not meet (docs/analogues.md)."""
  path = analogues.SETTINGS_FILE
  with open(path) as f:
    current = json.load(f)
  res = outputs.as_json(res)
  cfg, chosen = res["config"], res["chosen"]
  share = cfg["data"]["synthetic_scale"] * res["analogue"]["fraction"]
  if loss is not None:
    o = Options(gain_tolerance=cfg["options"]["gain_tolerance"], level_tolerance=cfg["options"]["level_tolerance"])
    own = [dict(t, measured={loss: t["measured"][loss]}) for t in res["candidates"] if loss in t["measured"]]
    if not own:
      raise ValueError(f"the calibration measured no candidate on {loss}")
    for t in own:
      t["distance"] = distance(t["measured"], TABLE4[cfg["data"]["dataset"]], o)
    chosen = min(own, key=lambda t: t["distance"])
  record = dict(
      chosen["settings"], distance=round(chosen["distance"], 3), losses=list(chosen["measured"]),
      **({"distance_se": round(chosen["distance_se"], 3)} if np.isfinite(chosen.get("distance_se", np.nan)) else {}),
      seeds=cfg["run"]["seeds"], epochs=cfg["train"]["epochs"], measured=chosen["measured"],
      share=share, test_scale=cfg["options"].get("test_scale", 1.0),
      tolerance=dict(gain=cfg["options"]["gain_tolerance"], level=cfg["options"]["level_tolerance"]),
      code=res.get("provenance", {}).get("code") or rundir.code_version())
  # at the size it was measured (the share of the paper's groups, from the fraction in force when it ran), under
  # each loss it was measured on: one population for both, or this loss's own (Table 4 is per loss)
  current.setdefault(cfg["data"]["dataset"], {}).setdefault(analogues.share_key(share), {}).update(
      dict.fromkeys(chosen["measured"], record))
  with open(path, "w") as f:
    json.dump(current, f, indent=1, sort_keys=True)
    f.write("\n")
  return path


DRIVER = schema.Driver("calibrate", run, to_markdown, options=Options, losses=("both",) + schema.SINGLE_LOSSES,
                       defaults=(("loss", "both"), ("dataset", "web30k_like"), ("seeds", 2)))

if __name__ == "__main__":
  lifecycle.main(DRIVER)
