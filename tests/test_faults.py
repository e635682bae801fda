"""Faults a machine or a cluster delivers, and a new user's traps: every case ends in one line, the right exit
code, and nothing partial. None of these tests races a timer: signals are sent by the run itself at a chosen
point (tests/signal_run.py), processes are synchronised on their output (pipes) or on files."""
import json
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CACHE, TINY
from experiments import predict
from experiments.framework import guards
from experiments.framework import fold_data, monitor, outputs, schema
from pfd_jax import data as data_lib
from pfd_jax.methods import distill
from pfd_jax import files
from pfd_jax import serving
from pfd_jax.methods.ranker import make_ranker
from pfd_jax.training import EpochScalars
from pfd_jax.config import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.dirname(os.path.abspath(__file__))
TINY_FLAGS = ["--methods=pfd", "--loss=rankbce", "--seeds=2", "--epochs=4", "--hidden=16", "--layers=3",
              "--synthetic_queries=80,20,60", "--synthetic_mean_docs=16", "--tau=4", "--max_buckets=2",
              "--min_docs=5", "--cache_dir=", "--noprobe"]  # tiny runs: no cost probe (tests/test_costing.py)


def _env(*paths):
  return dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, *paths]))


def _table2(out, *extra, mode=None):
  """The tiny table2 command in its own process; it loads its programs from the suite's compilation cache, but
  for the signal sent when compilation ends (mode compile), which needs a compilation: its own empty cache."""
  cmd = ([sys.executable, os.path.join(HERE, "signal_run.py"), mode] if mode else
         [sys.executable, "-m", "experiments.paper.table2"])
  cache = f"--compile_cache={'' if mode == 'compile' else CACHE}"
  return subprocess.run(cmd + TINY_FLAGS + [cache, f"--out_dir={out}", *extra], cwd=ROOT, env=_env(),
                        capture_output=True, text=True, timeout=300)


def _numbers(out):
  """The latest results.json under `out`, without wall times, timestamps and where it was written."""
  res = json.load(open(out / "synthetic" / "latest" / "results.json"))
  for fold in res["losses"]["rankbce"]["folds"].values():
    fold.pop("seconds")
    for row in fold["rows"].values():
      row.pop("seconds")
  return dict(losses=res["losses"], config=res["config"] | {"output": None}, data=res["provenance"]["data"])


def _saved_rows(out):
  return sorted(p.name for p in out.glob("synthetic/*/runs/rankbce/fold1/*.msgpack"))


def _epochs_logged(err):
  return [(row, int(e)) for row, e in re.findall(r"\] (\w+)\s+row \d+/\d+ epoch\s+(\d+)/", err)]


# ------------------------------------------------------------------------------------------------ signals

@pytest.mark.slow
@pytest.mark.parametrize("mode", ["compile", "row", "between", "twice"])
def test_a_signal_stops_the_run_at_the_next_safe_point(tmp_path, mode):
  p = _table2(tmp_path, mode=mode)
  err = p.stderr
  assert p.returncode == 143, err[-1500:]
  assert "Traceback" not in err
  epochs = _epochs_logged(err)
  if mode == "compile":  # compiled inside epoch 1 of the first row: that epoch ends, nothing is saved
    assert epochs == [("no_distill", 1)] and _saved_rows(tmp_path) == []
  elif mode == "row":  # sent in epoch 2's log: the run stops at the end of epoch 2, that row unsaved
    assert epochs == [("no_distill", 1), ("no_distill", 2)] and _saved_rows(tmp_path) == []
  elif mode == "between":  # after the first row was saved: the second row never starts
    assert {r for r, _ in epochs} == {"no_distill"} and _saved_rows(tmp_path) == ["no_distill.msgpack"]
  else:  # the second signal exits at once, inside epoch 2's log (its line never printed)
    assert epochs == [("no_distill", 1)] and "second signal (SIGTERM): stopping at once" in err
  if mode != "twice":
    assert "SIGTERM received: stopping at the next safe point" in err
    assert re.search(r"error: interrupted \(SIGTERM\); the finished rows are saved in \S+/synthetic/\w+: the same "
                     "command resumes from them", err)
  assert not list(tmp_path.glob("synthetic/*/results.json")) and not (tmp_path / "synthetic" / "latest").exists()
  if mode == "between":  # the same command resumes from the saved row, to the bits of a run never stopped
    again = _table2(tmp_path)
    assert again.returncode == 0 and again.stderr.count("loaded from") == 1, again.stderr[-1500:]
    run_dir = os.path.realpath(tmp_path / "synthetic" / "latest")  # what a newcomer reads last: where the results are
    assert again.stdout.rstrip().splitlines()[-1] == f"wrote {run_dir} (also {tmp_path / 'synthetic' / 'latest'})"
    clean = _table2(tmp_path / "clean")
    assert clean.returncode == 0, clean.stderr[-1500:]
    assert _numbers(tmp_path) == _numbers(tmp_path / "clean")


