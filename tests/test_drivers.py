"""Each driver's path once: the paper's drivers here, the related systems' and the debiasing driver in
test_drivers_related.py (all heavy). The default tier keeps the cheapest paths here, the others are marked heavy; the
drivers' canaries, which pin their bits, are in the slow tier. Each runs at the smallest size its options allow (one
point of its sweep, TINY's training on one length bucket, LightGBM left out where the driver allows it: compilation
is most of a tiny run's cost, one program per bucket shape) and writes its results.json, table and plots as its main
would (conftest.driver_end_to_end). The theory driver's path is the slow tier's alone: at any size it compiles its
whole grid (about 40 s), and its parts are tested in test_theory.py."""
import pytest

from conftest import TINY, driver_end_to_end, tiny
from experiments.paper import (alpha_robustness, data_summary, fig3_alpha, fig4_sparsity, fig5_correlation, power,
                               table3_logs, table5_positive_groups, table6_imputation)

CASES = {  # driver: (its configuration, the key of its results.json that holds its rows or points, and their names)
    fig3_alpha.DRIVER: (tiny(fig3_alpha.Options(alphas=(0.5,))), ("alphas", ["0.5"])),
    alpha_robustness.DRIVER: (tiny(fig3_alpha.Options(alphas=(0.9,))), ("alphas", ["0.9"])),
    fig4_sparsity.DRIVER: (tiny(fig4_sparsity.Options(taus=(2.0,), methods=("pfd",))), ("taus", ["2.0"])),
    fig5_correlation.DRIVER: (tiny(fig5_correlation.Options(tau_privs=(4.0,))), ("tau_privs", ["4.0"])),
    table3_logs.DRIVER: (tiny(table3_logs.Options(sessions=(60, 10, 60), placebo=False, lightgbm=False)),
                         ("rows", None)),
    table5_positive_groups.DRIVER: (TINY, ("rows", None)),
    table6_imputation.DRIVER: (TINY, ("rows", None)),
    power.DRIVER: (tiny(power.Options(scales=(0.2,), test_queries=60, preset_tests=(60,), project=(0.4,)),
                        run=dict(loss="rankbce")), ("points", ["0.2"])),
    data_summary.DRIVER: (TINY, (None, None)),
}


# The drivers that compile the most (a sweep, LightGBM, several teachers) are heavy; the default tier keeps those
# that share one compiled student (Table 5's and Table 6's rows) and the data summary.
HEAVY = (alpha_robustness.DRIVER, table3_logs.DRIVER, power.DRIVER, fig3_alpha.DRIVER, fig4_sparsity.DRIVER,
         fig5_correlation.DRIVER)


@pytest.mark.parametrize("driver", [pytest.param(d, marks=pytest.mark.heavy) if d in HEAVY else d for d in CASES],
                         ids=lambda d: d.name)
def test_each_driver_runs_end_to_end_and_writes_its_outputs(driver, tmp_path):
  driver_end_to_end(driver, *CASES[driver], tmp_path)
