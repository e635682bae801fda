"""experiments.power end to end on a tiny configuration (its canary): per-query lists that are the run metric,
the analysis and the decisive choice derived from the points, the page's table and plot."""
import numpy as np
import pytest

from conftest import tiny, written
from experiments import power


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
