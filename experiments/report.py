r"""RESULTS.md from the results files: every driver's latest run, its table and figures, the command, commit,
machine and wall time, and one verdict per claim derived from the run's paired intervals.

  python -m experiments.report                          # reads results/, writes RESULTS.md and figures/
  python -m experiments.report --results=runs --out=mine/RESULTS.md
  python -m experiments.report --check                  # do my runs in results/ reproduce RESULTS.md?

Nothing in RESULTS.md is typed by hand: each section is the run's own table.md, its PNGs (copied beside the page,
under figures/), and what its results.json and provenance.json say. A run whose training code (the library less
its serving side, the driver and the experiments modules it imports) differs between its commit and HEAD is
marked **stale**. A
missing run is an error (exit 1) naming every missing one and the command that makes it, never a silent gap.

Verdicts (directional claims "A beats B", paired by run, 95% paired-t interval of the relative change):
* **holds**: the interval lies above 0;
* **does not reproduce**: the interval lies below +MARGIN (a gain of MARGIN or more is ruled out; "reversed"
  when it lies below 0);
* **undecided at n runs**: otherwise, with the seeds (per fold) a paired t-test would need for 80% power at the
  measured spread, for the observed change or MARGIN, whichever is larger.
"Comparable" claims hold when the interval lies within +-MARGIN and do not reproduce when it excludes 0.
The theory's claims are checks of Monte-Carlo against the closed forms (holds / does not reproduce).

Configurations: a run's bits depend on the machine and packages too (:mod:`experiments.machine`). The page
records each run's `numerics` (CPU model, instruction set, caches, threads, XLA_FLAGS, numeric packages) and
marks a run whose numerics differ from the reference run's (the main job, the first entry). RESULTS.json beside
the page keeps, per run, its numerics, a fingerprint of its stored results (every field less wall times, paths
and the environment) and its table's cells, so that ``--check`` can tell a newcomer whether each of their runs is
bit-identical to the published one (required on the same configuration) or, on another configuration, within
the tolerance of every published cell (:func:`compare_cells`).
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from typing import Callable, NamedTuple, Optional

import numpy as np
from absl import app, flags

from experiments import common, machine
from pfd_jax import stats

MARGIN = common.POWER_CHANGE  # the relative change the tables' power columns are about (2%)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Claim(NamedTuple):
  text: str
  verdict: str   # holds / does not reproduce / undecided at n runs
  detail: str


def verdict(c: dict, folds: int = 1, margin: float = MARGIN) -> tuple:
  """(verdict, detail) of the claim "row beats reference" from its comparison record (common.comparison_record)."""
  cell = common.change_cell(c)
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
  seeds = "more than 100,000 runs" if need is None else (f"~{-(-need // folds):,} seeds" +
                                                          (" per fold" if folds > 1 else ""))
  return f"undecided at {c['n']} runs", f"{cell}; {seeds} would detect {size} with 80% power"


def equivalence(c: dict, margin: float = MARGIN) -> tuple:
  """(verdict, detail) of the claim "row is comparable to reference" (within +-margin)."""
  cell = common.change_cell(c)
  lo, hi = c["rel_ci"]
  if -margin < lo and hi < margin:
    return "holds", f"{cell} (within ±{100 * margin:.0f}%)"
  if lo > 0 or hi < 0:
    return "does not reproduce", f"{cell} (they differ)"
  need = stats.runs_for_power(margin * c["reference"], c["sd"])
  return (f"undecided at {c['n']} runs", f"{cell}; " + ("more than 100,000 runs" if need is None else f"~{need:,} runs")
          + f" would detect a {100 * margin:.0f}% difference with 80% power")


def beats(text: str, rows: dict, a: str, b: str, folds: int = 1, col: int = 0) -> Optional[Claim]:
  """The claim "rows[a] beats rows[b]" (paired by run), or None when either row is absent."""
  if a not in rows or b not in rows:
    return None
  c = common.compare({a: np.asarray(rows[a]), b: np.asarray(rows[b])}, b, col=col)[a]
  return Claim(text, *verdict(c, folds))


def sweep(text: str, records: dict, folds: int = 1) -> Optional[Claim]:
  """One claim over a sweep ({point: comparison record}): where it holds, is undecided, does not reproduce."""
  if not records:
    return None
  found = {}
  for point, c in records.items():
    found.setdefault(verdict(c, folds)[0].split(" at ")[0], []).append(str(point))
  word = next(iter(found)) if len(found) == 1 else "mixed"
  return Claim(text, word, "; ".join(f"{k} at {', '.join(v)}" for k, v in found.items()))


def check(text: str, ok: bool, detail: str) -> Claim:
  return Claim(text, "holds" if ok else "does not reproduce", detail)


# ------------------------------------------------------------------ the claims of each driver


def _folds(n_runs: int, res: dict) -> int:
  return max(1, n_runs // res["config"]["run"]["seeds"])


def table2_claims(res: dict) -> list:
  from experiments import table2
  out = []
  for loss, lr in res["losses"].items():
    rows, folds = table2.aggregate(lr), len(lr["folds"])
    p = f"[{loss}] "
    out += [beats(p + "PFD student beats no-distillation (paper, Table 2)", rows, "pfd", "no_distill", folds),
            beats(p + "PFD student beats self-distillation (paper, Table 2)", rows, "pfd", "self_distill", folds),
            beats(p + "PFD student beats GenD student (paper, Table 2)", rows, "pfd", "gend", folds),
            beats(p + "Self-distillation beats no-distillation (paper, Table 2)", rows, "self_distill", "no_distill",
                  folds),
            beats(p + "PFD student beats the placebo student: the gain is the privileged information (control)",
                  rows, "pfd", "placebo", folds),
            beats(p + "PFD student beats LambdaMART, the incumbent", rows, "pfd", "lambdamart", folds),
            beats(p + "GBDT student of the PFD teacher beats LambdaMART (cross-family)", rows, "gbdt_xent_from_pfd",
                  "lambdamart", folds)]
  return out


def table3_claims(res: dict) -> list:
  rows = res["rows"]
  single = ("position", "click", "add")
  vs = lambda a, b: common.compare({a: np.asarray(rows[a]), b: np.asarray(rows[b])}, b)[a]
  return [beats("Multi-teacher PFD beats the baseline (paper, Table 3)", rows, "multi", "no_distill"),
          sweep("Each single-feature PFD student beats the baseline (paper, Table 3)",
                {k: vs(k, "no_distill") for k in single if k in rows}),
          sweep("Multi-teacher PFD beats pre-training + fine-tuning (paper, Table 3)",
                {k: vs("multi", k) for k in ("pre_click_ft", "pre_add_ft") if k in rows}),
          beats("Multi-teacher PFD beats its placebo: the gain is the privileged information (control)", rows,
                "multi", "multi_placebo"),
          sweep("Each single-feature PFD student beats its placebo (control)",
                {k: vs(k, f"{k}_placebo") for k in single if f"{k}_placebo" in rows}),
          beats("Multi-teacher PFD beats LambdaMART, the incumbent", rows, "multi", "lambdamart")]


def table5_claims(res: dict) -> list:
  rows = res["rows"]
  f = _folds(len(rows["no_distill"]), res)
  return [beats("Data loss on positive groups beats all groups (paper, Table 5)", rows, "pfd_positive", "pfd_all", f),
          beats("PFD (positive groups) beats no-distillation", rows, "pfd_positive", "no_distill", f)]


def table6_claims(res: dict) -> list:
  rows = res["rows"]
  f = _folds(len(rows["no_distill"]), res)
  return [beats("No-distillation beats the PFD teacher served with mean-imputed z (paper, Table 6)", rows,
                "no_distill", "mean", f),
          beats("No-distillation beats the PFD teacher served with zero-imputed z (paper, Table 6)", rows,
                "no_distill", "zero", f)]


def teacher_loss_claims(res: dict) -> list:
  rows = res["rows"]
  f = _folds(len(rows["no_distill"]), res)
  recs = {k: common.compare({k: np.asarray(rows[k]), "b": np.asarray(rows["no_distill"])}, "b")[k]
          for k in ("pointwise", "pairwise", "listwise", "topk") if k in rows}
  return [sweep("PFD beats no-distillation, whatever the teacher term", recs, f)]


def alpha_claims(res: dict) -> list:
  f = _folds(len(res["no_distill"]), res)
  return [sweep("PFD student beats no-distillation at alpha (paper, Figure 3 / appendix A.7)",
                {a: r["comparison"] for a, r in res["alphas"].items()}, f)]


def fig4_claims(res: dict) -> list:
  taus = res["taus"]
  f = _folds(len(next(iter(taus.values()))["rows"]["no_distill"]), res)
  cmp = lambda key: {t: r["comparisons"][key] for t, r in taus.items() if key in r["comparisons"]}
  return [sweep("PFD beats no-distillation at tau_target (paper, Figure 4)", cmp("pfd"), f),
          sweep("Self-distillation beats no-distillation at tau_target (paper, Figure 4)", cmp("self_distill"), f),
          sweep("PFD beats the placebo at tau_target (control)",
                {t: r["pfd_vs_placebo"] for t, r in taus.items() if "pfd_vs_placebo" in r}, f)]


def fig5_claims(res: dict) -> list:
  tp = res["tau_privs"]
  f = _folds(len(res["no_distill"]), res)
  top = max(tp, key=lambda k: tp[k]["corr"])
  best = max((k for k in tp if k != top), key=lambda k: np.asarray(tp[k]["student"])[:, 0].mean())
  students = {k: np.asarray(v["student"]) for k, v in tp.items()}
  return [sweep("PFD student beats no-distillation at tau_priv (paper, Figure 5)",
                {k: v["comparison"] for k, v in tp.items()}, f),
          beats(f"A less correlated z (the best student, tau_priv = {best}, corr {tp[best]['corr']:.2f}) beats the "
                f"most correlated one (tau_priv = {top}, corr {tp[top]['corr']:.2f}) (paper, Figure 5)",
                students, best, top, f)]


def sdr_claims(res: dict) -> list:
  from experiments import sdr
  rows = res["rows"]
  f = _folds(len(next(iter(rows.values()))), res)
  col = sdr.SHOW.index(5)
  return [beats("The listwise self-distilled student beats its teacher (SDR)", rows, "listwise -> listwise",
                "listwise teacher", f, col),
          beats("The pointwise-teacher, listwise-student pair beats its teacher (SDR)", rows, "pointwise -> listwise",
                "pointwise teacher", f, col)]


def rank_distill_claims(res: dict) -> list:
  rows = {k: np.asarray(v["NDCG@10"])[:, None] for k, v in res["rows"].items()}
  f = _folds(len(rows["student"]), res)
  schemes = [k for k in rows if k not in ("teacher", "student")]
  return [sweep("Ranking distillation beats the student trained alone, NDCG@10 (Ranking Distillation)",
                {k: common.compare({k: rows[k], "student": rows["student"]}, "student")[k] for k in schemes}, f)]


def committee_claims(res: dict) -> list:
  cmp = res["comparisons"]
  return [Claim(f"The {k} is comparable to RankSVM, NDCG@10 paired by fold (Committee Perceptron)", *equivalence(cmp[k]))
          for k in ("committee (avg), K chosen", "committee (vote), K chosen") if k in cmp]


def theory_claims(res: dict) -> list:
  grid, fig6 = res["grid"], res["fig6"]
  exact = [abs(g["regression_mc"] - g["regression_cf"]) <= 3 * g["regression_se"] + 0.005 * g["regression_cf"]
           for g in grid]
  large = [g for g in grid if g["n"] >= 100]
  gaps = [g["pfd_mc"] / g["pfd_cf"] - 1 for g in large]
  dz = [r["d_z"] for r in fig6]
  best = dz[int(np.argmin([r["pfd_mc"] for r in fig6]))]
  out = [check("Theorem 1 (exact) matches Monte-Carlo in every grid cell (within 3 SE + 0.5%)", all(exact),
               f"{sum(exact)}/{len(exact)} cells"),
         check("Theorem 2 matches Monte-Carlo within 2% once n >= 100 (its dropped O(1/(nm)) term)",
               all(abs(x) < 0.02 for x in gaps), ", ".join(f"n={g['n']}, d_z={g['d_z']}: {100 * x:+.1f}%"
                                                         for g, x in zip(large, gaps))),
         check("Figure 6: PFD's error is smallest strictly inside 0 < d_z < 10", 0 < best < max(dz),
               f"minimum at d_z = {best}"),
         check("Example 1: PFD beats regression for every d_z >= 1",
               all(r["pfd_mc"] + 3 * r["pfd_se"] < r["regression_mc"] for r in fig6 if r["d_z"] > 0),
               "Monte-Carlo, 3 SE")]
  if "placebo_mc" in fig6[0]:
    worse = [r for r in fig6 if r["d_z"] > 0 and r["placebo_mc"] - 3 * r["placebo_se"] > r["regression_mc"]]
    out.append(check("Placebo (noise for z) is worse than regression for every d_z >= 1 (linear theory, control)",
                     len(worse) == sum(r["d_z"] > 0 for r in fig6),
                     f"{len(worse)}/{sum(r['d_z'] > 0 for r in fig6)} values of d_z, Monte-Carlo, 3 SE"))
  return out


class Entry(NamedTuple):
  """A run the page needs: <results>/<driver>/<label>/latest, the command that makes it, its claims."""
  driver: str
  label: str
  command: str
  title: str
  claims: Optional[Callable] = None
  headline: bool = False  # its claims go into the README's summary too

  @property
  def key(self) -> str:  # how runs are named on the command line and in RESULTS.json
    return f"{self.driver}/{self.label}"

  @property
  def anchor(self) -> str:  # its section's anchor on the page
    return f"{self.driver}-{self.label}"


EXPECTED = [
    Entry("table2", "synthetic", "python -m experiments.table2", "Table 2 / Table 4: synthetic default (main job)",
          table2_claims, True),
    Entry("table2", "ohsumed", "python -m experiments.table2 --dataset=ohsumed --loss=rankbce",
          "Table 2 / Table 4: OHSUMED, 5 folds", table2_claims, True),
    Entry("table2", "letor-logs_letor", "python -m experiments.export_logs --out=logs_letor && python -m "
          "experiments.table2 --dataset=letor --data_dir=logs_letor --privileged=21,22,23 --loss=rankbce "
          "--methods=pfd,placebo,lambdamart,gbdt_from_pfd --save_models",
          "Your own data: simulated logs as a LETOR folder, file labels, named privileged features", table2_claims),
    Entry("table3_logs", "logs", "python -m experiments.table3_logs", "Table 3 analogue: simulated e-commerce logs",
          table3_claims, True),
    Entry("theory", "fig6", "python -m experiments.theory", "Linear theory: Theorems 1-2, Figure 6", theory_claims,
          True),
    Entry("fig3_alpha", "synthetic", "python -m experiments.fig3_alpha", "Figure 3: alpha", alpha_claims),
    Entry("alpha_robustness", "synthetic", "python -m experiments.alpha_robustness", "Appendix A.7: alpha robustness",
          alpha_claims),
    Entry("fig4_sparsity", "synthetic", "python -m experiments.fig4_sparsity", "Figure 4: label sparsity",
          fig4_claims),
    Entry("fig5_correlation", "synthetic", "python -m experiments.fig5_correlation",
          "Figure 5: correlation of z with y", fig5_claims),
    Entry("table5_positive_groups", "synthetic", "python -m experiments.table5_positive_groups",
          "Table 5: positive vs all query groups", table5_claims),
    Entry("table6_imputation", "synthetic", "python -m experiments.table6_imputation",
          "Table 6: the teacher served with imputed z", table6_claims),
    Entry("pfd_teacher_loss", "synthetic", "python -m experiments.pfd_teacher_loss",
          "Ablation: how the PFD teacher teaches", teacher_loss_claims),
    Entry("sdr", "synthetic", "python -m experiments.sdr", "Self-Distilled neural Rankers (SDR)", sdr_claims),
    Entry("rank_distill", "synthetic", "python -m experiments.rank_distill", "Ranking Distillation",
          rank_distill_claims),
    Entry("committee_perceptron", "ohsumed", "python -m experiments.committee_perceptron",
          "Committee Perceptron family vs RankSVM (OHSUMED)", committee_claims),
    Entry("data_summary", "synthetic", "python -m experiments.data_summary", "Data summary (Table 1 columns)"),
    # The benchmarks (speed, memory, latency) are not here: their figures need an idle machine and hold no claim;
    # python -m experiments.benchmark [--case=...] writes them to results/benchmark/<case>/.
]


class Missing(Exception):
  """Runs the page needs are absent (the message names each and its command)."""


# ------------------------------------------------------------------ staleness


def _imported_experiments(module: str, root: str, seen: set) -> None:
  """experiments modules `module` imports, recursively (the driver's own code beside the library)."""
  if module in seen:
    return
  seen.add(module)
  path = os.path.join(root, "experiments", module + ".py")
  if not os.path.exists(path):
    return
  with open(path) as f:
    tree = ast.parse(f.read())
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom) and node.module == "experiments":
      for a in node.names:
        _imported_experiments(a.name, root, seen)
    elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("experiments."):
      _imported_experiments(node.module.split(".", 1)[1], root, seen)


