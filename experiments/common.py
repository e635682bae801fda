"""The drivers' shared machinery: one typed configuration, flags made from it, one main, output helpers.

Configuration (defined once, from flag to function): a driver's :class:`Config` holds a
:class:`pfd_jax.config.DataConfig` (the data recipe), a :class:`pfd_jax.train.TrainConfig` (training), a
:class:`RunConfig` (loss, seeds, teaching, saving), an :class:`OutputConfig` and the driver's own options
dataclass. The absl flags are
generated from those fields (:func:`define_flags`): a flag's name, default, help and checks are its field's,
so a new setting is one field. Flags are defined only when a driver runs as ``__main__`` (:func:`main`), so
importing drivers defines nothing and never collides. Bad values are absl usage errors naming the flag,
raised before any data is loaded.

Every driver is ``run(Config) -> results``, ``to_markdown(results)``, optionally ``plot(results, path)``,
declared as a :class:`Driver` and started by :func:`main`, which gives each configuration its own run
folder and resumes an interrupted run from the rows it saved (:class:`Rows`). Printing and files live here,
never in pfd_jax.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import time
import typing
from typing import Any, Callable, NamedTuple, Optional

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags, logging

import pfd_jax
from experiments import guards, machine
from pfd_jax import config as C
from pfd_jax import data as D
from pfd_jax import distill
from pfd_jax import distributed
from pfd_jax import files
from pfd_jax import gbdt
from pfd_jax import serving
from pfd_jax import stats
from pfd_jax import train as T
from pfd_jax.config import DataConfig, option
from pfd_jax.train import TrainConfig

FLAGS = flags.FLAGS
T_START = time.time()  # the process's start (imports included), for results.json's wall_seconds
RESULTS = "results"
SINGLE_LOSSES = ("rankbce", "ranknet")


@dataclasses.dataclass(frozen=True)
class RunConfig:
  """What a run trains and where it writes."""
  loss: str = option("rankbce", "Ranking loss of the trained rows (both = RankBCE and RankNet, one after the "
                     "other).", choices=("rankbce", "ranknet", "both", "softmax"))
  seeds: int = option(5, "Training seeds, vmapped in one program.", lo=1)
  seed: int = option(0, "Base PRNG seed of the training keys.")
  teaching: Optional[str] = option(None, "How teachers teach (default: the student's own loss on sigmoid "
                                   "probabilities, the paper's PFD): pointwise = RankBCE, pairwise = RankNet on "
                                   "sigmoid(t); listwise = SDR softmax on max(a t + b, 0); topk = Ranking "
                                   "Distillation's top-K loss.", choices=tuple(distill.TEACHING))
  placebo_within: str = option("query", "The placebo rows' permutation of the privileged features (the PFD teacher's "
                        "inputs with z's rows permuted, the link to the label broken): query = within each "
                        "query (keeps every query's values; the link a ranking loss uses is the one broken), "
                        "split = across the whole split.", choices=D.PLACEBO_MODES)
  save_models: bool = option(False, "Save every trained row's model (all seeds + feature recipe) under "
                             "<run folder>/models/[<loss>/][fold<k>/]<row>/ (pfd_jax.load_model, "
                             "python -m experiments.predict).")
  restart: bool = option(False, "Ignore the finished rows saved by an earlier run of this configuration and "
                         "train everything again (default: resume, loading them).")

  def __post_init__(self):
    C.check(self)


@dataclasses.dataclass(frozen=True)
class OutputConfig:
  """Where a driver writes."""
  out_dir: Optional[str] = option(None, "Output root (default results/<driver>); each configuration writes "
                                  "its own run folder <out_dir>/<dataset>[-<data folder>]/<hash>/, with a "
                                  "'latest' link beside it.")
  run_dir: Optional[str] = option(None, "The run folder (set by the driver's main).", flag=False)
  tensorboard: bool = option(True, "Write every row's per-epoch loss and NDCG of every seed as TensorBoard event "
                             "files under <run folder>/tensorboard (flushed each epoch; tensorboard --logdir "
                             "results).")
  compile_cache: str = option(os.path.join("cache", "jax"), "JAX's persistent compilation cache folder, so that "
                              "a second run of a driver skips compiling ('' = off).")
  coordinator: str = option("", "Multi-process run: host:port of process 0 (or 'auto': the cluster's "
                            "environment, e.g. SLURM); '' = one process. Every process reads only its share of "
                            "the query groups; process 0 writes. Try it locally with experiments.launch.")
  num_processes: int = option(1, "Multi-process run: how many processes take part.", lo=1)
  process_id: int = option(0, "Multi-process run: this process's index (0 .. num_processes - 1).", lo=0)
  heartbeat_timeout: int = option(100, "Multi-process run: seconds without a heartbeat after which JAX's "
                                  "coordination service declares a process dead (JAX's default suits a cluster; "
                                  "experiments.launch passes 10).", lo=1)
  shutdown_timeout: int = option(300, "Multi-process run: seconds a finishing process waits for the others at "
                                 "shutdown (JAX's default; experiments.launch passes 10).", lo=1)


@dataclasses.dataclass(frozen=True)
class Config:
  """A driver's whole configuration (recorded in results.json as config; see :func:`config_from_json`)."""
  data: DataConfig = DataConfig()
  train: TrainConfig = TrainConfig()
  run: RunConfig = RunConfig()
  output: OutputConfig = OutputConfig()
  options: Any = None

  @property
  def losses(self) -> tuple:
    return SINGLE_LOSSES if self.run.loss == "both" else (self.run.loss,)

  def train_config(self, loss: Optional[str] = None, **overrides) -> TrainConfig:
    """The TrainConfig of a row: training settings, `loss` (default: the run's), --teaching, overrides."""
    loss = loss or self.losses[0]
    return dataclasses.replace(self.train, loss=loss, **distill.TEACHING.get(self.run.teaching, {}), **overrides)

  def replace(self, **groups) -> "Config":
    """A copy with fields of groups replaced: cfg.replace(data=dict(tau=4.0), run=dict(seeds=2))."""
    return dataclasses.replace(self, **{g: dataclasses.replace(getattr(self, g), **kw) if isinstance(kw, dict)
                                        else kw for g, kw in groups.items()})


