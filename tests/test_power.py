"""experiments.paper.power end to end on a tiny configuration (its canary): per-query lists that are the run metric,
the analysis and the decisive choice derived from the points, the page's table and plot."""
import json

import numpy as np
import pytest

from conftest import tiny, written
from experiments.page import judged
from experiments.paper import power


@pytest.mark.slow
def test_power_driver_end_to_end(tmp_path):
  cfg = tiny(power.Options(scales=(0.2, 0.4), test_queries=60, preset_tests=(60, 600), project=(0.8,)),
             run=dict(loss="rankbce", seeds=3, seed=1000))
  res = power.run(cfg)
  js = written(tmp_path, res, power.DRIVER)
  assert list(js["points"]) == ["0.2", "0.4"]
  p = js["points"]["0.4"]["rankbce"]
  assert p["train_groups"] > js["points"]["0.2"]["rankbce"]["train_groups"] and p["seeds"] == 3
  for row in ("pfd",) + power.COMPARED:  # the per-query lists are the run metric (lists with a positive)
    lists = np.asarray(p["lists"][row])
    assert lists.shape == (3, p["test_positive"])
    np.testing.assert_allclose(lists.mean(1), np.asarray(p["best"][row])[:, 0], rtol=1e-5)
  a = power.analysis(js)
  grid = {(g["scale"], g["test_queries"]): g for g in a["grid"]}
  assert set(grid) == {(s, t) for s in (0.2, 0.4, 0.8) for t in (60, 600)} and grid[(0.8, 60)]["projected"]
  # at a measured point the spread is the measured one: seed + query / Q of the (unclipped) components, the seed
  # term floored at 0 in the spread only
  seed, query = a["components"]["rankbce"]["0.4"]["no_distill"]
  q = grid[(0.4, 60)]["test_positive"]
  np.testing.assert_allclose(grid[(0.4, 60)]["sd"]["rankbce/no_distill"], np.sqrt(max(seed, 0.0) + query / q))
  np.testing.assert_allclose(power.fit_inverse([1.0, 2.0, 4.0], [3.0, 2.0, 1.5]), (1.0, 2.0), atol=1e-12)  # a + b/x
  c = a["choice"]
  assert c["seeds"] >= 2 and c["seconds"] <= 60 * cfg.options.budget_minutes
  assert "The decisive preset" in (tmp_path / "out" / "table.md").read_text()


@pytest.mark.slow
@pytest.mark.long
def test_a_decisive_run_records_its_pilots_plan_beside_what_it_achieved(tmp_path):
  """A re-drawn pilot (3 draws, validation selection, test scored at the kept epochs only) sizes a run given
  --pilot=<its folder>: the run records the draws protocol.BUDGET_MINUTES holds at the pilot's seconds per draw and
  each comparison's MDE and power there from the pilot's spread; its power section sets them beside its own, says
  which variance component dominates, and each claim prints its MDE. A folder without results is refused before
  anything trains."""
  from experiments.paper import table2
  from experiments.framework import outputs, protocol
  from pfd_jax.config import ConfigError
  from pfd_jax.ops import stats
  cfg = tiny(table2.Options(methods=("no_distill", "pfd")), data=dict(draws=3),
             train=dict(select_on="vali", curves="select"), run=dict(seeds=1, loss="rankbce"))
  pilot = table2.run(cfg)
  assert set(pilot["losses"]["rankbce"].folds["fold1"].rows["pfd"].curves) == {"vali"}
  outputs.write_outputs(str(tmp_path / "pilot"), pilot, table2.DRIVER)
  with pytest.raises(ConfigError, match="pilot"):
    table2.run(cfg.replace(options=table2.Options(methods=("no_distill", "pfd"), pilot=str(tmp_path / "none"))))
  run = table2.run(cfg.replace(options=table2.Options(methods=("no_distill", "pfd"), pilot=str(tmp_path / "pilot")),
                               data=dict(draws=3, label_seed=1)))
  plan = run["pilot"]
  assert plan["pilot_draws"] == 3 and plan["draws"] == int(protocol.BUDGET_MINUTES * 60 // plan["seconds_per_draw"])
  c = plan["comparisons"]["rankbce/no_distill"]
  e = stats.Estimate(0.0, 1.0, c["sd"] / np.sqrt(plan["draws"]), plan["draws"] - 1, "draws", plan["draws"])
  np.testing.assert_allclose([c["mde"], c["power"]], [e.mde(), e.power(0.02)], rtol=1e-9)
  md = outputs.write_outputs(str(tmp_path / "run"), run, table2.DRIVER)
  run = json.loads((tmp_path / "run" / "results.json").read_text())
  assert "planned MDE" in md and "sized by its pilot" in md and f": {plan['draws']} draws; it ran 3 draws in" in md
  # sized by an MDE instead (spreads of a draw 5% and 9%): the fewest draws whose largest MDE is at most 2%, about
  # ((z.975 + z.8) 9% / 2%)^2 = 159
  spread = dict(comparisons={"a": dict(sd=0.05), "b": dict(sd=0.09)}, seconds_per_draw=100.0, draws=6)
  target = protocol._sized(spread, protocol.BUDGET_MINUTES, mde=0.02)
  at = lambda n: max(protocol._at(sd, n)[0] for sd in (0.05, 0.09))
  assert target["target_mde"] == 0.02 and at(target["draws"]) <= 0.02 < at(target["draws"] - 1)
  assert 159 <= target["draws"] <= 170
  assert "dominates" in md and "Selection: the best epoch on **validation**" in md
  assert all("MDE " in c.detail for c in judged.of("table2").claims(run) if c is not None)
