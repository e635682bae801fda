"""The typed configuration of a driver run: the shared groups (data, train, run, output), the driver's own
options, and the :class:`Driver` record that names its functions."""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, NamedTuple, Optional


import experiments
from pfd_jax import config as config_lib
from pfd_jax import data as data_lib
from pfd_jax.config import option
from pfd_jax.ops import losses as losses_lib
from pfd_jax.data.config import DataConfig
from pfd_jax.training import TrainConfig
from pfd_jax.training import teaching as teaching_lib


RESULTS = "results"


SINGLE_LOSSES = ("rankbce", "ranknet")


@dataclasses.dataclass(frozen=True)
class RunConfig:
  """What a run trains and where it writes."""
  loss: str = option("rankbce", "Ranking loss of the trained rows (both = RankBCE and RankNet, one after the "
                     "other; the listwise ones: softmax, listmle, approxndcg, lambdaloss = NDCG-Loss2++; any loss registered in "
                     "pfd_jax.ops.losses.REGISTRY).", choices=lambda: ("both",) + losses_lib.REGISTRY.names())
  seeds: int = option(5, "Training seeds, vmapped in one program.", lo=1)
  seed: int = option(0, "Base PRNG seed of the training keys.")
  teaching: Optional[str] = option(None, "How teachers teach (default: the student's own loss on sigmoid "
                                   "probabilities, the paper's PFD): pointwise = RankBCE, pairwise = RankNet on "
                                   "sigmoid(t); listwise = SDR softmax on max(a t + b, 0); topk = Ranking "
                                   "Distillation's top-K loss; any way registered in "
                                   "pfd_jax.training.teaching.REGISTRY.",
                                   choices=lambda: teaching_lib.REGISTRY.names())
  placebo_within: str = option("query", "The placebo rows' permutation of the privileged features (the PFD teacher's "
                        "inputs with z's rows permuted, the link to the label broken): query = within each "
                        "query (keeps every query's values; the link a ranking loss uses is the one broken), "
                        "split = across the whole split.", choices=data_lib.PLACEBO_MODES)
  save_models: bool = option(False, "Save every trained row's model (all seeds + feature recipe) under "
                             "<run folder>/models/[<loss>/][fold<k>/]<row>/ (pfd_jax.load_model, "
                             "python -m experiments.predict).")
  ensembles: bool = option(False, "Add a seed-ensemble row (the mean logit of the seeds' best models) of every MLP "
                           "row, compared over test queries (default on for --dataset=letor).", omit_default=True)
  restart: bool = option(False, "Ignore the finished rows saved by an earlier run of this configuration and "
                         "train everything again (default: resume, loading them).")

  def __post_init__(self):
    config_lib.check(self)


@dataclasses.dataclass(frozen=True)
class OutputConfig:
  """Where a driver writes."""
  out_dir: Optional[str] = option(None, "Output root (default results/<driver>); each configuration writes "
                                  "its own run folder <out_dir>/<dataset>[-<data folder>]/<hash>/, with a "
                                  "'latest' link beside it.")
  run_dir: Optional[str] = option(None, "The run folder (set by the driver's main).", flag=False)
  tag: str = option("", "Appended to the run folder's label, <out_dir>/<dataset>[-<data folder>]-<tag>/<hash>/: keeps "
                    "a preset that resizes a dataset apart from the dataset's other runs (their 'latest').",
                    omit_default=True)
  tensorboard: bool = option(True, "Write every row's per-epoch loss and NDCG of every seed as TensorBoard event "
                             "files under <run folder>/tensorboard (flushed each epoch; tensorboard --logdir "
                             "results).")
  probe: bool = option(True, "Before training, time a short probe of the run (its first fold at 3 epochs, in a folder "
                       "deleted after) and log the run's expected wall time on this machine "
                       "(experiments/framework/costing.py).", omit_default=True)
  plan: bool = option(False, "Print the run's expected wall time on this machine, from the probe, and exit without "
                      "running it.", omit_default=True)
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

  def __post_init__(self):
    population = (data_lib.analogues.parse_settings(self.data.analogue).get("calibrated_for") if self.data.analogue
                  else None)
    if population and self.losses != (population,):
      # the teachers of one loss's Table 4 row met on the other loss's runs: not the calibrated world
      raise config_lib.ConfigError("analogue",
                                   f"calibrated_for={population} is the population calibrated for {population}'s "
                          f"teachers; this run trains {', '.join(self.losses)}: run --loss={population}")

  @property
  def losses(self) -> tuple:
    return SINGLE_LOSSES if self.run.loss == "both" else (self.run.loss,)

  def train_config(self, loss: Optional[str] = None, **overrides) -> TrainConfig:
    """The TrainConfig of a row: training settings, `loss` (default: the run's), --teaching, overrides."""
    loss = loss or self.losses[0]
    tc = dataclasses.replace(self.train, loss=loss)
    if self.run.teaching:
      tc = teaching_lib.REGISTRY[self.run.teaching].apply(tc)
    return dataclasses.replace(tc, **overrides).check_loss()

  def replace(self, **groups) -> "Config":
    """A copy with fields of groups replaced: cfg.replace(data=dict(tau=4.0), run=dict(seeds=2))."""
    return dataclasses.replace(self, **{g: dataclasses.replace(getattr(self, g), **kw) if isinstance(kw, dict)
                                        else kw for g, kw in groups.items()})


