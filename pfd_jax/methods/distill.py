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
* **the debiasing rows** (:func:`run_debias_methods`, :mod:`pfd_jax.methods.debias`): the display position as a
  feature served at the top position, the two-tower model, IPS, PFD with the position as the privileged feature
  (alone, and with click; and its student taught by the teacher's predictions with every item at the top
  position), its placebo, and LambdaMART with LightGBM's position-bias model.
* **the GBDT rows** (:func:`run_gbdt_methods`): LightGBM LambdaMART (:mod:`pfd_jax.methods.gbdt`), and
  distillation across model families: an MLP student of an out-of-fold LambdaMART teacher, and GBDT students
  of the MLP PFD teacher.

Every row's model input, teacher and settings are in one table, the row registry (:mod:`pfd_jax.methods.rows`).

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
from typing import TYPE_CHECKING, Callable, NamedTuple, Optional, Sequence

import jax.numpy as jnp
import numpy as np

from pfd_jax import distributed
from pfd_jax.data import shards
from pfd_jax.data.config import DataConfig
from pfd_jax.data.datasets import Dataset
from pfd_jax.data.padding import bucketize
from pfd_jax.data.preprocess import positive_groups
from pfd_jax.methods import debias, gbdt
from pfd_jax.methods import rows as rows_lib
from pfd_jax.training.evaluation import EvalSet, device_buckets, eval_buckets, predict
from pfd_jax.training.loop import Hooks, TrainResult, train

if TYPE_CHECKING:
  from pfd_jax.training.config import TrainConfig

# The --methods choices of the built-in rows (the row registry, :mod:`pfd_jax.methods.rows`, has every row: its
# view, its teacher, its overrides; rows registered later are choices too, rows.methods()).
METHODS = rows_lib.methods("mlp")  # no_distill, self_distill, gend, pfd, placebo
GBDT_METHODS = rows_lib.methods("gbdt")  # :func:`run_gbdt_methods`
GBDT_ROWS = rows_lib.of_family("gbdt")

@dataclasses.dataclass
class DeviceData:
  """One dataset fold on the device: training buckets (all groups, positive groups) and eval splits."""
  train_all: list
  train_pos: list
  eval_sets: dict
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


def shard_key(ds: Dataset, max_buckets: int, data_groups: str) -> str:
  """The shard folder of a dataset's buckets: a hash of its recipe, the bucketing and its splits' sizes."""
  sizes = {s: [g.num_queries, g.num_docs] for s, g in ds.splits.items()}
  text = json.dumps(dict(name=ds.name, recipe=ds.config, max_buckets=max_buckets, data_groups=data_groups,
                         sizes=sizes), sort_keys=True, default=str)
  return f"{ds.name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def train_on_data(keys, cfg: TrainConfig, dd: DeviceData, view: str, hooks: Hooks = Hooks()) -> TrainResult:
  """A data-loss-only run (the baseline or a teacher) on the positive groups (or all, per to_device)."""
  return train(keys, cfg, dd.train_pos, view, dd.eval_sets, hooks=hooks)


def teacher_targets(cfg: TrainConfig, teachers: Sequence[tuple], dd: DeviceData,
                    z_override=None) -> list:
  """Teacher logits on every training group, per bucket: [S, Q, L] (one teacher) or [S, K, Q, L].

  teachers: (TrainResult, view) or (TrainResult, view, TrainConfig) tuples; the config gives the teacher's
  model shape (default `cfg`: teacher and student alike). The student's teacher term turns logits into its
  targets (its teaching's targets, :mod:`pfd_jax.training.teaching`: the transform of the logits, or top-K
  ranks).
  """
  per_teacher = [predict(t[2] if len(t) > 2 else cfg, t[0].params, dd.train_all, t[1], z_override)
                 for t in teachers]
  if len(per_teacher) == 1:
    return per_teacher[0]
  return [jnp.stack(ts, axis=1) for ts in zip(*per_teacher)]


def train_student(keys, cfg: TrainConfig, dd: DeviceData, targets: list, hooks: Hooks = Hooks(),
                  variants: Optional[Sequence[dict]] = None):
  """A student on x over all training groups with Eq. 1 against `targets` (see teacher_targets); with
  `variants` (e.g. ``[{"alpha": a} for a in alphas]``), one student per variant trained side by side in one
  program (a list of results; :func:`pfd_jax.training.train`)."""
  return train(keys, cfg, dd.train_all, "x", dd.eval_sets, teacher=targets, hooks=hooks,
               variants=variants)


