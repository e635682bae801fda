r"""Figure 3 of the paper: PFD student NDCG@8 against alpha, and against the teacher / data loss ratio.

  python -m experiments.paper.fig3_alpha                       # synthetic default, RankBCE
  python -m experiments.paper.fig3_alpha --dataset=ohsumed --alphas=0.3,0.5,0.9
  python -m experiments.paper.fig3_alpha --preset=yahoo_like_redrawn   # the Yahoo analogue, Figure 3's data

One PFD teacher per fold (and the no-distillation baseline) is trained once; a student is trained for every
alpha. The loss ratio is (1 - alpha) * teacher term / (alpha * data term), both summed over the best epoch of
each seed (the paper's right-hand plot puts PFD's NDCG against this ratio). Writes results/fig3_alpha/<dataset>/latest/.
"""
import dataclasses
import time
from typing import Tuple

import numpy as np

from experiments.framework.records import RunRecord
from experiments.framework import ablation, lifecycle, plots, protocol, rundir, schema, tabulate
from pfd_jax.methods import distill
from pfd_jax.config import option

ALPHAS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 0.999)
# Where the paper claims robustness: "for all alpha <= 0.95, PFD can deliver an over 2.5% improvement in NDCG@8"
# (appendix A.7, Istella; 2.6% on Web30k). Beyond it PFD tends to no-distillation (alpha = 1 is the data loss
# alone), so no gain is claimed there. The 2.5% is Istella's size of the gain, not a threshold for other data: the
# claim tested is a gain (superiority) at every alpha up to 0.95.
PAPER_MAX_ALPHA = 0.95
# The alphas appendix A.7 lists ("we adopted a list of alpha: [0.3, 0.5, 0.7, 0.9, 0.95, 0.99, 0.999]"): the grid of
# the run on the Yahoo analogue, Figure 3's data (section 4.2: "The experiments here use the Yahoo dataset and
# RankBCE loss"), so that its sweep reaches the end where PFD tends to no-distillation, as the paper's does.
PAPER_ALPHAS = (0.3, 0.5, 0.7, 0.9, 0.95, 0.99, 0.999)


@dataclasses.dataclass(frozen=True)
class Options:
  alphas: Tuple[float, ...] = option(ALPHAS, "Values of alpha (Eq. 1 weight of the data loss).", lo=0, hi=1,
                                     lo_open=True)


def run(cfg: schema.Config) -> RunRecord:
  """Per alpha: the PFD student's best NDCG (pooled over folds x seeds) and the loss ratio."""
  t0 = time.time()
  base, rows = [], {a: dict(ndcg=[], ratio=[]) for a in cfg.options.alphas}
  for f in ablation.pfd_folds(cfg):
    base.append(f.baseline.best["test"])
    targets = distill.teacher_targets(f.tc, [(f.teacher, "xz")], f.dd)
    alphas = cfg.options.alphas
    students = f.rows.many([(f"pfd_alpha{a}", "x", cfg.train_config(alpha=a)) for a in alphas],
                           lambda: distill.train_student(f.keys, f.tc, f.dd, targets, f.log("pfd alphas"),
                                                         variants=[dict(alpha=a) for a in alphas]))
    for a, st in zip(alphas, students):  # all alphas x seeds trained side by side in one program
      at_best = st.loss[np.arange(st.loss.shape[0]), st.best_epoch]  # [S, 3] total, data, teacher
      rows[a]["ndcg"].append(st.best["test"])
      rows[a]["ratio"].append((1 - a) * at_best[:, 2] / np.maximum(a * at_best[:, 1], 1e-12))
  base = np.concatenate(base)
  out = RunRecord(config=cfg, env=rundir.environment(), no_distill=base, alphas={})
  for a, r in rows.items():
    nd, ratio = np.concatenate(r["ndcg"]), np.concatenate(r["ratio"])
    out["alphas"][str(a)] = dict(ndcg=nd, ratio=ratio, gain=tabulate.ratio(nd[:, 0].mean(), base[:, 0].mean()),
                                 comparison=tabulate.compare(dict(no_distill=base, pfd=nd), "no_distill")["pfd"])
  out["seconds"] = time.time() - t0
  return out


def to_markdown(res: RunRecord, title: str = "Figure 3: PFD against alpha") -> str:
  cfg, base = res["config"], np.asarray(res["no_distill"])
  tr = cfg["train"]
  rows = []
  folds = max(1, len(base) // cfg["run"]["seeds"])
  for a, r in res["alphas"].items():
    nd, ratio = np.asarray(r["ndcg"]), np.asarray(r["ratio"])
    cmp = r.get("comparison") or tabulate.compare(dict(no_distill=base, pfd=nd), "no_distill")["pfd"]
    rows.append([a, tabulate.fmt_pm(nd[:, 0].mean(), nd[:, 0].std())] + tabulate.change_cells(cmp, folds) +
                [f"{np.median(ratio):.2f}"])
  return (f"# {title} ({tabulate.title(cfg)})\n\nNo-distillation NDCG@8 "
          f"{base[:, 0].mean():.3f} ± {base[:, 0].std():.3f}; mean ± std over folds x seeds ({cfg['run']['seeds']} "
          f"seeds, {tr['epochs']} epochs, best epoch on {tr['select_on']}); {res['seconds']:.0f} s.\n" +
          tabulate.stats_note("no-distillation", len(base), folds) + "\n" +
          tabulate.markdown_table(["alpha", "PFD NDCG@8"] + tabulate.change_header("no-distillation", 8) +
                                ["(1-a) teacher loss / (a data loss), median"], rows))


def plot(res: RunRecord, path: str) -> None:
  plt = plots.pyplot()
  a = np.array([float(k) for k in res["alphas"]])
  nd = np.array([np.asarray(r["ndcg"])[:, 0].mean() for r in res["alphas"].values()])
  sd = np.array([np.asarray(r["ndcg"])[:, 0].std() for r in res["alphas"].values()])
  ratio = np.array([np.median(r["ratio"]) for r in res["alphas"].values()])
  base = np.asarray(res["no_distill"])[:, 0].mean()
  fig, axes = plt.subplots(1, 2, figsize=(10, 4))
  for ax, x, lab in ((axes[0], a, "alpha"), (axes[1], ratio, "(1-alpha) teacher loss / (alpha data loss)")):
    ax.errorbar(x, nd, yerr=sd, fmt="o-", label="PFD student")
    ax.axhline(base, color="gray", ls="--", label="no-distillation")
    ax.set_xlabel(lab)
    ax.set_ylabel("test NDCG@8")
    ax.legend(fontsize=8)
  axes[1].set_xscale("log")
  fig.suptitle(tabulate.title(res["config"]))
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


DRIVER = ablation.driver("fig3_alpha", run, to_markdown, title="Figure 3: alpha", plot=plot, options=Options,
                         rows_per_fold=lambda cfg: 2 + len(cfg.options.alphas),
                         redrawn=True, presets=(protocol.analogue_redrawn_preset(
                             "Figure 3: alpha", "yahoo_like", "rankbce",
                             f"--alphas={','.join(f'{a:g}' for a in PAPER_ALPHAS)}"),))

if __name__ == "__main__":
  lifecycle.main(DRIVER)
