"""What each driver's runs claim, by the driver's name: its declarations ({claim id: Declared}, before any run) and
claims(results) -> [Claim], the verdicts a run's results give them. The drivers know nothing of it: the page reads
a run's results and judges them here."""
from __future__ import annotations

from typing import Callable, Mapping, NamedTuple

from experiments.page.judged import paper, related, table2


class Judged(NamedTuple):
  claims: Callable      # results -> [Claim] (None where a row the claim needs is absent)
  declared: Callable    # () -> {claim id: Declared}


def _of(module, name: str) -> Judged:
  declared = getattr(module, name.upper())
  return Judged(getattr(module, f"claims_{name}"), lambda: declared)


BY_DRIVER: Mapping[str, Judged] = {
    "table2": Judged(table2.claims_table2, table2.declarations),
    **{name: _of(paper, name) for name in ("fig3_alpha", "fig4_sparsity", "fig5_correlation", "pfd_teacher_loss",
                                           "table3_logs", "table3_sparsity", "table5_positive_groups",
                                           "table6_imputation", "theory")},
    "alpha_robustness": _of(paper, "fig3_alpha"),  # Figure 3's driver over appendix A.7's alphas
    **{name: _of(related, name) for name in ("committee_perceptron", "debias", "rank_distill", "sdr")},
}


def of(driver: str) -> Judged:
  """The claims of `driver` (a driver without claims states none)."""
  return BY_DRIVER.get(driver, Judged(lambda res: [], dict))
