r"""Figure 4 of the paper: self-distillation and PFD relative to no-distillation as positives get sparser.

  python -m experiments.fig4_sparsity                        # synthetic default, RankBCE
  python -m experiments.fig4_sparsity --taus=4.8,4.0,3.0,2.0,1.0,0.4 --dataset=web30k --data_dir=...

tau_target is swept (the paper goes from 4.8 down to 0.4); the labels are redrawn with the same label seed
for every tau, the privileged split is redone on each tau's labels (the paper's recipe), and the x-axis is
the measured share of positive training groups. Writes results/fig4_sparsity/<dataset>/latest/.
"""
import dataclasses
import time
from typing import Tuple

import numpy as np

from experiments.framework import lifecycle, monitor, plots, rowstore, rundir, schema, setup, tabulate
from experiments.framework.claims import PFD, Preset, runs_per_fold, sweep, trend
from pfd_jax.methods import distill
from pfd_jax.methods import rows as rows_lib
from pfd_jax.config import option

TAUS = (4.8, 4.4, 3.6, 2.4)
METHODS = ("self_distill", "pfd", "placebo")


@dataclasses.dataclass(frozen=True)
class Options:
  taus: Tuple[float, ...] = option(TAUS, "Values of tau_target.")
  methods: Tuple[str, ...] = option(METHODS, "Methods at each tau (placebo: the PFD teacher and student on "
                                    "permuted privileged features, --placebo_within; any MLP row registered in "
                                    "pfd_jax.methods.rows).", choices=lambda: rows_lib.methods("mlp")[1:])


def run(cfg: schema.Config) -> dict:
  t0 = time.time()
  out = {"config": cfg, "env": rundir.environment(), "taus": {}}
  for tau in cfg.options.taus:
    rows, pos = {}, []
    for fold in setup.folds_of(cfg.data):
      ds, dd, tc, keys = setup.fold_setup(cfg.replace(data=dict(tau=tau)), None, fold)
      pos.append(100.0 * dd.num_positive_groups / dd.num_train_groups)
      store = rowstore.Rows(cfg, ds, fold)
      r = distill.run_methods(keys, tc, dd, cfg.options.methods,
                              hooks=monitor.progress(f"[tau={tau} fold{fold}]"),
                              fit=store.fit(f"tau{tau}_"),
                              placebo=setup.placebo_data(cfg, ds, tc, fold))
      for name, res in r.items():
        rows.setdefault(name, []).append(res.best["test"])
    rows = {k: np.concatenate(v) for k, v in rows.items()}
    base = rows["no_distill"][:, 0].mean()
    out["taus"][str(tau)] = dict(positive_groups_pct=float(np.mean(pos)), rows=rows,
                                 relative={k: tabulate.ratio(v[:, 0].mean(), base) for k, v in rows.items()},
                                 comparisons=tabulate.compare(rows, "no_distill"),
                                 **({"pfd_vs_placebo": tabulate.compare(rows, "placebo")["pfd"]}
                                    if {"pfd", "placebo"} <= set(rows) else {}))
  out["seconds"] = time.time() - t0
  return out


