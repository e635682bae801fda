"""pfd-train: trains PFD on a team's own LETOR folder and saves the students (no clone of the repository needed).

  pfd-train --data_dir=logs/ --privileged=101,102,103 --out=models/ [--methods=pfd,self_distill] [--epochs=100]

The folder holds train.txt, test.txt and, for selection, vali.txt (SVMlight/LETOR lines, the file's own labels:
0/1, or graded with --positive_grade). No-distillation, the rows of --methods and the teachers they need train with
--seeds seeds in one compiled program; each row's best epoch is chosen on vali.txt (on test.txt without one, as
the paper does, and the printout says so). It prints each row's test NDCG@8 over the seeds and, with a vali.txt,
the servable row that validation picks; every servable row (one that reads regular features only) is saved to
<out>/<row>/, which pfd-predict and pfd-export read. The clone's driver (python -m experiments.paper.table2) does
the same with its paired intervals, the placebo control, LightGBM and the PFD search."""
from __future__ import annotations

import os
import sys

import jax
import numpy as np
from absl import flags

import pfd_jax
from pfd_jax import data as data_lib
from pfd_jax.commands import main as common
from pfd_jax.methods import rows as rows_lib


def define(fv: flags.FlagValues) -> None:
  flags.DEFINE_string("data_dir", "", "LETOR folder: train.txt, test.txt and (for selection) vali.txt.", flag_values=fv)
  flags.DEFINE_string("privileged", "", "The privileged feature ids (1-based, as in the files), e.g. 101,102,103: "
                      "known in the logs, absent when serving.", flag_values=fv)
  flags.DEFINE_string("out", "", "Folder to save the servable rows' models in (<out>/<row>/).", flag_values=fv)
  flags.DEFINE_list("methods", ["pfd"], "Rows beside no-distillation (pfd_jax.methods.rows.REGISTRY: pfd, "
                    "self_distill, gend, placebo, ...); each brings the teachers it needs.", flag_values=fv)
  flags.DEFINE_string("loss", "rankbce", "Ranking loss (pfd_jax.ops.losses.REGISTRY).", flag_values=fv)
  flags.DEFINE_integer("epochs", 100, "Training epochs of every row (the paper's 100).", lower_bound=1, flag_values=fv)
  flags.DEFINE_integer("seeds", 5, "Training seeds, vmapped in one program.", lower_bound=1, flag_values=fv)
  flags.DEFINE_integer("seed", 0, "Base PRNG seed.", flag_values=fv)
  flags.DEFINE_float("positive_grade", None, "Graded labels: y = 1[label >= this grade] (default: the labels as 0/1).",
                     flag_values=fv)
  flags.DEFINE_integer("min_docs", 1, "Drop query groups with fewer documents (default: keep every list).",
                       lower_bound=1, flag_values=fv)


def train_folder(data_dir: str, privileged: str, out: str, methods, *, loss: str = "rankbce", epochs: int = 100,
                 seeds: int = 5, seed: int = 0, positive_grade=None, min_docs: int = 1) -> dict:
  """{select_on, rows: {row: dict(test, vali, servable, saved)}, deploy}: the rows trained on the folder, each
  row's per-seed NDCG@8 at its best epoch, and where each servable row was saved."""
  select_on = "vali" if os.path.exists(os.path.join(data_dir, "vali.txt")) else "test"
  raw = pfd_jax.load_raw("letor", data_dir, cache_dir="")
  ds = pfd_jax.prepare(pfd_jax.DataConfig(dataset="letor", data_dir=data_dir, labels="file", privileged=privileged,
                                          positive_grade=positive_grade, min_docs=min_docs), raw)
  dd = pfd_jax.to_device(ds, eval_splits=tuple(dict.fromkeys(("test", select_on))))
  cfg = pfd_jax.TrainConfig(loss=loss, epochs=epochs, select_on=select_on)
  keys = jax.random.split(jax.random.PRNGKey(seed), seeds)
  placebo = lambda: pfd_jax.to_device(data_lib.with_placebo_privileged(ds, "query", seed),  # noqa: E731
                                     eval_splits=tuple(dd.eval_sets))
  results = pfd_jax.run_methods(keys, cfg, dd, list(methods), placebo=placebo)
  rows = {}
  for name, r in results.items():
    view = rows_lib.REGISTRY[name].recipe.view if name in rows_lib.REGISTRY else "x"
    servable = view == "x"  # regular features only: what a serving file holds
    saved = os.path.join(out, name) if servable else None
    if saved:
      pfd_jax.make_ranker(r, cfg, view, ds.config, row=name).save(saved)
    rows[name] = dict(test=np.asarray(r.best["test"])[:, 0].tolist(), servable=servable, saved=saved,
                      vali=np.asarray(r.best[select_on])[:, 0].tolist() if select_on == "vali" else None)
  served = [n for n, r in rows.items() if r["servable"]]
  deploy = max(served, key=lambda n: np.mean(rows[n]["vali"])) if select_on == "vali" else None
  return dict(select_on=select_on, rows=rows, deploy=deploy)


def summary_text(res: dict) -> str:
  """The rows' test NDCG@8 (mean ± sd over seeds), validation's pick and where the models are."""
  lines = [f"best epoch of each row on {res['select_on']}" +
           ("" if res["select_on"] == "vali" else " (no vali.txt: test selects, as the paper does; no deploy choice)")]
  for name, r in res["rows"].items():
    t = np.asarray(r["test"])
    vali = f", vali {np.mean(r['vali']):.4f}" if r["vali"] is not None else ""
    where = f" -> {r['saved']}" if r["saved"] else " (reads privileged features: not saved)"
    lines.append(f"  {name}: test NDCG@8 {t.mean():.4f} ± {t.std():.4f} over {t.size} seeds{vali}{where}")
  if res["deploy"]:
    lines.append(f"deploy: {res['deploy']} (the servable row with the best validation NDCG@8)")
  return "\n".join(lines)


def main(argv=None) -> int:
  fv = common.parse(define, sys.argv if argv is None else argv, ("data_dir", "privileged", "out"), __doc__)
  return common.run(lambda: summary_text(train_folder(
      fv.data_dir, fv.privileged, fv.out, fv.methods, loss=fv.loss, epochs=fv.epochs, seeds=fv.seeds, seed=fv.seed,
      positive_grade=fv.positive_grade, min_docs=fv.min_docs)))


if __name__ == "__main__":
  sys.exit(main())
