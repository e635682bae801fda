r"""PFD x teacher loss: one privileged teacher (x + z) teaching its student through each way of teaching.

  python -m experiments.paper.pfd_teacher_loss                      # synthetic default, RankBCE data loss
  python -m experiments.paper.pfd_teacher_loss --dataset=ohsumed

The combination none of the papers ran. Per fold, the no-distillation baseline and the PFD teacher are
trained once (as in Table 2); then a student on x alone for every --teachings entry
(:data:`pfd_jax.training.teaching.REGISTRY`): pointwise = RankBCE on sigmoid(t) (the paper's PFD), pairwise =
RankNet on sigmoid(t), listwise = SDR's softmax on max(a t + b, 0) (--transform_a/b), topk = Ranking
Distillation's weighted top-K positives among y = 0 documents (--topk_* flags). The data term stays the
student's --loss on the positive groups; alpha weights it (Eq. 1). Writes results/pfd_teacher_loss/<dataset>/latest/.
"""
import dataclasses
import time
from typing import Tuple

import numpy as np

from experiments.framework.records import RunRecord
from experiments.framework import ablation, lifecycle, plots, schema, tabulate
from pfd_jax.methods import distill
from pfd_jax.methods import rows as rows_lib
from pfd_jax.config import option
from pfd_jax.training import teaching as teaching_lib


@dataclasses.dataclass(frozen=True)
class Options:
  teachings: Tuple[str, ...] = option(teaching_lib.REGISTRY.names(), "Ways of teaching (rows; any way "
                                      "registered in pfd_jax.training.teaching.REGISTRY).",
                                      choices=lambda: teaching_lib.REGISTRY.names())

REFERENCES = {"no_distill": "No-distillation", "pfd_teacher": "PFD teacher* (x + z)",
              "lambdamart": "LambdaMART (regular features; LightGBM)"}


def label(name: str) -> str:
  """A row's title: a reference row's, or its teaching's (pfd_jax.training.teaching)."""
  return REFERENCES.get(name) or teaching_lib.REGISTRY[name].title or name


def run(cfg: schema.Config) -> RunRecord:
  t0 = time.time()
  rows = {k: [] for k in ["no_distill", "pfd_teacher"] + list(cfg.options.teachings) + ["lambdamart"]}
  for f in ablation.pfd_folds(cfg):
    f.add_references(rows)
    rows["pfd_teacher"].append(f.teacher.best["test"])
    logits = distill.teacher_targets(f.tc, [(f.teacher, "xz")], f.dd)
    for name in cfg.options.teachings:
      tc = teaching_lib.REGISTRY[name].apply(cfg.train_config())
      st = f.rows(f"pfd_{name}", "x", tc, lambda: distill.train_student(f.keys, tc, f.dd, logits,
                                                                        f.log(f"pfd {name}")))
      rows[name].append(st.best["test"])
  return ablation.results(cfg, rows, t0)


def to_markdown(res: RunRecord) -> str:
  cfg = res["config"]
  tr = cfg["train"]
  tk = tr["topk"]
  rows = {k: np.asarray(v) for k, v in res["rows"].items()}
  base = rows["no_distill"][:, 0].mean()
  labels = {k: label(k) + ("" if k == rows_lib.baseline() else f" [{tabulate.fmt_change(rows[k][:, 0].mean(), base)}]")
            for k in rows}
  return (f"# PFD x teacher loss ({tabulate.title(cfg)} data loss)\n\n"
          f"Mean ± std over folds x {cfg['run']['seeds']} seeds, {tr['epochs']} epochs, alpha = {tr['alpha']}, best "
          f"epoch on {tr['select_on']}; [NDCG@8 change vs no-distillation]; affine g = max({tr['transform_a']} t"
          f" + {tr['transform_b']}, 0); top-K: K = {tk['k']}, {tk['scheme']} weights, lambda = {tk['lam']}, "
          f"mu = {tk['mu']}, eps = {tk['eps']}. {res['seconds']:.0f} s.\n\n"
          + tabulate.mean_std_table(rows, labels, reference="no_distill", seeds=cfg['run']['seeds']))


DRIVER = ablation.driver("pfd_teacher_loss", run, to_markdown, title="Ablation: how the PFD teacher teaches",
                         rows_per_fold=lambda cfg: 3 + len(cfg.options.teachings),
                         plot=lambda res, path: plots.bar_plot(res, path, {k: label(k) for k in res["rows"]}),
                         options=Options)

if __name__ == "__main__":
  lifecycle.main(DRIVER)