# Library modules that load, check and export saved models: they never change a number a driver records.
SERVING_SIDE = ("pfd_jax/serving.py", "pfd_jax/export.py")


def training_code(driver: str, root: str = ROOT) -> list:
  """The git pathspecs whose change changes a driver's results: the library (less its serving side) and the
  experiments modules the driver runs."""
  seen = set()
  _imported_experiments(driver, root, seen)
  return (["pfd_jax"] + [f":(exclude){p}" for p in SERVING_SIDE] +
          sorted(f"experiments/{m}.py" for m in seen))


def _git(root: str, *args) -> subprocess.CompletedProcess:
  return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=60)


def staleness(code: dict, driver: str, root: str = ROOT) -> Optional[str]:
  """None when the run's training code is HEAD's; else why it is stale (or cannot be checked)."""
  commit = code.get("git_commit")
  if not commit:
    return "run outside a git checkout: its code cannot be compared with HEAD"
  paths = training_code(driver, root)
  diff = _git(root, "diff", "--name-only", commit, "HEAD", "--", *paths)
  if diff.returncode != 0:
    return f"commit {commit[:10]} is not in this repository: its code cannot be compared with HEAD"
  changed = diff.stdout.split()
  if changed:
    shown = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
    return f"training code changed since {commit[:10]} ({shown})"
  if code.get("git_dirty"):
    return f"run on {commit[:10]} with uncommitted changes: its code cannot be compared with HEAD"
  return None


