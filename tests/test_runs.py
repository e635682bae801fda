"""Runs that survive interruption, never overwrite each other, and never report silent garbage."""
import dataclasses
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from absl import flags
from sklearn.datasets import dump_svmlight_file

from experiments import export_logs

from experiments.paper import table2
from experiments.framework import cli, fold_data, lifecycle, rowstore, rundir, tabulate
from pfd_jax import data as data_lib
from pfd_jax.data.config import DataConfig
from pfd_jax.data import logs
from pfd_jax.methods import rows as rows_lib

from conftest import TINY, heavy_after_first

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def two_folds(tmp_path_factory):
  """A LETOR layout with Fold1 and Fold2 (simulated logs; ids 21-23 privileged), read as --dataset=ohsumed."""
  root = tmp_path_factory.mktemp("two_folds")
  for k in (1, 2):
    export_logs.write_folder(str(root / f"Fold{k}"), logs.simulate(sessions=(60, 20, 40), min_items=10,
                                                                   max_items=20, seed=k))
  return str(root)


def _cmd(data_dir, out_dir, *extra):
  return [sys.executable, "-m", "experiments.paper.table2", "--dataset=ohsumed", f"--data_dir={data_dir}",
          "--labels=file", "--privileged=21,22,23", "--methods=pfd", "--loss=rankbce", "--seeds=2", "--epochs=30",
          "--hidden=16", "--layers=3", "--max_buckets=2", "--min_docs=5", "--cache_dir=", "--noprobe",
          f"--out_dir={out_dir}",
          *extra]


def test_configurations_get_their_own_run_folders(two_folds, tmp_path):
  """Another flag -> another folder; the same flags -> the same folder (loaded, not retrained); --restart retrains."""
  from absl import flags
  fv = flags.FlagValues()
  cli.define_flags(table2.DRIVER, fv, key_module="t")
  argv = _cmd(two_folds, tmp_path)[3:]
  fv(["prog", *argv])
  a, prov, lock_a = rundir.prepare_run(cli.config_from_flags(table2.DRIVER, fv), table2.DRIVER)
  fv2 = flags.FlagValues()
  cli.define_flags(table2.DRIVER, fv2, key_module="t")
  fv2(["prog", *argv, "--alpha=0.7"])
  b, _, lock_b = rundir.prepare_run(cli.config_from_flags(table2.DRIVER, fv2), table2.DRIVER)
  lock_a.release(), lock_b.release()
  assert a != b and os.path.dirname(a) == os.path.dirname(b) == str(tmp_path / f"ohsumed-{os.path.basename(two_folds)}")
  assert not os.path.lexists(os.path.join(os.path.dirname(a), "latest"))  # only a finished run is 'latest'
  rundir.point_latest(b)
  assert os.readlink(os.path.join(os.path.dirname(a), "latest")) == os.path.basename(b)
  files = prov["data"]["files"]
  assert set(files) == {f"fold{k}/{s}" for k in (1, 2) for s in ("train", "vali", "test")}
  assert all(len(f["sha256"]) == 64 and f["bytes"] > 0 for f in files.values())
  assert prov["code"]["pfd_jax"] and len(prov["code"]["source_sha256"]) == 64
  assert prov["code"]["git_commit"] is None or len(prov["code"]["git_commit"]) == 40
  # the page's declarations are read at the run's commit, less the paths it ran with uncommitted changes
  assert "family" not in prov and (prov["code"]["git_commit"] is None or isinstance(prov["code"]["git_changed"], list))


def _prepared(data_dir, out_dir, *extra):
  from absl import flags
  fv = flags.FlagValues()
  cli.define_flags(table2.DRIVER, fv, key_module="t")
  fv(["prog", *_cmd(data_dir, out_dir, *extra)[3:]])
  run_dir, prov, lock = rundir.prepare_run(cli.config_from_flags(table2.DRIVER, fv), table2.DRIVER)
  lock.release()
  return run_dir, prov


