"""Typed configuration: each setting defined once, with its type, default, allowed values and help.

A setting is a field of a frozen dataclass declared with :func:`option`: the default, one line of help,
and optionally its choices or bounds. Checking (:func:`check`) runs when the object is built, so a bad
value fails before any data is loaded, as a :class:`ConfigError` naming the field. The experiment drivers
generate their absl flags from these fields (``experiments/common.py``), so a flag, its default, its help
and its check are the field's: a new setting is one new field.

The configurations: :class:`DataConfig` (the data recipe, here), :class:`pfd_jax.train.TrainConfig` (the
training hyper-parameters), :class:`pfd_jax.rank_distill.TopK` (the top-K teacher loss), and the drivers'
run settings (``experiments.common.RunConfig``).
"""
from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any, Optional, Sequence, Tuple

from pfd_jax.data import datasets as _datasets


class ConfigError(ValueError):
  """A bad configuration value; `field` names the setting (the flag of the same name)."""

  def __init__(self, field: str, message: str):
    self.field = field
    super().__init__(f"{field}: {message}")


def option(default, help: str, *, choices: Optional[Sequence] = None, lo=None, hi=None, lo_open: bool = False,
           flag: bool = True, parse=None, fmt=None):
  """A configuration field: default, help, and the checks of :func:`check`.

  choices: allowed values (of each element for a tuple field); lo / hi: inclusive bounds (lo_open: lo
  excluded); floats must be finite. flag=False keeps a field out of the generated flags (set by code).
  parse / fmt: text <-> value for fields whose flag text is not a plain scalar or comma list.
  """
  meta = dict(help=help, choices=tuple(choices) if choices is not None else None, lo=lo, hi=hi, lo_open=lo_open,
              flag=flag, parse=parse, fmt=fmt)
  if isinstance(default, (list, dict, set)):
    raise TypeError("mutable default; use a tuple")
  return dataclasses.field(default=default, metadata=meta)


def _check_value(name: str, value, meta: dict) -> None:
  if isinstance(value, float) and not math.isfinite(value):
    raise ConfigError(name, f"must be finite, got {value}")
  choices = meta.get("choices")
  if choices is not None and value not in choices:
    raise ConfigError(name, f"{value!r} is not one of {', '.join(map(str, choices))}")
  lo, hi = meta.get("lo"), meta.get("hi")
  if isinstance(value, (int, float)) and not isinstance(value, bool):
    if lo is not None and (value < lo or (meta.get("lo_open") and value == lo)):
      raise ConfigError(name, f"must be {'>' if meta.get('lo_open') else '>='} {lo}, got {value}")
    if hi is not None and value > hi:
      raise ConfigError(name, f"must be <= {hi}, got {value}")


def check(obj) -> None:
  """Checks every :func:`option` field of a dataclass instance (elements of tuple fields one by one)."""
  for f in dataclasses.fields(obj):
    if "help" not in f.metadata:
      continue
    value = getattr(obj, f.name)
    if value is None:
      continue
    for v in (value if isinstance(value, tuple) and f.metadata.get("parse") is None else (value,)):
      _check_value(f.name, v, f.metadata)


def to_dict(obj) -> dict:
  """A configuration as plain JSON-able data (nested dataclasses as dicts, tuples as lists)."""
  return dataclasses.asdict(obj)


def from_dict(cls, d: dict, **nested):
  """The instance of dataclass `cls` that :func:`to_dict` wrote (lists back to tuples, nested dataclasses
  rebuilt; `nested` gives the class of fields typed ``Any``)."""
  hints = typing.get_type_hints(cls)
  kw = {}
  for f in dataclasses.fields(cls):
    if f.name not in d:
      continue
    v = d[f.name]
    t = nested.get(f.name) or hints[f.name]
    kw[f.name] = _rebuild(t, v)
  return cls(**kw)


def _rebuild(t, v):
  if v is None:
    return None
  if dataclasses.is_dataclass(t):
    return from_dict(t, v)
  if isinstance(v, list):
    return tuple(_rebuild(Any, x) for x in v)
  return v