def test_checkpoint_raises_only_after_a_request():
  guards.checkpoint()  # nothing requested: returns
  old = signal.getsignal(signal.SIGTERM)
  try:
    guards.install_signals()
    os.kill(os.getpid(), signal.SIGTERM)
    assert guards.requested() == signal.SIGTERM
    with pytest.raises(guards.Interrupted) as e:
      guards.checkpoint()
    assert e.value.code == 143 and not isinstance(e.value, Exception)  # no `except Exception` swallows it
  finally:
    guards._requested = None
    signal.signal(signal.SIGTERM, old)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def test_compiled_programs_are_released_only_past_half_the_mapping_limit(monkeypatch):
  import jax
  import jax.numpy as jnp
  f = jax.jit(lambda x: jnp.tanh(x).sum())
  y = f(jnp.arange(3.0))
  held = 1000
  monkeypatch.setattr(guards, "_mappings", lambda: (held, 2 * held))  # exactly half: kept
  assert not guards.release_compiled() and f._cache_size() == 1
  monkeypatch.setattr(guards, "_mappings", lambda: (held + 1, 2 * held))  # past half: released
  assert guards.release_compiled() and f._cache_size() == 0
  assert f(jnp.arange(3.0)) == y  # compiled again, same bits
  monkeypatch.setattr(guards, "_mappings", lambda: (0, 0))  # no /proc (not Linux): nothing to do
  assert not guards.release_compiled()
  monkeypatch.undo()
  held, limit = guards._mappings()  # this machine's own numbers
  assert limit == 0 or 0 < held < limit


# ------------------------------------------------------------------------------------------------ the launcher

@pytest.mark.slow
def test_launcher_stops_the_job_when_a_worker_dies(tmp_path):
  """Process 1 is SIGKILLed; process 0 ignores SIGTERM as one blocked in a collective would: the launcher
  SIGKILLs it after the grace period and names the dead process, its signal and the resume command."""
  os.mkfifo(tmp_path / "ready")  # process 1 dies only once process 0 is ready (fake_worker.py)
  p = subprocess.run([sys.executable, "-m", "experiments.launch", "--num_processes=2", "--grace=1", "--",
                      "fake_worker", "die", str(tmp_path)], cwd=ROOT, env=_env(HERE), capture_output=True,
                     text=True, timeout=120)
  assert p.returncode == 128 + signal.SIGKILL, p.stderr
  assert p.stderr.startswith("error: process 1 was killed by SIGKILL; stopped the other 1 process(es); the same "
                             "command resumes: python -m experiments.launch --num_processes=2 -- fake_worker die")
  assert len(p.stderr.strip().splitlines()) == 1
  assert sorted(re.findall(r"\[p(\d)\] ready", p.stdout)) == ["0", "1"]


def _alive(pid):
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead
  except FileNotFoundError:
    return False