def test_a_folder_named_like_another_gets_a_label_of_its_own_and_a_fixed_file_keeps_the_other_folds(two_folds,
                                                                                                    tmp_path):
  """Two data folders of one name (a Fold1-only copy beside the two-fold original) never share a label, so the
  copy's run cannot repoint the original's 'latest'; a file fixed in one fold keeps the saved rows of the others
  (the same configuration and code), and the fold whose file changed trains again."""
  import shutil
  a, _ = _prepared(two_folds, tmp_path)
  copy = tmp_path / "elsewhere" / os.path.basename(two_folds)
  shutil.copytree(os.path.join(two_folds, "Fold1"), copy / "Fold1")
  b, _ = _prepared(str(copy), tmp_path)
  assert os.path.basename(os.path.dirname(a)) == f"ohsumed-{os.path.basename(two_folds)}"
  assert os.path.dirname(b) != os.path.dirname(a) and os.path.dirname(b).startswith(os.path.dirname(a) + "-")
  assert _prepared(str(copy), tmp_path)[0] == b  # the same folder again: the same label and run folder
  # saved rows of both folds in the original's run folder; then fold 2's test file is fixed
  edited = tmp_path / "edited" / "data"
  shutil.copytree(two_folds, edited)
  c, _ = _prepared(str(edited), tmp_path / "out2")
  for fold in ("fold1", "fold2"):
    os.makedirs(os.path.join(c, "runs", "rankbce", fold))
    open(os.path.join(c, "runs", "rankbce", fold, "pfd.msgpack"), "wb").write(fold.encode())
  with open(edited / "Fold2" / "test.txt", "a") as f:
    f.write("0 qid:999999 1:0.5\n")
  d, _ = _prepared(str(edited), tmp_path / "out2")
  assert d != c and os.path.dirname(d) == os.path.dirname(c)
  assert open(os.path.join(d, "runs", "rankbce", "fold1", "pfd.msgpack"), "rb").read() == b"fold1"
  assert not os.path.exists(os.path.join(d, "runs", "rankbce", "fold2"))


@pytest.mark.heavy
def test_saved_rows_round_trip(tmp_path):
  cfg = TINY.replace(output=dict(run_dir=str(tmp_path)))
  ds, dd, tc, keys = fold_data.fold_setup(cfg)
  rows = rowstore.RowStore(cfg, ds)
  calls = []
  first = rows("no_distill", "x", tc, lambda: calls.append(1) or __import__("pfd_jax").train_on_data(keys, tc, dd, "x"))
  again = rows("no_distill", "x", tc, lambda: calls.append(2))
  assert calls == [1]
  for a, b in zip(jax_leaves(first.params), jax_leaves(again.params)):
    np.testing.assert_array_equal(a, b)
  np.testing.assert_array_equal(first.curves["test"], again.curves["test"])
  np.testing.assert_array_equal(first.best_epoch, again.best_epoch)
  restart = rowstore.RowStore(TINY.replace(output=dict(run_dir=str(tmp_path)), run=dict(restart=True)), ds)
  restart("no_distill", "x", tc, lambda: calls.append(3) or first)
  assert calls == [1, 3]


