r"""The power study: how the paired spread of Table 2's comparisons shrinks with training size, test size and seeds,
what each point costs, and the smallest protocol that decides every Table 2 claim within a time budget.

  python -m experiments.paper.power                      # pilot seeds 1000.. at 1x, 2x, 4x, 8x the default training set
  python -m experiments.paper.power --scales=1,2 --seeds=3

At each training scale (multiples of the synthetic default's 400 training queries; 200 validation queries; a
--test_queries test set) the Table 2 MLP rows are trained for both losses with the *pilot* seeds (--seed=1000, so
never the seeds of a preset it sizes) and every row's per-query NDCG@8 of every seed is kept. For each comparison
(PFD student - no-distillation / self-distillation / GenD student / placebo student) the per-list differences
d[seed, query] are split into a seed and a query variance (:func:`pfd_jax.ops.stats.variance_components`,
unclipped, so unbiased): the
run-level difference over a test set of Q queries with a positive varies from seed to seed with variance
seed + query / Q, so one pilot test set predicts every test size. Across the measured scales each relative
component is fitted as a + b / (training size) by least squares over every point (negative estimates too) and
projected to larger sets, marked as projected. Times: each row's wall seconds split into training and per-epoch evaluation (one evaluation
pass on the test set, timed), linear in the training groups, the test queries and the seeds (vmapped seeds cost
linearly on a CPU). The choice: the cheapest (scale, test queries, seeds) whose projected time fits --budget_minutes
and gives every comparison of both losses 80% power to detect a --change relative change (paired t, two-sided
5%); when none does, the one that fits with the highest smallest power. It was the table2 preset 'decisive_fixed'
(fixed data; the re-drawn population sizes itself: table2's "Power on the re-drawn population").
"""
import dataclasses
import json
import os
import time
from typing import Any, Dict, Tuple

import numpy as np

from experiments.framework.records import RunRecord
from experiments.framework import fold_data, lifecycle, monitor, outputs, plots, rowstore, rundir, schema, tabulate
from experiments.framework.schema import Preset
from pfd_jax import training as training_lib
from pfd_jax.config import JsonObject, option
from pfd_jax.methods import distill
from pfd_jax.methods import rows as rows_lib
from pfd_jax.ops import stats

DEFAULT_QUERIES = (400, 200, 600)  # the synthetic default's train / vali / test queries (synthetic.generate)
WEB30K_TRAIN, WEB30K_TEST = 18919, 6306
COMPARED = rows_lib.compared()  # each against the PFD student: the rows its claims name (no_distill, ..., placebo)
PFD = rows_lib.primary().name


@dataclasses.dataclass(frozen=True)
class Options:
  scales: Tuple[float, ...] = option((1.0, 2.0, 4.0, 8.0), "Training sizes measured, as multiples of the "
                                     "synthetic default's 400 training queries.", lo=0, lo_open=True)
  test_queries: int = option(1200, "Test queries of the pilot sets (the query variance predicts other sizes).",
                             lo=10)
  preset_tests: Tuple[int, ...] = option((600, 1200, 2400, 4800, WEB30K_TEST), "Test sizes (queries) the choice "
                                         "may take.", lo=10)
  project: Tuple[float, ...] = option((16.0, 32.0, WEB30K_TRAIN / DEFAULT_QUERIES[0]), "Training scales projected "
                                      "by the fits (the choice takes those up to twice the largest measured).",
                                      lo=0, lo_open=True)
  budget_minutes: float = option(90.0, "The decisive preset's time budget on this machine.", lo=0, lo_open=True)
  change: float = option(tabulate.POWER_CHANGE, "The relative change every comparison must detect with 80% power.",
                         lo=0, lo_open=True)


def train_queries(scale: float) -> int:
  return int(round(DEFAULT_QUERIES[0] * scale))


def run(cfg: schema.Config) -> RunRecord:
  """Trains the pilot points and returns the results dictionary (the points; the analysis and the choice are
  derived from them by :func:`analysis`, so they are never out of step)."""
  t0 = time.time()
  out = RunRecord(config=cfg, env=rundir.environment(), points={})
  for scale in cfg.options.scales:
    pcfg = cfg.replace(data=dict(synthetic_queries=(train_queries(scale), DEFAULT_QUERIES[1],
                                                    cfg.options.test_queries)))
    ds = fold_data.load_dataset(pcfg.data)
    out["points"][str(scale)] = {loss: point(pcfg, ds, loss, scale) for loss in cfg.losses}
  out["seconds"] = time.time() - t0  # the analysis is derived from the points where it is shown (to_markdown)
  return out


