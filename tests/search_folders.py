"""The PFD search at a practitioner's size on constructed folders (pfd_jax.data.constructed): its error on null folders
(tests/test_search_null.py) and its stated power on gain folders (tests/test_search_gain.py), two files so that
the slow tier's two workers run them side by side (each is some forty searches)."""
import jax

from pfd_jax.data import constructed
from pfd_jax.training.device import to_device
from pfd_jax.training import TrainConfig

# The search as table2 runs it: 2 screening seeds, patience 10, two stages, 3 cross-fitted folds.
CFG = TrainConfig(epochs=30, hidden=16, layers=3, select_on="vali", batch_size=25, lr=1e-2, lr_halve_every=10, ks=(8,))
OPTS = dict(seeds=2, patience=10, refine=1, folds=3)
FOLDERS = 10  # re-drawn folders of each kind


def keys():
  return jax.random.split(jax.random.PRNGKey(0), 2)


def device(d):
  return to_device(d, 1)


folder = constructed.folder  # (seed, gain): a null folder, or one with a planted column