def test_what_a_row_found_is_saved_and_loaded_like_its_models(tmp_path):
  """The PFD search (a row's `found`) is kept beside the rows: a resumed run loads it instead of screening again,
  a row trained with another configuration screens again, and --restart always does."""
  import jax.numpy as jnp
  from pfd_jax.methods import rows as rows_lib, search
  cfg = TINY.replace(output=dict(run_dir=str(tmp_path)))
  ds, dd, tc, keys = fold_data.fold_setup(cfg)
  entry = rows_lib.REGISTRY["pfd_searched"]
  pick = search.Candidate((1,), 0.5, 2.0)
  made = []
  def make():
    made.append(1)
    return search.Search(lists={pick: np.arange(3.0)}, choice=dict(chosen=pick), strength=np.ones(2), teachers={},
                         chosen=jnp.arange(4.0), baseline=None, valid=np.arange(3), seconds=1.5)
  first = rowstore.RowStore(cfg, ds).found()(entry, tc, make)
  again = rowstore.RowStore(cfg, ds).found()(entry, tc, make)  # a resumed run: loaded
  assert made == [1] and os.path.exists(tmp_path / "runs" / tc.loss / "fold1" / "pfd_searched.found.pickle")
  assert again.candidate == pick and again.seconds == 1.5
  np.testing.assert_array_equal(again.chosen, first.chosen)
  np.testing.assert_array_equal(again.lists[pick], first.lists[pick])
  rowstore.RowStore(cfg, ds).found()(entry, dataclasses.replace(tc, alpha=0.3), make)  # another configuration
  restart = TINY.replace(output=dict(run_dir=str(tmp_path)), run=dict(restart=True))
  rowstore.RowStore(restart, ds).found()(entry, tc, make)
  assert made == [1, 1, 1]


def jax_leaves(tree):
  import jax
  return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def test_a_split_without_positives_is_an_error_before_training():
  cfg = TINY.replace(data=DataConfig(dataset="synthetic", synthetic_queries=(40, 10, 30), synthetic_mean_docs=12.0,
                                     tau=9.0, min_docs=5, cache_dir=""))
  with pytest.raises(data_lib.DataError, match=r"no test list has a positive label \(labels=gumbel, t=4.0, tau=9.0"):
    fold_data.fold_setup(cfg)


def test_no_table_prints_nan_or_inf():
  assert tabulate.fmt_change(0.3, 0.0) == "n/a" and tabulate.fmt_change(np.nan, 0.3) == "n/a"
  assert tabulate.fmt_pm(np.nan, 0.1) == "n/a" and tabulate.fmt_change(0.33, 0.3) == "+10.0%"
  assert tabulate.ratio(1.0, 0.0) is None


def test_nan_label_names_file_and_line(tmp_path):
  p = tmp_path / "f.txt"
  p.write_text("1 qid:1 1:0.5\nnan qid:1 1:0.2\n")
  with pytest.raises(data_lib.DataError, match=rf"{p}:2: non-finite label 'nan'"):
    data_lib.load_letor(str(p))


@pytest.mark.parametrize("argv,code,want", heavy_after_first([
    (["--dataset=ohsumed", "--data_dir=/nonexistent/folder"], 1, "error: --data_dir '/nonexistent/folder'"),
    (["--dataset=letor", "--data_dir={bad}", "--privileged=1"], 1,
     "error: {bad}/train.txt:2: value of feature 1 'x' is not a number"),
    (["--dataset=letor", "--data_dir={bad}/only_test", "--privileged=1", "--min_docs=1"], 1,
     "error: dataset 'letor' fold 1 needs the splits ['test', 'train']; it has ['test']"),
    (["--seeds=0"], 2, "error: --seeds=0: must be >= 1"),
    (["--out_dir={bad}/test.txt/results"], 1, "error: {bad}/test.txt/results: Not a directory (a part of "
     "the path is a file, not a folder)"),
    (["--cache_dir={bad}/test.txt", "--dataset=letor", "--data_dir={bad}/only_test", "--privileged=1"], 1,
     "error: {bad}/test.txt: the cache folder (--cache_dir) is a file"),
]))
def test_known_user_errors_are_one_readable_line(tmp_path, argv, code, want):
  bad = tmp_path / "bad"
  bad.mkdir()
  (bad / "train.txt").write_text("1 qid:1 1:0.5\n0 qid:1 1:x\n")
  (bad / "test.txt").write_text("1 qid:1 1:0.5\n")
  (bad / "only_test").mkdir()
  (bad / "only_test" / "test.txt").write_text("1 qid:1 1:0.5\n")
  argv = [a.replace("{bad}", str(bad)) for a in argv]
  if not any(a.startswith("--out_dir") for a in argv):
    argv.append(f"--out_dir={tmp_path}")
  p = subprocess.run([sys.executable, "-m", "experiments.paper.table2", *argv], cwd=ROOT, capture_output=True, text=True,
                     timeout=120)
  assert p.returncode == code and want.replace("{bad}", str(bad)) in p.stderr, p.stderr[-800:]
  assert "Traceback" not in p.stderr