def num_rows(methods: Sequence[str]) -> int:
  """How many models :func:`run_methods` trains for `methods` (the baseline, and the teachers they need)."""
  return len(rows_lib.plan(methods))


def run_methods(keys, cfg: TrainConfig, dd: DeviceData, methods: Sequence[str] = METHODS, *,
                hooks: Optional[Callable[[str], Hooks]] = None,
                fit: Optional[Callable] = None, placebo: Optional[Callable[[], DeviceData]] = None) -> dict:
  """Runs the MLP rows of `methods` (--methods choices of the row registry, :func:`pfd_jax.methods.rows.plan`:
  each with the teachers it needs; the baseline no_distill always) and returns {row name: TrainResult}, e.g. rows
  no_distill, self_distill, gend_teacher, gend, pfd_teacher, pfd, placebo_teacher, placebo.

  Each row trains from its registry entry: with its own settings (``row.config(cfg)``), on its view, on data alone
  or as a student of its teacher (Eq. 1 against the teacher's logits). Seed s of every row shares its key, so the
  self-distillation teacher *is* the baseline run. hooks(row name) returns the
  :class:`pfd_jax.training.loop.Hooks` of that row's training. fit(row, config, train) returns the row's result
  (row: its :class:`~pfd_jax.methods.rows.Row`, config: its TrainConfig), by calling ``train()`` or otherwise (a
  driver loads rows an interrupted run saved); default: train. placebo() returns the placebo rows' device data (the
  same groups with permuted z; called only when a placebo row has to be trained).
  """
  plan = rows_lib.plan(methods)
  if any(r.placebo for r in plan) and placebo is None:
    raise ValueError("the placebo rows need their data: run_methods(..., placebo=lambda: to_device(...)) of "
                     "pfd_jax.data.with_placebo_privileged(ds)")
  row_hooks = hooks or (lambda row: Hooks())
  fit = fit or (lambda row, config, train: train())
  out = {}
  for row in plan:
    config = row.config(cfg)
    data = placebo if row.placebo else (lambda: dd)  # the placebo's teacher and student see its z
    if row.teacher is None:
      train = lambda row=row, config=config, data=data: train_on_data(keys, config, data(), row.view, row_hooks(row.name))
    else:
      teacher = rows_lib.REGISTRY[row.teacher]
      taught = [(out[teacher.name], teacher.view, teacher.config(cfg))]
      train = lambda row=row, config=config, data=data, taught=taught: train_student(
          keys, config, data(), teacher_targets(config, taught, data()), row_hooks(row.name))
    out[row.name] = fit(row, config, train)
  return out


