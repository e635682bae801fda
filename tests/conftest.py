import functools
import hashlib
import json
import os
import shutil
import tempfile
from typing import NamedTuple

import jax
import numpy as np
import pytest

from experiments.framework import machine
from experiments.framework import outputs, schema
from experiments.page import published, staleness
from pfd_jax.data.config import DataConfig
from pfd_jax.data import shared_data_root
from pfd_jax.methods.gbdt import GBDTConfig
from pfd_jax.training import TrainConfig

# One JAX persistent compilation cache per pytest run, shared by its xdist workers (a fresh folder per run, removed
# at its end; never another run's): the suite is compile-bound, and the tiny configurations of many tests compile
# the same programs, which a test then loads instead of compiling again. A loaded program is the compiled one:
# the canaries, checked by this very suite, keep their bits.
# The first process to import this file (the xdist controller) makes the folder; the workers it starts inherit it.
CACHE = os.environ.setdefault("_PFD_JAX_TEST_CACHE", tempfile.mkdtemp(prefix="pfd_jax_tests_"))
jax.config.update("jax_compilation_cache_dir", CACHE)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def pytest_addoption(parser):
  parser.addoption("--tf32", action="store_true", help="Round the operands of float32 products as an NVIDIA GPU's "
                   "TF32 does (tests/tf32.py), to run the numeric tests under a GPU's default rounding on a CPU.")
  parser.addoption("--compile_times", metavar="FILE", help="Where a tier's time goes: each test process appends to "
                   "FILE (a new file per run) its seconds of JAX tracing, lowering and XLA compilation per test file "
                   "(a JSON line), and the run ends with the files' totals (a test's own subprocesses not counted).")


# --compile_times: {(test file, stage): seconds} of this process, charged to the file of the test running.
_COMPILING = {}
_RUNNING = [""]
_STAGES = {"/jax/core/compile/jaxpr_trace_duration": "tracing",
           "/jax/core/compile/jaxpr_to_mlir_module_duration": "lowering",
           "/jax/core/compile/backend_compile_duration": "XLA compilation"}


def _compiling(event: str, duration: float, **_) -> None:
  if event in _STAGES:
    key = (_RUNNING[0], _STAGES[event])
    _COMPILING[key] = _COMPILING.get(key, 0.0) + duration


def pytest_configure(config):
  if config.getoption("tf32"):
    import tf32
    tf32.install()
  if config.getoption("compile_times"):
    jax.monitoring.register_event_duration_secs_listener(_compiling)


def pytest_runtest_protocol(item, nextitem):
  _RUNNING[0] = item.nodeid.split("::")[0]


def pytest_sessionfinish(session):
  path = session.config.getoption("compile_times")
  if path and _COMPILING:  # a worker, or a run without workers (the controller compiles nothing)
    with open(path, "a") as f:
      f.write(json.dumps([[*k, v] for k, v in _COMPILING.items()]) + "\n")


def pytest_terminal_summary(terminalreporter, config):
  path = config.getoption("compile_times")
  if not path or hasattr(config, "workerinput") or not os.path.exists(path):
    return
  files = {}
  with open(path) as f:
    for line in f:
      for name, stage, seconds in json.loads(line):
        files.setdefault(name, {}).setdefault(stage, 0.0)
        files[name][stage] += seconds
  terminalreporter.section(f"seconds compiling per test file (all processes of {path})")
  for name, stages in sorted(files.items(), key=lambda kv: -sum(kv[1].values())):
    terminalreporter.write_line(f"{sum(stages.values()):8.1f} s  {name or '(outside tests)'}: " +
                                ", ".join(f"{s} {t:.1f} s" for s, t in sorted(stages.items())))


def emulating_tf32() -> bool:
  """Whether this test process rounds float32 products as a GPU's TF32 (--tf32)."""
  import tf32
  return tf32.installed()


def operand_roundoff(matmul_precision: str) -> float:
  """The unit roundoff of a float32 product's operands in this process under `matmul_precision`: 0 on a CPU
  (float32 products), 2^-11 under --tf32 or on an NVIDIA GPU below 'highest' (pfd_jax.ops.precision)."""
  from pfd_jax.ops import precision
  return precision.operand_roundoff(matmul_precision, jax.default_backend(), emulating_tf32())


# The default tier's longest files (--durations=0 --compile_times=FILE measure them), handed out first.
LONGEST_FILES = ("test_losses.py", "test_train.py", "test_models.py", "test_related.py", "test_theory.py",
                 "test_faults.py", "test_drivers.py")


def pytest_collection_modifyitems(config, items):
  """The tests marked long first, then LONGEST_FILES' (a stable sort): --dist loadfile hands files to the workers in
  collection order, and a long file handed out last keeps one worker busy while the other has nothing left."""
  def rank(item) -> tuple:
    name = os.path.basename(str(item.fspath))
    return (item.get_closest_marker("long") is None,
            LONGEST_FILES.index(name) if name in LONGEST_FILES else len(LONGEST_FILES))
  items.sort(key=rank)