# ---------------------------------------------------------------- a property-based fuzz of the LETOR reader

_values = st.floats(-1e6, 1e6, allow_nan=False, width=32)


@st.composite
def letor_files(draw):
  """(x [n, d], labels [n], qids [n] grouped): a random dense well-formed ranking file's contents."""
  d = draw(st.integers(1, 6))
  sizes = draw(st.lists(st.integers(1, 5), min_size=1, max_size=6))
  n = sum(sizes)
  x = np.array(draw(st.lists(_values, min_size=n * d, max_size=n * d)), np.float32).reshape(n, d)
  x[:, -1] = np.where(x[:, -1] == 0, 1.0, x[:, -1])  # the last column present, so the width is d
  labels = np.array(draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)), np.float32)
  qid = np.repeat(np.arange(1, len(sizes) + 1) * 7, sizes)
  return x, labels, qid


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(letor_files())
def test_well_formed_files_round_trip_against_scikit_learn(tmp_path, f):
  x, labels, qid = f
  path = str(tmp_path / "rt.txt")
  dump_svmlight_file(x, labels, path, query_id=qid, zero_based=False)
  g = data_lib.load_letor(path)
  np.testing.assert_array_equal(g.x, x)
  np.testing.assert_array_equal(g.rel, labels)
  np.testing.assert_array_equal(np.repeat(g.qid, g.sizes), qid)


_corruptions = st.sampled_from([
    lambda ln: ln.replace(":", "=", 1) if ln.count(":") > 1 else "x" + ln,  # label or qid token broken
    lambda ln: ln.rstrip("\n") + " 3:abc\n",                          # non-numeric value
    lambda ln: ln.rstrip("\n") + " 0:1\n",                            # feature id 0
    lambda ln: "nan " + ln.split(" ", 1)[1],                         # NaN label
    lambda ln: ln.rstrip("\n") + " 99:inf\n",                         # infinite value
    lambda ln: ln.split(" ", 1)[0] + " " + " ".join(ln.split()[2:]) + "\n",  # qid missing
    lambda ln: ln.rstrip("\n") + " 5\n",                              # token without ':'
])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(letor_files(), _corruptions, st.data())
def test_any_single_corrupted_line_names_its_file_and_line(tmp_path, f, corrupt, data):
  x, labels, qid = f
  path = str(tmp_path / "bad.txt")
  dump_svmlight_file(x, labels, path, query_id=qid, zero_based=False)
  lines = open(path).read().splitlines(True)
  body = [i for i, ln in enumerate(lines) if not ln.startswith("#")]
  i = data.draw(st.sampled_from(body))
  lines[i] = corrupt(lines[i])
  open(path, "w").write("".join(lines))
  with pytest.raises(ValueError, match=rf"{path}:{i + 1}: "):
    data_lib.load_letor(path)


@pytest.mark.slow
def test_second_run_loads_its_programs_from_the_persistent_compilation_cache(tmp_path):
  cmd = [sys.executable, "-m", "experiments.paper.table2", "--synthetic_queries=40,10,30", "--synthetic_mean_docs=12",
         "--tau=4", "--epochs=1", "--seeds=1", "--hidden=8", "--layers=2", "--min_docs=5", "--methods=no_distill",
         "--loss=rankbce", "--restart", f"--out_dir={tmp_path / 'out'}", f"--compile_cache={tmp_path / 'jax'}"]
  first = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert first.returncode == 0, first.stderr[-1000:]
  entries = sorted(os.listdir(tmp_path / "jax"))
  assert len(entries) >= 3  # init, the epoch program, the evaluation, ...
  second = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert second.returncode == 0, second.stderr[-1000:]
  assert sorted(os.listdir(tmp_path / "jax")) == entries  # every program came from the cache