def run_gbdt_methods(keys, cfg: TrainConfig, gc: gbdt.GBDTConfig, ds: Dataset, dd: DeviceData,
                     methods: Sequence[str], *, mlp_rows: Optional[dict] = None, fit: Optional[Callable] = None,
                     hooks: Optional[Callable[[str], Hooks]] = None, seed: int = 0,
                     cache: Optional[dict] = None) -> dict:
  """The GBDT rows of `methods` (:data:`GBDT_METHODS`) beside the MLP rows of :func:`run_methods`:
  {row: gbdt.Result or TrainResult}. dd: the MLP rows' device data; mlp_rows: the MLP rows already trained (the
  GBDT students' teacher is their 'pfd_teacher', trained here when absent); fit(row, config, train) returns a
  row's result, as :func:`run_methods`'s (default: train; a driver loads the rows an interrupted run saved).
  seed: LightGBM's base seed. Each row's title, view and teacher are its registry entry's (family 'gbdt').
  The lists are bucketed as the MLP rows' (dd.max_buckets), so GBDT and MLP rows pair list by list.
  cache: a dict kept across calls on the same data and GBDT settings with another loss: what no loss changes
  (the LambdaMART rows, the out-of-fold teacher scores) is computed once."""
  rows_lib.plan(methods, "gbdt")  # checks the names
  row_hooks = hooks or (lambda row: Hooks())
  fit_row = fit or (lambda row, config, train_fn: train_fn())
  fit = lambda name, train_fn: fit_row(rows_lib.REGISTRY[name], cfg, train_fn)
  cache = {} if cache is None else cache
  once = lambda key, make: cache[key] if key in cache else cache.setdefault(key, make())
  num_seeds, max_buckets = int(np.shape(keys)[0]), dd.max_buckets
  tr = ds["train"]
  data_groups = gbdt.loss_groups(cfg, tr)
  splits = tuple(dd.eval_sets)
  kw = dict(num_seeds=num_seeds, seed=seed, eval_splits=splits, max_buckets=max_buckets)
  rows = {}
  if "lambdamart" in methods:
    rows["lambdamart"] = fit("lambdamart", lambda: once("lambdamart", lambda: gbdt.train(
        gc, cfg, ds, "x", query_index=data_groups, hooks=row_hooks("lambdamart"), **kw)))
  if "pfd_from_lambdamart" in methods:
    rows["lambdamart_teacher"] = fit("lambdamart_teacher", lambda: once("lambdamart_teacher", lambda: gbdt.train(
        gc, cfg, ds, "xz", query_index=data_groups, hooks=row_hooks("lambdamart_teacher"), **kw)))

    def student():
      t = once("oof", lambda: gbdt.teacher_scores_oof(gc, cfg, ds, "xz", num_seeds, seed=seed, query_index=data_groups,
                                                          max_buckets=max_buckets, hooks=row_hooks("lambdamart_teacher_oof")))
      targets = gbdt.to_buckets(t, bucketize(tr, max_buckets), tr.offsets)
      return train_student(keys, cfg, dd, targets, row_hooks("pfd_from_lambdamart"))
    rows["pfd_from_lambdamart"] = fit("pfd_from_lambdamart", student)
  if "gbdt_from_pfd" in methods:
    teacher = (mlp_rows or {}).get("pfd_teacher") or rows.setdefault("pfd_teacher", fit(
        "pfd_teacher", lambda: train_on_data(keys, cfg, dd, "xz", row_hooks("pfd_teacher"))))
    logits = []  # the PFD teacher's logits on every training document, computed once for both students
    in_data = np.ones(tr.num_docs, bool) if data_groups is None else np.isin(tr.group_index, data_groups)

    def targets(s, as_grades):
      if not logits:
        logits.append(gbdt.doc_scores(cfg, teacher.params, tr, "xz", max_buckets=max_buckets))
      q, w = gbdt.distilled_targets(tr.y, logits[0][s], in_data, cfg.alpha)
      return (gbdt.grades(q), None) if as_grades else (q, w)
    rows["gbdt_xent_from_pfd"] = fit("gbdt_xent_from_pfd", lambda: gbdt.train(
        gc, cfg, ds, "x", objective="cross_entropy", targets=lambda s: targets(s, False),
        hooks=row_hooks("gbdt_xent_from_pfd"), **kw))
    rows["lambdamart_from_pfd"] = fit("lambdamart_from_pfd", lambda: gbdt.train(
        gc, cfg, ds, "x", targets=lambda s: targets(s, True), hooks=row_hooks("lambdamart_from_pfd"), **kw))
  return rows


# ------------------------------------------------------------------ the debiasing rows

DEBIAS_METHODS = ("position_feature", "two_tower", "ips", "pfd_position", "pfd_position_top", "pfd_position_click",
                  "placebo", "lambdamart", "lambdamart_position")


class DebiasRow(NamedTuple):
  """A trained debiasing row: its result, the view it is scored (served) with, and its training config."""
  result: object
  view: str
  config: object