def point(cfg: schema.Config, ds, loss: str, scale: float) -> JsonObject:
  """One (scale, loss): the Table 2 MLP rows with the pilot seeds, their per-query lists and times (under
  'seconds': the fingerprint leaves times out)."""
  wall, cpu = time.time(), time.process_time()
  ds, dd, tc, keys = fold_data.fold_setup(cfg, loss, 1, ds=ds)
  store = rowstore.RowStore(cfg, ds, 1, loss)
  rows = distill.run_methods(keys, tc, dd, distill.METHODS, hooks=monitor.progress(f"[{loss} x{scale:g}]"),
                             fit=store.fit(f"x{scale:g}_", servable=False),
                             placebo=fold_data.placebo_data(cfg, ds, tc))
  wall, cpu = time.time() - wall, time.process_time() - cpu
  test = dd.eval_sets["test"]
  lists = {}
  for name in (PFD,) + COMPARED:
    v, valid = training_lib.per_list_ndcg(tc, rows[name].params, test, "x")
    lists[name] = v[:, valid]
  t = time.perf_counter()
  training_lib.per_list_ndcg(tc, rows[rows_lib.baseline()].params, test, "x")  # compiled by now: one evaluation pass
  timing = dict(rows={k: r.seconds for k, r in rows.items()}, wall=wall, cpu=cpu, eval_pass=time.perf_counter() - t)
  return dict(train_groups=dd.num_train_groups, positive_train_groups=dd.num_positive_groups,
              test_queries=int(test.num_lists), test_positive=int(valid.sum()), seeds=int(keys.shape[0]),
              best={k: r.best["test"] for k, r in rows.items()}, lists=lists,
              seconds=first_timing(store.store, f"x{scale:g}", timing))


def first_timing(folder, name: str, timing: Dict[str, float]) -> Dict[str, float]:
  """The times of the run that trained a point, kept beside its saved rows (<folder>/<name>_seconds.json): a
  resumed run reports them, not its loading times. Outside a run folder (folder None): `timing`."""
  if not folder:
    return timing
  path = os.path.join(folder, f"{name}_seconds.json")
  if os.path.exists(path):
    with open(path) as f:
      return json.load(f)
  outputs.write_json(path, timing)
  return timing


def components(p: JsonObject) -> Dict[str, Tuple[float, float]]:
  """{compared row: (seed variance, query variance)} of one point, relative to the compared row's mean NDCG@8
  (variances divided by its square)."""
  out = {}
  for b in COMPARED:
    ref = float(np.asarray(p["lists"][b], np.float64).mean())
    seed, query = stats.variance_components(np.asarray(p["lists"][PFD]) - np.asarray(p["lists"][b]), clip=False)
    out[b] = (seed / ref ** 2, query / ref ** 2)
  return out


def spread(component: tuple, q: int) -> float:
  """The relative spread of the run-level difference over q test queries with a positive: sqrt(seed + query / q),
  never below the query term alone (an unbiased seed estimate can be negative; the spread is floored, the
  components and their fits are not)."""
  return float(np.sqrt(max(component[0], 0.0) + component[1] / q))