def test_the_accelerator_refuses_a_step_it_does_not_have():
  p = subprocess.run([sys.executable, "-m", "experiments.accelerator", "--steps=decisive_gpu,webb30k"], cwd=ROOT,
                     capture_output=True, text=True, timeout=120)
  assert p.returncode == 2 and "--steps" in p.stderr
  assert "one or more of numeric, decisive_gpu, web30k, headline" in p.stderr


def test_the_accelerators_paper_steps_need_the_data_folder():
  p = subprocess.run([sys.executable, "-m", "experiments.accelerator", "--steps=paper_yahoo"], cwd=ROOT,
                     capture_output=True, text=True, timeout=120)
  assert p.returncode == 2 and "--data_dir" in p.stderr and "paper_<dataset>" in p.stderr


def test_a_paper_presets_gpu_time_is_said_unmeasured_until_a_run_on_one():
  from experiments.framework import protocol
  for p in protocol.PAPER_PRESETS:
    assert "its time on a GPU not measured (no run of it on one yet)" in p.accelerator and "H200" not in p.accelerator


def test_the_accelerator_gives_a_step_the_time_the_later_steps_that_fit_do_not_need():
  from experiments import accelerator as A
  assert A.FLAGS["steps"].default == ["numeric", "decisive_gpu", "headline"]  # web30k and calibrations by name
  steps = {s.name: s for s in A.STEPS}
  numeric, decisive, web, head = (steps[n] for n in ("numeric", "decisive_gpu", "web30k", "headline"))
  assert A.plan([numeric, decisive, web, head], 480) == 480 - head.need  # only the headline fits beside it
  assert A.plan([decisive, web, head], 480 - numeric.need) is None  # it needs a call of its own: the next
  assert A.plan([web, head], 480 - numeric.need) is None
  assert A.plan([head], 480 - numeric.need) == 480 - numeric.need  # the last takes what is left
  assert A.plan([web, head], 1000) == 1000 - head.need
  assert A.plan([decisive], 480) == 480
  assert A.plan([head], head.need - 1) is None
  assert A.plan([head], 200, dry=True) == 200 and A.plan([head], head.dry_need - 1, dry=True) is None


def test_every_accelerator_step_is_a_command_its_driver_accepts(tmp_path):
  """Each driver step's command line, on the device and in the dry run, parses into its driver's configuration (a
  step the device machine would refuse costs a call); the analogues' calibrations run at the paper's Table 1 sizes
  (--synthetic_scale = 1 / the declared fraction), never by default."""
  import importlib
  from absl import flags
  from experiments import accelerator as A, calibrate
  from experiments.framework import protocol
  from pfd_jax.data import analogues
  for step in (s for s in A.STEPS if not s.tests):
    driver = importlib.import_module(step.args[0]).DRIVER
    for dry in (False, True):
      fv = flags.FlagValues()
      cli.define_flags(driver, fv, key_module="t")
      fv(lifecycle.expand_preset(driver, ["prog", *A.command(step, str(tmp_path), dry, "/data/paper")[3:]]))
      cfg = cli.config_from_flags(driver, fv)
      if step.name.startswith("paper_"):  # the preset on the folder named, the dry run at toy epochs
        assert (cfg.data.dataset, cfg.data.data_dir) == (step.name[len("paper_"):], "/data/paper")
        assert cfg.train.epochs == (2 if dry else 100)
      if step.name.startswith("calibrate_"):
        a = analogues.ANALOGUES[cfg.data.dataset]
        assert cfg.data.synthetic_scale == pytest.approx(0.05 if dry else 1 / a.fraction)
        assert a.num_queries(cfg.data.synthetic_scale)[0] == (max(round(a.queries[0] * a.fraction * 0.05), 1) if dry
                                                               else a.queries[0])
        # the test lists: the analogue's declared multiple of Table 1's on the device (calibrate's default); the toy
        # size's own in the dry run
        assert calibrate.test_scale(cfg) == (1 if dry else protocol.ANALOGUE_TEST_LISTS[cfg.data.dataset])
  assert {s.name for s in A.STEPS if s.name.startswith("calibrate_")} == {f"calibrate_{n}" for n in analogues.ANALOGUES}
  assert not [n for n in A.FLAGS["steps"].default if n.startswith("calibrate_")]


