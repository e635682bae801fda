"""A fold's data as the drivers use it: the folds on disk, the dataset of a recipe, the device data and the
placebo's copy."""
from __future__ import annotations

import dataclasses
import functools
import os
from typing import Callable, Optional

import jax
import numpy as np
from absl import logging

from pfd_jax import config as config_lib
from pfd_jax import data as data_lib
from pfd_jax import distributed
from pfd_jax.data.config import DataConfig
from pfd_jax.training import TrainConfig, device
from experiments.framework.schema import Config


def folds_of(d: DataConfig) -> list:
  """The folds a run visits: --folds, else every fold on disk (with --draws: the draws 1..N)."""
  have = list(range(1, d.draws + 1)) if d.draws else data_lib.available_folds(d.dataset, d.data_dir)
  folds = list(d.folds) or have
  bad = [f for f in folds if f not in have]
  if bad:
    raise config_lib.ConfigError("folds",
                                 f"{','.join(map(str, d.folds))}: dataset {d.dataset!r} has folds {have} on disk")
  return folds


def check_files(d: DataConfig, first: bool = False) -> int:
  """Every fold of a run on files read and prepared before its first row trains, so that a bad line in a later
  fold's file stops the run before the earlier folds train (with --cache_dir, what was parsed is kept for the run);
  first: the first fold too (--plan, which trains none). The folds checked."""
  folds = [] if data_lib.spec(d.dataset).in_memory else folds_of(d)
  for fold in folds[0 if first else 1:]:  # a run reads the first as it trains
    load_dataset(d, fold)
  return len(folds)


def load_dataset(d: DataConfig, fold: int = 1) -> data_lib.Dataset:
  """Loads and preprocesses one fold (with --draws: one draw) as the data recipe `d` says."""
  name, d = d.dataset, d.draw(fold)
  comm = distributed.comm()  # several processes: each loads and keeps only its share of the groups
  raw = data_lib.load_raw(name, d.data_dir, fold=fold, cache_dir=d.cache_dir or None,
                          synthetic_kwargs=d.synthetic_kwargs() if data_lib.spec(name).in_memory else None, comm=comm)
  privileged = d.privileged_ids
  if privileged:
    width = int(comm.max(max(g.x.shape[1] for g in raw.values())))
    bad = [i for i in privileged if i > width]
    if bad:
      raise config_lib.ConfigError("privileged", f"feature ids {bad} are out of range; dataset {name!r} has features "
                                   f"1..{width}")
  ds = data_lib.prepare(d, raw, comm=comm)
  if d.draws:
    ds.config.update(draw=fold)
  if comm.count > 1:  # what this process holds, of the whole
    held = {s: (g.num_queries, int(comm.sum(g.num_queries)), g.num_docs, int(comm.sum(g.num_docs)))
            for s, g in ds.splits.items()}
    logging.info("process %d of %d holds %s", comm.index, comm.count,
                 "; ".join(f"{s} {q}/{qa} groups {n}/{na} documents" for s, (q, qa, n, na) in held.items()))
  return ds


def fold_setup(cfg: Config, loss: Optional[str] = None, fold: int = 1, ds: Optional[data_lib.Dataset] = None,
               **overrides):
  """(dataset, device data, TrainConfig, seed keys) of one fold, checked for the splits training needs. With
  --draws, draw k's seeds and step order come from streams of their own (keys folded with k, order_stream k)."""
  if cfg.data.draws:
    # A draw's shapes are its own: no program compiled for an earlier draw runs again, and each holds executable
    # memory maps (a process has 65,530 on Linux; a 12-draw run once died of "LLVM: Cannot allocate memory").
    jax.clear_caches()
  ds = load_dataset(cfg.data, fold) if ds is None else ds
  tc = train_config_of(cfg, loss, fold, **overrides)
  _need(cfg, ds, tc, fold)
  dd = device_data(cfg, ds, tc, fold)
  _positives(cfg, ds, tc, fold, {s: bool(dd.eval_sets[s].buckets) for s in eval_splits(tc)}, dd.num_positive_groups)
  return ds, dd, tc, draw_keys(cfg, fold)


def train_config_of(cfg: Config, loss: Optional[str], fold: int, **overrides) -> TrainConfig:
  """The loss's TrainConfig for one fold (with --draws, draw k's step order from stream k)."""
  tc = cfg.train_config(loss, **overrides)
  return dataclasses.replace(tc, order_stream=fold) if cfg.data.draws else tc


def draw_keys(cfg: Config, fold: int):
  """The run's S seed keys (with --draws, draw k's: the run seed folded with k)."""
  root = jax.random.PRNGKey(cfg.run.seed)
  return jax.random.split(jax.random.fold_in(root, fold) if cfg.data.draws else root, cfg.run.seeds)


