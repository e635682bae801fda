"""A driver's process from start to exit: flags -> configuration -> (processes) -> run folder -> run ->
results; every known way it ends early is a row of :data:`EXITS` (one line on stderr and an exit code)."""
from __future__ import annotations

import os
import resource
import shlex
import sys
import time
from typing import Optional

import jax
from absl import app, flags, logging

import experiments
from experiments.framework import guards
from pfd_jax import config as config_lib
from pfd_jax import data as data_lib
from pfd_jax import distributed, registry
from pfd_jax.ops import precision
from pfd_jax.data.config import DataConfig
from experiments.framework.cli import FLAGS, config_from_flags, define_flags
from experiments.framework.monitor import PROGRESS, TENSORBOARD
from experiments.framework.outputs import as_json, write_outputs
from experiments.framework.records import RunRecord
from experiments.framework.rundir import Provenance, point_latest, prepare_run
from experiments.framework import costing, fold_data
from experiments.framework.schema import Config, Driver, MULTI_PROCESS


T_START = time.time()  # the process's start (imports included), for results.json's wall_seconds


def main(driver: Driver) -> None:
  """Defines the driver's flags and runs it: config -> run folder -> run -> results.json, table.md, plot.

  Known user errors end with one line on stderr and the exit code of their row of :data:`EXITS`: 2 for usage
  (a bad flag or flag combination), 1 for data and I/O (a missing or malformed file, a full disk, a folder
  that cannot be written); unexpected exceptions keep their traceback. --help exits 0. SIGTERM or Ctrl-C stop
  the run at the next safe point (:mod:`experiments.framework.guards`) with every finished row saved (exit 143 or 130):
  the same command resumes.
  """
  try:  # before the flags are defined: what they register is a choice of them (--loss, --methods, --teaching)
    registry.import_modules(registry_modules(sys.argv))
  except (ImportError, OSError) as e:
    _fail(str(e), 2)
  define_flags(driver)
  hint = f"(python -m {experiments.module(driver.name)} --help lists the flags)"

  def run(argv):
    try:
      if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments {argv[1:]}: settings are flags with two dashes, e.g. --seeds=5")
      cfg = config_from_flags(driver)
    except app.UsageError as e:  # one readable line, not absl's page of usage
      _fail(f"{e}\n{hint}", 2)
    _run(driver, cfg)

  guards.run_app(run, lambda argv: expand_preset(driver, argv), hint[1:-1])


def registry_modules(argv: list) -> list:
  """The --registry_modules of a command line (read before absl parses it)."""
  out = []
  for i, a in enumerate(argv):
    if a.startswith("--registry_modules="):
      out = a.split("=", 1)[1].split(",")
    elif a == "--registry_modules" and i + 1 < len(argv):
      out = argv[i + 1].split(",")
  return [m for m in out if m]


def expand_preset(driver: Driver, argv: list) -> list:
  """argv with ``--preset=<name>`` preceded by the preset's flags (flags after it still override them)."""
  out = []
  for i, a in enumerate(argv):
    if i and a.startswith("--preset="):
      try:
        out += shlex.split(driver.preset(a.split("=", 1)[1]).flags)
      except config_lib.ConfigError as e:
        raise flags.Error(str(e)) from None
    out.append(a)
  return out


def _config_line(e: config_lib.ConfigError, cfg: Config) -> str:
  value = FLAGS[e.field].value if e.field in FLAGS else None
  return f"--{e.field}{f'={value!r}' if value not in (None, '') else ''}: {str(e).split(': ', 1)[1]}"


def _interrupted_line(e: BaseException, cfg: Config) -> str:
  return f"interrupted ({e or 'Ctrl-C'}); {_saved_in(cfg)}"


# How a run ends early: (exceptions, exit code (or a function of the exception), its one line on stderr).
# The first row that matches decides; anything else keeps its traceback.
EXITS = (
    (config_lib.ConfigError, 2, _config_line),  # a setting that only the data could show wrong
    ((data_lib.DataError, guards.RunLock.Busy), 1, lambda e, cfg: str(e)),
    (OSError, 1, lambda e, cfg: guards.os_error_line(e)),  # a missing file, an unwritable folder, a full disk
    (guards.Interrupted, lambda e: e.code, _interrupted_line),
    (KeyboardInterrupt, 130, _interrupted_line),
)