def config_from_json(d: dict, options: Optional[type] = None) -> Config:
  """The :class:`Config` a results.json recorded (options: the driver's options class)."""
  return C.from_dict(Config, d, **({"options": options} if options else {}))


# Drivers that run as several processes (the others use host-side steps that read a whole split).
MULTI_PROCESS = ("table2", "fig3_alpha", "alpha_robustness", "fig4_sparsity", "table5_positive_groups",
                 "pfd_teacher_loss", "sdr")

GROUPS = {"data": DataConfig, "train": TrainConfig, "run": RunConfig, "output": OutputConfig}


@dataclasses.dataclass(frozen=True)
class Driver:
  """An experiment driver: its functions, options and the shared settings it reads.

  run(Config) -> results dict; to_markdown(results) -> str; plot(results, path) writes `png`.
  groups: the shared configuration groups whose flags it has; defaults: per-driver flag defaults
  ((flag name, value) pairs); losses: the values --loss may take; needs_privileged (bool or function of
  the Config): a folder given by path must name its privileged features; rows(Config): how many models the
  run trains (progress); folder(Config): the run folder's label for drivers that read no dataset (default:
  the driver's name); write=False: a tool whose output is its own files (main only prints its summary).
  Drivers named in MULTI_PROCESS run as several cooperating processes (--num_processes, :func:`start_processes`).
  """
  name: str
  run: Callable
  to_markdown: Callable
  plot: Optional[Callable] = None
  png: Optional[str] = None
  options: Optional[type] = None
  groups: tuple = ("data", "train", "run", "output")
  defaults: tuple = ()
  losses: tuple = SINGLE_LOSSES
  needs_privileged: Any = True
  rows: Optional[Callable] = None
  folder: Optional[Callable] = None
  write: bool = True


def _unwrap(t):
  """Optional[X] -> X."""
  args = [a for a in typing.get_args(t) if a is not type(None)]
  return args[0] if typing.get_origin(t) is typing.Union and len(args) == 1 else t


def _flag_items(cls):
  """(field, type) of the fields of `cls` that are flags (Optional unwrapped)."""
  hints = typing.get_type_hints(cls)
  return [(f, _unwrap(hints[f.name])) for f in dataclasses.fields(cls) if f.metadata.get("flag", False)]


def flag_fields(cls, prefix: str = ""):
  """(flag name, field, type, prefix) of every flag of `cls`, nested dataclasses flattened with '<field>_'
  prefixes (topk_k, topk_scheme, ...)."""
  for f, t in _flag_items(cls):
    if dataclasses.is_dataclass(t):
      yield from flag_fields(t, f"{prefix}{f.name}_")
    else:
      yield prefix + f.name, f, t, prefix


def _driver_fields(driver: Driver):
  for g in driver.groups:
    for item in flag_fields(GROUPS[g]):
      yield g, item
  if driver.options is not None:
    for item in flag_fields(driver.options):
      yield "options", item


def _text(value, f) -> Optional[str]:
  if value is None:
    return None
  if f.metadata.get("fmt"):
    return f.metadata["fmt"](value)
  return ",".join(map(str, value)) if isinstance(value, tuple) else value


def define_flags(driver: Driver, flag_values=FLAGS, key_module: Optional[str] = None) -> None:
  """Defines the driver's flags from its configuration fields (key flags of the main module, so that
  --help lists them)."""
  defaults = dict(driver.defaults)
  for group, (name, f, t, _) in _driver_fields(driver):
    default = defaults.get(name, f.default)
    help_ = f.metadata["help"]
    lo, hi = f.metadata.get("lo"), f.metadata.get("hi")
    if lo is not None or hi is not None:
      help_ += f" Range {'(' if f.metadata.get('lo_open') else '['}{lo if lo is not None else '-inf'}, " \
               f"{hi if hi is not None else 'inf'}{']' if hi is not None else ')'}."
    choices = f.metadata.get("choices")
    if name == "loss":
      choices = driver.losses
    if t is bool:
      flags.DEFINE_boolean(name, default, help_, flag_values=flag_values)
    elif t is int:
      flags.DEFINE_integer(name, default, help_, flag_values=flag_values)
    elif t is float:
      flags.DEFINE_float(name, default, help_, flag_values=flag_values)
    elif choices is not None and t is str:
      flags.DEFINE_enum(name, default, [c for c in choices if c], help_, flag_values=flag_values)
    else:  # strings, comma lists and parsed text
      if choices is not None:
        help_ += f" (each one of {', '.join(map(str, choices))})"
      flags.DEFINE_string(name, _text(default, f), help_, flag_values=flag_values)
    flag_values.register_key_flag_for_module(key_module or sys.argv[0], flag_values[name])


def _value(name, f, t, text):
  """A flag's value as its field's type (comma lists and parsed text converted)."""
  if f.metadata.get("parse"):
    return f.metadata["parse"](text or "")
  if typing.get_origin(t) is tuple:
    elem = typing.get_args(t)[0]
    out = []
    for tok in filter(None, (text or "").split(",")):
      try:
        out.append(elem(tok.strip()))
      except ValueError:
        raise C.ConfigError(name, f"{tok.strip()!r} is not {'an integer' if elem is int else 'a number'}") from None
    return tuple(out)
  return text


def _build(cls, flag_values, prefix: str = ""):
  """An instance of `cls` from the parsed flags (nested dataclasses from their prefixed flags), checked."""
  kw = {}
  for f, t in _flag_items(cls):
    name = prefix + f.name
    if dataclasses.is_dataclass(t):
      kw[f.name] = _build(t, flag_values, name + "_")
      continue
    try:
      kw[f.name] = _value(name, f, t, flag_values[name].value)
    except C.ConfigError as e:
      raise C.ConfigError(name, str(e).split(": ", 1)[1]) from None
  try:
    obj = cls(**kw)
    C.check(obj)  # options classes need not call it themselves
    return obj
  except C.ConfigError as e:
    raise C.ConfigError(prefix + e.field, str(e).split(": ", 1)[1]) from None