def check_splits(cfg: Config, ds: data_lib.Dataset, tc: TrainConfig, fold: int) -> None:
  """fold_setup's checks of a dataset held whole in this process (its splits, and a positive where training and
  evaluation need one), before anything is put on the device."""
  _need(cfg, ds, tc, fold)
  _positives(cfg, ds, tc, fold, {s: bool(data_lib.positive_groups(ds[s]).any()) for s in eval_splits(tc)},
             int(data_lib.positive_groups(ds["train"]).sum()))


def _need(cfg: Config, ds: data_lib.Dataset, tc: TrainConfig, fold: int) -> None:
  need = {"train", "test", tc.select_on}
  if not need <= set(ds.splits):
    raise data_lib.DataError(f"dataset {cfg.data.dataset!r} fold {fold} needs the splits {sorted(need)}; it has "
                             f"{list(ds.splits)}")


def _positives(cfg: Config, ds: data_lib.Dataset, tc: TrainConfig, fold: int, has: dict, positive_train: int) -> None:
  labels = ds.config.get("labels", "gumbel")
  how = (f"labels={labels}" + (f", t={ds.config.get('t')}, tau={ds.config.get('tau')}, label_seed="
                               f"{ds.config.get('seed')}" if labels == "gumbel" else
                               f", positive_grade={ds.config.get('positive_grade')}"))
  for split in eval_splits(tc):
    if not has[split]:
      raise data_lib.DataError(f"dataset {ds.name!r} fold {fold}: no {split} list has a positive label ({how}), so "
                               f"NDCG on {split} is undefined; {'selection and ' if split == tc.select_on else ''}"
                               "evaluation need one (lower --tau, or --positive_grade, or check the file)")
  if positive_train == 0:
    raise data_lib.DataError(f"dataset {ds.name!r} fold {fold}: no training query group has a positive label ({how})")


def eval_splits(tc: TrainConfig) -> tuple:
  return ("test", "vali") if tc.select_on == "vali" else ("test",)


def device_data(cfg: Config, ds: data_lib.Dataset, tc: TrainConfig, fold: int = 1) -> device.DeviceData:
  """A fold's buckets on the device (or streamed from shards, as --data_source says); a dataset with a ``truth``
  split (the simulated logs' unbiased target, pfd_jax.data.logs) is evaluated on it too."""
  splits = eval_splits(tc) + (("truth",) if "truth" in ds.splits else ())
  streamed, why = streams(cfg.data.data_source, cfg.data.stream_above, lambda: device.resident_bytes(
      ds, cfg.data.max_buckets, splits, tc.data_groups), available_memory)
  if why:  # every process of a multi-process run alike: one that must stream makes them all stream
    streamed = bool(distributed.comm().max(np.int64(streamed)))
  dd = device.to_device(ds, cfg.data.max_buckets, splits, tc.data_groups, cfg.data.shard_dir if streamed else None)
  if dd.shards:
    logging.info("fold %d streams its buckets from %s%s", fold, dd.shards, why)
  elif why:
    logging.info("fold %d holds its buckets resident%s", fold, why)
  return dd


def streams(source: str, above: float, need: Callable[[], int], available: Callable[[], int]) -> tuple:
  """(whether a fold streams its buckets, why: '' unless the fold was to be resident and `above` > 0): resident
  buckets whose bytes (`need`) exceed the fraction `above` of the memory `available` stream instead."""
  if source == "streamed" or not above:
    return source == "streamed", ""
  n, a = need(), available()
  more = n > above * a
  return more, (f" (its padded buckets take {n / 2 ** 30:.2f} GiB, {'more' if more else 'no more'} than "
                f"--stream_above={above:g} of the {a / 2 ** 30:.1f} GiB available)")


def available_memory() -> int:
  """The bytes this machine can give without swapping (Linux's MemAvailable; elsewhere its physical memory)."""
  try:
    with open("/proc/meminfo") as f:
      return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
  except (OSError, StopIteration, ValueError):
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def placebo_data(cfg: Config, ds: data_lib.Dataset, tc: TrainConfig, fold: int = 1) -> Callable[[], device.DeviceData]:
  """The placebo rows' device data, made on first use and kept: `ds` with its privileged rows permuted
  (--placebo_within; the permutation seeded by --seed, the same for every training seed of the run)."""
  return functools.cache(lambda: device_data(cfg,
                                             data_lib.with_placebo_privileged(ds, cfg.run.placebo_within, cfg.run.seed),
                                             tc, fold))