def _stop_when_ready(stopper, ready):
  """Asks `stopper` to stop once the child wrote `ready` (its handler is installed): synchronised on the file."""
  import threading

  def watch():
    while not ready.exists():
      threading.Event().wait(0.01)
    stopper.requested = True
  threading.Thread(target=watch, daemon=True).start()


def test_a_step_asked_to_stop_may_save_then_is_killed_after_the_grace(tmp_path):
  """supervise: a step asked to stop (the call's own SIGTERM, or its deadline) gets its stop signal and may finish
  saving (here: a child that writes 'saved' when SIGTERM arrives); one that ignores it is killed after the grace."""
  from experiments import accelerator as A
  polite = ("import signal, sys, time, pathlib\n"
            "def stop(*a):\n  pathlib.Path(sys.argv[1]).write_text('saved'); sys.exit(143)\n"
            "signal.signal(signal.SIGTERM, stop)\npathlib.Path(sys.argv[2]).write_text('')\n"
            "while True: time.sleep(0.05)\n")
  deaf = ("import signal, sys, time, pathlib\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
          "pathlib.Path(sys.argv[1]).write_text('')\nwhile True: time.sleep(0.05)\n")
  stopper = A.Stopper(handlers=False)  # this test process keeps its own handlers
  _stop_when_ready(stopper, tmp_path / "ready1")
  rc, how = A.supervise([sys.executable, "-c", polite, str(tmp_path / "s"), str(tmp_path / "ready1")],
                        str(tmp_path / "a.log"), 600, grace=60, stop_signal=signal.SIGTERM, stopper=stopper)
  assert (rc, how) == (143, "stopped on request") and (tmp_path / "s").read_text() == "saved"
  stopper.requested = False
  _stop_when_ready(stopper, tmp_path / "ready2")
  rc, how = A.supervise([sys.executable, "-c", deaf, str(tmp_path / "ready2")], str(tmp_path / "b.log"), 600,
                        grace=1, stop_signal=signal.SIGTERM, stopper=stopper)
  assert rc == -signal.SIGKILL and how == "stopped on request and killed after the grace period"
  stopper.requested = False
  rc, how = A.supervise([sys.executable, "-c", "pass"], str(tmp_path / "c.log"), 600, grace=1,
                        stop_signal=signal.SIGTERM, stopper=stopper)
  assert (rc, how) == (0, "done")


ACCELERATOR_FILES = ("accelerator.json", "numeric.log", "decisive_gpu.log", "decisive_gpu.tar.gz", "web30k.log",
                     "web30k.tar.gz", "headline.log", "headline.tar.gz")


