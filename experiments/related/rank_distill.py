r"""Ranking Distillation (Tang & Wang, KDD 2018): a larger teacher's top-K unlabelled documents teach a compact
student. Rows of RD's Table 2 (teacher, student alone, student with RD) and Table 4 (weighting schemes), with
RD's Table 3 efficiency columns (parameters, scoring time).

  python -m experiments.related.rank_distill                          # synthetic default, RankBCE
  python -m experiments.related.rank_distill --dataset=ohsumed --teacher_hidden=200 --student_hidden=50

RD's setting on the PFD paper's data: binary Gumbel labels; every feature is an input (no privileged
split); groups without a y = 1 are the "unlabelled" ones (as in the PFD paper's appendix A.5). The teacher
(width --teacher_hidden) and the student alone train on the data loss over the positive groups; the RD
student adds, on every group, the top-K loss of :mod:`pfd_jax.ops.topk` over the teacher's top-K
documents among those with y = 0, with RD Eq. 4 weight a = --rd_a on it (our alpha = 1 - a).

Metrics on test at each run's best epoch (by NDCG@10 on --select_on): NDCG, P@k and MAP at k = 3, 5, 10.
Scoring time: one seed's model scoring the whole test split, jitted and warmed up, fastest of 50 repeats, per
1,000 documents. Writes results/rank_distill/<dataset>/latest/{results.json, table.md, rank_distill.png}.
"""
import dataclasses
import time
from typing import Any, Mapping, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from experiments.framework.records import RunRecord
from experiments.framework import (deploy, fold_data, lifecycle, monitor, plots, protocol, rowstore, rundir, schema,
                                   tabulate)
from experiments.framework.schema import Preset
from pfd_jax.methods import distill
from pfd_jax.ops import models
from pfd_jax.ops import topk as rank_distill
from pfd_jax import training as training_lib
from pfd_jax.config import option


@dataclasses.dataclass(frozen=True)
class Options:
  teacher_hidden: int = option(100, "Teacher MLP width.", lo=1)
  student_hidden: int = option(60, "Student MLP width.", lo=1)
  rd_a: float = option(0.5, "RD Eq. 4 weight a of the distillation loss (alpha = 1 - a).", lo=0, hi=1)
  schemes: Tuple[str, ...] = option(("uniform", "inverse", "position", "hybrid"), "RD weighting schemes (rows).",
                                    choices=rank_distill.SCHEMES)


KS = (10, 3, 5)
METRIC_KS = (3, 5, 10)
SCHEME_NAMES = {"uniform": "w = 1/K", "inverse": "w = 1/r", "position": "w = w^a (Eq. 8)",
                "discrepancy": "w = w^b (Eq. 9)", "hybrid": "hybrid w^a w^b (3.2.3)"}


def scoring_ms_per_1000(tc: training_lib.TrainConfig, params, es: training_lib.EvalSet, repeats: int = 50) -> float:
  """Fastest of `repeats` wall times of one model scoring every test document in one jitted call, in ms per
  1,000 documents (the model's cost, not the per-bucket dispatch; the minimum filters out other load)."""
  one = jax.tree_util.tree_map(lambda a: a[:1], params)
  docs = jnp.concatenate([b["x"][b["mask"]] for b in es.buckets])[None]  # [1, N, d]
  run = lambda: jax.block_until_ready(training_lib.predict(tc, one, [dict(x=docs)], "x"))
  return 1e6 * deploy.wall_times(run, repeats).min() / docs.shape[1]


def run(cfg: schema.Config) -> RunRecord:
  t0 = time.time()
  rows, info = {}, {}
  o = cfg.options
  for fold in fold_data.folds_of(cfg.data):
    ds = fold_data.load_dataset(dataclasses.replace(cfg.data, num_privileged=0, privileged=""), fold)
    _, dd, tc_t, keys = fold_data.fold_setup(cfg, None, fold, ds=ds, ks=KS, hidden=o.teacher_hidden)
    tc_s = dataclasses.replace(tc_t, hidden=o.student_hidden, teacher_loss="topk", alpha=1.0 - o.rd_a)
    log = monitor.progress(f"[rd fold{fold}]")
    store = rowstore.RowStore(cfg, ds, fold)
    runs = {name: (store(name, "x", tc, lambda: distill.train_on_data(keys, tc, dd, "x", log(name))), tc)
            for name, tc in (("teacher", tc_t), ("student", tc_s))}
    targets = distill.teacher_targets(tc_s, [(runs["teacher"][0], "x", tc_t)], dd)
    for scheme in o.schemes:
      tc = dataclasses.replace(tc_s, topk=dataclasses.replace(tc_s.topk, scheme=scheme))
      runs[scheme] = (store(f"rd_{scheme}", "x", tc,
                            lambda: distill.train_student(keys, tc, dd, targets, log(f"rd {scheme}"))), tc)
    test = dd.eval_sets["test"]
    for name, (res, tc) in runs.items():
      rows.setdefault(name, []).append(training_lib.full_metrics(tc, res.params, test, "x", METRIC_KS))
      if name not in info:
        info[name] = dict(params=models.num_params(jax.tree_util.tree_map(lambda a: a[0], res.params)),
                          ms_per_1000_docs=scoring_ms_per_1000(tc, res.params, test), hidden=tc.hidden)
  rows = {name: {m: np.concatenate([f[m] for f in per_fold]) for m in per_fold[0]} for name, per_fold in rows.items()}
  return RunRecord(config=cfg, env=rundir.environment(), data=ds.config, topk=dataclasses.asdict(tc_s.topk),
                   rows=rows, comparisons=comparisons(rows), info=info, seconds=time.time() - t0)