def config_from_json(d: dict, options: Optional[type] = None) -> Config:
  """The :class:`Config` a results.json recorded (options: the driver's options class)."""
  return config_lib.from_dict(Config, d, **({"options": options} if options else {}))


# Drivers that run as several processes (the others use host-side steps that read a whole split).
MULTI_PROCESS = ("table2", "fig3_alpha", "alpha_robustness", "fig4_sparsity", "table5_positive_groups",
                 "pfd_teacher_loss", "sdr")


GROUPS = {"data": DataConfig, "train": TrainConfig, "run": RunConfig, "output": OutputConfig}


class Preset(NamedTuple):
  """A reproduced run of a driver: ``python -m experiments.<driver> --preset=<name>`` runs it with `flags`; its
  results land in <results>/<driver>/<label>/latest (the dataset's name, or the folder's)."""
  name: str
  label: str
  flags: str          # the flags it stands for ('' = the driver's defaults)
  title: str          # its section's title on RESULTS.md
  before: str = ""    # a command to run first (e.g. one that writes the data folder)
  accelerator: str = ""  # where it needs an accelerator: its projected cost; absent from the page until run
  needs: str = "an accelerator"  # with `accelerator`: what the page says the run waits for


@dataclasses.dataclass(frozen=True)
class Driver:
  """An experiment driver: its functions, options and the shared settings it reads.

  run(Config) -> :class:`experiments.framework.records.RunRecord`; to_markdown(record) -> str; plot(record, path)
  writes `png` (the record as results.json holds it, read back).
  groups: the shared configuration groups whose flags it has; defaults: per-driver flag defaults
  ((flag name, value) pairs); losses: the values --loss may take (or a function returning them); needs_privileged (bool or function of
  the Config): a folder given by path must name its privileged features; rows(Config): how many models the
  run trains (progress), or rows_per_fold times the folds; folder(Config): the run folder's label for drivers that read no dataset (default:
  the driver's name); write=False: a tool whose output is its own files (main only prints its summary).
  Drivers named in MULTI_PROCESS run as several cooperating processes (--num_processes, :func:`start_processes`).
  presets: the runs of RESULTS.md it makes (:class:`Preset`, ``--preset=<name>``). What its runs claim is the
  page's (experiments/page/judged/, by the driver's name).
  """
  name: str
  run: Callable
  to_markdown: Callable
  plot: Optional[Callable] = None
  png: Optional[str] = None
  options: Optional[type] = None
  groups: tuple = ("data", "train", "run", "output")
  defaults: tuple = ()
  losses: Any = SINGLE_LOSSES
  needs_privileged: Any = True
  rows: Optional[Callable] = None
  rows_per_fold: Any = None  # how many models one fold trains (an int, or a function of the Config)
  folder: Optional[Callable] = None
  write: bool = True
  presets: tuple = ()

  def loss_names(self) -> tuple:
    """The values --loss may take."""
    return tuple(self.losses() if callable(self.losses) else self.losses)

  def preset(self, name: str):
    """The preset `name`; a ConfigError naming the known ones otherwise."""
    found = {p.name: p for p in self.presets}
    if name not in found:
      raise config_lib.ConfigError("preset",
                                   f"{name!r} is not a preset of {experiments.module(self.name)}; its presets: "
                          f"{', '.join(found) or 'none'}")
    return found[name]
