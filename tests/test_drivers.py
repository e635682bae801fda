"""Each driver's path once, in the default tier (issue 57). The drivers' canaries, which pin their bits, are in the
slow tier; here each runs at the smallest size its options allow (one point of its sweep, TINY's training on one
length bucket, LightGBM left out where the driver allows it: compilation is most of a tiny run's cost, one program
per bucket shape) and writes its results.json, table and plots as its main would. The theory driver's path is the slow tier's alone: at any size it
compiles its whole grid (about 40 s), and its parts are tested in test_theory.py."""
import json

import pytest

from conftest import TINY, tiny
from experiments import (alpha_robustness, committee_perceptron, data_summary, debias, fig3_alpha, fig4_sparsity,
                         fig5_correlation, pfd_teacher_loss, power, rank_distill, sdr, table3_logs,
                         table5_positive_groups, table6_imputation)
from experiments.framework import outputs

CASES = {  # driver: (its configuration, the keys of its results.json that hold its rows or points)
    fig3_alpha.DRIVER: (tiny(fig3_alpha.Options(alphas=(0.5,))), ("alphas", ["0.5"])),
    alpha_robustness.DRIVER: (tiny(fig3_alpha.Options(alphas=(0.9,))), ("alphas", ["0.9"])),
    fig4_sparsity.DRIVER: (tiny(fig4_sparsity.Options(taus=(2.0,), methods=("pfd",))), ("taus", ["2.0"])),
    fig5_correlation.DRIVER: (tiny(fig5_correlation.Options(tau_privs=(4.0,))), ("tau_privs", ["4.0"])),
    table3_logs.DRIVER: (tiny(table3_logs.Options(sessions=(60, 10, 60), placebo=False, lightgbm=False)),
                         ("rows", None)),
    table5_positive_groups.DRIVER: (TINY, ("rows", None)),
    table6_imputation.DRIVER: (TINY, ("rows", None)),
    sdr.DRIVER: (tiny(sdr.Options(temperatures=(2.0,)), run=dict(loss="softmax")), ("rows", None)),
    rank_distill.DRIVER: (tiny(rank_distill.Options(teacher_hidden=32, student_hidden=8, schemes=("uniform",))),
                          ("rows", ["teacher", "student", "uniform"])),
    pfd_teacher_loss.DRIVER: (tiny(pfd_teacher_loss.Options(teachings=("listwise",))), ("rows", None)),
    debias.DRIVER: (TINY.replace(options=debias.Options(etas=(0.0,), sessions=(40, 20, 30), random_share=0.5,
                                                        lightgbm=False, placebo=False)), ("etas", ["0"])),
    committee_perceptron.DRIVER: (tiny(committee_perceptron.Options(passes=2, committee_sizes=(2,), vote_capacity=4,
                                                                    svm_c=(0.1,), timing_passes=1),
                                       data=dict(min_docs=1)), ("folds", ["fold1"])),
    power.DRIVER: (tiny(power.Options(scales=(0.2,), test_queries=60, preset_tests=(60,), project=(0.4,)),
                        run=dict(loss="rankbce")), ("points", ["0.2"])),
    data_summary.DRIVER: (TINY, (None, None)),
}


@pytest.mark.parametrize("driver", list(CASES), ids=lambda d: d.name)
def test_each_driver_runs_end_to_end_and_writes_its_outputs(driver, tmp_path):
  cfg, (key, want) = CASES[driver]
  res = driver.run(cfg.replace(output=dict(out_dir=str(tmp_path)), data=dict(max_buckets=1)))
  md = outputs.write_outputs(str(tmp_path / "out"), res, driver)
  js = json.loads((tmp_path / "out" / "results.json").read_text())
  assert (tmp_path / "out" / "table.md").read_text() == md == driver.to_markdown(js)
  if driver.png:
    assert (tmp_path / "out" / driver.png).stat().st_size > 1000
  if key:
    assert js[key] and (want is None or list(js[key]) == want), list(js[key])