@pytest.mark.slow
@pytest.mark.long
def test_the_accelerator_commands_dry_run_runs_every_step(tmp_path):
  """python -m experiments.accelerator --dry_run: the numeric tests (one file), the decisive protocol (sized by the
  page's pilot, its plan recorded), the Web30k-size preset and the benchmark's headline at toy size, each a step with
  its log; with $OUT set, the device and each step's status in accelerator.json and each driver step's runs packed
  there as on the device machine (8 files: the device tool returns at most 8), and unpacked into a results folder
  they are where the report reads them. The command's own budget (--minutes) stops it before the test's timeout. The
  budget is a safety net, not a target: with a cold compilation cache (a fresh checkout, as on CI) the headline
  alone compiles for ~3 minutes on two cores, and beside another worker's tests the whole took 9 minutes (its
  headline killed at 9.5), where it takes 3 alone."""
  env = dict(os.environ, OUT=str(tmp_path / "out"))
  p = subprocess.run([sys.executable, "-m", "experiments.accelerator", "--dry_run", "--minutes=20",
                      "--steps=numeric,decisive_gpu,web30k,headline"], cwd=ROOT,
                     env=env, capture_output=True, text=True, timeout=1260)
  assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
  assert "4 of 4 steps done" in p.stdout
  out = tmp_path / "out"
  assert sorted(os.listdir(out)) == sorted(ACCELERATOR_FILES)
  import json
  import tarfile
  record = json.loads((out / "accelerator.json").read_text())
  assert [s["step"] for s in record["steps"]] == ["numeric", "decisive_gpu", "web30k", "headline"]
  assert record["device"]["numerics"]["packages"]["jax"] and all(s["ended"] == "done" for s in record["steps"])
  assert " PASSED" in (out / "numeric.log").read_text() and " passed" in (out / "numeric.log").read_text()
  for s in ("headline", "decisive_gpu", "web30k"):
    with tarfile.open(out / f"{s}.tar.gz") as tar:
      assert not [n for n in tar.getnames() if os.path.basename(n) in ("tensorboard", "models", ".lock")
                  or n.endswith(".msgpack")]
      tar.extractall(tmp_path / "results", **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))
  table2 = tmp_path / "results" / "table2"
  decisive = json.loads((table2 / "synthetic-decisive_gpu" / "latest" / "results.json").read_text())
  assert decisive["pilot"]["target_mde"] == 0.02 and decisive["config"]["data"]["draws"] == 2
  assert (table2 / "synthetic-web30k" / "latest" / "table.md").exists()


