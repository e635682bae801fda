r"""Table 6 of the paper: the PFD teacher served with imputed privileged features vs the regular-only model.

  python -m experiments.paper.table6_imputation                    # synthetic default, RankBCE
  python -m experiments.paper.table6_imputation --dataset=ohsumed

At test time the teacher's privileged inputs are replaced by zero or by their training mean (over real
training documents, after the log1p transform). Writes results/table6_imputation/<dataset>/latest/.
"""
import time

import jax.numpy as jnp

from experiments.framework.records import RunRecord
from experiments.framework import ablation, lifecycle, schema, tabulate
from experiments.framework.claims import PFD, beats, runs_per_fold
from experiments.framework.declared import Declared, declare
from pfd_jax import training as T

ROWS = {"zero": "Zero imputation", "mean": "Mean imputation", "teacher": "PFD teacher with true z*",
        "no_distill": "Baseline: trained with no privileged features",
        "lambdamart": "LambdaMART (regular features; LightGBM)"}


def run(cfg: schema.Config) -> RunRecord:
  t0 = time.time()
  rows = {k: [] for k in ROWS}
  for f in ablation.pfd_folds(cfg):
    f.add_references(rows)
    rows["teacher"].append(f.teacher.best["test"])
    test = f.dd.eval_sets["test"]
    rows["zero"].append(T.evaluate(f.tc, f.teacher.params, test, "xz", jnp.zeros(())))
    rows["mean"].append(T.evaluate(f.tc, f.teacher.params, test, "xz", jnp.asarray(f.ds["train"].z.mean(0))))
  return ablation.results(cfg, rows, t0)


IMPUTED = ("mean", "zero")
CLAIMS = declare(*(Declared(f"table6:no_distill-vs-{how}-imputed", f"No-distillation beats the PFD teacher served "
                            f"with {how}-imputed z (paper, Table 6)", source=PFD) for how in IMPUTED))


def claims(res: RunRecord) -> list:
  """The claims of a run of this driver, with their verdicts (:mod:`experiments.framework.claims`)."""
  rows = res["rows"]
  f = runs_per_fold(len(rows["no_distill"]), res)
  return [CLAIMS[f"table6:no_distill-vs-{how}-imputed"].judged(beats, rows, "no_distill", how, f) for how in IMPUTED]


def to_markdown(res: RunRecord) -> str:
  cfg = res["config"]
  return (f"# Table 6: PFD teacher with imputed privileged features ({tabulate.title(cfg)})\n\n"
          f"Mean ± std over folds x {cfg['run']['seeds']} seeds; * uses the real privileged features (not servable); "
          f"{res['seconds']:.0f} s.\n\n" +
          tabulate.mean_std_table(res["rows"], ROWS, reference="no_distill", seeds=cfg["run"]["seeds"]))


DRIVER = ablation.driver("table6_imputation", run, to_markdown, title="Table 6: the teacher served with imputed z",
                         rows_per_fold=3, claims=claims, declared=CLAIMS, bars=ROWS, png="table6.png", redrawn=True)

if __name__ == "__main__":
  lifecycle.main(DRIVER)