def config_from_flags(driver: Driver, flag_values=FLAGS) -> Config:
  """The driver's :class:`Config` from the parsed flags; bad values raise app.UsageError naming the flag."""
  try:
    parts = {g: _build(GROUPS[g], flag_values) for g in driver.groups}
    if driver.options is not None:
      parts["options"] = _build(driver.options, flag_values)
    cfg = Config(**parts)
    if cfg.output.out_dir is None:
      cfg = cfg.replace(output=dict(out_dir=os.path.join(RESULTS, driver.name)))
    needs = driver.needs_privileged(cfg) if callable(driver.needs_privileged) else driver.needs_privileged
    if "data" in driver.groups and cfg.data.dataset == "letor" and needs and not cfg.data.privileged:
      raise C.ConfigError("privileged", "dataset=letor reads your own folder, so say which features are "
                          "privileged (known at training time only): --privileged=ID,ID,... with 1-based feature "
                          "ids as in the files, or --privileged=auto for the paper's protocol (the "
                          "--num_privileged features most correlated with the labels)")
  except C.ConfigError as e:
    value = flag_values[e.field].value if e.field in flag_values else None
    shown = f"={value!r}" if value not in (None, "") else ""
    raise app.UsageError(f"--{e.field}{shown}: {str(e).split(': ', 1)[1]}") from None
  return cfg


def main(driver: Driver) -> None:
  """Defines the driver's flags and runs it: config -> run folder -> run -> results.json, table.md, plot.

  Known user errors end with one line on stderr: exit 2 for usage (a bad flag or flag combination), 1 for
  data and I/O (a missing or malformed file, a full disk, a folder that cannot be written); unexpected
  exceptions keep their traceback. --help exits 0. SIGTERM or Ctrl-C stop the run at the next safe point
  (:mod:`experiments.guards`) with every finished row saved (exit 143 or 130): the same command resumes.
  """
  define_flags(driver)
  hint = f"(python -m experiments.{driver.name} --help lists the flags)"

  def parse(argv):
    try:
      return FLAGS(argv)
    except flags.Error as e:  # absl would print a page and exit 1: one line, exit 2 as every usage error
      _fail(f"{e}\n{hint}", 2)
    except SystemExit as e:  # absl's help flags exit 1 after printing the help that was asked for
      sys.exit(0 if e.code == 1 else e.code)

  def _main(argv):
    try:
      if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments {argv[1:]}: settings are flags with two dashes, e.g. --seeds=5")
      cfg = config_from_flags(driver)
    except app.UsageError as e:  # one readable line, not absl's page of usage
      _fail(f"{e}\n{hint}", 2)
    # A run that saves rows stops at its safe points; a tool that writes one file at its end (predict) may die
    # at once on a signal, as it would by default.
    signals = guards.install_signals if driver.write else (lambda: None)
    lock = None
    signals()
    try:
      lead = start_processes(cfg, driver)
      signals()  # again after jax.distributed.initialize, whose preemption notifier takes SIGTERM
      if "data" in driver.groups and lead:
        print(describe_data(cfg.data), flush=True)
      if not driver.write:
        print(driver.to_markdown(as_json(driver.run(cfg))))
        return
      use_compile_cache(cfg.output.compile_cache)
      error = None
      try:
        run_dir, prov, lock = prepare_run(cfg, driver, write=lead)
      except guards.RunLock.Busy as e:
        error = str(e)
      except OSError as e:
        error = guards.os_error_line(e)
      error = distributed.comm().first_error(error)  # process 0 prepares the folder; all stop if it cannot
      if error:
        _fail(error, 1)
      logging.info("run folder %s", run_dir)
      cfg = cfg.replace(output=dict(run_dir=run_dir))
      PROGRESS.start(driver.rows(cfg) if driver.rows else None)
      if cfg.output.tensorboard and lead:
        TENSORBOARD.open(os.path.join(run_dir, "tensorboard"), as_json({"c": cfg})["c"])
      res = driver.run(cfg)
      guards.checkpoint(distributed.comm())
      res["provenance"] = prov
      # how it was run and how long the whole command took (what experiments.report shows beside each table)
      res["command"] = " ".join(["python -m experiments." + driver.name] + [shlex.quote(a) for a in sys.argv[1:]])
      res["wall_seconds"] = time.time() - T_START
      if lead:  # one writer: process 0
        print(write_outputs(run_dir, res, driver))
        point_latest(run_dir)  # only a run that wrote its results becomes 'latest'
        print(f"wrote {run_dir} (also {os.path.join(os.path.dirname(run_dir), 'latest')})")
      if not (lead and cfg.output.num_processes == 1):  # what each process of a multi-process run held at most
        logging.info("process %d: peak resident memory %.2f GiB", jax.process_index(),
                     resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20)
    except C.ConfigError as e:  # a setting that only the data could show wrong
      value = FLAGS[e.field].value if e.field in FLAGS else None
      _fail(f"--{e.field}{f'={value!r}' if value not in (None, '') else ''}: {str(e).split(': ', 1)[1]}", 2)
    except (D.DataError, guards.RunLock.Busy) as e:
      _fail(str(e), 1)
    except OSError as e:  # a missing file, a folder that cannot be written, a full disk
      _fail(guards.os_error_line(e), 1)
    except (guards.Interrupted, KeyboardInterrupt) as e:
      code = e.code if isinstance(e, guards.Interrupted) else 130
      _fail(f"interrupted ({e or 'Ctrl-C'}); {_saved_in(cfg)}", code)
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
      if lock is not None:
        lock.release()

  app.run(_main, flags_parser=parse)


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
    raise C.ConfigError("num_processes", f"experiments.{driver.name} runs in one process only; multi-process "
                        f"runs: {', '.join(MULTI_PROCESS)}")
  if o.coordinator != "auto" and not o.process_id < o.num_processes:
    raise C.ConfigError("process_id", f"{o.process_id} is not below --num_processes={o.num_processes}")
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


