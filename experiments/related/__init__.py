"""The systems the paper is compared with, and position debiasing beside them: SDR, Ranking Distillation, the
Committee Perceptron family, the unbiased learning-to-rank family on simulated logs. DRIVERS is their order on the
page, after the paper's; tests/test_layers.py checks that it names exactly the drivers of this folder."""
DRIVERS = ("debias", "sdr", "rank_distill", "committee_perceptron")