def pytest_unconfigure(config):
  if not hasattr(config, "workerinput"):  # the controller (or a run without workers): every worker is done
    shutil.rmtree(CACHE, ignore_errors=True)


# A tiny configuration, built through the same typed objects as the flags: every driver end to end in
# seconds (structure, not numbers).
# LightGBM settings small enough for tests (the defaults fit up to 500 trees per model).
SMALL_GBDT = GBDTConfig(trees=20, leaves=7, min_leaf=5, early_stopping=10, oof_folds=3, threads=1)

TINY = schema.Config(
    data=DataConfig(dataset="synthetic", synthetic_queries=(80, 20, 60), synthetic_mean_docs=16.0, tau=4.0,
                    cache_dir="", max_buckets=2, min_docs=5),
    train=TrainConfig(epochs=2, hidden=16, layers=3),
    run=schema.RunConfig(seeds=2))


def tiny(options=None, **groups) -> schema.Config:
  """TINY with a driver's options and group overrides, e.g. tiny(Options(alphas=(0.5,)), run=dict(seeds=3))."""
  return TINY.replace(options=options, **groups)


def assert_close_at_scale(actual, desired, rtol: float = 1e-6, scale=None) -> None:
  """Two float32 results of the same computation in other shapes or orders (padding, a vmapped seed axis, a
  sharded batch): equal within `rtol` of the values' scale (max |desired|, or `scale`), not of each value.

  XLA blocks a product or a reduction by its shape and by the CPU's vector width (AVX, AVX2, AVX-512), so the
  rounding error of a value is a few ulps of the terms summed into it, not of the value: a score near 0 is the
  sum of larger terms, and `rtol` alone would demand of it a precision no CPU owes (2e-8 on a score of
  0.006, 3e-6 relative, on an AMD EPYC). Claims of exact equality stay np.testing.assert_array_equal."""
  desired = np.asarray(desired)
  scale = float(np.max(np.abs(desired))) if scale is None else scale
  np.testing.assert_allclose(actual, desired, rtol=rtol, atol=rtol * scale)


def assert_same_program_bits(actual, desired) -> None:
  """Two programs that XLA:CPU compiles to the same arithmetic (an epoch whole or in chunks, data resident or
  streamed, draws looped inside one program or run alone, the curves of every split or of one): the same bits on a
  CPU, where the tests of this claim were written and pass. On a GPU the two programs are autotuned and fused each
  on its own (cuBLAS may pick another algorithm, another split of a reduction, for each), so the same bits are not
  XLA's promise there: a float32 computation in other kernels, carried through the test's few epochs of training, to
  1e-4 of the values' scale (the bound the draws' batched test holds on a CPU, where the draw axis changes the
  blocking of every product, is 1e-6; training amplifies such differences by the epochs' steps)."""
  if jax.default_backend() == "cpu":
    np.testing.assert_array_equal(actual, desired)
  else:
    assert_close_at_scale(actual, desired, 1e-4)


# The simulated logs every practitioner test reads (purchase labels; ids 1-20 regular, 21-23 privileged: position,
# click, add-to-cart; serve.txt), and the rows trained on them once per worker, not once in each
# of test_serving, test_export, test_faults and test_gbdt.
LOGS = dict(sessions=(60, 20, 40), min_items=10, max_items=20, seed=3)


def logs_data(folder: str, **kw) -> DataConfig:
  """The data settings of a run on the logs folder (kw: any other DataConfig field)."""
  return DataConfig(**dict(dict(dataset="letor", data_dir=folder, privileged="21,22,23", min_docs=5, cache_dir="",
                                max_buckets=2), **kw))


@pytest.fixture(scope="session")
def logs_folder(tmp_path_factory) -> str:
  """The simulated logs as a LETOR folder (train/vali/test/serve.txt); read-only for the tests that share it."""
  from experiments import export_logs
  from pfd_jax.data import logs
  out = tmp_path_factory.mktemp("logs_letor")
  export_logs.write_folder(str(out), logs.simulate(**LOGS))
  return str(out)


class Practitioner(NamedTuple):
  folder: str  # logs_folder
  result: dict  # table2.run's result
  models: str  # the saved models: no_distill, pfd_teacher, pfd