def _fail(message: str, code: int):
  print(f"error: {message}", file=sys.stderr, flush=True)
  sys.exit(code)


def write_outputs(out_dir: str, res: dict, driver: Driver) -> str:
  """<run folder>/{results.json, table.md, <png>}; returns the Markdown. The table and the plot are made from the
  results as results.json holds them, so either can be remade later from the file alone."""
  res = as_json(res)
  md = driver.to_markdown(res)
  write_json(os.path.join(out_dir, "results.json"), res)
  write_text(os.path.join(out_dir, "table.md"), md)
  if driver.plot is not None and driver.png:
    driver.plot(res, os.path.join(out_dir, driver.png))
  return md


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


def progress(prefix: str, epochs: int):
  """A log_fn factory: one absl log line per epoch of every row, with the run's progress and its ETA, and the
  row's per-seed scalars to TensorBoard when the run writes them (:data:`TENSORBOARD`)."""
  def make(row):
    def log(epoch, loss, ndcg, seconds):
      logging.info("%s %-13s %s epoch %3d/%d  loss %10.3f  select NDCG %.4f  %s", prefix, row, PROGRESS.of(),
                   epoch + 1, epochs, loss, ndcg, PROGRESS.eta((epoch + 1) / epochs))
      guards.checkpoint(distributed.comm())  # a safe point: the epoch's state is consistent
    if TENSORBOARD.writer is not None:
      tag = "/".join(filter(None, [prefix.strip("[]").replace(" ", "/"), row.replace(" ", "_")]))
      log.per_model = lambda epoch, loss, metrics, ks: TENSORBOARD.epoch(tag, epoch, loss, metrics, ks)
    return log
  return make


class TensorBoard:
  """The run's TensorBoard event files (tensorboardX): <run folder>/tensorboard, one scalar per row, model
  (seed, or variant x seed) and epoch: ``<loss>/<fold>/<row>/seed<s>/loss`` and ``.../<split>_ndcg<k>``; the
  configuration as text (``config``). Flushed every epoch, so a running job can be watched."""

  def __init__(self):
    self.writer = None

  def open(self, folder: str, config: dict) -> None:
    from tensorboardX import SummaryWriter
    self.writer = SummaryWriter(folder, flush_secs=3600)
    self.writer.add_text("config", "```\n" + json.dumps(config, indent=1) + "\n```", 0)
    self.writer.flush()

  def epoch(self, tag: str, epoch: int, loss, metrics: dict, ks) -> None:
    for s, value in enumerate(np.asarray(loss)):
      self.writer.add_scalar(f"{tag}/seed{s}/loss", float(value), epoch + 1)
    for split, vals in metrics.items():
      for s, row in enumerate(np.asarray(vals)):
        for k, v in zip(ks, row):
          self.writer.add_scalar(f"{tag}/seed{s}/{split}_ndcg{k}", float(v), epoch + 1)
    self.writer.flush()

  def close(self) -> None:
    if self.writer is not None:
      self.writer.close()
      self.writer = None


TENSORBOARD = TensorBoard()


SYNTHETIC_TAU = 4.4  # see README: tau 4.8 leaves ~16 positive training groups in the small default


def folds_of(d: DataConfig) -> list:
  have = D.available_folds(d.dataset, d.data_dir)
  folds = list(d.folds) or have
  bad = [f for f in folds if f not in have]
  if bad:
    raise C.ConfigError("folds", f"{','.join(map(str, d.folds))}: dataset {d.dataset!r} has folds {have} on disk")
  return folds


def load_dataset(d: DataConfig, fold: int = 1) -> D.Dataset:
  """Loads and preprocesses one fold as the data recipe `d` says."""
  name = d.dataset
  comm = distributed.comm()  # several processes: each loads and keeps only its share of the groups
  raw = D.load_raw(name, d.data_dir, fold=fold, cache_dir=d.cache_dir or None,
                   synthetic_kwargs=d.synthetic_kwargs() if name == "synthetic" else None, comm=comm)
  tau = SYNTHETIC_TAU if d.tau is None and name == "synthetic" else d.tau
  privileged = d.privileged_ids
  if privileged:
    width = int(comm.max(max(g.x.shape[1] for g in raw.values())))
    bad = [i for i in privileged if i > width]
    if bad:
      raise C.ConfigError("privileged", f"feature ids {bad} are out of range; dataset {name!r} has features "
                          f"1..{width}")
  ds = D.prepare(name, raw, t=d.t, tau=tau, num_privileged=d.num_privileged, min_docs=d.min_docs,
                 query_norm=d.query_norm, log1p=d.log1p, seed=d.label_seed, labels=d.label_mode,
                 positive_grade=d.positive_grade, privileged=privileged, comm=comm)
  if comm.count > 1:  # what this process holds, of the whole
    held = {s: (g.num_queries, int(comm.sum(g.num_queries)), g.num_docs, int(comm.sum(g.num_docs)))
            for s, g in ds.splits.items()}
    logging.info("process %d of %d holds %s", comm.index, comm.count,
                 "; ".join(f"{s} {q}/{qa} groups {n}/{na} documents" for s, (q, qa, n, na) in held.items()))
  return ds


