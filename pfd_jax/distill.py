"""The methods of the paper's Table 2 (sections 3.1-3.2): no-distillation, self-distillation, GenD, PFD.

* **no-distillation**: a student on regular features ``x``, data loss only, trained on the positive
  query groups (groups with at least one y = 1; appendix A.5 treats the others as unlabeled).
* **teachers** are trained the same way on the positive groups with their own inputs: ``x``
  (self-distillation), ``z`` (GenD) or ``concat(x, z)`` (PFD). The teacher is its run's best checkpoint.
* **students** see ``x`` only and train on *all* groups with Eq. 1: alpha * data loss on the positive
  groups + (1 - alpha) * loss against the teacher's probabilities sigmoid(g) on every group.
* **placebo** (a control, not in the paper): PFD's teacher and student on a copy of the data whose privileged
  rows are permuted across documents (:func:`pfd_jax.data.with_placebo_privileged`): the teacher has PFD's
  inputs, capacity and training, the student PFD's distillation, and only the link between z and the label is
  gone. PFD student vs placebo student, paired, measures what the privileged information adds beyond
  distillation as regularisation.

Seeds: every run of a table uses the same ``S`` training keys, so seed s of the baseline, of each teacher
and of each student share their key (common random numbers), and teacher seed s teaches student s.
Because the self-distillation teacher is trained exactly like the baseline with the same key, it *is*
the baseline run, which is therefore reused rather than trained twice.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import Callable, Optional, Sequence

import jax.numpy as jnp
import numpy as np

from pfd_jax import config
from pfd_jax import data as data_lib
from pfd_jax import distributed
from pfd_jax import train as train_lib
from pfd_jax.data import shards

METHODS = ("no_distill", "self_distill", "gend", "pfd", "placebo")
TEACHER_VIEW = {"self_distill": "x", "gend": "z", "pfd": "xz", "placebo": "xz"}

# How a teacher can teach (TrainConfig overrides of the teacher term). 'pointwise' and 'pairwise' are the
# paper's own PFD for RankBCE and RankNet (sigmoid probabilities as soft labels); 'listwise' is SDR's
# softmax loss against the affine transform max(a t + b, 0) of the teacher logits (SDR Eq. 8, 10); 'topk'
# is Ranking Distillation's weighted top-K loss (:mod:`pfd_jax.rank_distill`). The data term keeps the
# student's own loss.
TEACHING = {
    "pointwise": dict(teacher_loss="rankbce", teacher_transform="sigmoid"),
    "pairwise": dict(teacher_loss="ranknet", teacher_transform="sigmoid"),
    "listwise": dict(teacher_loss="softmax", teacher_transform="affine"),
    "topk": dict(teacher_loss="topk"),
}


@dataclasses.dataclass
class DeviceData:
  """One dataset fold on the device: training buckets (all groups, positive groups) and eval splits."""
  train_all: list
  train_pos: list
  eval_sets: dict
  num_train_groups: int
  num_positive_groups: int
  shards: Optional[str] = None  # the shard folder streamed from (None: resident)


def to_device(ds: data_lib.Dataset, max_buckets: Optional[int] = None, eval_splits: Sequence[str] = ("test", "vali"),
              data_groups: str = "positive", shard_dir: Optional[str] = None) -> DeviceData:
  """Buckets the training split twice (all groups; the groups the data-only runs visit) and the eval splits.

  data_groups='positive' (the paper) makes the data-only runs visit the positive groups; 'all' every group.
  max_buckets: None = :attr:`pfd_jax.config.DataConfig.max_buckets`. shard_dir: stream training and
  evaluation from on-disk shards (:mod:`pfd_jax.data.shards`) written there once per recipe (a folder named
  by the recipe's hash, reused when complete) instead of holding them on the device.
  """
  if max_buckets is None:
    max_buckets = config.DataConfig.max_buckets
  comm = distributed.comm()  # in a multi-process run `ds` is this process's share; bucket lengths are global
  tr = ds["train"]
  pos = np.flatnonzero(data_lib.positive_groups(tr))
  visit = pos if data_groups == "positive" else np.arange(tr.num_queries)
  sets = {"train_all": lambda: data_lib.bucketize(tr, max_buckets, comm=comm),
          "train_pos": lambda: data_lib.bucketize(tr, max_buckets, visit, comm=comm)}
  for s in eval_splits:
    if s in ds.splits:
      sets[s] = lambda s=s: train_lib.eval_buckets(ds[s], max_buckets)
  if shard_dir:
    # in a multi-process run each process writes and streams its own share
    own = f"-p{comm.index}of{comm.count}" if comm.count > 1 else ""
    folder = os.path.join(shard_dir, shard_key(ds, max_buckets, data_groups) + own)
    for name, make in sets.items():
      if not shards.is_done(folder, name):
        shards.write_buckets(folder, name, make())
    buckets = {name: shards.open_set(folder, name) for name in sets}
  else:
    folder, buckets = None, {name: train_lib.device_buckets(make()) for name, make in sets.items()}
  evals = {s: train_lib.EvalSet(buckets[s], ds[s].num_queries) for s in eval_splits if s in ds.splits}
  return DeviceData(train_all=buckets["train_all"], train_pos=buckets["train_pos"], eval_sets=evals,
                    num_train_groups=int(comm.sum(tr.num_queries)), num_positive_groups=int(comm.sum(pos.size)),
                    shards=folder)


def shard_key(ds: data_lib.Dataset, max_buckets: int, data_groups: str) -> str:
  """The shard folder of a dataset's buckets: a hash of its recipe, the bucketing and its splits' sizes."""
  sizes = {s: [g.num_queries, g.num_docs] for s, g in ds.splits.items()}
  text = json.dumps(dict(name=ds.name, recipe=ds.config, max_buckets=max_buckets, data_groups=data_groups,
                         sizes=sizes), sort_keys=True, default=str)
  return f"{ds.name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def train_on_data(keys, cfg: train_lib.TrainConfig, dd: DeviceData, view: str,
                  log_fn: Optional[Callable] = None) -> train_lib.TrainResult:
  """A data-loss-only run (the baseline or a teacher) on the positive groups (or all, per to_device)."""
  return train_lib.train(keys, cfg, dd.train_pos, view, dd.eval_sets, log_fn=log_fn)


def teacher_targets(cfg: train_lib.TrainConfig, teachers: Sequence[tuple], dd: DeviceData,
                    z_override=None) -> list:
  """Teacher logits on every training group, per bucket: [S, Q, L] (one teacher) or [S, K, Q, L].

  teachers: (TrainResult, view) or (TrainResult, view, TrainConfig) tuples; the config gives the teacher's
  model shape (default `cfg`: teacher and student alike). The student's teacher term turns logits into its
  targets (cfg.teacher_transform, or top-K ranks).
  """
  per_teacher = [train_lib.predict(t[2] if len(t) > 2 else cfg, t[0].params, dd.train_all, t[1], z_override)
                 for t in teachers]
  if len(per_teacher) == 1:
    return per_teacher[0]
  return [jnp.stack(ts, axis=1) for ts in zip(*per_teacher)]


def train_student(keys, cfg: train_lib.TrainConfig, dd: DeviceData, targets: list,
                  log_fn: Optional[Callable] = None, variants: Optional[Sequence[dict]] = None):
  """A student on x over all training groups with Eq. 1 against `targets` (see teacher_targets); with
  `variants` (e.g. ``[{"alpha": a} for a in alphas]``), one student per variant trained side by side in one
  program (a list of results; :func:`pfd_jax.train.train`)."""
  return train_lib.train(keys, cfg, dd.train_all, "x", dd.eval_sets, teacher=targets, log_fn=log_fn,
                         variants=variants)


def num_rows(methods: Sequence[str]) -> int:
  """How many models :func:`run_methods` trains for `methods` (the baseline, and a teacher per GenD / PFD)."""
  return 1 + sum({"no_distill": 0, "self_distill": 1}.get(m, 2) for m in methods)


def run_methods(keys, cfg: train_lib.TrainConfig, dd: DeviceData, methods: Sequence[str] = METHODS,
                log_fn: Optional[Callable[[str], Callable]] = None,
                fit: Optional[Callable] = None, placebo: Optional[Callable[[], DeviceData]] = None) -> dict:
  """Runs the Table 2 / Table 4 rows. Returns {row: TrainResult} with rows no_distill, self_distill,
  gend_teacher, gend, pfd_teacher, pfd, placebo_teacher, placebo (those asked for; the baseline always runs).

  log_fn(row) returns the per-epoch callback for that row (or None). fit(row, view, train) returns the row's
  result, by calling ``train()`` or otherwise (a driver loads rows an interrupted run saved); default: train.
  placebo() returns the placebo rows' device data (the same groups with permuted z; called only when a
  placebo row has to be trained).
  """
  bad = [m for m in methods if m not in METHODS]
  if bad:
    raise ValueError(f"unknown methods {bad}; known: {METHODS}")
  if "placebo" in methods and placebo is None:
    raise ValueError("the placebo rows need their data: run_methods(..., placebo=lambda: to_device(...)) of "
                     "pfd_jax.data.with_placebo_privileged(ds)")
  cb = (lambda row: log_fn(row)) if log_fn else (lambda row: None)
  fit = fit or (lambda row, view, train: train())
  rows = {"no_distill": fit("no_distill", "x", lambda: train_on_data(keys, cfg, dd, "x", cb("no_distill")))}
  for m in methods:
    if m == "no_distill":
      continue
    view = TEACHER_VIEW[m]
    data = placebo if m == "placebo" else (lambda: dd)  # the placebo's teacher and student see its z
    if m == "self_distill":
      teacher = rows["no_distill"]
    else:
      teacher = rows[f"{m}_teacher"] = fit(f"{m}_teacher", view,
                                           lambda: train_on_data(keys, cfg, data(), view, cb(f"{m}_teacher")))
    rows[m] = fit(m, "x", lambda: train_student(keys, cfg, data(), teacher_targets(cfg, [(teacher, view)], data()),
                                                cb(m)))
  return rows
