r"""Table 6 of the paper: the PFD teacher served with imputed privileged features vs the regular-only model.

  python -m experiments.table6_imputation                    # synthetic default, RankBCE
  python -m experiments.table6_imputation --dataset=ohsumed

At test time the teacher's privileged inputs are replaced by zero or by their training mean (over real
training documents, after the log1p transform). Writes results/table6_imputation/<dataset>/latest/.
"""
import time

import jax.numpy as jnp
import numpy as np

from experiments import common
from pfd_jax import train as T

ROWS = {"zero": "Zero imputation", "mean": "Mean imputation", "teacher": "PFD teacher with true z*",
        "no_distill": "Baseline: trained with no privileged features",
        "lambdamart": "LambdaMART (regular features; LightGBM)"}


def run(cfg: common.Config) -> dict:
  t0 = time.time()
  rows = {k: [] for k in ROWS}
  for f in common.pfd_folds(cfg):
    rows["no_distill"].append(f.baseline.best["test"])
    if (lm := f.lambdamart()) is not None:
      rows["lambdamart"].append(lm.best["test"])
    rows["teacher"].append(f.teacher.best["test"])
    test = f.dd.eval_sets["test"]
    rows["zero"].append(T.evaluate(f.tc, f.teacher.params, test, "xz", jnp.zeros(())))
    rows["mean"].append(T.evaluate(f.tc, f.teacher.params, test, "xz", jnp.asarray(f.ds["train"].z.mean(0))))
  rows = {k: np.concatenate(v) for k, v in rows.items() if v}
  return {"config": cfg, "env": common.environment(), "rows": rows, "comparisons": common.compare(rows, "no_distill"),
          "seconds": time.time() - t0}


def to_markdown(res: dict) -> str:
  cfg = res["config"]
  return (f"# Table 6: PFD teacher with imputed privileged features ({common.title(cfg)})\n\n"
          f"Mean ± std over folds x {cfg['run']['seeds']} seeds; * uses the real privileged features (not servable); "
          f"{res['seconds']:.0f} s.\n\n" +
          common.mean_std_table(res["rows"], ROWS, reference="no_distill", seeds=cfg["run"]["seeds"]))


def plot(res: dict, path: str) -> None:
  common.bar_plot(res, path, ROWS)


DRIVER = common.Driver("table6_imputation", run, to_markdown, plot, "table6.png",
                       rows=lambda cfg: 3 * len(common.folds_of(cfg.data)))

if __name__ == "__main__":
  common.main(DRIVER)