def fit_inverse(x, y) -> tuple:
  """(a, b) of y = a + b / x by least squares over every measured point, the unclipped estimates' negatives too
  (their mean is the truth's: dropping or clipping them, as this study once did, biases the fit); one point: y
  held constant. A b < 0, a variance growing with the training set (what the noise of a few seeds' estimates can
  give), is taken as 0: the projection then holds the measured mean level."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  if x.size < 2:
    return float(y.mean()), 0.0
  b, a = np.polyfit(1.0 / x, y, 1)
  return (float(y.mean()), 0.0) if b < 0 else (float(a), float(b))


def analyse(points: Dict[str, JsonObject], o: Options, epochs: int) -> JsonObject:
  """The measured components, their fits, the time model and the choice (all JSON-ready)."""
  scales = [float(s) for s in points]
  losses = list(next(iter(points.values())))
  comps = {loss: {s: components(points[s][loss]) for s in points} for loss in losses}
  fits = {loss: {b: dict(seed=fit_inverse(scales, [comps[loss][s][b][0] for s in points]),
                         query=fit_inverse(scales, [comps[loss][s][b][1] for s in points])) for b in COMPARED}
          for loss in losses}
  share = float(np.mean([p[loss]["test_positive"] / p[loss]["test_queries"] for p in points.values()
                         for loss in losses]))
  timing = {loss: time_model(points, loss, epochs) for loss in losses}
  grid = []
  top = max(scales)
  for scale in sorted(set(scales) | {s for s in o.project if s <= 2 * top}):
    for tq in o.preset_tests:
      q = max(2, int(round(tq * share)))
      sd = {f"{loss}/{b}": projected_spread(fits[loss][b], {s: c[b] for s, c in comps[loss].items()}, scale, q)
            for loss in losses for b in COMPARED}
      grid.append(dict(scale=scale, train_queries=train_queries(scale), test_queries=tq, test_positive=q,
                       projected=scale not in scales, sd=sd,
                       seconds_per_seed=sum(seconds(timing[loss], scale, q, 1) for loss in losses),
                       overhead=sum(timing[loss]["overhead"] for loss in losses),
                       seeds_needed=max((stats.runs_for_power(o.change, v) or 10 ** 9) for v in sd.values())))
  web_scale, web_q = WEB30K_TRAIN / DEFAULT_QUERIES[0], int(round(WEB30K_TEST * share))
  web = dict(test_positive=web_q, sd={f"{loss}/{b}": projected_spread(fits[loss][b], {}, web_scale, web_q)
                                      for loss in losses for b in COMPARED},
             seconds_per_seed=sum(seconds(timing[loss], web_scale, web_q, 1) for loss in losses))
  return dict(components={loss: {str(s): v for s, v in c.items()} for loss, c in comps.items()}, fits=fits,
              positive_share=share, timing=timing, grid=grid, web30k=web, choice=choose(grid, o))


def projected_spread(fit: JsonObject, measured: Dict[str, Any], scale: float, q: int) -> float:
  """:func:`spread` at `scale`: of the measured components ({scale: (seed, query)}) at a measured scale, of the
  fits' projection elsewhere."""
  if str(scale) in measured:
    return spread(measured[str(scale)], q)
  (a1, b1), (a2, b2) = fit["seed"], fit["query"]
  return spread((a1 + b1 / scale, a2 + b2 / scale), q)


def time_model(points: Dict[str, JsonObject], loss: str, epochs: int) -> Dict[str, float]:
  """Per seed: training seconds linear in the training groups (fitted) and evaluation seconds per test query
  with a positive and epoch (every row evaluates those once per epoch); per run: the fixed overhead (data,
  compiling)."""
  tg, train, evals, fixed = [], [], [], []
  for p in (pts[loss] for pts in points.values()):
    t = p["seconds"]
    fixed.append(t["wall"] - sum(t["rows"].values()))
    rows = len(t["rows"])
    ev = t["eval_pass"] / p["seeds"] / p["test_positive"]  # only lists with a positive are scored
    evals.append(ev)
    tg.append(p["train_groups"])
    train.append(sum(t["rows"].values()) / p["seeds"] - rows * epochs * ev * p["test_positive"])
  slope, icpt = np.polyfit(tg, train, 1) if len(tg) > 1 else (train[0] / tg[0], 0.0)
  return dict(train_per_group=float(slope), train_fixed=float(icpt), eval_per_query=float(np.mean(evals)),
              rows=rows, epochs=epochs, overhead=float(np.mean(fixed)))


def seconds(t: Dict[str, float], scale: float, test_positive: int, seeds: int) -> float:
  """Projected wall seconds of one loss's Table 2 MLP rows at this size (test_positive: the test queries with a
  positive, the ones evaluated)."""
  groups = train_queries(scale)  # ~ the training groups (min_docs drops about 1%)
  per_seed = t["train_fixed"] + t["train_per_group"] * groups + t["rows"] * t["epochs"] * t["eval_per_query"] * \
      test_positive
  return seeds * per_seed + t["overhead"]


