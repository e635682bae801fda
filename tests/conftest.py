import json
import os

import pytest

from pfd_jax.data import shared_data_root

# A tiny training configuration: every driver end to end in seconds (structure, not numbers).
TINY = dict(dataset="synthetic", synthetic_kwargs=dict(num_queries=(80, 20, 60), mean_docs=16.0), tau=4.0,
            cache_dir=None, max_buckets=2, seeds=2, seed=0, epochs=2, alpha=0.5, batch_size=None, lr=None,
            weight_decay=0.005, hidden=16, layers=3, select_on="test", empty_rule="exclude",
            data_groups="positive", folds=None, t=4.0, num_privileged=None, min_docs=5, query_norm=False,
            label_seed=0, loss="rankbce")


def shared(sub: str) -> str:
  """Path of a staged dataset under $PFD_DATA_DIR or ../shared/data; skips the test when absent."""
  for root in (os.environ.get("PFD_DATA_DIR"), shared_data_root()):
    if root and os.path.exists(os.path.join(root, sub)):
      return os.path.join(root, sub)
  pytest.skip(f"staged data {sub} not found (set PFD_DATA_DIR)")


def written(tmp_path, res, md, plot=None, png=None):
  """Writes a driver's outputs under tmp_path and returns the JSON read back (checks table and PNG)."""
  from experiments import common
  common.write_outputs(str(tmp_path), res, md, plot, png)
  out = tmp_path / res["config"]["dataset"]
  js = json.loads((out / "results.json").read_text())
  assert (out / "table.md").read_text() == md
  if png:
    assert (out / png).stat().st_size > 1000
  return js
