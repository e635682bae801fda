import json
import os

import pytest

from experiments import common
from pfd_jax.config import DataConfig
from pfd_jax.data import shared_data_root
from pfd_jax.gbdt import GBDTConfig
from pfd_jax.train import TrainConfig

# A tiny configuration, built through the same typed objects as the flags: every driver end to end in
# seconds (structure, not numbers).
# LightGBM settings small enough for tests (the defaults fit up to 500 trees per model).
SMALL_GBDT = GBDTConfig(trees=20, leaves=7, min_leaf=5, early_stopping=10, oof_folds=3, threads=1)

TINY = common.Config(
    data=DataConfig(dataset="synthetic", synthetic_queries=(80, 20, 60), synthetic_mean_docs=16.0, tau=4.0,
                    cache_dir="", max_buckets=2, min_docs=5),
    train=TrainConfig(epochs=2, hidden=16, layers=3),
    run=common.RunConfig(seeds=2))


def tiny(options=None, **groups) -> common.Config:
  """TINY with a driver's options and group overrides, e.g. tiny(Options(alphas=(0.5,)), run=dict(seeds=3))."""
  return TINY.replace(options=options, **groups)


def shared(sub: str) -> str:
  """Path of a staged dataset under $PFD_DATA_DIR or ../shared/data; skips the test when absent."""
  for root in (os.environ.get("PFD_DATA_DIR"), shared_data_root()):
    if root and os.path.exists(os.path.join(root, sub)):
      return os.path.join(root, sub)
  pytest.skip(f"staged data {sub} not found (set PFD_DATA_DIR)")


def written(tmp_path, res, driver):
  """Writes a driver's outputs under tmp_path as its main would and returns the JSON read back (checks the
  table and the PNG)."""
  out = tmp_path / "out"
  md = common.write_outputs(str(out), res, driver)
  js = json.loads((out / "results.json").read_text())
  assert (out / "table.md").read_text() == md
  if driver.png:
    pngs = [p for p in os.listdir(out) if p.endswith(".png")]
    assert pngs and all((out / p).stat().st_size > 1000 for p in pngs)
  return js
