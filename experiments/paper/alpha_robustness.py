r"""Appendix A.7: PFD's relative gain over no-distillation for alpha in [0.3, ..., 0.999].

  python -m experiments.paper.alpha_robustness                     # synthetic default
  python -m experiments.paper.alpha_robustness --dataset=ohsumed   # any loadable dataset (all its folds)

The Figure 3 driver (experiments/paper/fig3_alpha.py) with the appendix's alpha list and title. Writes
results/alpha_robustness/<dataset>/.
"""
import dataclasses
import functools

from experiments.paper import fig3_alpha
from experiments.framework import lifecycle
from experiments.framework.schema import Preset

ALPHAS = (0.3, 0.5, 0.7, 0.9, 0.95, 0.99, 0.999)

DRIVER = dataclasses.replace(
    fig3_alpha.DRIVER, name="alpha_robustness", png="alpha_robustness.png", defaults=(("alphas", ALPHAS),),
    presets=(Preset("default", "synthetic", "", "Appendix A.7: alpha robustness"),),
    to_markdown=functools.partial(fig3_alpha.to_markdown,
                                  title="Appendix A.7: PFD's gain over no-distillation against alpha"))

if __name__ == "__main__":
  lifecycle.main(DRIVER)
