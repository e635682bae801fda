r"""Figure 4 of the paper: self-distillation and PFD relative to no-distillation as positives get sparser.

  python -m experiments.paper.fig4_sparsity                        # synthetic default, RankBCE
  python -m experiments.paper.fig4_sparsity --taus=4.8,4.0,3.0,2.0,1.0,0.4 --dataset=web30k --data_dir=...

tau_target is swept (the paper goes from 4.8 down to 0.4); the labels are redrawn with the same label seed
for every tau, the privileged split is redone on each tau's labels (the paper's recipe), and the x-axis is
the measured share of positive training groups. Writes results/fig4_sparsity/<dataset>/latest/.
"""
import dataclasses
import time
from typing import Tuple

import numpy as np

from experiments.framework.records import RunRecord
from experiments.framework import fold_data, lifecycle, monitor, plots, protocol, rowstore, rundir, schema, tabulate
from experiments.framework.schema import Preset
from pfd_jax.methods import distill
from pfd_jax.methods import rows as rows_lib
from pfd_jax.config import option

TAUS = (4.8, 4.4, 3.6, 2.4)
METHODS = ("self_distill", "pfd", "placebo")


# The rows the figure reads beside the --methods ones: the baseline, the PFD student (its own columns) and the
# placebo control (its column 'PFD vs placebo'), as the row registry declares them.
BASE, PFD_ROW, CONTROL = rows_lib.baseline(), rows_lib.primary().name, rows_lib.control()
VS_CONTROL = f"{PFD_ROW}_vs_{CONTROL}"  # pfd_vs_placebo
SELF = "self_distill"  # the row of the paper's second Figure 4 claim (its gain grows with sparsity against PFD's)


@dataclasses.dataclass(frozen=True)
class Options:
  taus: Tuple[float, ...] = option(TAUS, "Values of tau_target.")
  methods: Tuple[str, ...] = option(METHODS, "Methods at each tau (placebo: the PFD teacher and student on "
                                    "permuted privileged features, --placebo_within; any MLP row registered in "
                                    "pfd_jax.methods.rows).", choices=lambda: rows_lib.methods(one_process=False)[1:])


def run(cfg: schema.Config) -> RunRecord:
  t0 = time.time()
  out = RunRecord(config=cfg, env=rundir.environment(), taus={})
  for tau in cfg.options.taus:
    rows, pos = {}, []
    for fold in fold_data.folds_of(cfg.data):
      ds, dd, tc, keys = fold_data.fold_setup(cfg.replace(data=dict(tau=tau)), None, fold)
      pos.append(100.0 * dd.num_positive_groups / dd.num_train_groups)
      store = rowstore.RowStore(cfg, ds, fold)
      r = distill.run_methods(keys, tc, dd, cfg.options.methods,
                              hooks=monitor.progress(f"[tau={tau} fold{fold}]"),
                              fit=store.fit(f"tau{tau}_"),
                              placebo=fold_data.placebo_data(cfg, ds, tc, fold))
      for name, res in r.items():
        rows.setdefault(name, []).append(res.best["test"])
    rows = {k: np.concatenate(v) for k, v in rows.items()}
    base = rows[BASE][:, 0].mean()
    out["taus"][str(tau)] = dict(positive_groups_pct=float(np.mean(pos)), rows=rows,
                                 relative={k: tabulate.ratio(v[:, 0].mean(), base) for k, v in rows.items()},
                                 comparisons=tabulate.compare(rows, BASE),
                                 **({VS_CONTROL: tabulate.compare(rows, CONTROL)[PFD_ROW]}
                                    if {PFD_ROW, CONTROL} <= set(rows) else {}))
  out["seconds"] = time.time() - t0
  return out


def to_markdown(res: RunRecord) -> str:
  cfg = res["config"]
  first = next(iter(res["taus"].values()))
  names = rows_lib.table_order(first["rows"])
  students = [k for k in names if k != BASE and not rows_lib.is_teacher(k)]
  placebo = VS_CONTROL in first
  rows = []
  for tau, r in res["taus"].items():
    nd = r["rows"]
    cmp = r.get("comparisons") or tabulate.compare(nd, BASE)
    runs = len(nd[BASE])
    rows.append([tau, f"{r['positive_groups_pct']:.1f}%"] +
                [f"{np.asarray(nd[k])[:, 0].mean():.3f} ("
                 + ("n/a" if r['relative'][k] is None else f"{r['relative'][k]:.3f}") + ")" for k in names] +
                [tabulate.change_cell(cmp[k]) for k in students if k != PFD_ROW] +
                (tabulate.change_cells(cmp[PFD_ROW], runs // cfg["run"]["seeds"]) if PFD_ROW in students else []) +
                ([tabulate.change_cell(r[VS_CONTROL])] if placebo else []))
  runs = len(first["rows"][BASE])
  return (f"# Figure 4: gains against label sparsity ({tabulate.title(cfg)})\n\nTest NDCG@8 (relative to "
          f"no-distillation), mean over folds x {cfg['run']['seeds']} seeds, {cfg['train']['epochs']} epochs; "
          f"{res['seconds']:.0f} s.\n" + tabulate.stats_note("no-distillation (of the same tau)", runs,
                                                          max(1, runs // cfg["run"]["seeds"])) +
          ("PFD vs placebo: the PFD student against the placebo student of the same tau (privileged rows permuted), "
           "paired by run: the privileged information's gain beyond distillation.\n" if placebo else "") +
          "\n" + tabulate.markdown_table(
              ["tau_target", "positive train groups"] + [rows_lib.title(k, short=True) for k in names] +
              [f"{rows_lib.title(k, short=True)} vs no-distillation (runs)" for k in students if k != PFD_ROW] +
              (["PFD vs no-distillation (runs)", "PFD: " + tabulate.change_header("", 8)[1]] if PFD_ROW in students
               else []) + (["PFD vs placebo (runs)"] if placebo else []), rows))


def plot(res: RunRecord, path: str) -> None:
  plt = plots.pyplot()
  taus = res["taus"].values()
  x = np.array([r["positive_groups_pct"] for r in taus])
  fig, ax = plt.subplots(figsize=(6, 4))
  for k in rows_lib.table_order(next(iter(taus))["relative"]):
    if k != BASE and not rows_lib.is_teacher(k):
      ax.plot(x, [np.nan if r["relative"][k] is None else r["relative"][k] for r in taus], "o-", label=rows_lib.title(k, short=True))
  ax.axhline(1.0, color="gray", ls="--", label="no-distillation")
  plots.finish_plot(fig, ax, res, path, "% positive training query groups", "test NDCG@8 / no-distillation")


DRIVER = schema.Driver("fig4_sparsity", run, to_markdown, plot, "fig4_sparsity.png", options=Options,
                       rows_per_fold=lambda cfg: len(cfg.options.taus) * distill.num_rows(cfg.options.methods),
                       presets=(Preset("default", "synthetic", "", "Figure 4: label sparsity"),
                                protocol.redrawn_preset("Figure 4: label sparsity")))

if __name__ == "__main__":
  lifecycle.main(DRIVER)
