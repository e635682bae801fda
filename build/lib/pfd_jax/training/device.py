"""A fold's data on the device: one place where a dataset's splits become the padded buckets the training and the
evaluation read (:func:`to_device`), resident or streamed from on-disk shards, and the same for D re-drawn datasets
on one shared layout (:func:`to_device_draws`). A driver decides where (resident or streamed, which splits, which
groups the data-only runs visit) and calls one of these; the rows read the :class:`DeviceData` it returns.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import TYPE_CHECKING, Any, Dict, Optional, Sequence

import numpy as np

from pfd_jax import distributed
from pfd_jax.data import shards
from pfd_jax.data.config import DataConfig
from pfd_jax.data.padding import bucketize, padded_slots
from pfd_jax.data.preprocess import positive_groups
from pfd_jax.training import draws
from pfd_jax.training.evaluation import EvalSet, device_buckets, eval_buckets

if TYPE_CHECKING:
  from pfd_jax.data.datasets import Dataset


@dataclasses.dataclass
class DeviceData:
  """One dataset fold on the device: training buckets (all groups, positive groups) and eval splits."""
  train_all: list
  train_pos: list
  eval_sets: Dict[str, Any]  # {split: EvalSet, or DrawnEvalSet with draws}
  num_train_groups: int
  num_positive_groups: int
  max_buckets: int  # the bucketing of every split: the GBDT rows order their lists alike (per-list pairing)
  shards: Optional[str] = None  # the shard folder streamed from (None: resident)


def to_device(ds: Dataset, max_buckets: Optional[int] = None, eval_splits: Sequence[str] = ("test", "vali"),
              data_groups: str = "positive", shard_dir: Optional[str] = None) -> DeviceData:
  """Buckets the training split twice (all groups; the groups the data-only runs visit) and the eval splits.

  data_groups='positive' (the paper) makes the data-only runs visit the positive groups; 'all' every group.
  max_buckets: None = :attr:`pfd_jax.data.config.DataConfig.max_buckets`. shard_dir: stream training and
  evaluation from on-disk shards (:mod:`pfd_jax.data.shards`) written there once per recipe (a folder named
  by the recipe's hash, reused when complete) instead of holding them on the device.
  """
  if max_buckets is None:
    max_buckets = DataConfig.max_buckets
  comm = distributed.comm()  # in a multi-process run `ds` is this process's share; bucket lengths are global
  tr = ds["train"]
  pos = np.flatnonzero(positive_groups(tr))
  visit = pos if data_groups == "positive" else np.arange(tr.num_queries)
  sets = {"train_all": lambda: bucketize(tr, max_buckets, comm=comm),
          "train_pos": lambda: bucketize(tr, max_buckets, visit, comm=comm)}
  for s in eval_splits:
    if s in ds.splits:
      sets[s] = lambda s=s: eval_buckets(ds[s], max_buckets)
  if shard_dir:
    # in a multi-process run each process writes and streams its own share
    own = f"-p{comm.index}of{comm.count}" if comm.count > 1 else ""
    folder = os.path.join(shard_dir, shard_key(ds, max_buckets, data_groups) + own)
    for name, make in sets.items():
      if not shards.is_done(folder, name):
        shards.write_buckets(folder, name, make())
    buckets = {name: shards.open_set(folder, name) for name in sets}
  else:
    folder, buckets = None, {name: device_buckets(make()) for name, make in sets.items()}
  evals = {s: EvalSet(buckets[s], ds[s].num_queries) for s in eval_splits if s in ds.splits}
  return DeviceData(train_all=buckets["train_all"], train_pos=buckets["train_pos"], eval_sets=evals,
                    num_train_groups=int(comm.sum(tr.num_queries)), num_positive_groups=int(comm.sum(pos.size)),
                    max_buckets=max_buckets, shards=folder)


def resident_bytes(ds: Dataset, max_buckets: Optional[int] = None, eval_splits: Sequence[str] = ("test", "vali"),
                   data_groups: str = "positive") -> int:
  """The bytes :func:`to_device` holds resident for `ds` (each of its bucket sets, padded), from the group sizes
  alone: x, z, rel, y and the mask in every padded slot (float32; the mask a byte)."""
  if max_buckets is None:
    max_buckets = DataConfig.max_buckets
  tr = ds["train"]
  pos = positive_groups(tr)
  width = tr.x.shape[1] + (0 if tr.z is None else tr.z.shape[1])
  lists = [tr.sizes, tr.sizes[pos] if data_groups == "positive" else tr.sizes]
  lists += [ds[s].sizes[positive_groups(ds[s])] for s in eval_splits if s in ds.splits]
  return sum(padded_slots(sizes, max_buckets) for sizes in lists) * (4 * (width + 2) + 1)


def to_device_draws(sets: Sequence[Dataset], max_buckets: Optional[int] = None,
                    eval_splits: Sequence[str] = ("test", "vali"), data_groups: str = "positive") -> DeviceData:
  """:func:`to_device` of D draws at once (:mod:`pfd_jax.training.draws`): every part on a layout the draws share,
  the training parts :class:`~pfd_jax.training.draws.Draws`, the eval splits
  :class:`~pfd_jax.training.draws.DrawnEvalSet` s; the group counts are the draws' totals. Rows train every draw's
  models in one program (keys draw-major, D x S)."""
  if max_buckets is None:
    max_buckets = DataConfig.max_buckets
  trs = [ds["train"] for ds in sets]
  pos = [np.flatnonzero(positive_groups(t)) for t in trs]
  visit = pos if data_groups == "positive" else None
  return DeviceData(train_all=draws.draws(trs, max_buckets), train_pos=draws.draws(trs, max_buckets, visit),
                    eval_sets={s: draws.eval_set([ds[s] for ds in sets], max_buckets) for s in eval_splits
                               if s in sets[0].splits},
                    num_train_groups=sum(t.num_queries for t in trs), num_positive_groups=sum(p.size for p in pos),
                    max_buckets=max_buckets)


def shard_key(ds: Dataset, max_buckets: int, data_groups: str) -> str:
  """The shard folder of a dataset's buckets: a hash of its recipe, the bucketing and its splits' sizes."""
  sizes = {s: [g.num_queries, g.num_docs] for s, g in ds.splits.items()}
  text = json.dumps(dict(name=ds.name, recipe=ds.config, max_buckets=max_buckets, data_groups=data_groups,
                         sizes=sizes), sort_keys=True, default=str)
  return f"{ds.name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