_EXIT_KINDS = tuple(k for kinds, _, _ in EXITS for k in (kinds if isinstance(kinds, tuple) else (kinds,)))


def _run(driver: Driver, cfg: Config) -> None:
  """Runs a configuration to its results files, ending every known failure by its row of :data:`EXITS`."""
  # A run that saves rows stops at its safe points; a tool that writes one file at its end (predict) may die
  # at once on a signal, as it would by default.
  signals = guards.install_signals if driver.write else (lambda: None)
  held = []  # the run folder's lock, once taken
  signals()
  use_matmul_precision(cfg.train.matmul_precision)
  try:
    lead = start_processes(cfg, driver)
    signals()  # again after jax.distributed.initialize, whose preemption notifier takes SIGTERM
    if "data" in driver.groups and lead:
      print(describe_data(cfg.data), flush=True)
    if not driver.write:
      print(driver.to_markdown(RunRecord.from_json(as_json(driver.run(cfg)))))
      return
    use_compile_cache(cfg.output.compile_cache)
    if cfg.output.plan:  # the data checked and the estimate alone: no run folder, nothing trained beyond the probe
      if "data" in driver.groups and (folds := fold_data.check_files(cfg.data, first=True)):
        print(f"data checked: every file of {folds} fold(s) read and prepared", flush=True)
      if not costing.skipped(driver, cfg):
        print(f"probing: the run at {costing.PROBE_EPOCHS} epochs on its first fold, then extrapolated ...", flush=True)
      print(costing.announce(driver, cfg, _total_rows(driver, cfg), jax.default_backend()), flush=True)
      return
    cfg, prov = _open_run(cfg, driver, lead, held)
    _finish(cfg, driver, lead, prov, driver.run(cfg))
  except _EXIT_KINDS as e:
    kinds, code, line = next(row for row in EXITS if isinstance(e, row[0]))
    _fail(line(e, cfg), code(e) if callable(code) else code)
  except jax.errors.JaxRuntimeError as e:
    if jax.process_count() == 1:
      raise
    # A collective failed: another process of the run died. Exit now, skipping the runtime's shutdown barrier
    # (it would wait for the dead process, then abort with a native stack trace).
    first = str(e).strip().splitlines()[0][:200]
    print(f"error: process {jax.process_index()}: a collective operation failed, so another process of this run "
          f"stopped ({first}); {_saved_in(cfg)}", file=sys.stderr, flush=True)
    os._exit(1)
  finally:
    TENSORBOARD.close()
    for lock in held:
      lock.release()
    _log_device_memory()


def _log_device_memory() -> None:
  """On an accelerator, each device's peak memory in use over the run (the runtime's own count), for sizing the
  next run (a drawn run's chunk, a Web30k fold) against the device's memory."""
  if jax.default_backend() == "cpu":
    return
  for d in jax.local_devices():
    stats = d.memory_stats() or {}
    if "peak_bytes_in_use" in stats:
      logging.info("device %s: peak memory %.2f GiB of %.2f GiB", d, stats["peak_bytes_in_use"] / 2 ** 30,
                   stats.get("bytes_limit", 0) / 2 ** 30)


def _open_run(cfg: Config, driver: Driver, lead: bool, held: list) -> tuple:
  """The run folder prepared (process 0 writes it and takes its lock into `held`; every process stops if it
  cannot), the progress and TensorBoard started: (the configuration with its run folder, provenance)."""
  error = None
  try:
    run_dir, prov, lock = prepare_run(cfg, driver, write=lead)
    held.extend([lock] if lock is not None else [])
  except guards.RunLock.Busy as e:
    error = str(e)
  except OSError as e:
    error = guards.os_error_line(e)
  error = distributed.comm().first_error(error)  # process 0 prepares the folder; all stop if it cannot
  if error:
    _fail(error, 1)
  logging.info("run folder %s", run_dir)
  cfg = cfg.replace(output=dict(run_dir=run_dir))
  costing.PROBED.clear()  # a run without a probe prices its search from its own rows, not an earlier run's probe
  if cfg.output.probe and lead:
    for line in costing.announce(driver, cfg, _total_rows(driver, cfg), jax.default_backend()).splitlines():
      logging.info("%s", line)
  PROGRESS.start(_total_rows(driver, cfg))
  if cfg.output.tensorboard and lead:
    TENSORBOARD.open(os.path.join(run_dir, "tensorboard"), as_json({"c": cfg})["c"])
  return cfg, prov