@pytest.fixture(scope="session")
def practitioner(logs_folder, tmp_path_factory) -> Practitioner:
  """`python -m experiments.paper.table2 --dataset=letor --data_dir=<logs> --privileged=21,22,23 --methods=pfd
  --save_models` at TINY's size, run in this process (the command line itself is tested in test_serving)."""
  from experiments.paper import table2
  out = tmp_path_factory.mktemp("practitioner")
  cfg = TINY.replace(data=logs_data(logs_folder), run=dict(save_models=True),
                     output=dict(out_dir=str(out)), options=table2.Options(methods=("pfd",)))
  return Practitioner(logs_folder, table2.run(cfg), str(out / "letor" / "models"))


@pytest.fixture(scope="session")
def tiny_device():
  """TINY's synthetic data on the device, scored on test and vali."""
  from experiments.framework import fold_data
  from pfd_jax.training import device
  return device.to_device(fold_data.load_dataset(TINY.data), max_buckets=2, eval_splits=("test", "vali"))


def slow_after_first(cases: list, mark=pytest.mark.slow) -> list:
  """Parameters of a test of one subprocess per case: the first case in the default tier, the others marked `mark`
  (each subprocess imports JAX anew): slow, or heavy (run beside the slow tier, under AVX and TF32 too)."""
  return [cases[0]] + [pytest.param(*(c if isinstance(c, tuple) else (c,)), marks=mark) for c in cases[1:]]


def heavy_after_first(cases: list) -> list:
  """slow_after_first's cases, the later ones marked heavy."""
  return slow_after_first(cases, pytest.mark.heavy)


def driver_end_to_end(driver, cfg: schema.Config, rows: tuple, tmp_path) -> dict:
  """Runs `driver` on `cfg` (on one length bucket) and writes its outputs as its main would: results.json, whose
  to_markdown is the table.md written, its PNG, and rows = (key, names): results.json's `key` holds these names
  (None: any, and a key of None: no check). Returns the JSON read back."""
  res = driver.run(cfg.replace(output=dict(out_dir=str(tmp_path)), data=dict(max_buckets=1)))
  md = outputs.write_outputs(str(tmp_path / "out"), res, driver)
  js = json.loads((tmp_path / "out" / "results.json").read_text())
  assert (tmp_path / "out" / "table.md").read_text() == md == driver.to_markdown(js)
  assert js.get("env", {}).get("numerics"), f"{driver.name} records no env: the page cannot tell its configuration"
  if driver.png:
    assert (tmp_path / "out" / driver.png).stat().st_size > 1000
  key, names = rows
  if key:
    assert js[key] and (names is None or list(js[key]) == names), list(js[key])
  return js


def shared(sub: str) -> str:
  """Path of a staged dataset under $PFD_DATA_DIR or ../shared/data; skips the test when absent."""
  for root in (os.environ.get("PFD_DATA_DIR"), shared_data_root()):
    if root and os.path.exists(os.path.join(root, sub)):
      return os.path.join(root, sub)
  pytest.skip(f"staged data {sub} not found (set PFD_DATA_DIR)")


def written(tmp_path, res, driver):
  """Writes a driver's outputs under tmp_path as its main would and returns the JSON read back (checks the
  table and the PNG). Each call is one of the driver's canaries (experiments.page.staleness): its
  fingerprint must be the one in experiments/canaries.json on the configuration that recorded them
  (PFD_CANARIES=<folder> records them instead)."""
  out = tmp_path / "out"
  md = outputs.write_outputs(str(out), res, driver)
  js = json.loads((out / "results.json").read_text())
  assert (out / "table.md").read_text() == md
  if driver.png:
    pngs = [p for p in os.listdir(out) if p.endswith(".png")]
    assert pngs and all((out / p).stat().st_size > 1000 for p in pngs)
  _canary(driver.name, js)
  return js


@functools.lru_cache(maxsize=None)
def _numerics() -> str:
  return json.dumps(machine.numerics(machine.packages()), sort_keys=True)


@functools.lru_cache(maxsize=None)
def _known_canaries() -> dict:
  path = os.path.join(staleness.ROOT, staleness.CANARIES)
  return json.load(open(path)) if os.path.exists(path) else {}


def _canary(driver: str, js: dict) -> None:
  test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" (", 1)[0]
  fp = published.fingerprint(js)
  record = os.environ.get("PFD_CANARIES")
  if record:
    os.makedirs(record, exist_ok=True)
    name = hashlib.sha256(f"{driver} {test}".encode()).hexdigest()[:16] + ".json"
    with open(os.path.join(record, name), "w") as f:
      json.dump(dict(driver=driver, test=test, fingerprint=fp, numerics=json.loads(_numerics())), f)
    return
  known = _known_canaries()
  want = known.get("drivers", {}).get(driver, {}).get(test)
  if want and json.dumps(known.get("numerics"), sort_keys=True) == _numerics():
    assert fp == want, (f"{driver}'s canary {test} changed bits ({want} -> {fp}): every published run of "
                        f"{driver} goes stale; if that is intended, re-record the canaries (see "
                        "experiments/page/staleness.py)")
