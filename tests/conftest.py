import os

import pytest

from pfd_jax.data import shared_data_root


def shared(sub: str) -> str:
  """Path of a staged dataset under $PFD_DATA_DIR or ../shared/data; skips the test when absent."""
  for root in (os.environ.get("PFD_DATA_DIR"), shared_data_root()):
    if root and os.path.exists(os.path.join(root, sub)):
      return os.path.join(root, sub)
  pytest.skip(f"staged data {sub} not found (set PFD_DATA_DIR)")
