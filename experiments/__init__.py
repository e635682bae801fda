"""The absl drivers, each writing results/<driver>/{results.json, table.md, *.png}, by what they are for:

  paper/      the paper's tables and figures (the page's first sections, paper.DRIVERS)
  related/    the systems it is compared with (the page's last sections, related.DRIVERS)
  bench/      speed, memory and latency (python -m experiments.bench.benchmark; not on the page)
  framework/  the drivers' machinery
  page/       the results page: what the runs claim (imported by no driver)
  *.py        tools: report (the page), predict and export (a saved model), launch (processes), calibrate (the
              paper analogues), export_logs, search_bias, walk, layers, crossmachine, peers, accelerator

A driver's module file is named as the driver (its results folder): :func:`module` finds it."""
from experiments import paper, related

PAGE = paper.DRIVERS + related.DRIVERS  # the drivers whose presets make RESULTS.md, in its order
_PACKAGES = {**{d: "paper" for d in paper.DRIVERS}, **{d: "related" for d in related.DRIVERS},
             "benchmark": "bench", "bench_losses": "bench"}


def module(driver: str) -> str:
  """The module that defines the driver named `driver` (`python -m <module>` runs it)."""
  return ".".join(("experiments", _PACKAGES[driver], driver) if driver in _PACKAGES else ("experiments", driver))
