"""Each way of extending the project is one entry in the user's own module (acceptance of the registries): a GBDT
row, a debiasing row, a teaching (softened targets at T = 2) and a loss with a hyper-parameter, registered by a
module named with --registry_modules and seen through a driver's whole process (lifecycle.main): the run folder,
its provenance, the table, the claims (read back in a process that never imported the module), the saved models,
predict on a saved model; and a changed override of a registered row is trained again on resume, never loaded."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from experiments.page import judged
from experiments.paper import table2

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODULE = textwrap.dedent('''
    import os

    import jax.numpy as jnp

    from pfd_jax.methods import rows
    from pfd_jax.ops import losses
    from pfd_jax.training import teaching


    def scaled_bce(scores, labels, mask=None, *, scale=1.0, reduce_fn=jnp.sum):
      return losses.rank_bce(scale * scores, labels, mask, reduce_fn=reduce_fn)


    losses.REGISTRY.register(losses.Loss("scaled_bce_ext", scaled_bce, params={"scale": 1.0}))
    teaching.REGISTRY.register(teaching.Teaching("softened", "PFD, softened targets",
                                                 (("teacher_transform", "sigmoid"), ("temperature", 2.0))))
    rows.REGISTRY.register(rows.Row(
        "gbdt_xent_a02", "GBDT student at alpha 0.2 (PFD teacher)",
        recipe=rows.Recipe(teacher="pfd_teacher", overrides=(("alpha", 0.2),),
                           train="pfd_jax.methods.gbdt:train_lightgbm_student",
                           train_args=(("objective", "cross_entropy"),), one_process=True),
        claims=(("no_distill", "GBDT student at alpha 0.2 beats no-distillation (a registered row)"),)))
    rows.REGISTRY.register(rows.Row(
        "pfd_position_a", "PFD(position) student, own alpha", when=("position",),
        recipe=rows.Recipe(teacher="pfd_position_teacher",
                           overrides=(("alpha", float(os.environ.get("EXT_ALPHA", "0.2"))),))))
''')


def _run(*argv, env=None):
  return subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True, timeout=600,
                        env=dict(os.environ, **(env or {})))


@pytest.mark.slow
def test_a_gbdt_row_a_debias_row_a_teaching_and_a_loss_are_one_entry_each(logs_folder, tmp_path):
  module = tmp_path / "ext_rows.py"
  module.write_text(MODULE)
  out = tmp_path / "out"
  argv = ["experiments.paper.table2", f"--registry_modules={module}", "--dataset=letor", f"--data_dir={logs_folder}",
          "--privileged=21,22,23", "--position=21", "--methods=pfd,gbdt_xent_a02", "--loss=scaled_bce_ext",
          "--loss_params=scale=2", "--teaching=softened", "--save_models", f"--out_dir={out}", "--epochs=2",
          "--hidden=16", "--layers=3", "--seeds=2", "--min_docs=5", "--cache_dir=", "--max_buckets=2",
          "--notensorboard", "--noensembles", "--nosearch", "--norm=none", "--dropout=0", "--noise=0",
          "--gbdt_trees=20", "--gbdt_leaves=7", "--gbdt_min_leaf=5", "--gbdt_early_stopping=10", "--gbdt_oof_folds=3",
          "--gbdt_threads=1", f"--compile_cache={os.path.join(ROOT, 'cache', 'jax')}"]
  p = _run(*argv)
  assert p.returncode == 0, p.stderr[-3000:]
  run = os.path.realpath(out / f"letor-{os.path.basename(logs_folder)}" / "latest")
  with open(os.path.join(run, "results.json")) as f:
    res = json.load(f)
  # provenance: where each entry was registered and a hash of what it runs
  reg = res["provenance"]["registered"]
  assert reg["modules"] == ["ext_rows"]
  assert reg["rows"]["gbdt_xent_a02"]["module"] == "ext_rows" and reg["rows"]["pfd"]["module"] == "pfd_jax.methods.rows"
  assert reg["rows"]["pfd_position_a"]["overrides"] == [["alpha", 0.2]]
  assert reg["losses"]["scaled_bce_ext"]["module"] == "ext_rows" and reg["teaching"]["softened"]["module"] == "ext_rows"
  # the rows trained, with the loss, its hyper-parameter and the teaching
  loss = res["losses"]["scaled_bce_ext"]
  assert loss["train_config"]["loss_params"] == [["scale", 2.0]] and loss["train_config"]["temperature"] == 2.0
  assert loss["train_config"]["teaching"] == "softened"
  fold = loss["folds"]["fold1"]
  assert {"gbdt_xent_a02", "pfd_position_a", "pfd_position_teacher", "lambdamart_position"} <= set(fold["rows"])
  md = open(os.path.join(run, "table.md")).read()
  assert "| GBDT student at alpha 0.2 (PFD teacher) |" in md and "| PFD(position) student, own alpha |" in md
  # the claims of a registered row, read in this process, which never imported ext_rows
  assert "gbdt_xent_a02" not in table2.rows_lib.REGISTRY
  texts = [c.text for c in judged.of("table2").claims(res) if c is not None]
  assert "[scaled_bce_ext] GBDT student at alpha 0.2 beats no-distillation (a registered row)" in texts
  # the saved models record their own settings; predict scores with one, its loss registered by the module
  models = os.path.join(run, "models")
  with open(os.path.join(models, "pfd_position_a", "model.json")) as f:
    model = json.load(f)
  assert model["train_config"]["alpha"] == 0.2 and model["train_config"]["loss"] == "scaled_bce_ext"
  scores = tmp_path / "scores.tsv"
  p = _run("experiments.predict", f"--registry_modules={module}", f"--model={os.path.join(models, 'pfd')}",
           f"--data={os.path.join(logs_folder, 'serve.txt')}", f"--out={scores}")
  assert p.returncode == 0 and scores.stat().st_size > 0, p.stderr[-2000:]
  # a changed override: that row (and no other) is trained again on resume, never loaded
  p = _run(*argv, env={"EXT_ALPHA": "0.3"})
  assert p.returncode == 0, p.stderr[-3000:]
  retrained = [line for line in p.stderr.splitlines() if "trained again, not loaded" in line]
  assert len(retrained) == 1 and "pfd_position_a:" in retrained[0], retrained
  assert "pfd_position_teacher: loaded from" in p.stderr
  with open(os.path.join(run, "results.json")) as f:
    again = json.load(f)
  rows, before = again["losses"]["scaled_bce_ext"]["folds"]["fold1"]["rows"], fold["rows"]
  assert again["provenance"]["registered"]["rows"]["pfd_position_a"]["overrides"] == [["alpha", 0.3]]
  assert rows["pfd"]["loss"] == before["pfd"]["loss"]  # loaded
  assert rows["pfd_position_a"]["loss"] != before["pfd_position_a"]["loss"]  # its Eq. 1 weights another alpha
