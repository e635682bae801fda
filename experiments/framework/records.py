"""Typed records of what a Table 2 run found, between the training and the pages: a row's result in one fold
(:class:`RowRecord`), a fold's (:class:`FoldRecord`) and a loss's (:class:`LossRecord`). results.json holds them as
plain JSON, exactly as before they were typed (:meth:`to_json`; an optional part that is absent stays absent), and
the pages read them back with :meth:`from_json`, which keeps every value as the file holds it (the paired
comparisons compute on the same numbers whether they read a run in memory or its file)."""
from __future__ import annotations

import dataclasses
import gzip
import json
import os
from typing import Any, Dict, Mapping, MutableMapping, Optional

import numpy as np

from pfd_jax.config import ConfigError, JsonObject

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout this runs from
ARCHIVED = "results.json.gz"  # a run's results as the page's copy of it in published/ keeps them



def _json(record, order: tuple, optional: tuple = ()) -> JsonObject:
  """A record's fields as a dict in `order`, leaving out the optional parts it does not have."""
  return {k: getattr(record, k) for k in order if not (k in optional and getattr(record, k) is None)}


@dataclasses.dataclass
class RowRecord:
  """One trained row of one fold."""
  best: Dict[str, Any]    # {split: [S, len(ks)]} best-epoch metrics of every seed
  best_epoch: Any = None  # [S] (a LightGBM row: its boosting rounds)
  curves: Dict[str, Any] = dataclasses.field(default_factory=dict)  # {split: [S, E, len(ks)]} ({} for LightGBM)
  loss: Any = None        # [S, E] per-epoch total loss
  seconds: float = 0.0
  test_lists: Any = None  # [Q] each test list's NDCG@ks[0], the mean over seeds
  seed_lists: Any = None  # [S, Q] each seed's per-list NDCG@ks[0] (the crossed seeds x queries interval)
  vali_lists: Any = None  # [V] each validation list's NDCG@ks[0] (with a positive), the mean over seeds (--draw_store)

  @classmethod
  def of(cls, result, seed_lists) -> "RowRecord":
    """The record of a trained row (a TrainResult or a LightGBM row's Result) and its per-list NDCG [S, Q]."""
    seed_lists = np.asarray(seed_lists)
    return cls(best=result.best, best_epoch=result.best_epoch, curves=result.curves, loss=result.loss,
               seconds=result.seconds, test_lists=seed_lists.mean(0), seed_lists=seed_lists)

  def to_json(self) -> JsonObject:
    return _json(self, ("best", "best_epoch", "curves", "loss", "seconds", "test_lists", "seed_lists", "vali_lists"),
                 ("seed_lists", "vali_lists"))

  @classmethod
  def from_json(cls, d: JsonObject) -> "RowRecord":
    return cls(**d)


@dataclasses.dataclass
class FoldRecord:
  """One fold of one loss: its data recipe, its rows, and the optional parts of a practitioner's run."""
  rows: Dict[str, RowRecord]
  data: Dict[str, Any] = dataclasses.field(default_factory=dict)  # the dataset's recipe (Dataset.config)
  train_groups: int = 0
  positive_train_groups: int = 0
  seconds: float = 0.0
  test_lists_valid: Any = None   # [Q] the test lists with a positive (the per-list NDCG's mask)
  ensembles: Optional[Dict[str, Any]] = None  # {row: {ndcg, test_lists, vali_ndcg}} (--ensembles)
  latency: Optional[Dict[str, Any]] = None    # {row: {single, ensemble}} serving latency (the first fold)
  debias: Optional[Dict[str, Any]] = None     # the --position rows' notes
  search: Optional[Dict[str, Any]] = None     # what the PFD search found (--search; table2.search_record)

  def to_json(self) -> JsonObject:  # the order results.json always had
    return _json(self, ("data", "train_groups", "positive_train_groups", "seconds", "rows", "test_lists_valid",
                        "ensembles", "latency", "debias", "search"), ("ensembles", "latency", "debias", "search"))

  @classmethod
  def from_json(cls, d: JsonObject) -> "FoldRecord":
    return cls(**dict(d, rows={k: RowRecord.from_json(r) for k, r in d["rows"].items()}))