def fold_setup(cfg: Config, loss: Optional[str] = None, fold: int = 1, ds: Optional[D.Dataset] = None,
               **overrides):
  """(dataset, device data, TrainConfig, seed keys) of one fold, checked for the splits training needs."""
  ds = load_dataset(cfg.data, fold) if ds is None else ds
  tc = cfg.train_config(loss, **overrides)
  need = {"train", "test", tc.select_on}
  if not need <= set(ds.splits):
    raise D.DataError(f"dataset {cfg.data.dataset!r} fold {fold} needs the splits {sorted(need)}; it has "
                     f"{list(ds.splits)}")
  splits = eval_splits(tc)
  dd = device_data(cfg, ds, tc, fold)
  labels = ds.config.get("labels", "gumbel")
  how = (f"labels={labels}" + (f", t={ds.config.get('t')}, tau={ds.config.get('tau')}, label_seed="
                               f"{ds.config.get('seed')}" if labels == "gumbel" else
                               f", positive_grade={ds.config.get('positive_grade')}"))
  for split in splits:
    if not dd.eval_sets[split].buckets:
      raise D.DataError(f"dataset {ds.name!r} fold {fold}: no {split} list has a positive label ({how}), so NDCG on "
                        f"{split} is undefined; {'selection and ' if split == tc.select_on else ''}evaluation need "
                        "one (lower --tau, or --positive_grade, or check the file)")
  if dd.num_positive_groups == 0:
    raise D.DataError(f"dataset {ds.name!r} fold {fold}: no training query group has a positive label ({how})")
  keys = jax.random.split(jax.random.PRNGKey(cfg.run.seed), cfg.run.seeds)
  return ds, dd, tc, keys


def eval_splits(tc: TrainConfig) -> tuple:
  return ("test", "vali") if tc.select_on == "vali" else ("test",)


def device_data(cfg: Config, ds: D.Dataset, tc: TrainConfig, fold: int = 1) -> distill.DeviceData:
  """A fold's buckets on the device (or streamed from shards, as --data_source says)."""
  dd = distill.to_device(ds, cfg.data.max_buckets, eval_splits(tc), tc.data_groups,
                         cfg.data.shard_dir if cfg.data.data_source == "streamed" else None)
  if dd.shards:
    logging.info("fold %d streams its buckets from %s", fold, dd.shards)
  return dd


def placebo_data(cfg: Config, ds: D.Dataset, tc: TrainConfig, fold: int = 1) -> Callable[[], distill.DeviceData]:
  """The placebo rows' device data, made on first use and kept: `ds` with its privileged rows permuted
  (--placebo_within; the permutation seeded by --seed, the same for every training seed of the run)."""
  return functools.cache(lambda: device_data(cfg, D.with_placebo_privileged(ds, cfg.run.placebo_within, cfg.run.seed),
                                             tc, fold))


class Rows:
  """The trained rows of one (loss, fold) of a run: each is trained once, saved atomically as soon as it
  ends (``<run folder>/runs/<loss>/fold<k>/<row>.msgpack``: parameters of every seed, curves, losses, best
  epochs), and loaded instead of trained when a saved one exists (an interrupted run resumes; --restart
  trains again). With --save_models each row is also written as a :class:`pfd_jax.serving.Ranker` to
  ``models/[<loss>/][fold<k>/]<row>/`` (the loss level when the run trains both losses, the fold level for
  multi-fold runs). Outside a driver's main (no run folder) rows are trained and never saved."""

  def __init__(self, cfg: Config, ds: D.Dataset, fold: int = 1, loss: Optional[str] = None):
    self.cfg, self.ds, self.fold = cfg, ds, fold
    self.loss = loss or cfg.losses[0]
    root = cfg.output.run_dir or os.path.join(cfg.output.out_dir or RESULTS, ds.name)
    self.store = os.path.join(root, "runs", self.loss, f"fold{fold}") if cfg.output.run_dir else None
    parts = [root, "models"]
    if len(cfg.losses) > 1:
      parts.append(self.loss)
    if ds.name in D.NAMES and len(folds_of(cfg.data)) > 1:
      parts.append(f"fold{fold}")
    self.models = os.path.join(*parts)

  def __call__(self, row: str, view: str, tc: TrainConfig, train: Callable[[], T.TrainResult],
               servable: bool = True) -> T.TrainResult:
    """The result of `train()` for `row` (input `view`, config `tc`): loaded if saved, else trained and saved.
    servable=False: never written as a model (its inputs exist in no file, e.g. Figure 5's synthetic z)."""
    return self.many([(row, view, tc)], lambda: [train()], servable)[0]

  def many(self, rows: list, train: Callable[[], list], servable: bool = True) -> list:
    """Rows trained together by one call (e.g. an alpha sweep in one program): [(row, view, tc)] ->
    their results, all loaded when all are saved, else all trained by `train()` and each saved."""
    names = [row.replace(" ", "_").replace("/", "_") for row, _, _ in rows]
    paths = [os.path.join(self.store, n + ".msgpack") for n in names] if self.store else None
    comm = distributed.comm()
    guards.checkpoint(comm)  # a safe point: every earlier row is saved
    PROGRESS.begin_row()
    saved = bool(paths) and all(map(os.path.exists, paths)) and not self.cfg.run.restart
    if comm.count > 1:  # load only if every process sees the saved rows, else all train (they must agree)
      saved = int(comm.sum(int(saved))) == comm.count
    if saved:
      results = [load_result(p) for p in paths]
      logging.info("%s %s: loaded from %s", PROGRESS.of(), ", ".join(r for r, _, _ in rows), os.path.dirname(paths[0]))
    else:
      results = train()  # the progress line shows the first row until they all end together
      for p, r in zip((paths or ()) if comm.index == 0 else (), results):  # one writer: process 0
        save_result(p, r)
    PROGRESS.end_rows(len(rows), trained=not saved)
    if self.cfg.run.save_models and servable and comm.index == 0:
      for (row, view, tc), name, r in zip(rows, names, results):
        serving.make_ranker(r, tc, view, self.ds.config, dataset=self.ds.name, data_dir=self.cfg.data.data_dir,
                            fold=self.fold, row=row).save(os.path.join(self.models, name))
    return results