def choose(grid: list, o: Options) -> JsonObject:
  """The decisive protocol: the cheapest grid point x seeds with 80% power for every comparison within the
  budget, else the affordable one with the highest smallest power."""
  budget = 60 * o.budget_minutes
  best, fallback = None, None
  for g in grid:
    for n in range(2, 201):
      t = g["seconds_per_seed"] * n + g["overhead"]
      if t > budget:
        break
      low = min(stats.power(n, o.change, v) for v in g["sd"].values())
      cand = dict(scale=g["scale"], train_queries=g["train_queries"], test_queries=g["test_queries"], seeds=n,
                  seconds=t, min_power=low, projected=g["projected"])
      if low >= 0.8 and (best is None or t < best["seconds"]):
        best = cand
      if fallback is None or low > fallback["min_power"]:
        fallback = cand
  return dict(best or fallback or {}, decides=best is not None)


def analysis(res: JsonObject) -> JsonObject:
  """:func:`analyse` of a results dictionary as results.json holds it."""
  o = Options(**{k: tuple(v) if isinstance(v, list) else v for k, v in res["config"]["options"].items()})
  return analyse(res["points"], o, res["config"]["train"]["epochs"])


def _pct(v: float) -> str:
  return f"{100 * v:.1f}%"


def _need(change: float, sd: float) -> str:
  n = stats.runs_for_power(change, sd)
  return "n/a" if n is None else f"{n:,}"


def to_markdown(res: RunRecord) -> str:
  o, a = res["config"]["options"], analysis(res)
  change, pts = o["change"], res["points"]
  losses = list(a["components"])
  parts = [f"# Power study: the paired spread of Table 2's comparisons against training size, test size and seeds\n\n"
           f"Pilot seeds {res['config']['run']['seed']}.. ({next(iter(next(iter(pts.values())).values()))['seeds']} "
           f"per point, never a preset's), {res['config']['train']['epochs']} epochs, the Table 2 MLP rows; "
           f"{100 * a['positive_share']:.1f}% of test queries have a positive. Spread = the standard deviation over "
           f"seeds of the run-level paired difference (PFD student - row) relative to the row's mean NDCG@8, from "
           f"the seed and query variance components (pfd_jax.ops.stats.variance_components); seeds = the seeds a "
           f"paired t-test needs for 80% power to detect a {100 * change:.0f}% change at that spread. Wall time "
           f"{res['seconds']:.0f} s on {res['env']['backend']} ({res['env']['cpus']} CPUs); the points were trained "
           f"in {sum(p[loss]['seconds']['wall'] for p in pts.values() for loss in p):.0f} s (each point's times are "
           f"those of the run that trained it, kept with its rows).\n"]
  for loss in losses:
    head = ["training queries (positive)", "test queries (positive)", "wall s (CPU s)"]
    body = []
    for s, p in pts.items():
      p = p[loss]
      comp = a["components"][loss][s]
      cells = []
      for b in COMPARED:
        at_pilot, at_web = spread(comp[b], p["test_positive"]), spread(comp[b], a["web30k"]["test_positive"])
        cells.append(f"{_pct(at_pilot)} ({_need(change, at_pilot)}); {_pct(at_web)} ({_need(change, at_web)})")
      body.append([f"{p['train_groups']:,} ({p['positive_train_groups']:,})",
                   f"{p['test_queries']:,} ({p['test_positive']:,})",
                   f"{p['seconds']['wall']:.0f} ({p['seconds']['cpu']:.0f})"] + cells)
    parts.append(f"\n## {loss}: measured points\n\nPer comparison: spread (seeds) at the pilot's test set; the same "
                 f"predicted at Web30k's {WEB30K_TEST:,} test queries.\n\n" + tabulate.markdown_table(
                     head + [f"PFD vs {rows_lib.title(b, short=True)}" for b in COMPARED], body))
  rows = [[f"{g['train_queries']:,}" + (" (projected)" if g["projected"] else ""), f"{g['test_queries']:,}",
           f"{g['seconds_per_seed']:.0f}",
           " / ".join(f"{_pct(g['sd'][f'{loss}/{b}'])}" for loss in losses for b in COMPARED),
           "n/a" if g["seeds_needed"] >= 10 ** 9 else f"{g['seeds_needed']:,}",
           "n/a" if g["seeds_needed"] >= 10 ** 9 else
           f"{(g['seconds_per_seed'] * g['seeds_needed'] + g['overhead']) / 60:.0f}"]
          for g in a["grid"]]
  parts.append(f"\n## The grid: every comparison's spread and the seeds that decide all of them\n\nSpreads in the "
               f"order {', '.join(f'{loss}/{rows_lib.title(b, short=True)}' for loss in losses for b in COMPARED)}; seconds per seed "
               f"(both losses) and minutes for the seeds needed, projected on this machine.\n\n" +
               tabulate.markdown_table(["training queries", "test queries", "s per seed", "spreads",
                                        "seeds for 80% power (all)", "minutes"], rows))
  c, w = a["choice"], a["web30k"]
  parts.append(f"\n**The decisive preset** (budget {o['budget_minutes']:.0f} minutes): {c['train_queries']:,} training "
               f"queries, {c['test_queries']:,} test queries, {c['seeds']} seeds: {c['seconds'] / 60:.0f} minutes "
               f"projected, smallest power {100 * c['min_power']:.0f}% "
               + ("(every comparison decided at 80%)" if c["decides"] else "(no size within the budget reaches "
                  "80% for every comparison: the largest that fits)") + (", a projected scale" if c["projected"]
                                                                          else "") + ".\n"
               f"\n**Web30k size** ({WEB30K_TRAIN:,} / {WEB30K_TEST:,} queries, projected): spreads "
               + ", ".join(f"{k} {_pct(v)}" for k, v in w["sd"].items()) +
               f"; {w['seconds_per_seed'] / 60:.0f} minutes per seed on this machine.\n")
  return "".join(parts)