def _check_labels(cfg: "DataConfig") -> None:
  if cfg.dataset == "synthetic" and cfg.data_dir:
    raise ConfigError("data_dir", "dataset=synthetic is generated in memory and reads no folder; to train on "
                      "your own LETOR files add --dataset=letor (named sets such as ohsumed or web30k take "
                      "--data_dir too)")
  if cfg.positive_grade is not None and cfg.label_mode != "file":
    raise ConfigError("positive_grade", "applies to labels=file only")
  ids = cfg.privileged_ids  # parses
  if ids is not None and cfg.num_privileged is not None:
    raise ConfigError("num_privileged", "applies to privileged=auto only (privileged names the ids)")


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
  dataset: str = option("synthetic", "Dataset name (letor = any folder given by data_dir).",
                        choices=_datasets.NAMES)
  data_dir: Optional[str] = option(None, "Dataset folder (default $PFD_DATA_DIR/<name> or ../shared/data).")
  cache_dir: Optional[str] = option("cache", "Where parsed LETOR files are cached as .npz ('' = no cache).")
  folds: Tuple[int, ...] = option((), "Folds to run, e.g. 1,3 (default: every fold of the dataset on disk).", lo=1)
  labels: Optional[str] = option(None, "Training labels: gumbel (the paper's Eq. 2 draws) or file (the file's "
                                 "own labels). Default: file for dataset=letor, gumbel otherwise.",
                                 choices=_datasets.LABEL_MODES)
  positive_grade: Optional[float] = option(None, "With labels=file: y = 1[label >= this grade] (needed for "
                                           "graded labels).")
  privileged: str = option("", "Privileged features: auto (the paper: the num_privileged columns most "
                           "|correlated| with y on train) or 1-based feature ids as in the files, e.g. 7,15. "
                           "Default: auto for named datasets; required with dataset=letor.")
  num_privileged: Optional[int] = option(None, "With privileged=auto: how many (default: per dataset).", lo=0)
  t: float = option(_datasets.PAPER_T, "Eq. 2 temperature t.", lo=0, lo_open=True)
  tau: Optional[float] = option(None, "Eq. 2 tau_target (default: per dataset, see README).")
  min_docs: int = option(10, "Drop query groups with fewer documents.", lo=1)
  query_norm: bool = option(False, "LETOR QueryLevelNorm (per-query min-max) before log1p.")
  log1p: bool = option(True, "sign(x) log(1 + |x|) feature transform (appendix A.1).")
  label_seed: int = option(0, "Seed of the Gumbel label draws (fixed across training seeds).")
  synthetic_scale: float = option(1.0, "Synthetic data: multiply query counts.", lo=0, lo_open=True)
  synthetic_web30k: bool = option(False, "Synthetic data at MSLR-WEB30K size (overrides synthetic_scale).")
  synthetic_queries: Tuple[int, ...] = option((), "Synthetic data: train,vali,test query counts (default: the "
                                    "generator's).", lo=1)
  synthetic_mean_docs: Optional[float] = option(None, "Synthetic data: mean documents per query (default: the "
                                                "generator's).", lo=1)
  max_buckets: int = option(4, "Length buckets per split (padding vs compiled shapes).", lo=1)
  data_source: str = option("resident", "Where training reads its buckets: resident (on the device) or streamed "
                            "(pre-bucketed shards on disk, read a chunk of steps at a time; the same numbers).",
                            choices=("resident", "streamed"))
  shard_dir: str = option("cache/shards", "With data_source=streamed: the folder of the shard sets (written once "
                          "per dataset recipe, then reused).")

  def __post_init__(self):
    check(self)
    if self.synthetic_queries and len(self.synthetic_queries) != 3:
      raise ConfigError("synthetic_queries", f"three counts (train,vali,test) expected, got {self.synthetic_queries}")
    _check_labels(self)

  @property
  def label_mode(self) -> str:
    """labels, or its default for the dataset (file for a folder given by path, gumbel otherwise)."""
    return self.labels or ("file" if self.dataset == "letor" else "gumbel")

  @property
  def privileged_ids(self) -> Optional[tuple]:
    """The 1-based privileged ids given, or None for the automatic choice."""
    return parse_ids(self.privileged)

  def synthetic_kwargs(self) -> dict:
    """Arguments of :func:`pfd_jax.data.generate_synthetic` for dataset=synthetic."""
    kw = _datasets.synthetic.web30k_scale() if self.synthetic_web30k else dict(scale=self.synthetic_scale)
    if self.synthetic_queries:
      kw["num_queries"] = tuple(self.synthetic_queries)
    if self.synthetic_mean_docs is not None:
      kw["mean_docs"] = self.synthetic_mean_docs
    return kw