# ------------------------------------------------------------------ the page


def load_run(results: str, e: Entry) -> Optional[dict]:
  folder = os.path.join(results, e.driver, e.label, "latest")
  path = os.path.join(folder, "results.json")
  if not os.path.exists(path):
    return None
  with open(path) as f:
    res = json.load(f)
  prov = res.get("provenance")
  if prov is None and os.path.exists(os.path.join(folder, "provenance.json")):
    with open(os.path.join(folder, "provenance.json")) as f:
      prov = json.load(f)
  shown = os.path.join(os.path.dirname(folder), os.readlink(folder)) if os.path.islink(folder) else folder
  return dict(res=res, prov=prov or {}, folder=os.path.realpath(folder), shown=shown)


def _demote(md: str) -> str:
  return "\n".join("##" + line if line.startswith("#") else line for line in md.strip().splitlines())


def _machine(env: dict) -> str:
  n = env.get("numerics")
  if not n:  # a run from before the numerics were recorded
    return (f"{env.get('cpus', '?')} CPUs ({env.get('machine', '?')}), {env.get('backend', '?')} backend, "
            f"Python {env.get('python', '?')}, jax {env.get('jax', '?')}")
  isa = next((f for f in ("amx_tile", "avx512f", "avx2", "avx") if f in n["isa"]), "no AVX")
  return (f"{n['cpu']} ({isa.upper()}; {n['caches'] or 'caches unknown'}), {n['threads']} threads, "
          f"{env.get('backend', '?')} backend, XLA_FLAGS '{n['xla_flags']}', Python {n['python']}, " +
          ", ".join(f"{p} {v}" for p, v in n["packages"].items()))