def _start_launcher(tmp_path):
  p = subprocess.Popen([sys.executable, "-m", "experiments.launch", "--num_processes=2", "--grace=1", "--",
                        "fake_worker", "wait", str(tmp_path)], cwd=ROOT, env=_env(HERE), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
  pids = {}
  while len(pids) < 2:  # synchronised on the workers' own 'ready' lines
    line = p.stdout.readline()
    assert line, p.stderr.read()
    if m := re.match(r"\[p(\d)\] ready \d (\d+)", line):
      pids[int(m.group(1))] = int(m.group(2))
  return p, pids


@pytest.mark.slow
def test_sigterm_to_the_launcher_reaches_every_worker(tmp_path):
  p, pids = _start_launcher(tmp_path)
  p.send_signal(signal.SIGTERM)
  _, err = p.communicate(timeout=60)
  assert p.returncode == 143 and err.startswith("error: stopped by SIGTERM; the same command resumes"), err
  assert sorted(os.listdir(tmp_path)) == ["term0", "term1"]  # each worker got the signal and could act on it
  assert not any(_alive(pid) for pid in pids.values())


@pytest.mark.slow
def test_a_killed_launcher_leaves_no_orphan(tmp_path):
  p, pids = _start_launcher(tmp_path)
  p.kill()
  p.wait()
  for pid in pids.values():  # the kernel SIGKILLs them (PR_SET_PDEATHSIG); wait for that, bounded
    for _ in range(600):
      if not _alive(pid):
        break
      time.sleep(0.05)
    assert not _alive(pid)


# ------------------------------------------------------------------------------------------------ run folders

@pytest.mark.slow
def test_a_run_folder_has_one_writer_and_latest_moves_only_with_results(tmp_path):
  first = _table2(tmp_path)
  assert first.returncode == 0, first.stderr[-1500:]
  latest = tmp_path / "synthetic" / "latest"
  run_dir = os.path.realpath(latest)
  lock = guards.RunLock(run_dir).acquire()  # another live run of the same configuration
  try:
    second = _table2(tmp_path)
  finally:
    lock.release()
  assert second.returncode == 1 and second.stderr.strip().splitlines()[-1] == (
      f"error: {run_dir} is in use by another run of the same configuration (pid {os.getpid()}); wait for it to end "
      "(it writes the same results) or stop it"), second.stderr[-800:]
  failed = _table2(tmp_path, "--privileged=1,2,999")  # fails after its run folder exists
  assert failed.returncode == 2 and "--privileged='1,2,999': feature ids [999] are out of range" in failed.stderr
  assert os.path.realpath(latest) == run_dir  # still the run that wrote results


def _writer(path, text, times):
  for _ in range(times):
    files.write_atomic(path, text)


@pytest.mark.heavy
def test_concurrent_atomic_writes_never_collide_or_show_a_partial_file(tmp_path):
  path = str(tmp_path / "f.json")
  texts = ["a" * 200_000, "b" * 150_000]
  ctx = multiprocessing.get_context("spawn")
  procs = [ctx.Process(target=_writer, args=(path, t, 300)) for t in texts]
  for p in procs:
    p.start()
  reads = 0
  while any(p.is_alive() for p in procs) or reads == 0:
    if os.path.exists(path):
      with open(path) as f:
        assert f.read() in texts  # whole, never truncated
      reads += 1
  for p in procs:
    p.join()
    assert p.exitcode == 0  # no writer lost its temporary to the other
  assert [f for f in os.listdir(tmp_path)] == ["f.json"]


def test_eta_is_measured_from_trained_rows(monkeypatch):
  clock = [100.0]
  monkeypatch.setattr(monitor.time, "time", lambda: clock[0])
  p = monitor.Progress()
  p.start(4)
  p.begin_row()
  clock[0] += 30  # data loading and compiling inside the first row's first epoch
  assert p.eta(0.1) == "elapsed 0m30s, ETA estimating"
  clock[0] += 30
  p.end_rows(1, trained=True)  # one row: 60 s
  p.begin_row()
  p.end_rows(1, trained=False, loaded_seconds=45.0)  # a loaded row costs nothing and is not a measurement
  p.begin_row()
  assert p.eta(0.5) == "elapsed 1m00s, ETA 1m30s"  # 1.5 rows left x 60 s
  # what the earlier process spent on the loaded row is counted apart, for the run's record (lifecycle: 'resumed')
  assert (p.trained_rows, p.trained_seconds, p.loaded_rows, p.loaded_seconds) == (1, 60.0, 1, 45.0)


def test_a_search_advances_the_row_count_and_its_eta_by_program(monkeypatch):
  """The PFD search trains, outside the row store, many programs, each counted in the run's total: the line
  moves with each program, and the estimate is a program's mean time (it stayed at 'row 1/6' before)."""
  clock = [0.0]
  monkeypatch.setattr(monitor.time, "time", lambda: clock[0])
  p = monitor.Progress()
  monkeypatch.setattr(monitor, "PROGRESS", p)
  make = monitor.progress("[test]")
  p.start(6)  # one plain row, then a search of four programs, then one more row
  p.begin_row()
  make("no_distill")
  clock[0] += 10
  p.end_rows(1, trained=True)
  clock[0] += 5  # between rows: the search's first program starts from here
  with p.counting_programs():  # the search is not a row of the store: its programs are the rows
    for k, name in enumerate(("no_distill_screened", "teacher_z0_cf1", "students_z0_screened", "students_z0_chosen")):
      make(name)
      assert p.of() == f"row {2 + k}/6"
      monitor.ProgressLine("[test]", name).write_epoch(EpochScalars(0, 3, np.zeros(2), {"vali": np.full((2, 1), k)},
                                                                    (8,), "vali", 1.0))
      clock[0] += 10
  assert (p.trained_rows, p.trained_seconds) == (5, 50.0)
  # the screened programs stop early in a run; the chosen candidate's trains as its row; each keeps its curve
  assert [t.screened for t in p.timed[1:]] == [True, True, True, False]
  assert [float(t.select[0][0][0]) for t in p.timed[1:]] == [0.0, 1.0, 2.0, 3.0] and p.timed[0].select == []
  p.begin_row()
  make("self_distill")  # outside a search a row's second program (an out-of-fold teacher) is the same row
  make("self_distill_oof")
  assert p.of() == "row 6/6" and p.eta(0.5) == "elapsed 0m55s, ETA 0m05s"


# ------------------------------------------------------------------------------------------------ saved models

@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
  ds, dd, tc, keys = fold_data.fold_setup(TINY)
  r = distill.train_on_data(keys, tc, dd, "x")
  path = str(tmp_path_factory.mktemp("model") / "student")
  make_ranker(r, tc, "x", ds.config, row="no_distill").save(path)
  other = TINY.replace(train=dict(hidden=8))
  tc8 = other.train_config()
  r8 = distill.train_on_data(keys, tc8, dd, "x")
  make_ranker(r8, tc8, "x", ds.config).save(path + "_h8")
  return path


def _copy(src, dst):
  return shutil.copytree(src, dst)


def _edit_recipe(path, fn):
  rp = os.path.join(path, "model.json")
  recipe = json.load(open(rp))
  fn(recipe)
  with open(rp, "w") as f:
    json.dump(recipe, f)


def _truncate(name, size):
  def damage(path):
    with open(os.path.join(path, name), "r+b") as f:
      n = len(f.read())
      f.truncate(size(n))
  return damage


DAMAGE = {
    "params truncated": (_truncate("params.msgpack", lambda n: n // 2), r"params.msgpack: damaged"),
    "params empty": (_truncate("params.msgpack", lambda n: 0), r"params.msgpack: damaged"),
    "recipe truncated": (_truncate("model.json", lambda n: n // 2), r"model.json:\d+: not valid JSON"),
    "labels deleted": (lambda p: _edit_recipe(p, lambda r: r.pop("labels")), r"model.json: key 'labels' is missing"),
    "width deleted": (lambda p: _edit_recipe(p, lambda r: r["model"].pop("hidden")),
                      r"model.json: key 'model.hidden' is missing"),
    "too few features": (lambda p: _edit_recipe(p, lambda r: r.update(num_features=3)),
                         r"feature ids must be integers in 1..num_features=3"),
    "input ids reversed": (lambda p: _edit_recipe(p, lambda r: r.update(input_ids=r["input_ids"][::-1])),
                           r"input_ids .* are not the ids view 'x' reads"),
    "other widths": (lambda p: _edit_recipe(p, lambda r: r["model"].update(hidden=8)),
                     r"params.msgpack: parameters do not match model.json \(3 layers of width 8"),
    "other seed count": (lambda p: _edit_recipe(p, lambda r: r.update(num_seeds=3)),
                         r"parameters do not match model.json .* 3 seeds"),
    "params missing": (lambda p: os.remove(os.path.join(p, "params.msgpack")), r"params.msgpack: missing"),
    "a switch that is a number": (lambda p: _edit_recipe(p, lambda r: r["model"].update(input_affine=1)),
                                  r"model.input_affine = 1 is not a valid setting"),
    "a number that is a switch": (lambda p: _edit_recipe(p, lambda r: r["model"].update(dropout=True)),
                                  r"model.dropout = True is not a valid setting"),
}


@pytest.mark.heavy
@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_model_is_refused_with_one_line(model_dir, tmp_path, case):
  damage, want = DAMAGE[case]
  bad = _copy(model_dir, str(tmp_path / "bad"))
  damage(bad)
  with pytest.raises(serving.ModelError, match=want):
    serving.load_model(bad)


@pytest.mark.heavy
def test_model_paths_that_are_not_models(model_dir, tmp_path):
  with pytest.raises(serving.ModelError, match="a file, not a saved model folder"):
    serving.load_model(os.path.join(model_dir, "model.json"))
  run = tmp_path / "run"
  (run / "models" / "pfd").mkdir(parents=True)
  (run / "results.json").write_text("{}")
  with pytest.raises(serving.ModelError, match=rf"not a saved model \(no model.json\); it looks like a run folder: "
                                               rf"give one of its models, e.g. {run}/models/pfd"):
    serving.load_model(str(run))
  with pytest.raises(FileNotFoundError, match="no such model folder"):
    serving.load_model(str(tmp_path / "nowhere"))


@pytest.mark.heavy
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_load_model_on_corrupted_bytes(model_dir, tmp_path_factory, data):
  """Any corruption of either file: a ModelError, or a model that loads and scores finite numbers."""
  bad = _copy(model_dir, str(tmp_path_factory.mktemp("fuzz") / "m"))
  name = data.draw(st.sampled_from(["params.msgpack", "model.json"]))
  path = os.path.join(bad, name)
  blob = bytearray(open(path, "rb").read())
  for _ in range(data.draw(st.integers(1, 4))):
    op = data.draw(st.sampled_from(["flip", "cut", "insert"]))
    i = data.draw(st.integers(0, max(len(blob) - 1, 0)))
    if op == "flip" and blob:
      blob[i] = data.draw(st.integers(0, 255))
    elif op == "cut":
      del blob[i:i + data.draw(st.integers(1, 64))]
    else:
      blob[i:i] = data.draw(st.binary(min_size=1, max_size=16))
  open(path, "wb").write(bytes(blob))
  try:
    ranker = serving.load_model(bad)
  except serving.ModelError:
    return
  feats = np.ones((2, 3, len(ranker.input_ids)), np.float32)
  assert np.isfinite(np.asarray(ranker.score(feats))).all()


def test_load_model_names_a_layer_key_that_is_not_text(model_dir):
  """Found by the fuzz above: corrupted msgpack bytes can turn a layer name into an integer key; the check must
  still end in the one-line ModelError (it once failed sorting mixed int and str keys for the message)."""
  import flax.serialization
  params = flax.serialization.msgpack_restore(open(os.path.join(model_dir, "params.msgpack"), "rb").read())
  params["params"][49] = params["params"].pop("Dense_1")
  recipe = json.load(open(os.path.join(model_dir, "model.json")))
  with pytest.raises(serving.ModelError, match="p.msgpack: parameters do not match model.json.*found 49 bias"):
    serving.model._check_params(params, recipe, "p.msgpack")


def test_load_model_names_a_parameter_that_is_not_an_array(model_dir, tmp_path):
  """Found by the fuzz above: corrupted bytes can leave an array's encoding undecoded, a list [shape, dtype,
  bytes]; loading must end in the one-line ModelError (it once raised numpy's ValueError from np.shape)."""
  import flax.serialization
  bad = _copy(model_dir, str(tmp_path / "m"))
  path = os.path.join(bad, "params.msgpack")
  params = flax.serialization.msgpack_restore(open(path, "rb").read())
  k = params["params"]["Dense_0"]["kernel"]
  params["params"]["Dense_0"]["kernel"] = [list(k.shape), str(k.dtype), k.tobytes()]
  open(path, "wb").write(flax.serialization.msgpack_serialize(params))
  with pytest.raises(serving.ModelError, match=r"params.msgpack: parameters do not match model.json.*kernel \u2014"):
    serving.load_model(bad)


# ------------------------------------------------------------------------------------------------ predict

@pytest.fixture(scope="module")
def practitioner(practitioner):
  """conftest's simulated logs and their saved models: (folder, student model, teacher model)."""
  return practitioner.folder, os.path.join(practitioner.models, "pfd"), os.path.join(practitioner.models, "pfd_teacher")


def _predict(*args, file_limit=None):
  cmd = [sys.executable, "-m", "experiments.predict", *args]
  if file_limit:  # bash's ulimit (KiB): writes past it fail with EFBIG, as writes to a full disk fail
    cmd = ["bash", "-c", f'ulimit -f {file_limit} && exec "$@"', "bash", *cmd]
  return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)


def _predict_here(model, data, out, **kw):
  """predict's run() in this process (what main calls; main's mapping of errors to lines is tested apart)."""
  return predict.run(schema.Config(options=predict.Options(model=str(model), data=str(data), out=str(out), **kw)))


def _one_line(p, code, want):
  assert p.returncode == code, p.stderr[-1500:]
  assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) <= 2, p.stderr[-1500:]
  assert re.search(want, p.stderr), p.stderr[-1500:]


def _lines(path, edit):
  text = open(path).read().splitlines(keepends=True)
  return "".join(edit(text))


SERVING = {  # serving file edits -> message
    "nan value": (lambda t: t[:4] + [t[4].replace(" 1:", " 1:nan #", 1)] + t[5:],
                  r"serve.txt:5: non-finite value of feature 1 'nan'"),
    "inf value": (lambda t: t[:6] + [t[6].rstrip("\n") + " 99:inf\n"] + t[7:],
                  r"serve.txt:7: non-finite value of feature 99 'inf'"),
    "split query": (lambda t: t + [t[0]], r"serve.txt:\d+: qid \d+ reappears after other queries"),
    "feature id 1e9": (lambda t: t[:2] + [t[2].rstrip("\n") + " 1000000000:1\n"] + t[3:],
                       r"serve.txt:3: feature id 1000000000 was never seen by the model \(it knows ids 1..23\)"),
    "qid not a number": (lambda t: t[:1] + [re.sub(r"qid:\d+", "qid:q0", t[1])] + t[2:],
                         r"serve.txt:2: qid 'q0' is not an integer"),
}


@pytest.mark.heavy
@pytest.mark.parametrize("case", sorted(SERVING))
def test_predict_refuses_a_bad_serving_file_naming_the_line(practitioner, tmp_path, case):
  folder, student, _ = practitioner
  edit, want = SERVING[case]
  data = tmp_path / "serve.txt"
  data.write_text(_lines(os.path.join(folder, "serve.txt"), edit))
  with pytest.raises(data_lib.DataError, match=want):
    _predict_here(student, data, tmp_path / "scores.tsv")
  assert os.listdir(tmp_path) == ["serve.txt"]  # nothing written, no temporary left


@pytest.mark.heavy
def test_predict_reads_crlf_files_as_lf(practitioner, tmp_path):
  folder, student, _ = practitioner
  crlf = tmp_path / "crlf.txt"
  crlf.write_bytes(open(os.path.join(folder, "serve.txt"), "rb").read().replace(b"\n", b"\r\n"))
  _predict_here(student, f"{folder}/serve.txt", tmp_path / "a.tsv")
  _predict_here(student, crlf, tmp_path / "b.tsv")
  assert (tmp_path / "a.tsv").read_bytes() == (tmp_path / "b.tsv").read_bytes()


@pytest.mark.heavy
def test_predict_refuses_a_teacher_without_its_privileged_features(practitioner, tmp_path, capsys):
  folder, _, teacher = practitioner
  out = tmp_path / "scores.tsv"
  with pytest.raises(data_lib.DataError,
                     match=r"serve.txt: the model reads feature ids 21,22,23 that appear on no line of "
                     r"this file; 21,22,23 are privileged: this model is a teacher, which needs them, so score with a "
                     r"student model, or pass --impute=zero"):
    _predict_here(teacher, f"{folder}/serve.txt", out)
  assert not out.exists()
  summary = _predict_here(teacher, f"{folder}/serve.txt", out, impute="zero")
  assert "warning: 3 feature ids read as 0 (--impute=zero): 21,22,23" in capsys.readouterr().err
  assert "imputed as 0 (absent from" in predict.to_markdown(outputs.as_json(summary)) and out.exists()


@pytest.mark.heavy
def test_predict_protects_its_input_and_writes_nothing_partial(practitioner, tmp_path):
  folder, student, _ = practitioner
  data = tmp_path / "serve.txt"
  data.write_bytes(open(os.path.join(folder, "serve.txt"), "rb").read())
  before = data.read_bytes()
  _one_line(_predict(f"--model={student}", f"--data={data}", f"--out={data}"), 2,
            r"--out=.*: is the --data file: scoring would replace the input")
  with pytest.raises(ConfigError, match=r"out: is a folder"):
    _predict_here(student, data, tmp_path)
  with pytest.raises(FileExistsError):  # main: "<file>: File exists (a file is in the way of a folder)", exit 1
    _predict_here(student, data, f"{data}/scores.tsv")
  with pytest.raises(serving.ModelError, match=r"not a saved model \(no model.json\)"):
    _predict_here(os.path.dirname(student), data, tmp_path / "s.tsv")
  _one_line(_predict(f"--model={student}", f"--data={data}", f"--out={tmp_path / 'scores.tsv'}", file_limit=4), 1,
            r"scores.tsv: File too large")
  assert data.read_bytes() == before and os.listdir(tmp_path) == ["serve.txt"]


@pytest.mark.heavy
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_serving_reader(practitioner, tmp_path_factory, data):
  """Any byte-level edit of a serving file: a DataError naming the file, or groups that score."""
  folder = practitioner[0]
  blob = bytearray(open(os.path.join(folder, "serve.txt"), "rb").read()[:3000])
  for _ in range(data.draw(st.integers(1, 4))):
    i = data.draw(st.integers(0, len(blob) - 1))
    op = data.draw(st.sampled_from(["flip", "cut", "insert"]))
    if op == "flip":
      blob[i] = data.draw(st.sampled_from(b" \n\r:#-.eqid0123456789x\xff\x00"))
    elif op == "cut":
      del blob[i:i + data.draw(st.integers(1, 40))]
    else:
      blob[i:i] = data.draw(st.binary(min_size=1, max_size=12))
  path = str(tmp_path_factory.mktemp("serve") / "serve.txt")
  open(path, "wb").write(bytes(blob))
  try:
    groups, present = data_lib.read_serving(path, 23)
  except data_lib.DataError as e:
    assert str(e).startswith(path)
    return
  assert groups.x.shape == (groups.num_docs, 23) and np.isfinite(groups.x).all()
  assert set(present.tolist()) <= set(range(1, 24))


# ------------------------------------------------------------------------------------------------ multi-process data

@pytest.mark.slow
@pytest.mark.parametrize("case", ["bad line in process 1's share", "qid split across shards"])
def test_a_data_error_in_one_process_stops_every_process_with_its_line(tmp_path, case):
  rng = np.random.default_rng(0)
  lines = [f"{int(rng.random() < 0.3)} qid:{q} " + " ".join(f"{j}:{rng.normal():.3f}" for j in range(1, 6)) + "\n"
           for q in range(40) for _ in range(6)]
  n = len(lines)
  if case.startswith("bad"):
    lines[n - 20] = lines[n - 20].replace("3:", "3:x", 1)
    want = rf"train.txt:{n - 19}: value of feature 3 'x.*' is not a number"
  else:
    lines.append(lines[0])  # qid 0 again at the very end: its two blocks are read by different processes
    want = rf"train.txt:{n + 1}: qid 0 reappears after other queries"
  folder = tmp_path / "data"
  folder.mkdir()
  (folder / "train.txt").write_text("".join(lines))
  (folder / "test.txt").write_text("".join(lines[:60]))
  one = subprocess.run([sys.executable, "-m", "experiments.paper.table2", "--dataset=letor", f"--data_dir={folder}",
                        "--privileged=5", "--cache_dir=", f"--compile_cache={CACHE}", f"--out_dir={tmp_path / 'one'}"],
                       cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
  two = subprocess.run([sys.executable, "-m", "experiments.launch", "--num_processes=2", "--", "experiments.paper.table2",
                        "--dataset=letor", f"--data_dir={folder}", "--privileged=5", "--cache_dir=",
                        f"--compile_cache={CACHE}", f"--out_dir={tmp_path / 'two'}"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
  assert one.returncode == 1 and re.search(want, one.stderr), one.stderr[-800:]
  assert two.returncode == 1, two.stdout[-2000:] + two.stderr[-800:]
  assert re.fullmatch(r"error: process \d exited with status 1 \(its error is above\); stopped the other 1 "
                      r"process\(es\)\n", two.stderr), two.stderr
  errors = [ln for ln in two.stdout.splitlines() if "error:" in ln]
  assert sorted(ln[:4] for ln in errors) == ["[p0]", "[p1]"] and all(re.search(want, ln) for ln in errors), errors
  assert "Traceback" not in two.stdout


def test_os_errors_read_as_one_line_with_the_cause():
  import errno
  assert guards.os_error_line(PermissionError(errno.EACCES, "Permission denied", "/r/out")) == (
      "/r/out: Permission denied (no permission: choose a folder you can write, e.g. with --out_dir)")
  assert guards.os_error_line(OSError(errno.ENOSPC, "No space left on device", "/r/x.json")).startswith(
      "/r/x.json: No space left on device (the disk is full")
  assert guards.os_error_line(OSError(errno.EXDEV, "Invalid cross-device link", "/a", None, "/b")) == (
      "/a -> /b: Invalid cross-device link")
  assert guards.os_error_line(FileNotFoundError("no such LETOR file: /x/train.txt")) == "no such LETOR file: /x/train.txt"
