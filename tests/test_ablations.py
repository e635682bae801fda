"""Each ablation driver end to end on a tiny configuration (seconds): structure, not numbers."""

import dataclasses
import re

import numpy as np
import pytest

from experiments.page import judged
from experiments.paper import (alpha_robustness, data_summary, fig3_alpha, fig4_sparsity,  # noqa: F401
                               fig5_correlation, table3_logs, table3_sparsity, table5_positive_groups,
                               table6_imputation)
from experiments.framework import fold_data, outputs
from experiments.page import claims
from experiments.framework.records import RunRecord
from pfd_jax import data as data_lib
from pfd_jax.data import logs

from conftest import SMALL_GBDT, TINY, tiny, written


@pytest.mark.slow
def test_fig3_alpha_and_ratio(tmp_path):
  res = fig3_alpha.run(tiny(fig3_alpha.Options(alphas=(0.5, 0.99))))
  js = written(tmp_path, res, fig3_alpha.DRIVER)
  assert set(js["alphas"]) == {"0.5", "0.99"}
  ratio = np.asarray(js["alphas"]["0.99"]["ratio"])
  assert ratio.shape == (2,) and np.all(ratio > 0)
  # the weighted ratio must shrink by ~ (0.01/0.99)/(0.5/0.5) when alpha goes from 0.5 to 0.99
  assert np.median(ratio) < np.median(js["alphas"]["0.5"]["ratio"])


@pytest.mark.slow
def test_alpha_robustness_is_figure_3s_driver_on_appendix_a7s_alphas(tmp_path):
  """Appendix A.7's driver: Figure 3's training, bit for bit, on its own alpha list, under its own name and title."""
  res = alpha_robustness.DRIVER.run(tiny(fig3_alpha.Options(alphas=(0.5, 0.95))))
  js = written(tmp_path, res, alpha_robustness.DRIVER)
  fig3 = outputs.as_json(fig3_alpha.run(tiny(fig3_alpha.Options(alphas=(0.5, 0.95)))))
  assert {k: v for k, v in fig3.items() if k not in ("env", "seconds")} == {
      k: v for k, v in js.items() if k not in ("env", "seconds")}
  assert set(js["alphas"]) == {"0.5", "0.95"} and "Appendix A.7" in (tmp_path / "out" / "table.md").read_text()
  assert alpha_robustness.DRIVER.defaults == (("alphas", alpha_robustness.ALPHAS),)


@pytest.mark.slow
def test_data_summary_counts_table_1s_columns(tmp_path):
  """The data summary of the tiny synthetic set: Table 1's columns for each split, as the generator made them."""
  js = written(tmp_path, data_summary.run(TINY), data_summary.DRIVER)
  (fold,) = js["folds"].values()
  assert set(fold["splits"]) == {"train", "vali", "test"}
  for split in fold["splits"].values():
    assert split["query_groups"] > 0 and 0 < split["positive_groups_pct"] <= 100


@pytest.mark.slow
def test_fig4_sparsity(tmp_path):
  res = fig4_sparsity.run(tiny(fig4_sparsity.Options(taus=(4.0, 2.0))))
  js = written(tmp_path, res, fig4_sparsity.DRIVER)
  pct = [js["taus"][t]["positive_groups_pct"] for t in ("4.0", "2.0")]
  assert pct[0] < pct[1]  # lower tau, more positive groups
  assert set(js["taus"]["2.0"]["relative"]) == {"no_distill", "self_distill", "pfd_teacher", "pfd", "placebo_teacher",
                                                 "placebo"}
  assert js["taus"]["2.0"]["pfd_vs_placebo"]["n"] == 2 and "PFD vs placebo (runs)" in (tmp_path / "out" / "table.md").read_text()
  res = fig4_sparsity.run(tiny(fig4_sparsity.Options(taus=(2.0,), methods=("gend",))))
  assert set(res["taus"]["2.0"]["rows"]) == {"no_distill", "gend_teacher", "gend"}
  assert "GenD student vs no-distillation" in fig4_sparsity.to_markdown(outputs.as_json(res))