def run_debias_methods(keys, cfg: TrainConfig, ds: Dataset, dd: DeviceData, methods: Sequence[str], *,
                       position: int, positions: np.ndarray, propensities: dict, clip: float, device_data: Callable,
                       fit: Callable, hooks: Callable, top: float = 1.0, click: Optional[int] = None,
                       placebo: Optional[Callable] = None, gbdt_config: Optional[gbdt.GBDTConfig] = None,
                       seed: int = 0) -> dict:
  """Trains the debiasing rows of `methods` (:data:`DEBIAS_METHODS`, :mod:`pfd_jax.methods.debias`) on `ds` and
  returns {row: :class:`DebiasRow`}.

  position: the privileged column (of ds's z) holding the display position, ``top`` its value at position 1
  (1 for raw positions and for log2(1 + position); log1p(1) after the recipe's log1p); positions: i64[N] the
  training split's display positions 1..L (:func:`pfd_jax.methods.debias.position_ids`); propensities:
  {name: table} gives one IPS row ``ips_<name>`` per table (method 'ips'); click: the privileged column of
  PFD(position + click); device_data(Dataset) -> DeviceData puts a variant of `ds` on the device as `dd` was (the
  served and the IPS-weighted copies); fit(row, config, train) -> result, as :func:`run_methods`'s (row: a
  :class:`~pfd_jax.methods.rows.Row` with the training view and whether a file has the row's inputs);
  hooks(row) -> Hooks; placebo() -> the placebo's DeviceData (its teacher sees the permuted position);
  gbdt_config: LightGBM's settings of 'lambdamart' and 'lambdamart_position'. Row views: ``x`` for the students
  and IPS, ``xz:<position>`` for the teachers, and ``xz:<position>=<top>`` for the position-aware rows, trained
  on the real positions and scored with every item at the top.
  """
  bad = [m for m in methods if m not in DEBIAS_METHODS]
  if bad:
    raise ValueError(f"unknown debiasing methods {bad}; known: {DEBIAS_METHODS}")
  out = {}

  def add(row, view, config, train, served=None):
    servable = served is None and row != "placebo_teacher"  # constants, or permuted columns: in no file
    entry = rows_lib.REGISTRY.get(row)
    entry = rows_lib.Row(row, entry.title if entry else row, view=view, servable=servable)
    out[row] = DebiasRow(fit(entry, config, train), served or view, config)
    return out[row].result

  pv = f"xz:{position}"
  if {"position_feature", "two_tower"} & set(methods):
    served = device_data(debias.serve_at(ds, position, top))
    for row in ("position_feature", "two_tower"):
      if row in methods:
        config = dataclasses.replace(cfg, tower=1) if row == "two_tower" else cfg
        add(row, pv, config, lambda: train_on_data(keys, config, served, pv, hooks(row)), f"{pv}={top:g}")
  if "ips" in methods:
    for name, table in propensities.items():
      weighted = debias.with_train_labels(ds, debias.ips_labels(ds["train"].y, positions, table, clip), ips=name)
      add(f"ips_{name}", "x", cfg, lambda: train_on_data(keys, cfg, device_data(weighted), "x", hooks(f"ips_{name}")))
  pfd = [("pfd_position", pv, lambda: dd), ("placebo", pv, placebo)]
  if click is not None:
    pfd.insert(1, ("pfd_position_click", f"xz:{position},{click}", lambda: dd))
  for row, view, data in pfd:
    if row in methods or (row == "pfd_position" and "pfd_position_top" in methods):
      teacher = add(f"{row}_teacher", view, cfg,
                    lambda: train_on_data(keys, cfg, data(), view, hooks(f"{row}_teacher")))
    if row in methods:
      add(row, "x", cfg, lambda: train_student(keys, cfg, data(), teacher_targets(
          cfg, [(teacher, view)], data()), hooks(row)))
    if row == "pfd_position" and "pfd_position_top" in methods:  # the teacher's targets with every item on top
      add("pfd_position_top", "x", cfg, lambda: train_student(keys, cfg, dd, teacher_targets(
          cfg, [(teacher, view)], dd, z_override=np.float32(top)), hooks("pfd_position_top")))
  kw = dict(num_seeds=int(np.shape(keys)[0]), seed=seed, eval_splits=tuple(dd.eval_sets),
            max_buckets=dd.max_buckets, query_index=gbdt.loss_groups(cfg, ds["train"]))
  for row in ("lambdamart", "lambdamart_position"):
    if row in methods:
      where = dict(position=positions - 1) if row == "lambdamart_position" else {}
      add(row, "x", cfg, lambda: gbdt.train(gbdt_config, cfg, ds, "x", hooks=hooks(row), **kw, **where))
  return out


def ensemble_lists(cfg: TrainConfig, result, groups, view: str, *, max_buckets: int) -> tuple:
  """(NDCG@ks of every list with a positive [K, Q], has-a-positive [Q]) of a row's seed ensemble on a labelled
  split: every document scored by the mean over the S seeds' best models (an MLP row's logits, a LightGBM row's
  raw scores), lists in the order of the rows' per-list NDCG (they pair list by list). One model per fold, so an
  ensemble is compared over queries, not runs."""
  if isinstance(result, gbdt.Result):
    scores = gbdt.scores(result, groups)
  else:
    scores = gbdt.doc_scores(cfg, result.params, groups, view, max_buckets=max_buckets)
  vals, valid = gbdt.list_ndcg(cfg, scores.mean(0, keepdims=True), groups, max_buckets=max_buckets)
  return vals[0], valid


def num_gbdt_rows(methods: Sequence[str]) -> int:
  """How many rows :func:`run_gbdt_methods` adds (the MLP PFD teacher counted by the MLP rows)."""
  return len(rows_lib.plan(methods, "gbdt"))
