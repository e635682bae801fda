r"""Table 5 of the paper: PFD's data loss on positive query groups only vs on all query groups.

  python -m experiments.paper.table5_positive_groups               # synthetic default, RankBCE
  python -m experiments.paper.table5_positive_groups --dataset=ohsumed

The PFD teacher (trained on the positive groups) is shared; the student's data term of Eq. 1 covers either
the positive groups (the paper's default, appendix A.5) or every group. The no-distillation baseline is
reported for scale. Writes results/table5_positive_groups/<dataset>/latest/.
"""
import time


from experiments.framework.records import RunRecord
from experiments.framework import ablation, lifecycle, schema, tabulate
from pfd_jax.methods import distill

ROWS = {"no_distill": "No-distillation", "pfd_positive": "PFD, data loss on positive query groups",
        "pfd_all": "PFD, data loss on all query groups", "lambdamart": "LambdaMART (regular features; LightGBM)"}


def run(cfg: schema.Config) -> RunRecord:
  t0 = time.time()
  rows = {k: [] for k in ROWS}
  for f in ablation.pfd_folds(cfg):
    f.add_references(rows)
    targets = distill.teacher_targets(f.tc, [(f.teacher, "xz")], f.dd)
    for groups in ("positive", "all"):
      tcg = cfg.train_config(data_groups=groups)
      st = f.rows(f"pfd_{groups}", "x", tcg, lambda: distill.train_student(f.keys, tcg, f.dd, targets,
                                                                          f.log(f"pfd_{groups}")))
      rows[f"pfd_{groups}"].append(st.best["test"])
  # the extra field: PFD with the data loss on all groups against positive groups only
  return ablation.results(cfg, rows, t0,
                          all_vs_positive=lambda r: tabulate.compare(r, "pfd_positive")["pfd_all"])


def to_markdown(res: RunRecord) -> str:
  cfg = res["config"]
  return (f"# Table 5: data loss on positive vs all query groups ({tabulate.title(cfg)})\n\nMean ± std "
          f"over folds x {cfg['run']['seeds']} seeds, {cfg['train']['epochs']} epochs; {res['seconds']:.0f} s.\n\n" +
          tabulate.mean_std_table(res["rows"], ROWS, reference="no_distill", seeds=cfg["run"]["seeds"]) +
          "\nPFD, all vs positive query groups: " + tabulate.change_cell(res["all_vs_positive"]) + "\n")


DRIVER = ablation.driver("table5_positive_groups", run, to_markdown, title="Table 5: positive vs all query groups",
                         rows_per_fold=5, bars=ROWS, png="table5.png", redrawn=True)

if __name__ == "__main__":
  lifecycle.main(DRIVER)
