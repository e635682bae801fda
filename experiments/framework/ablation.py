"""The fold the ablation drivers build on: a dataset fold with its no-distillation baseline and PFD teacher
trained (and resumed) once, and the LightGBM incumbent on demand."""
from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import numpy as np

from pfd_jax import data as D
from pfd_jax import distributed
from pfd_jax import training as T
from pfd_jax.methods import distill
from pfd_jax.methods import gbdt
from pfd_jax.training import TrainConfig
from experiments.framework.monitor import progress
from experiments.framework.rowstore import Rows
from experiments.framework.schema import Config
from experiments.framework.setup import fold_setup, folds_of


class PFDFold(NamedTuple):
  """One fold of an ablation: its data, config, keys, progress logger, baseline and PFD teacher runs."""
  ds: D.Dataset
  dd: object
  tc: TrainConfig
  keys: jax.Array
  log: object
  baseline: T.TrainResult
  teacher: T.TrainResult
  rows: Rows

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
  (view xz) that the ablation drivers build on, both trained on the positive groups."""
  for fold in folds_of(cfg.data):
    ds, dd, tc, keys = fold_setup(cfg, None, fold)
    log = progress(f"[fold{fold}]", tc.epochs)
    rows = Rows(cfg, ds, fold)
    base = rows("no_distill", "x", tc, lambda: distill.train_on_data(keys, tc, dd, "x", log("no_distill")))
    teacher = rows("pfd_teacher", "xz", tc, lambda: distill.train_on_data(keys, tc, dd, "xz", log("pfd_teacher")))
    yield PFDFold(ds, dd, tc, keys, log, base, teacher, rows)
