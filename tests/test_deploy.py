"""The deploy choice: the simplest candidate that validation cannot tell from the best one, so that
the maximum over many noisy validation scores (the winner's curse) does not pick a complex model whose gain is
noise."""
import numpy as np
from scipy import stats as sps

from experiments.framework import deploy
from pfd_jax.ops import choice


def _candidates(names, kinds=("single", "ensemble")):
  return [(n, k) for n in names for k in kinds]


def test_equal_candidates_that_differ_by_noise_keep_the_simplest():
  """Twelve candidates with the same true NDCG per list, scored on 42 validation lists with independent noise
  (as a small search log's): the best on validation is some complex candidate by chance, but every one lies
  within the paired SE of it, so no-distillation (the simplest) is kept, in each of 200 draws of the noise."""
  names = ("no_distill", "self_distill", "gend", "pfd", "lambdamart", "pfd_from_lambdamart")
  cands = _candidates(names)
  rng = np.random.default_rng(0)
  chose_simplest, best_was_simplest = 0, 0
  for _ in range(200):
    truth = rng.uniform(0.1, 0.6, size=42)  # the lists' difficulty, shared by every candidate
    lists = {c: np.clip(truth + 0.08 * rng.normal(size=42), 0, 1) for c in cands}
    pick = choice.tied_with_best(lists, deploy.simplicity)
    chose_simplest += pick["chosen"] == ("no_distill", "single")
    best_was_simplest += pick["best"] == ("no_distill", "single")
    # the rule's own terms, from a float64 reference: the best is the arg max, the chosen not worse than it by a
    # one-sided paired t-test at 5% / 11 (scipy's), every simpler candidate worse
    assert pick["best"] == max(lists, key=lambda c: lists[c].mean())
    worse = lambda c: sps.ttest_rel(lists[pick["best"]], lists[c], alternative="greater").pvalue < 0.05 / 11
    assert not worse(pick["chosen"])
    assert all(worse(c) for c in cands if deploy.simplicity(c) < deploy.simplicity(pick["chosen"]))
  assert best_was_simplest <= 30  # the plain arg max would pick a complex model most of the time
  assert chose_simplest >= 190  # the rule keeps the simplest (a tie by noise may rarely exceed one SE)


def test_a_real_gain_is_chosen_and_the_simplest_of_equals_wins():
  rng = np.random.default_rng(1)
  truth = rng.uniform(0.1, 0.6, size=300)
  noise = lambda: 0.05 * rng.normal(size=300)
  lists = {("no_distill", "single"): truth + noise(), ("pfd", "single"): truth + 0.05 + noise(),
           ("pfd", "ensemble"): truth + 0.05 + noise(), ("self_distill", "single"): truth + noise()}
  pick = choice.tied_with_best(lists, deploy.simplicity)
  assert pick["chosen"] == ("pfd", "single")  # a clear gain; the ensemble ties with it and is more complex
  assert set(pick["within"]) == {("pfd", "single"), ("pfd", "ensemble")}
  # simplicity: no teacher < a teacher's student; single < ensemble; then the registry's order
  assert sorted(_candidates(("pfd", "lambdamart", "no_distill")), key=deploy.simplicity) == [
      ("no_distill", "single"), ("lambdamart", "single"), ("no_distill", "ensemble"), ("lambdamart", "ensemble"),
      ("pfd", "single"), ("pfd", "ensemble")]


def test_choose_pairs_the_folds_lists_and_compares_with_no_distillation():
  """choose(): every fold's validation lists with a positive, concatenated; the chosen candidate's paired
  interval against no-distillation on them; {} without validation lists."""
  class Fold:  # what choose reads of a FoldRecord
    def __init__(self, ens):
      self.rows, self.ensembles = {n: None for n in ens}, ens
  rng = np.random.default_rng(2)
  folds = []
  for _ in range(2):
    truth = rng.uniform(0.2, 0.6, 80)
    valid = rng.uniform(size=80) > 0.2
    ens = {n: dict(vali_lists=truth + g + 0.01 * rng.normal(size=80), vali_valid=valid,
                   vali_single_lists=truth + g + 0.01 * rng.normal(size=80))
           for n, g in (("no_distill", 0.0), ("pfd", 0.1), ("pfd_teacher", 0.3))}
    folds.append(Fold(ens))
  d = deploy.choose(folds, True)
  assert (d["row"], d["kind"]) == ("pfd", "single")  # the teacher reads z: no candidate
  assert d["lists"] == sum(int(f.ensembles["pfd"]["vali_valid"].sum()) for f in folds)
  mine = np.concatenate([f.ensembles["pfd"]["vali_single_lists"][f.ensembles["pfd"]["vali_valid"]] for f in folds])
  base = np.concatenate([f.ensembles["no_distill"]["vali_single_lists"][f.ensembles["no_distill"]["vali_valid"]]
                         for f in folds])
  assert np.isclose(d["vali"], mine.mean()) and np.isclose(d["vs_no_distill"]["diff"], (mine - base).mean())
  assert d["vs_no_distill"]["t_ci"][0] > 0
  for f in folds:
    f.ensembles["pfd"]["vali_lists"] = None
  assert deploy.choose(folds, True) == {}
