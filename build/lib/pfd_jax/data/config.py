"""The data recipe (:class:`DataConfig`): which files, which labels, which features are privileged, how lists
are padded. Each field is a flag of the drivers; :func:`pfd_jax.data.datasets.prepare` applies it."""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, Optional, Tuple

import numpy as np

from pfd_jax.config import ConfigError, check, option
from pfd_jax.data import analogues, synthetic
from pfd_jax.data.specs import REGISTRY

LABEL_MODES = ("gumbel", "file")
PAPER_T = 4.0  # Eq. 2 temperature t (section 4.1)


def _check_labels(cfg: "DataConfig") -> None:
  if REGISTRY[cfg.dataset].in_memory and cfg.data_dir:
    raise ConfigError("data_dir", f"dataset={cfg.dataset} is generated in memory and reads no folder; to train on "
                      "your own LETOR files add --dataset=letor (named sets such as ohsumed or web30k take "
                      "--data_dir too)")
  if cfg.positive_grade is not None and cfg.label_mode != "file":
    raise ConfigError("positive_grade", "applies to labels=file only")
  ids = cfg.privileged_ids  # parses
  if cfg.draws and not REGISTRY[cfg.dataset].in_memory:
    raise ConfigError("draws", f"dataset={cfg.dataset} is read from files, whose folds are the draws: --draws applies "
                      "to generated data (dataset=synthetic)")
  if ids is not None and cfg.num_privileged is not None:
    raise ConfigError("num_privileged", "applies to privileged=auto only (privileged names the ids)")


def draw_seed(label_seed: int, k: int) -> int:
  """The seed of draw k (1, 2, ...) of the data and its labels: a 31-bit word of SeedSequence([label_seed, k]),
  so draws of different label seeds never share a stream."""
  return int(np.random.SeedSequence([label_seed, k]).generate_state(1)[0] >> 1)


def parse_ids(text: str) -> Optional[tuple]:
  """'' or 'auto' -> None (the automatic choice); '7,15' -> (7, 15): 1-based feature ids."""
  if text in ("", "auto"):
    return None
  ids = []
  for tok in text.split(","):
    tok = tok.strip()
    if not tok.isdigit() or int(tok) < 1:
      raise ConfigError("privileged", f"{text!r}: {tok!r} is not a feature id (1-based integers, e.g. 7,15, or "
                        "auto)")
    ids.append(int(tok))
  if len(set(ids)) != len(ids):
    raise ConfigError("privileged", f"{text!r}: duplicate feature ids")
  return tuple(ids)