@dataclasses.dataclass
class LossRecord:
  """Every fold of one loss, the paired comparisons of its rows and the model to deploy."""
  folds: Dict[str, FoldRecord]           # {"fold<k>": ...}
  train_config: Dict[str, Any] = dataclasses.field(default_factory=dict)
  comparisons: Optional[Dict[str, Any]] = None  # experiments.framework.pairs.comparisons
  deploy: Optional[Dict[str, Any]] = None       # experiments.framework.deploy.choose (a run with ensembles)

  def to_json(self) -> JsonObject:  # the order results.json always had
    return _json(self, ("train_config", "folds", "comparisons", "deploy"), ("comparisons", "deploy"))

  @classmethod
  def from_json(cls, d: JsonObject) -> "LossRecord":
    return cls(**dict(d, folds={k: FoldRecord.from_json(f) for k, f in d["folds"].items()}))

  @property
  def first_fold(self) -> FoldRecord:
    return next(iter(self.folds.values()))

  @property
  def first_fold_number(self) -> str:
    """The first fold's number ("1" of "fold1")."""
    return next(iter(self.folds)).removeprefix("fold")


class RunRecord(MutableMapping):
  """One run of a driver, as results.json holds it (:meth:`to_json`, the order it was given) and its pages read
  it back (:meth:`from_json`): named parts, those every page reads typed (:attr:`config`, :attr:`env`,
  :attr:`seconds`, and, once the run is written, :attr:`provenance`, :attr:`command`, :attr:`wall_seconds`), the
  driver's own findings beside them (table2's ``losses``: a :class:`LossRecord` per loss; an ablation's ``rows`` and
  ``comparisons``; ...), read as ``record["rows"]`` as before records were typed."""

  def __init__(self, **parts):
    self._parts: Dict[str, Any] = dict(parts)

  config = property(lambda self: self._parts.get("config"), doc="The driver's configuration (a schema.Config, or "
                    "its JSON when read back).")
  env = property(lambda self: self._parts.get("env", {}), doc="Where it ran (rundir.environment()).")
  seconds = property(lambda self: self._parts.get("seconds"), doc="The run's own seconds (training and scoring).")
  provenance = property(lambda self: self._parts.get("provenance", {}), doc="What determined it (rundir.provenance).")
  command = property(lambda self: self._parts.get("command"), doc="The command line that made it.")
  wall_seconds = property(lambda self: self._parts.get("wall_seconds"), doc="The whole process's seconds.")

  def finished(self, provenance: Dict[str, Any], command: str, wall_seconds: float,
               resumed: Optional[Dict[str, float]] = None) -> "RunRecord":
    """The record with how it was run (lifecycle: written last, after the driver's parts); resumed: {rows, seconds}
    loaded from the run folder instead of trained, and their own training seconds (None: nothing was loaded)."""
    self._parts.update(provenance=provenance, command=command, wall_seconds=wall_seconds)
    self._parts.update({"resumed": resumed} if resumed else {})
    return self

  def to_json(self) -> Dict[str, Any]:
    return dict(self._parts)

  @classmethod
  def from_json(cls, d: Mapping[str, Any]) -> "RunRecord":
    return d if isinstance(d, RunRecord) else cls(**d)

  def __getitem__(self, key: str):
    return self._parts[key]

  def __setitem__(self, key: str, value) -> None:
    self._parts[key] = value

  def __delitem__(self, key: str) -> None:
    del self._parts[key]

  def __iter__(self):
    return iter(self._parts)

  def __len__(self) -> int:
    return len(self._parts)


def read_results(path: str, flag: str) -> JsonObject:
  """A run's results: a results.json or results.json.gz file, or a folder holding one (a run folder, or the page's
  copy of a run in published/); a ConfigError naming `flag` and the path when there is none."""
  for p in ([os.path.join(path, "results.json"), os.path.join(path, ARCHIVED)] if os.path.isdir(path) else [path]):
    if os.path.isfile(p):
      with (gzip.open(p, "rt") if p.endswith(".gz") else open(p)) as f:
        return json.load(f)
  raise ConfigError(flag, f"{path}: no results.json or {ARCHIVED} there (a run folder, the page's copy of one in "
                    "published/, or the file)")