@pytest.mark.slow
def test_a_stopped_accelerator_call_keeps_the_finished_loss_and_the_next_call_resumes_it(tmp_path):
  """The dry run's decisive step (a drawn run, both losses) stopped by a SIGTERM to the accelerator once RankBCE's
  rows are all saved (the first RankNet row's file: synchronised on the file) exits at its next safe point; the same
  command then loads every RankBCE row instead of training it, finishes RankNet, and writes the results an
  uninterrupted call writes, bit for bit (the fingerprint of results.json)."""
  import glob
  import json
  import threading
  from experiments.page import published
  cmd = lambda root: [sys.executable, "-m", "experiments.accelerator", "--dry_run", "--steps=decisive_gpu",
                      f"--out_root={root}", "--minutes=9"]
  env = dict(os.environ, OUT=str(tmp_path / "out"))
  p = subprocess.Popen(cmd(tmp_path / "r"), cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
  run = tmp_path / "r" / "table2" / "synthetic-decisive_gpu"
  saved = lambda loss: glob.glob(str(run / "[0-9a-f]*" / "runs" / loss / "*" / "*.msgpack"))  # not 'latest' beside it
  while p.poll() is None and not saved("ranknet"):
    threading.Event().wait(0.05)
  assert p.poll() is None, "the run ended before RankNet's first row was saved: " + p.stdout.read()[-2000:]
  p.send_signal(signal.SIGTERM)
  first = p.communicate(timeout=300)[0]
  assert p.returncode == 1, first[-2000:]
  record = json.loads((tmp_path / "out" / "accelerator.json").read_text())
  assert record["steps"][0]["ended"] == "stopped on request" and record["steps"][0]["rc"] == 143, record
  rankbce, ranknet = saved("rankbce"), saved("ranknet")  # what the stopped call had saved
  second = subprocess.run(cmd(tmp_path / "r"), cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
  assert second.returncode == 0, second.stdout[-2000:]
  log = (tmp_path / "out" / "decisive_gpu.log").read_text()
  loaded = [ln for ln in log.splitlines() if "loaded from" in ln and os.sep + "rankbce" + os.sep in ln]
  assert len(saved("ranknet")) == len(rankbce) == len(loaded) > 3, log[-3000:]  # every RankBCE row, loaded
  whole = subprocess.run(cmd(tmp_path / "w"), cwd=ROOT, env=dict(env, OUT=str(tmp_path / "out_w")),
                         capture_output=True, text=True, timeout=600)
  assert whole.returncode == 0, whole.stdout[-2000:]
  read = lambda root: json.loads((root / "table2" / "synthetic-decisive_gpu" / "latest" / "results.json").read_text())
  resumed, uninterrupted = read(tmp_path / "r"), read(tmp_path / "w")
  assert set(resumed["losses"]) == {"rankbce", "ranknet"}
  assert published.fingerprint(resumed) == published.fingerprint(uninterrupted)
  # the resumed run says what it loaded and what those rows took when the first call trained them
  assert resumed["resumed"]["rows"] == len(rankbce) + len(ranknet) and resumed["resumed"]["seconds"] > 0
  assert "resumed" not in uninterrupted and uninterrupted["command"].startswith("python -m experiments.paper.table2 ")
  table = lambda root: (root / "table2" / "synthetic-decisive_gpu" / "latest" / "table.md").read_text()
  assert "rows loaded from earlier processes" in table(tmp_path / "r") and "loaded" not in table(tmp_path / "w")


# Every row of the main job and the fingerprint its saved row carries (rowstore.fingerprint: its view, its own
# training configuration and the registered code it ran), as a run of the main job wrote them. A change that moves
# one makes every saved row of it, and every committed draw that keys on it, train again: a refactoring must leave
# these as they are; a change that means to retrain a row updates its value here, and says so.
MAIN_JOB_FINGERPRINTS = {
  "rankbce": {
    "gbdt_xent_from_pfd": "2c477d56020b127a",
    "gend": "5306a3985bb14543",
    "gend_teacher": "1318f64342a4a390",
    "lambdamart": "ac30a145075644de",
    "lambdamart_from_pfd": "80797240a2a54bbd",
    "lambdamart_teacher": "4827a2e5fa4031a9",
    "no_distill": "055e35c7742e1c60",
    "pfd": "24b6afefd5fb02e8",
    "pfd_from_lambdamart": "afdcd65e4c1e2ea9",
    "pfd_teacher": "115dc6748ae389c0",
    "placebo": "f3c1c80fed78368d",
    "placebo_teacher": "5fb4ddfc562f0131",
    "self_distill": "dbf33fa9cf6a7aeb",
  },
  "ranknet": {
    "gbdt_xent_from_pfd": "4823f8772891d070",
    "gend": "776f0cfeeca7b847",
    "gend_teacher": "7e36b11838a9e5e3",
    "lambdamart": "5a93b95f299c8821",
    "lambdamart_from_pfd": "3954cb87665eb7da",
    "lambdamart_teacher": "0fbbbaefbe80ea0f",
    "no_distill": "dfa4bed02ff57890",
    "pfd": "3293a609dd339c6d",
    "pfd_from_lambdamart": "08417fcf6bf68787",
    "pfd_teacher": "7bd2735cf9a9dc0d",
    "placebo": "dae822fbb8b920a8",
    "placebo_teacher": "6b928a0e30f03270",
    "self_distill": "1f645437938adaad",
  },
}


def test_the_main_job_s_rows_keep_their_fingerprints():
  """Each row the main job trains, at the configuration its flags give by default, fingerprints as its saved row did,
  and the main job trains exactly these rows."""
  fv = flags.FlagValues()
  cli.define_flags(table2.DRIVER, fv)
  fv(["prog"])
  cfg = cli.config_from_flags(table2.DRIVER, fv)
  assert set(cfg.losses) == set(MAIN_JOB_FINGERPRINTS)
  for loss, pinned in MAIN_JOB_FINGERPRINTS.items():
    tc = cfg.train_config(loss)
    plan = rows_lib.plan(cfg.options.methods_for(1), cfg.options.offered(), not cfg.options.teachers_only,
                         cfg.options.baseline)
    now = {r.name: rowstore.fingerprint(r.recipe.view, r.recipe.config(tc), r) for r in plan}
    assert now == pinned, {n: (pinned.get(n), f) for n, f in now.items() if pinned.get(n) != f}
