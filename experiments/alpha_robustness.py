r"""Appendix A.7: PFD's relative gain over no-distillation for alpha in [0.3, ..., 0.999].

  python -m experiments.alpha_robustness                     # synthetic default
  python -m experiments.alpha_robustness --dataset=ohsumed   # any loadable dataset (all its folds)

The Figure 3 machinery (experiments/fig3_alpha.py) with the appendix's alpha list. Writes
results/alpha_robustness/<dataset>/.
"""
from absl import app

from experiments import fig3_alpha

ALPHAS = [0.3, 0.5, 0.7, 0.9, 0.95, 0.99, 0.999]


def main(argv):
  del argv
  cfg = fig3_alpha.config_from_flags(ALPHAS, "alpha_robustness")
  res = fig3_alpha.run(cfg)
  print(fig3_alpha.write(res, cfg["out_dir"], "alpha_robustness",
                         "Appendix A.7: PFD's gain over no-distillation against alpha"))


if __name__ == "__main__":
  app.run(main)
