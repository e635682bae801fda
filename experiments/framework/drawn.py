"""Table 2 on re-drawn data with the draws as a vmapped axis (``--draws=N --draws_per_program=K``): each chunk of
K draws is put on one layout (:mod:`pfd_jax.training.draws`) and every row trains the chunk's K x S models in one
compiled program (a teacher's logits taught to the students of its own draw), then each draw is recorded as the
fold it is (its rows' best-epoch metrics, curves and per-list test NDCG on its own test lists with a positive, in
the layout's order), so the claims, the power section and the pages read it as they read draws run one after
another.

The layout is part of the recipe: the same draws run one at a time (``--draws_per_program=0``) take other batches
in another order (each draw's own buckets), so their numbers differ within the run-to-run spread, not bit for bit;
the chunk's step order is that of its first draw's stream. The MLP rows only (no LightGBM row, --position or
--search).

Each row of a chunk (its K x S models) is saved as it ends (``<run folder>/runs/<loss>/draws<first>-<last>/``,
:class:`experiments.framework.rowstore.RowStore`), so a stopped run (a signal, an accelerator call's deadline) keeps
every row and every loss it finished, and the same command resumes it: saved rows are loaded, not trained, and each
loss's per-list scores are computed again from them (the same bits as the uninterrupted run).
"""
from __future__ import annotations

import concurrent.futures
import functools
import os
import time
from typing import Dict

from absl import logging

import jax
import numpy as np

from experiments.framework import fold_data, monitor, rowstore, schema
from experiments.framework.records import FoldRecord, RowRecord
from pfd_jax import config as config_lib
from pfd_jax import data as data_lib
from pfd_jax.training import draws
from pfd_jax.methods import distill
from pfd_jax.training.device import to_device_draws
from pfd_jax.methods import rows as rows_lib


def check(cfg: schema.Config, methods: tuple) -> None:
  """What a drawn run cannot do, said before anything trains."""
  o = cfg.options
  if not cfg.data.draws:
    raise config_lib.ConfigError("draws_per_program", "needs --draws (the draws it trains side by side)")
  other = sorted(set(methods) - set(rows_lib.methods(one_process=False)))
  if other or o.position or o.search or cfg.run.ensembles:
    raise config_lib.ConfigError("draws_per_program",
                                 "trains the MLP rows only (no LightGBM row, --position, --search or "
                        f"--ensembles); got {other or 'an option'}")


def run_folds(cfg: schema.Config, methods: tuple) -> Dict[str, Dict[str, FoldRecord]]:
  """{loss: {fold name: FoldRecord}} of every draw of `cfg`, cfg.options.draws_per_program draws at a time: each
  chunk's draws generated, put on their layout and (for the placebo rows) permuted once for every loss of the run."""
  check(cfg, methods)
  folds, per = fold_data.folds_of(cfg.data), cfg.options.draws_per_program
  out = {loss: {} for loss in cfg.losses}
  for a in range(0, len(folds), per):
    t0, chunk = time.time(), folds[a:a + per]
    sets = load(cfg, chunk)
    loaded = time.time() - t0
    logging.info("[draws %d-%d] %d draws loaded in %.0f s", chunk[0], chunk[-1], len(chunk), loaded)
    permuted = functools.cache(lambda: [data_lib.with_placebo_privileged(ds, cfg.run.placebo_within, cfg.run.seed)
                                        for ds in sets])
    device = functools.cache(lambda placebo, splits, groups: to_device_draws(
        permuted() if placebo else sets, cfg.data.max_buckets, splits, groups))
    for loss in cfg.losses:  # each loss's seconds count its share of the loading
      out[loss].update(_chunk(cfg, loss, chunk, sets, device, methods, loaded / len(cfg.losses)))
  return out


def load(cfg: schema.Config, chunk: list) -> list:
  """The chunk's draws, generated side by side on the machine's cores: a draw's data is a function of its recipe
  alone, so each has the bits it has loaded by itself. Generating one (validation and test sets of 6,306 queries)
  takes seconds on a core, and a chunk of an accelerator's size holds a hundred or more."""
  with concurrent.futures.ThreadPoolExecutor(min(len(chunk), os.cpu_count() or 1)) as pool:
    return list(pool.map(lambda k: fold_data.load_dataset(cfg.data, k), chunk))


def _chunk(cfg: schema.Config, loss: str, chunk: list, sets: list, device, methods: tuple,
           loaded_s: float) -> Dict[str, FoldRecord]:
  """One loss's rows on a chunk of draws; device(placebo, splits, data_groups): the chunk on its layout (the
  placebo's permuted z, or not), made once for the run's losses."""
  t0 = time.time() - loaded_s
  jax.clear_caches()  # the previous chunk's or loss's programs never run again
  tc = fold_data.train_config_of(cfg, loss, chunk[0])
  for k, ds in zip(chunk, sets):
    fold_data.check_splits(cfg, ds, tc, k)
  layout = (tuple(fold_data.eval_splits(tc)), tc.data_groups)
  dd = device(False, *layout)
  keys = np.concatenate([np.asarray(fold_data.draw_keys(cfg, k)) for k in chunk])
  log = monitor.progress(f"[{loss} draws {chunk[0]}-{chunk[-1]}]")
  store = rowstore.RowStore(cfg, sets[0], chunk[0], loss, folder=f"draws{chunk[0]}-{chunk[-1]}")
  ctx = distill.Context(keys, tc, dd, fit=store.fit(servable=False), hooks=log, placebo=lambda: device(True, *layout))
  plan = rows_lib.plan(methods, students=not cfg.options.teachers_only)
  rows = distill.run_rows(ctx, plan)
  baseline = next(r.name for r in plan if r.baseline)
  # per test list NDCG of every draw's models on its own lists of the layout (a row that reads the permuted z on the
  # placebo data), one vmapped call per bucket and row
  lists = {name: draws.per_list_ndcg(t.config, t.result.params,
                                    device(rows_lib.REGISTRY[name].recipe.permuted, *layout).eval_sets["test"], t.view)
           for name, t in rows.items()}
  seeds, seconds = cfg.run.seeds, (time.time() - t0) / len(chunk)
  out = {}
  for i, (k, ds) in enumerate(zip(chunk, sets)):
    recs = {name: RowRecord.of(t.result.part(i, seeds), lists[name][i][0]) for name, t in rows.items()}
    pos = int(data_lib.positive_groups(ds["train"]).sum())
    out[f"fold{k}"] = FoldRecord(data=ds.config, train_groups=ds["train"].num_queries, positive_train_groups=pos,
                                 seconds=seconds, rows=recs, test_lists_valid=lists[baseline][i][1])
  return out
