"""The related systems' drivers and the debiasing driver, each end to end once at its smallest size; heavy, all of
them (the default tier's driver paths are test_drivers.py's cheapest, which share their compiled programs)."""
import pytest

from conftest import TINY, driver_end_to_end, tiny
from experiments.related import committee_perceptron, debias, rank_distill, sdr
from experiments.paper import pfd_teacher_loss

CASES = {  # driver: (its configuration, the key of its results.json that holds its rows or points, and their names)
    sdr.DRIVER: (tiny(sdr.Options(temperatures=(2.0,)), run=dict(loss="softmax")), ("rows", None)),
    rank_distill.DRIVER: (tiny(rank_distill.Options(teacher_hidden=32, student_hidden=8, schemes=("uniform",))),
                          ("rows", ["teacher", "student", "uniform"])),
    pfd_teacher_loss.DRIVER: (tiny(pfd_teacher_loss.Options(teachings=("listwise",))), ("rows", None)),
    debias.DRIVER: (TINY.replace(options=debias.Options(etas=(0.0,), sessions=(40, 20, 30), random_share=0.5,
                                                        lightgbm=False, placebo=False)), ("etas", ["0"])),
    committee_perceptron.DRIVER: (tiny(committee_perceptron.Options(passes=2, committee_sizes=(2,), vote_capacity=4,
                                                                    svm_c=(0.1,), timing_passes=1),
                                       data=dict(min_docs=1)), ("folds", ["fold1"])),
}


pytestmark = pytest.mark.heavy


@pytest.mark.parametrize("driver", list(CASES), ids=lambda d: d.name)
def test_each_driver_runs_end_to_end_and_writes_its_outputs(driver, tmp_path):
  driver_end_to_end(driver, *CASES[driver], tmp_path)
