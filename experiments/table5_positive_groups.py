r"""Table 5 of the paper: PFD's data loss on positive query groups only vs on all query groups.

  python -m experiments.table5_positive_groups               # synthetic default, RankBCE
  python -m experiments.table5_positive_groups --dataset=ohsumed

The PFD teacher (trained on the positive groups) is shared; the student's data term of Eq. 1 covers either
the positive groups (the paper's default, appendix A.5) or every group. The no-distillation baseline is
reported for scale. Writes results/table5_positive_groups/<dataset>/latest/.
"""
import time

import numpy as np

from experiments.framework import ablation, lifecycle, plots, rundir, schema, setup, tabulate
from experiments.framework.claims import Preset, beats, runs_per_fold
from pfd_jax.methods import distill

ROWS = {"no_distill": "No-distillation", "pfd_positive": "PFD, data loss on positive query groups",
        "pfd_all": "PFD, data loss on all query groups", "lambdamart": "LambdaMART (regular features; LightGBM)"}


def run(cfg: schema.Config) -> dict:
  t0 = time.time()
  rows = {k: [] for k in ROWS}
  for f in ablation.pfd_folds(cfg):
    rows["no_distill"].append(f.baseline.best["test"])
    if (lm := f.lambdamart()) is not None:
      rows["lambdamart"].append(lm.best["test"])
    targets = distill.teacher_targets(f.tc, [(f.teacher, "xz")], f.dd)
    for groups in ("positive", "all"):
      tcg = cfg.train_config(data_groups=groups)
      st = f.rows(f"pfd_{groups}", "x", tcg, lambda: distill.train_student(f.keys, tcg, f.dd, targets,
                                                                          f.log(f"pfd_{groups}")))
      rows[f"pfd_{groups}"].append(st.best["test"])
  rows = {k: np.concatenate(v) for k, v in rows.items() if v}
  return {"config": cfg, "env": rundir.environment(), "rows": rows, "comparisons": tabulate.compare(rows, "no_distill"),
          "all_vs_positive": tabulate.compare(rows, "pfd_positive")["pfd_all"], "seconds": time.time() - t0}


def to_markdown(res: dict) -> str:
  cfg = res["config"]
  return (f"# Table 5: data loss on positive vs all query groups ({tabulate.title(cfg)})\n\nMean ± std "
          f"over folds x {cfg['run']['seeds']} seeds, {cfg['train']['epochs']} epochs; {res['seconds']:.0f} s.\n\n" +
          tabulate.mean_std_table(res["rows"], ROWS, reference="no_distill", seeds=cfg["run"]["seeds"]) +
          "\nPFD, all vs positive query groups: " + tabulate.change_cell(res["all_vs_positive"]) + "\n")


def plot(res: dict, path: str) -> None:
  plots.bar_plot(res, path, ROWS)


def claims(res: dict) -> list:
  """The claims of a run of this driver, with their verdicts (:mod:`experiments.framework.claims`)."""
  rows = res["rows"]
  f = runs_per_fold(len(rows["no_distill"]), res)
  return [beats("Data loss on positive groups beats all groups (paper, Table 5)", rows, "pfd_positive", "pfd_all", f),
          beats("PFD (positive groups) beats no-distillation", rows, "pfd_positive", "no_distill", f)]


DRIVER = schema.Driver("table5_positive_groups", run, to_markdown, plot, "table5.png",
                       rows=lambda cfg: 5 * len(setup.folds_of(cfg.data)),
                       presets=(Preset("default", "synthetic", "", "Table 5: positive vs all query groups"),),
                       claims=claims)

if __name__ == "__main__":
  lifecycle.main(DRIVER)