def _total_rows(driver: Driver, cfg: Config) -> Optional[int]:
  """How many models the run trains (the progress line's total), when the driver says."""
  if driver.rows:
    return driver.rows(cfg)
  per_fold = driver.rows_per_fold(cfg) if callable(driver.rows_per_fold) else driver.rows_per_fold
  return None if per_fold is None else per_fold * len(fold_data.folds_of(cfg.data))


def _finish(cfg: Config, driver: Driver, lead: bool, prov: Provenance, res: RunRecord) -> None:
  """The run's results with how it was run, written by process 0 (results.json, table.md, plot, 'latest')."""
  guards.checkpoint(distributed.comm())
  run_dir = cfg.output.run_dir
  # how it was run and how long the whole command took (what experiments.report shows beside each table)
  command = " ".join([f"python -m {experiments.module(driver.name)}"] + [shlex.quote(a) for a in sys.argv[1:]])
  resumed = dict(rows=PROGRESS.loaded_rows, seconds=PROGRESS.loaded_seconds) if PROGRESS.loaded_rows else None
  res = RunRecord.from_json(res).finished(prov, command, time.time() - T_START, resumed)
  if lead:  # one writer: process 0
    print(write_outputs(run_dir, res, driver))
    point_latest(run_dir)  # only a run that wrote its results becomes 'latest'
    print(f"wrote {run_dir} (also {os.path.join(os.path.dirname(run_dir), 'latest')})")
  if not (lead and cfg.output.num_processes == 1):  # what each process of a multi-process run held at most
    logging.info("process %d: peak resident memory %.2f GiB", jax.process_index(),
                 resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20)


def _saved_in(cfg: Config) -> str:
  where = cfg.output.run_dir
  return (f"the finished rows are saved in {where}: the same command resumes from them" if where else
          "nothing was saved yet")


def start_processes(cfg: Config, driver: Driver) -> bool:
  """Joins the multi-process runtime when the output flags ask for it (before any JAX computation);
  returns whether this process writes (process 0, or the only one)."""
  o = cfg.output
  if not o.coordinator and o.num_processes == 1:
    return True
  if driver.name not in MULTI_PROCESS:
    raise config_lib.ConfigError("num_processes",
                                 f"{experiments.module(driver.name)} runs in one process only; multi-process "
                        f"runs: {', '.join(MULTI_PROCESS)}")
  if o.coordinator != "auto" and not o.process_id < o.num_processes:
    raise config_lib.ConfigError("process_id", f"{o.process_id} is not below --num_processes={o.num_processes}")
  index, count = distributed.initialize(o.coordinator, o.num_processes, o.process_id,
                                       heartbeat_timeout=o.heartbeat_timeout, shutdown_timeout=o.shutdown_timeout)
  logging.info("process %d of %d (%d local devices, %d in all)", index, count, jax.local_device_count(),
               jax.device_count())
  return index == 0


def use_compile_cache(folder: str) -> None:
  """Turns on JAX's persistent compilation cache in `folder` ('' leaves it off): every compiled program is
  kept on disk and a later process with the same program, shapes and JAX version loads it."""
  if folder:
    jax.config.update("jax_compilation_cache_dir", os.path.abspath(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def use_matmul_precision(name: str) -> None:
  """--matmul_precision for every product of the process (the model's Dense layers take it from TrainConfig; this
  sets the rest: the committee perceptron's products, a registered row's own): jax_default_matmul_precision set
  before anything is traced ('default' leaves JAX's as it is)."""
  value = precision.config_value(name)
  if value:
    jax.config.update("jax_default_matmul_precision", value)


def _fail(message: str, code: int):
  print(f"error: {message}", file=sys.stderr, flush=True)
  sys.exit(code)


def describe_data(d: DataConfig) -> str:
  """One line: the label mode and the privileged features in force (printed when a run starts)."""
  if d.label_mode == "file":
    lab = "the file's own labels" + (f", y = 1[label >= {d.positive_grade}]" if d.positive_grade is not None
                                     else " (0/1)")
  else:
    lab = "Gumbel draws of Eq. 2 (the paper's protocol)"
  ids = d.privileged_ids
  priv = f"feature ids {','.join(map(str, ids))}" if ids else "chosen automatically (most correlated with y)"
  return f"labels: {lab}; privileged features: {priv}"
