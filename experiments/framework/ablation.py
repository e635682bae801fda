"""The fold the ablation drivers build on: a dataset fold with its no-distillation baseline and PFD teacher
trained (and resumed) once, and the LightGBM incumbent on demand."""
from __future__ import annotations

import functools
import time
from typing import Dict, NamedTuple, Optional

import jax
import numpy as np

from pfd_jax import data as data_lib
from pfd_jax import distributed
from pfd_jax import training as training_lib
from pfd_jax.methods import distill
from pfd_jax.methods import gbdt
from pfd_jax.methods import rows as rows_lib
from pfd_jax.training import TrainConfig
from experiments.framework.records import RunRecord
from experiments.framework import plots, protocol, rundir, schema, tabulate
from experiments.framework.schema import Preset
from experiments.framework.monitor import progress
from experiments.framework.rowstore import RowStore
from experiments.framework.schema import Config
from experiments.framework.fold_data import fold_setup, folds_of


class PFDFold(NamedTuple):
  """One fold of an ablation: its data, config, keys, progress logger, baseline and PFD teacher runs."""
  ds: data_lib.Dataset
  dd: object
  tc: TrainConfig
  keys: jax.Array
  log: object
  baseline: training_lib.TrainResult
  teacher: training_lib.TrainResult
  rows: RowStore

  def add_references(self, rows: Dict[str, list]) -> None:
    """Appends this fold's no-distillation NDCG and, where it can run, LambdaMART's to their lists in `rows`."""
    rows["no_distill"].append(self.baseline.best["test"])
    if (lm := self.lambdamart()) is not None:
      rows["lambdamart"].append(lm.best["test"])

  def lambdamart(self) -> Optional[gbdt.Result]:
    """The practitioner's incumbent as a reference row of this fold: LightGBM LambdaMART on the regular
    features (:mod:`pfd_jax.methods.gbdt`, its default settings), saved and resumed like the other rows; None in a
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
  (view xz) that the ablation drivers build on, both trained on the positive groups as Table 2 trains them: their
  rows of the registry, through :func:`pfd_jax.methods.distill.run_rows`."""
  for fold in folds_of(cfg.data):
    ds, dd, tc, keys = fold_setup(cfg, None, fold)
    log = progress(f"[fold{fold}]")
    rows = RowStore(cfg, ds, fold)
    done = distill.run_rows(distill.Context(keys, tc, dd, ds, fit=rows.fit(), hooks=log),
                            rows_lib.plan(("pfd",), students=False))  # the baseline and the PFD teacher
    yield PFDFold(ds, dd, tc, keys, log, done["no_distill"].result, done["pfd_teacher"].result, rows)


def results(cfg: Config, rows: Dict[str, list], t0: float, **extra) -> RunRecord:
  """An ablation's results: each row's folds stacked ({row: [runs, K]}; rows that got nothing left out), every
  row compared with no-distillation, `extra` fields, and the seconds since `t0`."""
  rows = {k: np.concatenate(v) for k, v in rows.items() if v}
  return RunRecord(config=cfg, env=rundir.environment(), rows=rows, comparisons=tabulate.compare(rows, "no_distill"),
                   **{k: f(rows) for k, f in extra.items()}, seconds=time.time() - t0)


def driver(name: str, run, to_markdown, *, title: str, rows_per_fold, plot=None,
           bars: Optional[dict] = None, png: Optional[str] = None, options=None,
           redrawn: bool = False, presets: tuple = ()) -> schema.Driver:
  """An ablation driver's record: its presets (the synthetic default, `title` on RESULTS.md; with `redrawn`, the
  paper's claims' confirmatory run on the re-drawn population too, protocol.redrawn_preset; then `presets`) and
  its plot (`plot`, or bars of NDCG@8 of the rows
  labelled by `bars`) written as `png` (default <name>.png)."""
  if bars is not None:
    plot = functools.partial(plots.bar_plot, labels=bars)
  return schema.Driver(name, run, to_markdown, plot, png or f"{name}.png", options=options,
                       rows_per_fold=rows_per_fold, presets=(Preset("default", "synthetic", "", title),) +
                       ((protocol.redrawn_preset(title),) if redrawn else ()) + presets)