def plot(res: RunRecord, path: str) -> None:
  """Relative spread against training queries, per loss: measured (markers) and fitted (lines), at the pilot's test
  size and at Web30k's."""
  plt = plots.pyplot()
  a = analysis(res)
  losses = list(a["components"])
  fig, axes = plt.subplots(1, len(losses), figsize=(6 * len(losses), 4), squeeze=False)
  x = np.geomspace(DEFAULT_QUERIES[0] * min(float(s) for s in res["points"]), WEB30K_TRAIN, 50)
  web_q = a["web30k"]["test_positive"]
  for ax, loss in zip(axes[0], losses):
    for i, b in enumerate(COMPARED):
      f = a["fits"][loss][b]
      ax.plot(x, [100 * projected_spread(f, {}, v / DEFAULT_QUERIES[0], web_q) for v in x], "--", color=f"C{i}")
      ax.plot([p[loss]["train_groups"] for p in res["points"].values()],
              [100 * spread(c[b], web_q) for c in a["components"][loss].values()], "o", color=f"C{i}",
              label=f"PFD vs {rows_lib.title(b, short=True)}")
    for n in (5, 10, 20):
      ax.axhline(100 * threshold(n, res["config"]["options"]["change"]), color="gray", lw=0.6, ls=":")
      ax.text(x[0], 100 * threshold(n, res["config"]["options"]["change"]), f"{n} seeds", fontsize=7, va="bottom")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_title(f"{loss}: at {WEB30K_TEST:,} test queries (lines: fitted)")
    ax.set_xlabel("training queries")
    ax.set_ylabel("spread of the paired change (%)")
    ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def threshold(n: int, change: float) -> float:
  """The largest relative spread at which n seeds give 80% power for `change` (bisection on stats.power)."""
  lo, hi = 1e-6, 10.0
  for _ in range(60):
    mid = (lo + hi) / 2
    lo, hi = (mid, hi) if stats.power(n, change, mid) >= 0.8 else (lo, mid)
  return lo


PRESETS = (Preset("default", "synthetic", "", "Power study: Table 2's paired spreads against training size, test "
                  "size and seeds (pilot seeds)"),)

DRIVER = schema.Driver("power", run, to_markdown, plot, "power.png", options=Options,
                       defaults=(("loss", "both"), ("seed", 1000)),
                       losses=("rankbce", "ranknet", "both"),
                       rows=lambda cfg: len(cfg.losses) * len(cfg.options.scales) * distill.num_rows(distill.METHODS),
                       presets=PRESETS)

if __name__ == "__main__":
  lifecycle.main(DRIVER)