def comparisons(rows: Mapping[str, Mapping[str, Any]]) -> tabulate.Comparisons:
  """Every model's test NDCG@10 against the student trained alone, paired by (fold, seed) run."""
  return tabulate.compare({n: np.asarray(v["NDCG@10"])[:, None] for n, v in rows.items()}, "student")


def to_markdown(res: RunRecord) -> str:
  cfg, rows, info = res["config"], res["rows"], res["info"]
  names = list(rows)
  metrics = list(rows[names[0]])
  p_teacher = info["teacher"]["params"]
  body = []
  ref = "student"
  cmp = res.get("comparisons") or comparisons(rows)
  folds = max(1, len(rows[ref]["NDCG@10"]) // cfg["run"]["seeds"])
  for n in names:
    label = {"teacher": "Teacher", "student": "Student alone"}.get(n, f"RD student, {SCHEME_NAMES.get(n, n)}")
    cells = [f"{np.mean(rows[n][m]):.4f} ± {np.std(rows[n][m]):.4f}" for m in metrics]
    body.append([label, f"{info[n]['params']:,} ({info[n]['params'] / p_teacher:.2f})",
                 f"{info[n]['ms_per_1000_docs']:.3f}"] + cells + tabulate.change_cells(cmp.get(n), folds))
  tk = res["topk"]
  o, tr = cfg["options"], cfg["train"]
  return (f"# Ranking Distillation on {cfg['data']['dataset']} ({cfg['run']['loss']} data loss)\n\n"
          f"Teacher width {o['teacher_hidden']}, student width {o['student_hidden']}, {tr['layers']} "
          f"layers; a = {o['rd_a']}, K = {tk['k']}, lambda = {tk['lam']}, mu = {tk['mu']}, eps = {tk['eps']}, "
          f"warm-up {tk['warmup'] if tk['warmup'] is not None else tr['epochs'] // 2} epochs. Mean ± std over "
          f"folds x {cfg['run']['seeds']} seeds, {tr['epochs']} epochs, best epoch by NDCG@10 on {tr['select_on']}; "
          f"scoring time = one model on the whole test split. {res['seconds']:.0f} s on {res['env']['backend']} "
          f"({res['env']['cpus']} CPUs).\n" + tabulate.stats_note("the student alone", len(rows[ref]["NDCG@10"]),
                                                             folds, 10) + "\n" +
          tabulate.markdown_table(["Model", "#params (ratio)", "ms / 1,000 docs"] + metrics +
                                tabulate.change_header("student alone", 10), body))


def plot(res: RunRecord, path: str) -> None:
  plt = plots.pyplot()
  rows = res["rows"]
  names = list(rows)
  fig, ax = plt.subplots(figsize=(7, 4))
  x = np.arange(len(names))
  for i, m in enumerate(("NDCG@10", "MAP")):
    v = [np.asarray(rows[n][m]) for n in names]
    ax.bar(x + 0.4 * i - 0.2, [a.mean() for a in v], 0.4, yerr=[a.std() for a in v], label=m, capsize=2)
  ax.set_xticks(x, names, rotation=20, fontsize=8)
  plots.finish_plot(fig, ax, res, path, "", "test metric")


DRIVER = schema.Driver("rank_distill", run, to_markdown, plot, "rank_distill.png", options=Options,
                       needs_privileged=False,
                       rows_per_fold=lambda cfg: 2 + len(cfg.options.schemes),
                       presets=(Preset("default", "synthetic", "", "Ranking Distillation"),
                                protocol.redrawn_preset("Ranking Distillation")))

if __name__ == "__main__":
  lifecycle.main(DRIVER)