@pytest.mark.slow
def test_fig5_correlation(tmp_path):
  res = fig5_correlation.run(tiny(fig5_correlation.Options(tau_privs=(2.0, 4.0))))
  js = written(tmp_path, res, fig5_correlation.DRIVER)
  assert js["tau_privs"]["4.0"]["corr"] == pytest.approx(1.0)  # tau_priv = tau_target: z = y
  assert js["tau_privs"]["2.0"]["corr"] < 1.0
  # the gain the figure plots is the student's mean over no-distillation's (NDCG@8, test), in NumPy
  base = np.asarray(js["no_distill"])[:, 0].mean()
  for t in ("2.0", "4.0"):
    r = js["tau_privs"][t]
    assert r["student_rel"] == pytest.approx(np.asarray(r["student"])[:, 0].mean() / base, rel=1e-12)
  # another privileged column, another teacher (and student): the column reaches training
  assert not np.array_equal(js["tau_privs"]["2.0"]["teacher"], js["tau_privs"]["4.0"]["teacher"])
  # Theorem 2's plug-in prediction per level: z = y explains more of what x leaves than the weaker z, so with one
  # column it predicts the larger gain; the page sets it beside the measured gains
  assert js["tau_privs"]["4.0"]["predicted"] > js["tau_privs"]["2.0"]["predicted"]
  assert "Theorem 2: the linear student's error reduction" in fig5_correlation.to_markdown(js)


def test_synthetic_privileged_feature_is_y_at_tau_target():
  ds = fold_data.load_dataset(TINY.data)
  s = data_lib.with_synthetic_privileged(ds, ds.config["tau"])
  np.testing.assert_array_equal(s["train"].z[:, 0], s["train"].y)
  assert s["train"].x.shape[1] == ds["train"].x.shape[1] + ds["train"].z.shape[1]


@pytest.mark.slow
def test_table5_and_table6(tmp_path):
  res = table5_positive_groups.run(TINY)
  js5 = written(tmp_path, res, table5_positive_groups.DRIVER)
  assert set(js5["rows"]) == {"no_distill", "pfd_positive", "pfd_all", "lambdamart"}  # LightGBM: a reference row
  res = table6_imputation.run(TINY)
  js = written(tmp_path / "t6", res, table6_imputation.DRIVER)
  assert set(js["rows"]) == {"zero", "mean", "teacher", "no_distill", "lambdamart"}
  assert np.asarray(js["rows"]["zero"]).shape == (2, 3)
  # the reference rows are one model each, whichever driver trains them (same data, keys and settings)
  for row in ("no_distill", "lambdamart"):
    np.testing.assert_array_equal(js["rows"][row], js5["rows"][row])
  # the data loss's groups reach the student, and the imputed z reaches the teacher's scores
  assert not np.array_equal(js5["rows"]["pfd_positive"], js5["rows"]["pfd_all"])
  assert not np.array_equal(js["rows"]["zero"], js["rows"]["teacher"])
  assert not np.array_equal(js["rows"]["mean"], js["rows"]["teacher"])


def test_logs_simulator_cascade_and_seed():
  a, b = logs.simulate(sessions=(50, 10, 20), seed=1), logs.simulate(sessions=(50, 10, 20), seed=1)
  g = a["train"]
  assert g.x.tobytes() == b["train"].x.tobytes()
  pos, click, add = g.z[:, 0], g.z[:, 1], g.z[:, 2]
  assert np.all(g.y <= add) and np.all(add <= click)  # purchase => add-to-cart => click
  sizes = g.sizes
  first = np.log2(2.0)
  assert np.sum(pos == first) == g.num_queries and sizes.min() >= 15  # one item at position 1 per session


def test_the_purchase_offset_thins_the_purchases_of_the_same_sessions():
  """A larger purchase_offset lowers every item's purchase probability on the same draws: the same sessions,
  features, clicks and adds, purchases a subset of the default's; the default keeps its bits and its record."""
  base, same = logs.simulate(sessions=(80, 10, 10), seed=3), logs.simulate(sessions=(80, 10, 10), seed=3,
                                                                            purchase_offset=2.0)
  sparse = logs.simulate(sessions=(80, 10, 10), seed=3, purchase_offset=5.0)
  a, b, c = base["train"], same["train"], sparse["train"]
  assert a.y.tobytes() == b.y.tobytes() and base.config == same.config and "purchase_offset" not in base.config
  np.testing.assert_array_equal(a.x, c.x)
  np.testing.assert_array_equal(a.z, c.z)
  assert np.all(c.y <= a.y) and c.y.sum() < a.y.sum() and sparse.config["purchase_offset"] == 5.0