@dataclasses.dataclass(frozen=True)
class DataConfig:
  """The data recipe: which files, which labels, which features are privileged, how lists are padded."""
  dataset: str = option("synthetic", "Dataset name (letor = any folder given by data_dir; any dataset registered in "
                        "pfd_jax.data.specs.REGISTRY).", choices=REGISTRY.names)
  data_dir: Optional[str] = option(None, "Dataset folder (default $PFD_DATA_DIR/<name> or ../shared/data).")
  cache_dir: Optional[str] = option("cache", "Where parsed LETOR files are cached as .npz ('' = no cache).")
  folds: Tuple[int, ...] = option((), "Folds to run, e.g. 1,3 (default: every fold of the dataset on disk).", lo=1)
  labels: Optional[str] = option(None, "Training labels: gumbel (the paper's Eq. 2 draws) or file (the file's "
                                 "own labels). Default: the dataset's (file for dataset=letor, gumbel for the named sets).",
                                 choices=LABEL_MODES)
  positive_grade: Optional[float] = option(None, "With labels=file: y = 1[label >= this grade] (needed for "
                                           "graded labels).")
  privileged: str = option("", "Privileged features: auto (the paper: the num_privileged columns most "
                           "|correlated| with y on train) or 1-based feature ids as in the files, e.g. 7,15. "
                           "Default: auto for named datasets; required with dataset=letor.")
  num_privileged: Optional[int] = option(None, "With privileged=auto: how many (default: per dataset).", lo=0)
  t: float = option(PAPER_T, "Eq. 2 temperature t.", lo=0, lo_open=True)
  tau: Optional[float] = option(None, "Eq. 2 tau_target (default: per dataset, see README).")
  min_docs: int = option(10, "Drop query groups with fewer documents.", lo=1)
  query_norm: bool = option(False, "LETOR QueryLevelNorm (per-query min-max) before log1p.")
  log1p: bool = option(True, "sign(x) log(1 + |x|) feature transform (appendix A.1).")
  label_seed: int = option(0, "Seed of the Gumbel label draws (fixed across training seeds).")
  draws: int = option(0, "Generated data only: the runs' population. 0 = one fixed draw of the data and of the Gumbel "
                      "labels (generator seed 0, --label_seed), shared by every run: the tables' default and the "
                      "regression check. N = N independent draws, each a fold of its own: draw k generates its data "
                      "and labels from (label_seed, k) and orders its training steps by its own stream, so with "
                      "--seeds=1 every run sees data of its own (the population the paper's runs sample).", lo=0,
                      omit_default=True)
  synthetic_scale: float = option(1.0, "Synthetic data: multiply query counts.", lo=0, lo_open=True)
  synthetic_web30k: bool = option(False, "Synthetic data at MSLR-WEB30K size (overrides synthetic_scale).")
  synthetic_queries: Tuple[int, ...] = option((), "Synthetic data: train,vali,test query counts (default: the "
                                    "generator's).", lo=1)
  synthetic_mean_docs: Optional[float] = option(None, "Synthetic data: mean documents per query (default: the "
                                                "generator's).", lo=1)
  synthetic_chunk: int = option(0, "Synthetic data: generate every split this many queries at a time, each chunk from "
                                "its own generator (memory: the data plus one chunk's work; other bits than the "
                                "one-piece recipe; a multi-process run generates only its share); 0 = in one piece.",
                                lo=0, omit_default=True)
  analogue: str = option("", "Paper analogues (dataset=yahoo_like, istella_like, web30k_like): their teachers' settings, "
                         "e.g. weight=0.4,leak=0.1,noise=0.7 (the calibration's candidates, experiments.calibrate; "
                         "default: the calibrated ones, pfd_jax.data.analogues), or calibrated_for=<loss>: the "
                         "population calibrated for that loss's teachers, where the two losses' differ.",
                         omit_default=True)
  max_buckets: int = option(4, "Length buckets per split (padding vs compiled shapes).", lo=1)
  data_source: str = option("resident", "Where training reads its buckets: resident (on the device, where they fit: "
                            "see --stream_above) or streamed (pre-bucketed shards on disk, read a chunk of steps at a "
                            "time). The same numbers either way (tested bit for bit).",
                            choices=("resident", "streamed"), same_numbers=True)
  stream_above: float = option(0.25, "With data_source=resident: a fold whose padded buckets would take more than "
                               "this fraction of the memory available as it loads is streamed instead, and the log "
                               "says so (on a CPU they are held twice, on the host and on the device, beside the "
                               "dataset and the models); 0 = never.", lo=0.0, hi=1.0, omit_default=True,
                               same_numbers=True)
  shard_dir: str = option("cache/shards", "With data_source=streamed: the folder of the shard sets (written once "
                          "per dataset recipe, then reused).")

  def __post_init__(self):
    check(self)
    if self.synthetic_queries and len(self.synthetic_queries) != 3:
      raise ConfigError("synthetic_queries", f"three counts (train,vali,test) expected, got {self.synthetic_queries}")
    _check_labels(self)
    generator = {k: v for k, v in (("synthetic_scale", self.synthetic_scale != 1.0),
                                   ("synthetic_web30k", self.synthetic_web30k),
                                   ("synthetic_queries", bool(self.synthetic_queries)),
                                   ("synthetic_mean_docs", self.synthetic_mean_docs is not None),
                                   ("synthetic_chunk", bool(self.synthetic_chunk))) if v}
    if generator and self.dataset in REGISTRY and not REGISTRY[self.dataset].in_memory:
      # a generated-data preset with --dataset=<files> would run on the files and record settings that did not apply
      raise ConfigError(next(iter(generator)), f"{', '.join(generator)} set the generated data's size, and "
                        f"dataset={self.dataset} reads files: drop them (a preset that sets them is a generated "
                        f"data preset)")
    if self.analogue and self.dataset not in analogues.ANALOGUES:
      raise ConfigError("analogue", f"applies to a paper analogue ({', '.join(analogues.ANALOGUES)}), not "
                        f"dataset={self.dataset}")
    if self.analogue:
      try:
        analogues.parse_settings(self.analogue)
      except ValueError as e:
        raise ConfigError("analogue", str(e)) from None

  @property
  def label_mode(self) -> str:
    """labels, or its dataset's default (file for a folder given by path, gumbel otherwise)."""
    return self.labels or REGISTRY[self.dataset].labels

  @property
  def privileged_ids(self) -> Optional[tuple]:
    """The 1-based privileged ids given, or None for the automatic choice."""
    return parse_ids(self.privileged)

  def draw(self, fold: int) -> "DataConfig":
    """The recipe of fold `fold`: itself for fixed data (draws = 0); for draw k of --draws, its label seed
    :func:`draw_seed` (label_seed, k), which seeds its generator too."""
    return dataclasses.replace(self, label_seed=draw_seed(self.label_seed, fold)) if self.draws else self

  def synthetic_kwargs(self) -> Dict[str, Any]:
    """Arguments of :func:`pfd_jax.data.synthetic.generate` for dataset=synthetic (a draw's: from its recipe,
    :meth:`draw`)."""
    kw = synthetic.web30k_scale() if self.synthetic_web30k else dict(scale=self.synthetic_scale)
    if self.draws:
      kw["seed"] = self.label_seed
    if self.synthetic_queries:
      kw["num_queries"] = tuple(self.synthetic_queries)
    if self.synthetic_mean_docs is not None:
      kw["mean_docs"] = self.synthetic_mean_docs
    if self.synthetic_chunk:
      kw["chunk"] = self.synthetic_chunk
    if self.analogue:
      kw["settings"] = analogues.parse_settings(self.analogue)
      if kw["settings"].get("scored"):  # the lists it keeps are those with a positive under these labels
        kw["label_seed"] = self.label_seed
    return kw
