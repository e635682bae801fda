"""The position-debiasing driver end to end: its own file, so pytest-xdist's file-level scheduling
runs it beside tests/test_debias.py."""
import numpy as np
import pytest

from conftest import TINY, written
from experiments.page import judged
from experiments.related import debias as debias_driver


@pytest.mark.slow
def test_debias_driver_end_to_end(tmp_path):
  """Every row on the truth and the logged purchases (but the LightGBM rows, which the table2 --position test
  covers, and the placebo rows, which train as PFD(position) does on fold_data.placebo_data, tested elsewhere); at eta = 0 every propensity is 1, so IPS with known
  propensities is no-distillation bit for bit; the claims are over the eta sweep."""
  o = debias_driver.Options(etas=(0.0,), sessions=(40, 20, 30), random_share=0.5, lightgbm=False, placebo=False)
  cfg = TINY.replace(options=o, train=dict(select_on="vali"), output=dict(out_dir=str(tmp_path)))
  res = debias_driver.run(cfg)
  written(tmp_path, res, debias_driver.DRIVER)
  r = res["etas"]["0"]
  assert set(r["truth"]) == set(r["logged"]) == {k for k, _ in debias_driver.ROWS} - {
      "lambdamart", "lambdamart_position", "placebo", "placebo_teacher"}
  np.testing.assert_array_equal(r["truth"]["ips_known"], r["truth"]["no_distill"])
  assert r["propensities"]["known"] == [1.0] * 10 and r["randomized_sessions"] > 5
  assert not np.array_equal(r["truth"]["two_tower"], r["truth"]["position_feature"])
  assert not np.array_equal(r["truth"]["pfd_position_top"], r["truth"]["pfd_position"])  # the teacher at the top
  claims = [c for c in judged.of("debias").claims(res) if c]  # those of LambdaMART and the placebo: absent rows
  assert len(claims) == 13 and all(c.detail.startswith(("holds", "undecided", "does not", "mixed", "vacuous"))
                                    for c in claims)
  # IPS with known propensities is no-distillation at eta = 0: its claims against it compare one model with itself
  assert all(c.verdict == "vacuous" for c in claims if c.detail.startswith("vacuous"))
