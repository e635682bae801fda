"""The cost probe (experiments/framework/costing.py): its arithmetic in closed form on planted times, the probe run
as the run at 3 epochs on its first fold in a folder of its own, and (slow) a real run's numbers untouched by it."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from absl import logging

from experiments.framework import costing, monitor, schema
from experiments.framework.costing import PROBE_EPOCHS, RowCost
from experiments.framework.monitor import PROGRESS, RowTimes
from pfd_jax.data.config import DataConfig
from pfd_jax.training import TrainConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_rows_start_epoch_and_end_from_its_times():
  # began at 10; epochs end at 17 (4 s of start + a 3 s epoch), 20, 23; ended at 24
  c = costing.row_cost(RowTimes(10.0, [(1, 3, 17.0), (2, 3, 20.0), (3, 3, 23.0)], [24.0]), now=99.0)
  assert c == RowCost(start=4.0, epoch=3.0, end=1.0, epochs=3, scaled=True)
  assert c.seconds == 14.0 and c.at(100) == 4.0 + 300.0 + 1.0
  assert c.at(100, compiled=True) == 3.0 + 300.0 + 1.0  # the probe's programs reused: a start of about an epoch
  # more epochs than the probe's: a row that does not follow --epochs (boosting rounds) counts as measured
  rounds = costing.row_cost(RowTimes(0.0, [(k, 50, 2.0 + k) for k in range(1, 51)], [60.0]), now=99.0)
  assert not rounds.scaled and rounds.epoch == pytest.approx(1.0) and rounds.at(100) == pytest.approx(60.0)
  # fewer than two timed epochs: its whole time, not scaled; a row that did not say it ended ends now
  assert costing.row_cost(RowTimes(5.0, [(1, 1, 6.0)], [None]), now=9.0) == RowCost(4.0, 0.0, 0.0, 0, False)


def test_the_runs_seconds_in_closed_form():
  rows = (RowCost(4.0, 3.0, 1.0, 3, True), RowCost(2.0, 0.5, 0.5, 3, True), RowCost(60.0, 0.0, 0.0, 0, False))
  probe = sum(r.seconds for r in rows) + 7.0  # 7 s outside the rows: loading and preparing the fold
  e = costing.extrapolate(rows, probe, folds=5, epochs=100)
  assert e.rest == pytest.approx(7.0)
  # the probed fold reuses the probe's programs (each row starts in min(c, e)); the 4 others compile again
  assert e.seconds == pytest.approx((7.0 + (3 + 300 + 1) + (0.5 + 50 + 0.5) + 60) +
                                    4 * (7.0 + (4 + 300 + 1) + (2 + 50 + 0.5) + 60))
  # a driver that times no row: its whole probe scaled by epochs
  assert costing.extrapolate((), 30.0, folds=2, epochs=30).seconds == pytest.approx(2 * 30.0 * 30 / PROBE_EPOCHS)

  # a search's screened programs stop early: counted at patience + 1 epochs, the high at every epoch
  screened = rows[:2] + (RowCost(1.0, 2.0, 0.5, 3, True, screened=True),)
  e = costing.extrapolate(screened, sum(r.seconds for r in screened) + 7.0, folds=1, epochs=100, screened=11)
  plain = 7.0 + (3 + 300 + 1) + (0.5 + 50 + 0.5)
  assert (e.seconds, e.high) == (pytest.approx(plain + 1.0 + 22 + 0.5), pytest.approx(plain + 1.0 + 200 + 0.5))
  cfg = schema.Config(data=DataConfig(dataset="synthetic"), train=TrainConfig(epochs=100))
  assert costing.say(e, cfg, None, 0, "cpu").startswith(
      "expected wall time here: about 6 min 26 s to 9 min 24 s: the search's 1 screened programs at their patience + 1 "
      "epochs, or at every epoch")
  # a refined grid the probe did not train: counted as the screened programs are, outside the probe's own time
  grid = RowCost(0.0, 10.0, 0.0, 3, True, screened=True, name=costing.GRID + "_screened")
  g = costing.extrapolate(screened, sum(r.seconds for r in screened) + 7.0, folds=1, epochs=100, screened=11,
                          unprobed=(grid,))
  assert g.rest == pytest.approx(7.0)
  assert (g.seconds, g.high) == (pytest.approx(e.seconds + 110), pytest.approx(e.high + 1000))
  said = costing.say(g, cfg, None, 0, "cpu")
  assert "the search's 2 screened programs (1 of them the refined grid, priced from the probe's plain students)" in said
  assert "2 timed rows and 1 search programs" in said


def test_what_is_said_before_a_run():
  rows = (RowCost(1.0, 2.0, 0.0, 3, True),)
  e = costing.extrapolate(rows, 7.0 + 6.0, folds=1, epochs=100)  # 1 + 200 + 6 s
  cfg = schema.Config(data=DataConfig(dataset="synthetic"), train=TrainConfig(epochs=100))
  text = costing.say(e, cfg, total_rows=10, saved=4, backend="cpu")
  assert "about 3 min 27 s" in text and "4 of 10 rows saved" in text and "about 2 min 04 s left" in text
  assert "paper" not in text and "multi-day" not in text
  day = costing.extrapolate((RowCost(1.0, 1000.0, 0.0, 3, True),), 3000.0, folds=1, epochs=100)
  assert "multi-day job on this CPU" in costing.say(day, cfg, None, 0, "cpu")
  assert "multi-day" not in costing.say(day, cfg, None, 0, "gpu")


def test_the_papers_whole_protocol_at_the_probes_rates():
  """Web30k: 5 folds x 2 losses x (the rest per loss + 6 rows x (start + end + 100 epochs x 1 seed / the run's 2))."""
  rows = (RowCost(3.0, 4.0, 1.0, 3, True), RowCost(1.0, 2.0, 1.0, 3, True))
  e = costing.extrapolate(rows, sum(r.seconds for r in rows) + 10.0, folds=1, epochs=2 * PROBE_EPOCHS)
  cfg = schema.Config(data=DataConfig(dataset="web30k", data_dir="unused"), train=TrainConfig(epochs=6),
                      run=schema.RunConfig(seeds=2, loss="rankbce"))
  rows_of_table2 = 6  # no-distillation (also the self-distillation teacher), self-distillation, two teachers and students
  per_row = (2.0 + 1.0) + 100 * 3.0 * 1 / 2
  assert costing.paper_protocol(cfg, e) == pytest.approx(5 * 2 * (10.0 + rows_of_table2 * per_row))
  text = costing.say(e, cfg, None, 0, "cpu")
  assert "--preset=paper_web30k): about 2 h 34 min" in text and "multi-day" not in text
  assert "on a GPU: python -m experiments.accelerator --steps=paper_web30k --data_dir=" in text
  assert "accelerator" not in costing.say(e, cfg, None, 0, "gpu")
  slow = costing.extrapolate((RowCost(3.0, 400.0, 1.0, 3, True),), 1300.0, folds=1, epochs=6)
  assert "multi-day job on this CPU: on a GPU: python -m experiments.accelerator --steps=paper_web30k" in costing.say(
      slow, cfg, None, 0, "cpu")
  assert costing.paper_protocol(cfg.replace(data=dict(dataset="synthetic", data_dir=None)), e) is None


def test_the_probe_is_the_run_at_three_epochs_on_its_first_fold_in_a_folder_deleted_after():
  seen = []

  def run(cfg):
    seen.append(cfg)
    assert os.path.isdir(cfg.output.run_dir) and not logging.level_info()
    for _ in range(2):  # two rows, each three epochs
      PROGRESS.begin_row()
      for k in range(1, cfg.train.epochs + 1):
        monitor.PROGRESS.epoch_ended(k, cfg.train.epochs)
      PROGRESS.end_rows(1, trained=True)
    return {}

  driver = schema.Driver("probe_test", run, lambda r: "")
  cfg = schema.Config(data=DataConfig(dataset="synthetic", draws=4), train=TrainConfig(epochs=50),
                      output=schema.OutputConfig(run_dir="/nonexistent/run"))
  PROGRESS.start(7)
  PROGRESS.row, verbosity = 3, logging.get_verbosity()
  e = costing.probe(driver, cfg)
  probe_cfg, = seen
  assert probe_cfg.train.epochs == PROBE_EPOCHS and probe_cfg.data.folds == (1,) and not probe_cfg.output.tensorboard
  assert not os.path.exists(probe_cfg.output.run_dir)
  assert len(e.rows) == 2 and all(r.scaled and r.epochs == PROBE_EPOCHS for r in e.rows) and e.folds == 4
  assert (PROGRESS.total, PROGRESS.row, PROGRESS.timed) == (7, 3, []) and logging.get_verbosity() == verbosity
  assert costing.probe_folds(driver, cfg.replace(options=None, data=dict(draws=5)))[1] == 5


def test_runs_that_get_no_probe_say_why():
  train = schema.Driver("t", None, None)
  assert costing.skipped(train, schema.Config(train=TrainConfig(epochs=3))) == "3 epochs: the probe would be the run"
  assert costing.skipped(train, schema.Config(output=schema.OutputConfig(num_processes=2))) == "a multi-process run"
  assert costing.skipped(schema.Driver("t", None, None, groups=("output",)), schema.Config()) == "it trains no network"
  assert costing.skipped(train, schema.Config()) == ""


@pytest.mark.slow
def test_a_probed_run_has_the_numbers_of_an_unprobed_one_and_plan_only_estimates(tmp_path):
  flags = ["--methods=pfd", "--loss=rankbce", "--seeds=2", "--epochs=5", "--hidden=16", "--layers=3",
           "--synthetic_queries=80,20,60", "--synthetic_mean_docs=16", "--tau=4", "--max_buckets=2", "--min_docs=5",
           "--cache_dir=", "--notensorboard"]
  out = {}
  for name, extra in (("probed", []), ("unprobed", ["--noprobe"])):
    p = subprocess.run([sys.executable, "-m", "experiments.paper.table2", *flags, *extra, f"--out_dir={tmp_path / name}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert ("expected wall time here: about" in p.stderr) == (name == "probed"), p.stderr[-2000:]
    res = json.loads((tmp_path / name / "synthetic" / "latest" / "results.json").read_text())
    fold = res["losses"]["rankbce"]["folds"]["fold1"]
    out[name] = {row: r["curves"] for row, r in fold["rows"].items()}
  assert out["probed"] == out["unprobed"] and all(len(c["test"][0]) == 5 for c in out["probed"].values())
  p = subprocess.run([sys.executable, "-m", "experiments.paper.table2", *flags, "--plan", f"--out_dir={tmp_path / 'plan'}"],
                     cwd=ROOT, capture_output=True, text=True, timeout=600)
  assert p.returncode == 0 and "expected wall time here: about" in p.stdout, p.stderr[-2000:]
  assert not (tmp_path / "plan").exists()


def test_the_pfd_search_says_its_cost_before_it_starts(monkeypatch):
  """One line before the search trains (not when an interrupted run's search is loaded): its candidates, its
  programs at the mean row's seconds so far, the flag that skips it."""
  from pfd_jax.methods import search
  o = search.SearchOptions(top=4, seeds=2, refine=1, folds=3)
  line = costing.search_cost(o, privileged=3, alpha=0.5, seconds=[20.0, 40.0])
  assert line.startswith(f"{1 + 5 + 5} candidates on 4 parts")
  # 3 columns: 5 subsets (all, each alone, all but the first); on 4 parts no distillation, a teacher and a student
  # per subset and one refined grid; the chosen teacher and student (the 50 programs a run on the logs trained)
  assert costing.programs(o, 3) == 4 * (1 + 2 * 5 + 1) + 2 == 50
  assert f"at most 50 training programs: about {costing.hms(50 * 30.0)} on this machine" in line
  assert "unknown" in costing.search_cost(o, 3, 0.5, [])
  # at the run's 100 epochs and 5 seeds: screened on 2 seeds, each after patience + 1 = 11 to 100 epochs
  # the chosen candidate's teacher and student as rows are (every seed and epoch)
  span = costing.search_cost(o, 3, 0.5, [20.0, 40.0], epochs=100, seeds=5)
  screen, chosen = 48 * 30.0 * 2 / 5, 2 * 30.0
  assert f"about {costing.hms(screen * 11 / 100 + chosen)} to {costing.hms(screen + chosen)} on this machine" in span
  # this run's rows' curves: early stopping would have run 40 and 60 epochs on them, so a screened model about 50
  point = costing.search_cost(o, 3, 0.5, [20.0, 40.0], epochs=100, seeds=5, stops=[40, 60])
  assert point.endswith(f"about {costing.hms(screen * 50 / 100 + chosen)} on this machine: its screened models (on 2 "
                        "seed(s)) at the 50 epochs early stopping at patience 10 would have run on this run's 2 rows "
                        f"here (their validation curves), {costing.hms(screen * 11 / 100 + chosen)} if each stopped "
                        f"at 11, {costing.hms(screen + chosen)} at 100, each at the 30 s a row of this run has taken; "
                        "the progress line's ETA says as it goes")
  # the curves: a row of 2 models over 12 epochs, the first's best at epoch 1 (0-based), the second's at 3; at
  # patience 10 the first would run on, the second too, until epoch 3 + 10 = 13 > 12: every epoch; at patience 2 the
  # pair stops after epoch 5 (6 epochs); a screened program's curve and a row cut short (an interrupted run) are
  # not read
  curve = [np.array([0.1, 0.1]), np.array([0.3, 0.2]), np.array([0.2, 0.25]), np.array([0.2, 0.4])] + [
      np.array([0.0, 0.0])] * 8
  ended = lambda select, **kw: RowTimes(0.0, [], [30.0], select=select, **kw)
  ensemble = [curve, [np.zeros(3)] * 12]  # one row, two trainings: each its own curve
  curves = costing.timed_curves([ended([curve]), ended([curve], screened=True), ended([curve[:5]]), ended(ensemble),
                                 ended([curve[:2] + [np.zeros(3)]])])  # the last mixes model counts: not read
  assert [c.shape for c in curves] == [(2, 12), (2, 5), (2, 12), (3, 12)]
  assert costing.curve_stops(curves, o, 12) == [12, 12, 11]  # a flat curve: best at 0, stopped after 0 + 10
  curves = curves[:1]
  assert costing.curve_stops(curves, o._replace(patience=2), 12) == [6]
  assert costing.curve_stops(curves, o._replace(patience=2, seeds=1), 12) == [4]  # the first model alone: 1 + 2 + 1
  assert costing.curve_stops([np.where(curves[0] > 0.35, np.nan, curves[0])], o._replace(patience=2), 12) == []
  # the probe's programs priced one by one: at patience 2 the row's first model alone stops after 4 epochs, its
  # second after 6, both together after 6; N models drawn from the two stop after 4 (1/2)^N + 6 (1 - (1/2)^N)
  # epochs on average (within the Monte-Carlo error of 256 draws: 4 standard errors)
  one, three = (costing.RowCost(2.0, 0.5, 1.0, 3, True, True, n) for n in (1, 3))
  stops = costing.program_stops([one, three], curves, o._replace(patience=2), 12)
  assert [p for p, _ in stops] == [one, three]
  assert abs(stops[0][1] - 5.0) < 4 * 1 / 256 ** 0.5 and abs(stops[1][1] - 5.75) < 4 * 0.66 / 256 ** 0.5
  assert stops == costing.program_stops([one, three], curves, o._replace(patience=2), 12)  # the same line
  assert costing.program_stops([one], [curves[0][:, :5]], o._replace(patience=2), 12) == []  # no full curve
  # the refined grid the probe did not train: G - 1 = 5 more settings at alpha 0.5 (alpha x temperature 3 x 2), for
  # the first subset, on each part: that part's plain students' mean start, epoch and end, 5 times their models
  # and epoch
  plain = [costing.RowCost(9.0, 9.0, 9.0, 3, True, True, 2, "teacher_z0_screened"),
           costing.RowCost(2.0, 0.5, 1.0, 3, True, True, 2, "students_z0_screened"),
           costing.RowCost(4.0, 0.7, 1.0, 3, True, True, 2, "students_z1_screened"),
           costing.RowCost(1.0, 0.3, 0.0, 3, True, True, 2, "students_z0_cf1")]
  assert costing.refined_grid(plain, o, 0.5) == [
      costing.RowCost(3.0, 5 * 0.6, 1.0, 3, True, True, 10, "students_grid_screened"),
      costing.RowCost(1.0, 5 * 0.3, 0.0, 3, True, True, 10, "students_grid_cf1")]
  assert costing.refined_grid(plain + [plain[1]._replace(models=10)], o, 0.5) == []  # the probe trained a grid
  assert costing.refined_grid(plain, o._replace(refine=0), 0.5) == []
  grid = costing.RowCost(0.0, 2.5, 0.0, 3, True, True, 10, "students_grid_screened")
  priced = costing.search_cost(o._replace(patience=2), 3, 0.5, [20.0, 40.0], epochs=12, seeds=5,
                               probed=[(one, 5.0), (three, 5.75), (grid, 7.0)])
  at = lambda k1, k3, kg: 2 * 30.0 + (3.0 + k1 * 0.5) + (3.0 + k3 * 0.5) + kg * 2.5
  assert priced.endswith(f"about {costing.hms(at(5.0, 5.75, 7.0))} on this machine: 3 screened programs (1 of them "
                         f"the refined grid priced from the probe's plain students, {costing.hms(at(5.0, 5.75, 0))} "
                         "without it), each at the probe's start and epoch for the epochs (mean 6) early stopping at "
                         "patience 2 would have run on this run's rows' validation curves with as many models as it "
                         f"trains, {costing.hms(at(3, 3, 3))} if each stopped at 3, {costing.hms(at(12, 12, 12))} at "
                         "12; the chosen candidate's teacher and student at the 30 s a row of this run has taken")
  said, events = [], []
  monkeypatch.setattr(PROGRESS, "timed", [RowTimes(0.0, [], [30.0]), RowTimes(5.0, [], [None])])  # one ended
  monkeypatch.setattr(costing.logging, "info", lambda fmt, *args: said.append(fmt % args))
  want = f"the PFD search: {costing.search_cost(o, 3, 0.5, [30.0])}; --nosearch skips it"
  trains = costing.announce_search(lambda row, config, make: make(), o, 3, 0.5)
  assert trains("row", None, lambda: events.append(list(said)) or "found") == "found"
  loads = costing.announce_search(lambda row, config, make: "saved", o, 3, 0.5)
  assert loads("row", None, lambda: events.append("trained")) == "saved"
  assert said == [want] and events == [said]  # said, then trained; loaded: silent