@pytest.mark.slow
def test_table3_sparsity_sweeps_the_purchase_rate_on_table3s_rows(tmp_path):
  """Each offset's level: Table 3's rows on its own sparsity of the same simulation (offset 2: table3_logs' run
  bit for bit), its teachers' distance to Table 3 from their relative NDCG@8, the paper's claims at every rate."""
  opts = table3_sparsity.Options(sessions=(60, 30, 60), purchase_offsets=(2.0, 5.0))
  js = written(tmp_path, table3_sparsity.run(tiny(opts)), table3_sparsity.DRIVER)
  dense, sparse = js["levels"]["2"], js["levels"]["5"]
  assert sparse["positive_train_sessions_pct"] < dense["positive_train_sessions_pct"]
  one = table3_logs.run(tiny(table3_logs.Options(sessions=(60, 30, 60), placebo=False, lightgbm=False)))
  assert set(dense["rows"]) == set(one["rows"])
  for k in one["rows"]:
    np.testing.assert_array_equal(dense["rows"][k], one["rows"][k])
  rel = sparse["relative"]
  want = max(abs(rel[f"{k}_teacher"] - v) for k, v in (("position", 1.182), ("click", 2.121), ("add", 2.292)))
  assert sparse["teacher_distance"] == pytest.approx(100 * want)
  md = (tmp_path / "out" / "table.md").read_text()
  assert md.count("(nearest)") == 1 and "table3_logs' logs" in md
  said = judged.of("table3_sparsity").claims(RunRecord.from_json(js))
  assert len(said) == 6 and all("% of sessions with a purchase, offset" in c.text for c in said)


@pytest.mark.slow
def test_table3_logs(tmp_path):
  res = table3_logs.run(tiny(table3_logs.Options(sessions=(60, 10, 60), sim_seed=0, gbdt=SMALL_GBDT)))
  js = written(tmp_path, res, table3_logs.DRIVER)
  assert set(js["rows"]) == {k for k, _ in table3_logs.ROWS}
  md = (tmp_path / "out" / "table.md").read_text()
  assert "Multi-teacher" in md and "vs its placebo" in md
  assert set(js["vs_placebo"]) == {"position", "click", "add", "multi"}
  # the placebo teachers trained on permuted columns: not the PFD teachers' models
  assert not np.array_equal(js["rows"]["click_placebo_teacher"], js["rows"]["click_teacher"])
  cfg = tiny(table3_logs.Options(sessions=(60, 10, 60), placebo=False, lightgbm=False))
  assert table3_logs.DRIVER.rows(cfg) == len(table3_logs.ROWS) - 1 - table3_logs.GBDT_ROWS - table3_logs.PLACEBO_ROWS


@pytest.mark.slow
@pytest.mark.long
def test_table3_logs_redrawn_gives_each_draw_its_own_simulation():
  """--draws=N: N simulations (draw k's simulator seed and training keys its own), one run each; the rows' runs
  stack over the draws, and the claims speak of draws."""
  opts = table3_logs.Options(sessions=(60, 10, 60), placebo=False, lightgbm=False, draws=2)
  res = table3_logs.run(tiny(opts).replace(run=dict(seeds=1)))
  assert all(np.shape(v)[0] == 2 for v in res["rows"].values())
  one = table3_logs.run(tiny(dataclasses.replace(opts, draws=0)).replace(run=dict(seeds=1)))
  assert not np.array_equal(res["rows"]["no_distill"][1], res["rows"]["no_distill"][0])
  assert "draws" not in outputs.as_json(one["config"])["options"]  # omitted at its default: old runs' bits stand
  js = outputs.as_json(res)
  assert claims.redrawn(js) and claims.runs_per_fold(2, js) == 1
  c = claims.in_draws(judged.of("table3_logs").claims(RunRecord.from_json(js))[0])
  assert c.unit == "draws" and " runs" not in c.verdict + c.detail
  md = table3_logs.to_markdown(RunRecord.from_json(js))  # the table counts draws, not the one seed of each
  assert "mean over 2 draws (one seed each)" in md and "over the 2 draws," in md and not re.search(r"\d seeds", md)