def save_result(path: str, r) -> None:
  """A TrainResult (or a LightGBM row's gbdt.Result: its model texts) as one msgpack file (flax.serialization;
  exact bytes), written atomically."""
  if isinstance(r, gbdt.Result):
    write_atomic(path, flax.serialization.msgpack_serialize(dict(
        kind="gbdt", models=list(r.models), best={k: np.asarray(v) for k, v in r.best.items()},
        best_epoch=np.asarray(r.best_epoch), seconds=float(r.seconds), params=json.dumps(r.params), view=r.view)))
    return
  blob = flax.serialization.to_bytes(dict(
      params=jax.tree_util.tree_map(np.asarray, r.params), curves=r.curves, loss=np.asarray(r.loss),
      best_epoch=np.asarray(r.best_epoch), best=r.best, seconds=float(r.seconds)))
  write_atomic(path, blob)


def load_result(path: str):
  with open(path, "rb") as f:
    d = flax.serialization.msgpack_restore(f.read())
  if d.get("kind") == "gbdt":
    return gbdt.Result(models=list(d["models"]), best=dict(d["best"]), best_epoch=d["best_epoch"],
                       seconds=float(d["seconds"]), params=json.loads(d["params"]), view=d["view"])
  return T.TrainResult(params=jax.tree_util.tree_map(jnp.asarray, d["params"]), curves=dict(d["curves"]),
                       loss=d["loss"], best_epoch=d["best_epoch"], best=dict(d["best"]), seconds=float(d["seconds"]))


def prepare_run(cfg: Config, driver: Driver, write: bool = True) -> tuple:
  """(run folder, provenance, lock): <out_dir>/<label>/<hash>/, where the hash covers everything that
  determines the results (the configuration less where it is written, the data files or generator, the code).
  Different configurations never share a folder; the same one finds its saved rows there. The writing
  process holds the folder's :class:`guards.RunLock` (returned; None for the other processes of a
  multi-process run), so two identical runs never interleave their writes: the second is refused."""
  prov = provenance(cfg, driver)
  key = dict(prov, code={k: prov["code"][k] for k in ("pfd_jax", "source_sha256")})
  digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:10]
  if "data" in driver.groups:
    label = cfg.data.dataset + (f"-{os.path.basename(os.path.normpath(cfg.data.data_dir))}" if cfg.data.data_dir
                                else "")
  else:
    label = driver.folder(cfg) if driver.folder else driver.name
  run_dir = os.path.join(cfg.output.out_dir, label, digest)
  if not write:  # another process of a multi-process run writes the folder
    return run_dir, prov, None
  os.makedirs(run_dir, exist_ok=True)
  lock = guards.RunLock(run_dir).acquire()
  write_json(os.path.join(run_dir, "provenance.json"), prov)
  return run_dir, prov, lock


def point_latest(run_dir: str) -> None:
  """<run folder>/../latest -> the run folder (a symlink replaced atomically through a unique temporary)."""
  latest = os.path.join(os.path.dirname(run_dir), "latest")
  tmp = files.temporary_name(latest)
  os.symlink(os.path.basename(run_dir), tmp)
  os.replace(tmp, latest)


def provenance(cfg: Config, driver: Driver) -> dict:
  """What determines a run's results: its configuration (less output settings, --restart and
  --save_models), its data (files with sizes and SHA-256, or the synthetic generator's arguments) and the
  code (package version, git commit, SHA-256 of the sources)."""
  run = dataclasses.replace(cfg.run, restart=False, save_models=False)
  out = dict(driver=driver.name, config=as_json({"c": cfg.replace(output=OutputConfig(), run=run)})["c"],
             code=code_version())
  if "data" in driver.groups:
    out["data"] = data_provenance(cfg.data)
    if cfg.data.data_source == "streamed":  # each fold's folder under it is logged: shard_dir/<dataset>-<hash>
      out["data"]["shards"] = os.path.abspath(cfg.data.shard_dir)
  return out


def data_provenance(d: DataConfig) -> dict:
  if d.dataset == "synthetic":
    return dict(generator="pfd_jax.data.synthetic.generate", arguments=d.synthetic_kwargs())
  found = {}
  for fold in folds_of(d):
    for split, path in D.split_files(d.dataset, d.data_dir, fold).items():
      found[f"fold{fold}/{split}"] = dict(path=os.path.abspath(path), bytes=os.path.getsize(path),
                                          sha256=files.sha256(path))
  return dict(folder=os.path.abspath(D.resolve_data_dir(d.dataset, d.data_dir)), files=found)