# ------------------------------------------------------------------ reproducing the page elsewhere

# Fields of results.json that say how, where and how long a run ran, not what it found (out of the fingerprint).
CIRCUMSTANCES = frozenset({"seconds", "wall_seconds", "env", "provenance", "command", "output", "data_dir",
                           "cache_dir", "shard_dir"})
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


def _claims(e: Entry, res: dict) -> list:
  return [c for c in (e.claims(res) if e.claims else []) if c is not None]


VERDICT_ROW = re.compile(r"^\| (.+?) \| \*\*(.+?)\*\* \|", re.M)


def _page_record(page: str, anchor: str) -> Optional[dict]:
  """A run's cells and verdicts from its section of a RESULTS.md without RESULTS.json; None if it has none."""
  start = page.find(f'<a id="{anchor}"></a>')
  if start < 0:
    return None
  stop = page.find('<a id="', start + 1)
  section = page[start:stop if stop > 0 else len(page)]
  return dict(numerics=None, fingerprint=None, cells=cells(section), verdicts=dict(VERDICT_ROW.findall(section)))


def check_reproduction(results: str, page: str, expected: list = EXPECTED, required: bool = False) -> tuple:
  """(ok, lines): each expected run present under `results` against the published page (RESULTS.md and the
  RESULTS.json beside it). Same numerics: the fingerprint must be equal. Other or unknown numerics: every
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
    mine = published_record(run, _claims(e, run["res"]))
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
    lines.append(f"{key}: {'ok' if good else 'FAILED'}: {why}")
    lines += [f"  verdict changed: {t}: {pub['verdicts'][t]} -> {v}" for t, v in mine["verdicts"].items()
              if t in pub["verdicts"] and pub["verdicts"][t] != v]
  return ok, lines


def _wall(res: dict) -> str:
  s = res.get("wall_seconds", res.get("seconds"))
  return "?" if s is None else (f"{s:.0f} s" if s < 120 else f"{int(s // 60)} min {int(round(s % 60))} s")


BEGIN, END = "<!-- results summary: generated by python -m experiments.report -->", "<!-- end of results summary -->"


def readme_summary(head: str, headline: list) -> str:
  """The README's block: the headline runs' claims with their verdicts, linking to their sections."""
  rows = [[f"[{e.title}](RESULTS.md#{e.anchor})", c.text, f"**{c.verdict}**", c.detail]
          for e, c in headline]
  return (f"{BEGIN}\nFrom RESULTS.md at commit `{head[:10]}`:\n\n" +
          common.markdown_table(["Run", "Claim", "Verdict", "Evidence (change [95% CI], p)"], rows) + END)


def update_readme(path: str, block: str) -> None:
  with open(path) as f:
    text = f.read()
  if BEGIN not in text or END not in text:
    raise Missing(f"{path} has no results summary block ({BEGIN} ... {END}) to update")
  start, stop = text.index(BEGIN), text.index(END) + len(END)
  with open(path, "w") as f:
    f.write(text[:start] + block + text[stop:])


def build(results: str, out: str, root: str = ROOT, expected: list = EXPECTED, readme: Optional[str] = None,
          mark_missing: bool = False) -> dict:
  """Writes `out` (Markdown) and its figures beside it (<dir of out>/figures/), and the headline claims into
  `readme`'s summary block when given; returns a summary {"entries": [...], "stale": [...], "claims": [...]}.
  Raises Missing (writing nothing) if a run is absent, unless mark_missing: then the page lists it as
  **missing** with its command, in the summary and in its own section."""
  runs = [(e, load_run(results, e)) for e in expected]
  missing = [e for e, r in runs if r is None]
  if missing and not mark_missing:
    raise Missing("no results for " + "; ".join(
        f"{e.key} ({os.path.join(results, e.driver, e.label, 'latest')} is absent; run: {e.command})"
        for e in missing))
  out_dir = os.path.dirname(os.path.abspath(out))
  fig_root = os.path.join(out_dir, "figures")
  head = _git(root, "rev-parse", "HEAD").stdout.strip() or "unknown"
  summary, sections, all_claims, stale, records = [], [], [], [], {}
  # the reference configuration: the first run's (the main job's) that recorded its numerics
  ref, ref_env = next(((e, r["res"]["env"]) for e, r in runs if r and r["res"].get("env", {}).get("numerics")),
                      (None, {}))
  shutil.rmtree(fig_root, ignore_errors=True)
  for e, run in runs:
    if run is None:
      anchor = e.anchor
      summary.append([f"[{e.title}](#{anchor})", "-", "**missing**", "-", "-", "-"])
      sections.append(f'<a id="{anchor}"></a>\n\n## {e.title}\n\n**Missing**: no run in '
                      f"`{os.path.join(results, e.driver, e.label, 'latest')}`; run `{e.command}`.\n")
      stale.append((e, "missing"))
      continue
    res, code = run["res"], run["prov"].get("code", {})
    why = staleness(code, e.driver, root)
    claims = _claims(e, res)
    all_claims += [(e, c) for c in claims]
    if why:
      stale.append((e, why))
    anchor = e.anchor
    counts = {}
    for c in claims:
      counts[c.verdict.split(" at ")[0]] = counts.get(c.verdict.split(" at ")[0], 0) + 1
    records[e.key] = published_record(run, claims)
    numerics, other = res.get("env", {}).get("numerics"), None
    if ref is not None and numerics != ref_env["numerics"]:
      other = ("its configuration is not recorded (a run from before it was)" if not numerics else
               "; ".join(machine.differences(numerics, ref_env["numerics"])))
    summary.append([f"[{e.title}](#{anchor})", "; ".join(f"{v} {k}" for k, v in counts.items()) or "-",
                    "**stale**" if why else "current", "**other**" if other else "reference",
                    (code.get("git_commit") or "?")[:10], _wall(res)])
    parts = [f'<a id="{anchor}"></a>\n\n## {e.title}\n\n',
             f"Command: `{res.get('command', e.command)}`  \nCommit: `{(code.get('git_commit') or '?')[:10]}`"
             f"{' (uncommitted changes)' if code.get('git_dirty') else ''}; run {res.get('env', {}).get('time', '?')} "
             f"on {_machine(res.get('env', {}))}; wall time {_wall(res)}.  \nResults: `{run['shown']}`\n"]
    if why:
      parts.append(f"\n**Stale**: {why}. Re-run `{e.command}`.\n")
    if other:
      parts.append(f"\n**Other configuration** than the reference run ({ref.title}): {other}. Its bits "
                   f"are its configuration's (README, \"Reproducing RESULTS.md\").\n")
    if claims:
      parts.append("\n| Claim | Verdict | Evidence |\n|---|---|---|\n" +
                   "".join(f"| {c.text} | **{c.verdict}** | {c.detail} |\n" for c in claims))
    table = os.path.join(run["folder"], "table.md")
    if os.path.exists(table):
      with open(table) as f:
        parts.append("\n" + _demote(f.read()) + "\n")
    for png in sorted(p for p in os.listdir(run["folder"]) if p.endswith(".png")):
      dest = os.path.join(fig_root, anchor, png)
      os.makedirs(os.path.dirname(dest), exist_ok=True)
      shutil.copyfile(os.path.join(run["folder"], png), dest)
      parts.append(f"\n![{e.title}: {png}]({os.path.relpath(dest, out_dir)})\n")
    sections.append("".join(parts))
  page = [f"# pfd_jax results\n\nGenerated by `python -m experiments.report` from `{results}` at commit "
          f"`{head[:10]}` ({time.strftime('%Y-%m-%d')}); do not edit by hand. Every table below is the run's own "
          f"table.md; every verdict is derived from the run's paired 95% intervals: **holds** = the interval of "
          f"the relative change lies above 0; **does not reproduce** = it lies below +{100 * MARGIN:.0f}% (a gain "
          f"of {100 * MARGIN:.0f}% or more is ruled out); **undecided at n runs** = neither, with the seeds a "
          f"paired t-test would need (80% power) for the observed change or {100 * MARGIN:.0f}%, whichever is "
          f"larger; **mixed** = a sweep whose points differ. A \"comparable\" claim holds when the interval lies "
          f"within ±{100 * MARGIN:.0f}% and does not reproduce when it excludes 0. A run is **stale** when the "
          f"library (less its serving side, which only loads and exports saved models) or its driver's code differs "
          f"between the run's commit and HEAD. Configuration: **other** marks a run whose machine or packages "
          f"(`numerics`: CPU, instruction set, caches, threads, XLA_FLAGS, numeric packages) differ from the "
          f"reference run's" + (f" ({ref.title}: {_machine(ref_env)})" if ref is not None else "") +
          f"; RESULTS.json beside this page has each run's fingerprint for `python -m experiments.report "
          f"--check`.\n\n",
          common.markdown_table(["Run", "Claims", "Code", "Configuration", "Commit", "Wall time"], summary), "\n"]
  page += [s + "\n" for s in sections]
  if readme:
    update_readme(readme, readme_summary(head, [(e, c) for e, c in all_claims if e.headline]))
  with open(out, "w") as f:
    f.write("".join(page).rstrip() + "\n")
  common.write_json(os.path.splitext(out)[0] + ".json", records)
  return dict(entries=[e.key for e in expected], stale=[e.key for e, _ in stale],
              claims=[(e.key, c.text, c.verdict) for e, c in all_claims])


flags.DEFINE_string("results", "results", "The results root the drivers wrote (<results>/<driver>/<label>/latest).")
flags.DEFINE_string("out", "RESULTS.md", "The page to write (its figures go to figures/ beside it).")
flags.DEFINE_bool("mark_missing", False, "List runs that are absent as missing on the page instead of failing.")
flags.DEFINE_string("readme", "README.md", "A file whose results summary block gets the headline claims ('' = none).")
flags.DEFINE_bool("check", False, "Write nothing: compare each run under --results with the published page --out "
                  "(and its .json): bit-identical on the same configuration, within the tolerance on another. "
                  "Exit 1 if one is not.")
flags.DEFINE_list("only", [], "With --check: these runs only, as driver/label (e.g. table2/synthetic).")


def main(argv):
  del argv
  if flags.FLAGS.check:
    chosen = [e for e in EXPECTED if not flags.FLAGS.only or e.key in flags.FLAGS.only]
    unknown = set(flags.FLAGS.only) - {e.key for e in EXPECTED}
    if unknown:
      print(f"error: --only: no expected run {', '.join(sorted(unknown))}", file=sys.stderr, flush=True)
      sys.exit(2)
    ok, lines = check_reproduction(flags.FLAGS.results, flags.FLAGS.out, chosen, required=bool(flags.FLAGS.only))
    print("\n".join(lines))
    sys.exit(0 if ok else 1)
  try:
    s = build(flags.FLAGS.results, flags.FLAGS.out, readme=flags.FLAGS.readme or None,
              mark_missing=flags.FLAGS.mark_missing)
  except Missing as e:
    print(f"error: {e}", file=sys.stderr, flush=True)
    sys.exit(1)
  verdicts = {}
  for _, _, v in s["claims"]:
    verdicts[v.split(" at ")[0]] = verdicts.get(v.split(" at ")[0], 0) + 1
  print(f"wrote {flags.FLAGS.out}: {len(s['entries'])} runs, {len(s['claims'])} claims "
        f"({', '.join(f'{n} {k}' for k, n in verdicts.items())}); stale: {', '.join(s['stale']) or 'none'}")


if __name__ == "__main__":
  app.run(main)
