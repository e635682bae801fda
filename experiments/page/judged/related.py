"""The claims the related systems' drivers' runs state (SDR, Ranking Distillation, the Committee Perceptron
family, the position-debiasing comparison), each declared before any run, and how a run's results judge them."""
from __future__ import annotations

import numpy as np

from experiments.framework import tabulate
from experiments.framework.records import RunRecord
from experiments.page.claims import MARGIN, beats, claim, estimate_of, runs_per_fold
from experiments.page.declared import Declared, declare
from experiments.page.sweeps import sweep
from experiments.related import committee_perceptron, sdr


COMMITTEE_PERCEPTRON = declare(*(Declared(f"committee_perceptron:{how}-within-ranksvm",
                                          f"The {k} is within ±{100 * MARGIN:.0f}% of RankSVM, NDCG@10 paired by fold "
                                          "(Committee Perceptron)", "equivalence", MARGIN, "Committee Perceptron")
                                 for how, k in committee_perceptron.COMMITTEES.items()))


def claims_committee_perceptron(res: RunRecord) -> list:
  """The claims a run of committee_perceptron states, with their verdicts."""
  cmp = res["comparisons"]
  return [COMMITTEE_PERCEPTRON[f"committee_perceptron:{how}-within-ranksvm"].judged(
      claim, estimate_of(dict(cmp[k], unit="folds")), run=cmp[k])
          for how, k in committee_perceptron.COMMITTEES.items() if k in cmp]


# Which method wins where, on the truth: (what is claimed, the row, the row it is compared with).
DEBIAS_COMPARED = (
    ("PFD(position) beats no-distillation on the truth", "pfd_position", "no_distill"),
    ("PFD(position) beats IPS with known propensities on the truth", "pfd_position", "ips_known"),
    ("PFD(position) beats IPS with regression-EM propensities on the truth", "pfd_position", "ips_em"),
    ("PFD(position) beats position-aware learning on the truth", "pfd_position", "position_feature"),
    ("PFD(position) beats the two-tower model on the truth", "pfd_position", "two_tower"),
    ("PFD(position) beats its placebo on the truth (control)", "pfd_position", "placebo"),
    ("PFD(position + click) beats PFD(position) on the truth", "pfd_position_click", "pfd_position"),
    ("PFD(position) taught at position 1 beats no-distillation on the truth", "pfd_position_top", "no_distill"),
    ("PFD(position) taught at position 1 beats PFD(position) on the truth", "pfd_position_top", "pfd_position"),
    ("PFD(position) taught at position 1 beats IPS with known propensities on the truth", "pfd_position_top",
     "ips_known"),
    ("Position-aware learning (served at position 1) beats no-distillation on the truth", "position_feature",
     "no_distill"),
    ("IPS with known propensities beats no-distillation on the truth", "ips_known", "no_distill"),
    ("IPS with regression-EM propensities beats no-distillation on the truth", "ips_em", "no_distill"),
    ("The two-tower model beats no-distillation on the truth", "two_tower", "no_distill"),
    ("PFD(position) beats LambdaMART on the truth", "pfd_position", "lambdamart"),
    ("LightGBM's position-bias model beats plain LambdaMART on the truth", "lambdamart_position", "lambdamart"))


DEBIAS = declare(*(Declared(f"debias:{a}-vs-{b}", text) for text, a, b in DEBIAS_COMPARED))


def claims_debias(res: RunRecord) -> list:
  """Which method wins where, on the truth, one claim over the eta sweep each."""
  def over_etas(a, b):
    return {f"eta={e}": tabulate.compare({a: np.asarray(r["truth"][a]), b: np.asarray(r["truth"][b])}, b)[a]
            for e, r in res["etas"].items() if a in r["truth"] and b in r["truth"]}
  return [DEBIAS[f"debias:{a}-vs-{b}"].judged(sweep, over_etas(a, b)) for _, a, b in DEBIAS_COMPARED]


RANK_DISTILL = declare(Declared("rank_distill:distilled-vs-student-alone", "Ranking distillation beats the student "
                                "trained alone, NDCG@10 (Ranking Distillation)", source="Ranking Distillation"))


def claims_rank_distill(res: RunRecord) -> list:
  """The claims a run of rank_distill states, with their verdicts."""
  rows = {k: np.asarray(v["NDCG@10"])[:, None] for k, v in res["rows"].items()}
  f = runs_per_fold(len(rows["student"]), res)
  schemes = [k for k in rows if k not in ("teacher", "student")]
  return [RANK_DISTILL["rank_distill:distilled-vs-student-alone"].judged(
      sweep, {k: tabulate.compare({k: rows[k], "student": rows["student"]}, "student")[k] for k in schemes}, f)]


SDR = declare(
    Declared("sdr:listwise-self-vs-teacher", "The listwise self-distilled student beats its teacher (SDR)",
             source="SDR"),
    Declared("sdr:pointwise-to-listwise-vs-teacher", "The pointwise-teacher, listwise-student pair beats its teacher "
             "(SDR)", source="SDR"))


def claims_sdr(res: RunRecord) -> list:
  """The claims a run of sdr states, with their verdicts."""
  rows = res["rows"]
  f = runs_per_fold(len(next(iter(rows.values()))), res)
  col = sdr.SHOW.index(5)
  return [SDR["sdr:listwise-self-vs-teacher"].judged(beats, rows, "listwise -> listwise", "listwise teacher", f, col),
          SDR["sdr:pointwise-to-listwise-vs-teacher"].judged(beats, rows, "pointwise -> listwise", "pointwise teacher",
                                                             f, col)]