def code_version() -> dict:
  """pfd_jax's version, the git commit (and whether the tree has changes) when there is one, and the SHA-256
  of the library's and the drivers' sources (what a saved row depends on)."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  h = hashlib.sha256()
  for sub in ("pfd_jax", "experiments"):
    for dirpath, _, names in sorted(os.walk(os.path.join(root, sub))):
      for name in sorted(n for n in names if n.endswith(".py")):
        h.update(name.encode())
        with open(os.path.join(dirpath, name), "rb") as f:
          h.update(f.read())
  out = dict(pfd_jax=pfd_jax.__version__, source_sha256=h.hexdigest(), git_commit=None, git_dirty=None)
  try:
    git = lambda *a: subprocess.run(["git", *a], cwd=root, capture_output=True, text=True, timeout=10)
    head = git("rev-parse", "HEAD")
    if head.returncode == 0:
      out.update(git_commit=head.stdout.strip(), git_dirty=bool(git("status", "--porcelain").stdout.strip()))
  except (OSError, subprocess.SubprocessError):
    pass
  return out


class Progress:
  """Per-epoch progress of a whole run: row i of n, epoch e of E, elapsed time and an estimate for the run
  (main starts it with the driver's row count; rows loaded from a saved run count as done). The estimate
  is the mean time of the rows trained so far in this process times the rows left; before one has ended it
  says 'estimating' (a first row's early epochs include loading and compiling, so extrapolating them misleads)."""

  def __init__(self):
    self.start(None)

  def start(self, total: Optional[int]) -> None:
    self.total, self.row, self.t0 = total, 0, time.time()
    self.t_row, self.trained_rows, self.trained_seconds = self.t0, 0, 0.0

  def begin_row(self) -> None:
    self.row += 1
    self.t_row = time.time()

  def end_rows(self, count: int, trained: bool) -> None:
    """The current `count` rows (trained together, or loaded) have ended."""
    if trained:
      self.trained_rows += count
      self.trained_seconds += time.time() - self.t_row
    self.row += count - 1

  def of(self) -> str:
    return f"row {self.row}/{self.total}" if self.total else f"row {self.row}"

  def eta(self, frac_of_row: float) -> str:
    """'elapsed 1m02s, ETA 3m10s' (or 'ETA estimating' until a row has been trained)."""
    el = f"elapsed {_hms(time.time() - self.t0)}"
    if not self.total:
      return el
    if not self.trained_rows:
      return el + ", ETA estimating"
    left = max(self.total - (self.row - 1) - frac_of_row, 0.0)
    return el + f", ETA {_hms(left * self.trained_seconds / self.trained_rows)}"


def _hms(sec: float) -> str:
  sec = int(round(sec))
  return f"{sec // 3600}h{sec % 3600 // 60:02d}m{sec % 60:02d}s" if sec >= 3600 else f"{sec // 60}m{sec % 60:02d}s"


PROGRESS = Progress()


class PFDFold(NamedTuple):
  """One fold of an ablation: its data, config, keys, progress logger, baseline and PFD teacher runs."""
  ds: D.Dataset
  dd: object
  tc: TrainConfig
  keys: jax.Array
  log: object
  baseline: T.TrainResult
  teacher: T.TrainResult
  rows: Rows

  def lambdamart(self) -> Optional[gbdt.Result]:
    """The practitioner's incumbent as a reference row of this fold: LightGBM LambdaMART on the regular
    features (:mod:`pfd_jax.gbdt`, its default settings), saved and resumed like the other rows; None in a
    multi-process run (LightGBM needs the whole training split in one process)."""
    if distributed.comm().count > 1:
      return None
    cfg = self.rows.cfg
    return self.rows("lambdamart", "x", self.tc, lambda: gbdt.train(
        gbdt.GBDTConfig(), self.tc, self.ds, "x", int(np.shape(self.keys)[0]), seed=cfg.run.seed,
        query_index=gbdt.loss_groups(self.tc, self.ds["train"]), eval_splits=tuple(self.dd.eval_sets),
        max_buckets=cfg.data.max_buckets))


def pfd_folds(cfg: Config):
  """Yields a :class:`PFDFold` per fold of `cfg`: the no-distillation baseline (view x) and the PFD teacher
  (view xz) that the ablation drivers build on, both trained on the positive groups."""
  for fold in folds_of(cfg.data):
    ds, dd, tc, keys = fold_setup(cfg, None, fold)
    log = progress(f"[fold{fold}]", tc.epochs)
    rows = Rows(cfg, ds, fold)
    base = rows("no_distill", "x", tc, lambda: distill.train_on_data(keys, tc, dd, "x", log("no_distill")))
    teacher = rows("pfd_teacher", "xz", tc, lambda: distill.train_on_data(keys, tc, dd, "xz", log("pfd_teacher")))
    yield PFDFold(ds, dd, tc, keys, log, base, teacher, rows)


def environment() -> dict:
  """Where a run ran: the short fields RESULTS.md shows, `numerics` (what its bits depend on besides code,
  configuration and data: CPU model, instruction set, caches, threads, XLA_FLAGS, the numeric packages) and
  every installed package's version."""
  installed = machine.packages()
  return dict(python=platform.python_version(), jax=jax.__version__, flax=installed.get("flax"),
              optax=installed.get("optax"), numpy=np.__version__, backend=jax.default_backend(),
              devices=[str(d) for d in jax.devices()], machine=platform.machine(),
              cpus=os.cpu_count(), time=time.strftime("%Y-%m-%d %H:%M:%S"),
              numerics=machine.numerics(installed), packages=installed)


def as_json(res: dict) -> dict:
  """Results as results.json holds them (configs and arrays as plain lists and dicts)."""
  return json.loads(json.dumps(_jsonable(res)))


def _jsonable(o):
  if dataclasses.is_dataclass(o) and not isinstance(o, type):
    return _jsonable(dataclasses.asdict(o))
  if isinstance(o, dict):
    return {str(k): _jsonable(v) for k, v in o.items()}
  if isinstance(o, (list, tuple)):
    return [_jsonable(v) for v in o]
  if isinstance(o, np.ndarray):
    return o.tolist()
  if isinstance(o, (np.floating, np.integer, np.bool_)):
    return o.item()
  if hasattr(o, "shape") and hasattr(o, "dtype"):  # jax arrays
    return np.asarray(o).tolist()
  return o


write_atomic = files.write_atomic


def write_json(path: str, obj) -> None:
  write_atomic(path, json.dumps(_jsonable(obj), indent=1))


def write_text(path: str, text: str) -> None:
  write_atomic(path, text)


def markdown_table(header: list, rows: list) -> str:
  out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
  out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
  return "\n".join(out) + "\n"


def title(cfg: dict) -> str:
  """'<dataset>, <loss>' of a results.json config (table and plot titles)."""
  return f"{cfg['data']['dataset']}, {cfg['run']['loss']}"


def ratio(value: float, base: float) -> Optional[float]:
  """value / base, or None where base is zero or either is not finite (never inf or nan in a table)."""
  value, base = float(value), float(base)
  return value / base if base != 0 and np.isfinite(value) and np.isfinite(base) else None


def fmt_change(value: float, base: float) -> str:
  """'+7.1%' against the baseline, or 'n/a' (zero or non-finite baseline)."""
  r = ratio(value, base)
  return "n/a" if r is None else f"{100 * (r - 1):+.1f}%"


def fmt_pm(mean: float, std: float, digits: int = 3) -> str:
  """'0.308 ± 0.019', or 'n/a' for a non-finite value."""
  return f"{mean:.{digits}f} ± {std:.{digits}f}" if np.isfinite(mean) and np.isfinite(std) else "n/a"


def mean_std_table(rows: dict, labels: dict, ks=(8, 16, 32), reference: Optional[str] = None,
                   seeds: int = 1) -> str:
  """Markdown rows `labels[k]` with mean ± std over the first axis of rows[k] [runs, len(ks)]; with a
  `reference` row, the comparison note and each other row's paired comparison of NDCG@ks[0] (:func:`compare`,
  :func:`change_cells`; runs are folds x `seeds`)."""
  if not reference:
    body = [[labels[k]] + [fmt_pm(m, s) for m, s in zip(np.asarray(v).mean(0), np.asarray(v).std(0))]
            for k, v in rows.items()]
    return markdown_table([""] + [f"NDCG@{k}" for k in ks], body)
  cmp = compare(rows, reference)
  runs = len(rows[reference])
  folds = max(1, runs // seeds)
  body = [[labels[k]] + [fmt_pm(m, s) for m, s in zip(np.asarray(v).mean(0), np.asarray(v).std(0))] +
          change_cells(cmp.get(k), folds) for k, v in rows.items()]
  return (stats_note(labels[reference], runs, folds, ks[0]) + "\n" +
          markdown_table([""] + [f"NDCG@{k}" for k in ks] + change_header(labels[reference], ks[0]), body))


# ------------------------------------------------------------------ paired comparisons (pfd_jax.stats)

POWER_CHANGE = 0.02  # the relative change a table's power column is about


def compare(rows: dict, reference: str, col: int = 0, seed: int = 0) -> dict:
  """{row: comparison record} of rows[k][:, col] against rows[reference][:, col], paired run by run (rows of
  one table share their (fold, seed) runs: the same keys and data)."""
  ref = np.asarray(rows[reference])[:, col]
  return {k: comparison_record(stats.paired(np.asarray(v)[:, col], ref, seed=seed))
          for k, v in rows.items() if k != reference}


def comparison_record(c: stats.Comparison) -> dict:
  """A comparison as results.json keeps it: every field, the relative interval, the p < 0.05 marker and how
  many paired runs would detect a POWER_CHANGE relative change with 80% power at this spread."""
  return dict(dataclasses.asdict(c), rel_ci=c.rel_ci, significant=c.significant,
              runs_for_power=stats.runs_for_power(POWER_CHANGE * c.reference, c.sd))


def change_header(reference: str, k: int, unit: str = "runs") -> list:
  return [f"NDCG@{k} vs {reference} ({unit}): change [95% CI], p", f"seeds for ±{100 * POWER_CHANGE:.0f}%"]


def change_cell(c: Optional[dict]) -> str:
  """'+7.1% [+1.9%, +12.3%] p=0.004 †' (relative change, paired-t interval, p; † for p < 0.05)."""
  if not c:
    return ""
  if not np.isfinite(c["rel"]):
    return "n/a"
  lo, hi = c["rel_ci"]
  p = c["t_p"]
  ptxt = "n/a" if not np.isfinite(p) else ("p<1e-4" if p < 1e-4 else f"p={p:.2g}" if p < 0.01 else f"p={p:.2f}")
  return (f"{100 * c['rel']:+.1f}% [{100 * lo:+.1f}%, {100 * hi:+.1f}%] {ptxt}" +
          (" †" if c["significant"] else ""))


def change_cells(c: Optional[dict], folds: int = 1) -> list:
  """[change cell, seeds cell]: the seeds per fold (runs / folds) a paired t-test needs for a POWER_CHANGE
  relative change with 80% power at the measured spread of this row's differences."""
  if not c:
    return ["", ""]
  n = c["runs_for_power"]
  return [change_cell(c), "n/a" if n is None else f"{-(-n // folds):,}"]


def stats_note(reference: str, runs: int, folds: int, k: int = 8) -> str:
  """The sentence under a table header that says what the comparison columns are."""
  unit = f"{runs} runs (folds x seeds)" if folds > 1 else f"{runs} seeds"
  return (f"Change vs {reference}: mean paired difference of NDCG@{k} over the {unit}, each run of a row paired "
          f"with the same run of the reference (same keys, same data), relative to the reference mean; 95% "
          f"paired-t interval; paired t-test p-value, † = p < 0.05 (bootstrap intervals and Wilcoxon p-values in "
          f"results.json). Seeds for ±{100 * POWER_CHANGE:.0f}%: seeds{' per fold' if folds > 1 else ''} a paired "
          f"t-test would need to detect a {100 * POWER_CHANGE:.0f}% change with 80% power at this row's spread.\n")


def bar_plot(res: dict, path: str, labels: dict, scale_to: Optional[str] = None) -> None:
  """Horizontal bars of NDCG@8 (mean ± std over runs) of res['rows'][k] for k in `labels`, optionally
  divided by the mean of row `scale_to`."""
  plt = pyplot()
  keys = [k for k in labels if k in res["rows"]]
  vals = [np.asarray(res["rows"][k])[:, 0] for k in keys]
  div = np.asarray(res["rows"][scale_to])[:, 0].mean() if scale_to else 1.0
  fig, ax = plt.subplots(figsize=(7, 0.45 * len(keys) + 1.2))
  ax.barh(range(len(keys)), [v.mean() / div for v in vals], xerr=[v.std() / div for v in vals], color="C0",
          label="mean ± std over runs")
  ax.set_yticks(range(len(keys)), [labels[k] for k in keys], fontsize=8)
  ax.invert_yaxis()
  finish_plot(fig, ax, res, path, "test NDCG@8" + (f" / {labels[scale_to]}" if scale_to else ""), "")


def finish_plot(fig, ax, res: dict, path: str, xlabel: str, ylabel: str = "test NDCG@8") -> None:
  """Labels, a '<dataset>, <loss>' title and the legend, then saves `fig` as a PNG at `path`."""
  plt = pyplot()
  ax.set_xlabel(xlabel)
  ax.set_ylabel(ylabel)
  ax.set_title(title(res["config"]))
  ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def pyplot():
  """matplotlib's pyplot on the file-only Agg backend."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  return plt