def to_markdown(res: dict) -> str:
  cfg = res["config"]
  first = next(iter(res["taus"].values()))
  names = rows_lib.table_order(first["rows"])
  students = [k for k in names if k != "no_distill" and not rows_lib.is_teacher(k)]
  placebo = "pfd_vs_placebo" in first
  rows = []
  for tau, r in res["taus"].items():
    nd = r["rows"]
    cmp = r.get("comparisons") or tabulate.compare(nd, "no_distill")
    runs = len(nd["no_distill"])
    rows.append([tau, f"{r['positive_groups_pct']:.1f}%"] +
                [f"{np.asarray(nd[k])[:, 0].mean():.3f} ("
                 + ("n/a" if r['relative'][k] is None else f"{r['relative'][k]:.3f}") + ")" for k in names] +
                [tabulate.change_cell(cmp[k]) for k in students if k != "pfd"] +
                (tabulate.change_cells(cmp["pfd"], runs // cfg["run"]["seeds"]) if "pfd" in students else []) +
                ([tabulate.change_cell(r["pfd_vs_placebo"])] if placebo else []))
  runs = len(first["rows"]["no_distill"])
  return (f"# Figure 4: gains against label sparsity ({tabulate.title(cfg)})\n\nTest NDCG@8 (relative to "
          f"no-distillation), mean over folds x {cfg['run']['seeds']} seeds, {cfg['train']['epochs']} epochs; "
          f"{res['seconds']:.0f} s.\n" + tabulate.stats_note("no-distillation (of the same tau)", runs,
                                                          max(1, runs // cfg["run"]["seeds"])) +
          ("PFD vs placebo: the PFD student against the placebo student of the same tau (privileged rows permuted), "
           "paired by run: the privileged information's gain beyond distillation.\n" if placebo else "") +
          "\n" + tabulate.markdown_table(
              ["tau_target", "positive train groups"] + [rows_lib.title(k, short=True) for k in names] +
              [f"{rows_lib.title(k, short=True)} vs no-distillation (runs)" for k in students if k != "pfd"] +
              (["PFD vs no-distillation (runs)", "PFD: " + tabulate.change_header("", 8)[1]] if "pfd" in students
               else []) + (["PFD vs placebo (runs)"] if placebo else []), rows))


def plot(res: dict, path: str) -> None:
  plt = plots.pyplot()
  taus = res["taus"].values()
  x = np.array([r["positive_groups_pct"] for r in taus])
  fig, ax = plt.subplots(figsize=(6, 4))
  for k in rows_lib.table_order(next(iter(taus))["relative"]):
    if k != "no_distill" and not rows_lib.is_teacher(k):
      ax.plot(x, [np.nan if r["relative"][k] is None else r["relative"][k] for r in taus], "o-", label=rows_lib.title(k, short=True))
  ax.axhline(1.0, color="gray", ls="--", label="no-distillation")
  plots.finish_plot(fig, ax, res, path, "% positive training query groups", "test NDCG@8 / no-distillation")


def claims(res: dict) -> list:
  """The claims of a run of this driver, with their verdicts (:mod:`experiments.framework.claims`)."""
  taus = res["taus"]
  f = runs_per_fold(len(next(iter(taus.values()))["rows"]["no_distill"]), res)
  cmp = lambda key: {t: r["comparisons"][key] for t, r in taus.items() if key in r["comparisons"]}
  out = [sweep("PFD beats no-distillation at every tau_target (paper, Figure 4)", cmp("pfd"), f, source=PFD),
         sweep("Self-distillation beats no-distillation at every tau_target (ours: the paper cites it as known)",
               cmp("self_distill"), f),
         sweep("PFD beats the placebo at every tau_target (control)",
               {t: r["pfd_vs_placebo"] for t, r in taus.items() if "pfd_vs_placebo" in r}, f)]
  if all({"pfd", "self_distill"} <= set(r["rows"]) for r in taus.values()):
    x = [r["positive_groups_pct"] for r in taus.values()]
    gains = [(np.asarray(r["rows"]["pfd"])[:, 0] - np.asarray(r["rows"]["self_distill"])[:, 0]) /
             np.asarray(r["rows"]["self_distill"])[:, 0].mean() for r in taus.values()]
    out.append(trend("PFD's relative gain over self-distillation grows as the labels get sparser (per run: its slope "
                     "against the % of positive training groups is negative) (paper, Figure 4)", x, gains,
                     decreasing=True, source=PFD))
  return out


DRIVER = schema.Driver("fig4_sparsity", run, to_markdown, plot, "fig4_sparsity.png", options=Options,
                       rows_per_fold=lambda cfg: len(cfg.options.taus) * distill.num_rows(cfg.options.methods),
                       presets=(Preset("default", "synthetic", "", "Figure 4: label sparsity"),),
                       claims=claims)

if __name__ == "__main__":
  lifecycle.main(DRIVER)
