"""The PFD search at a practitioner's size on constructed folders (pfd_jax.data.constructed): its error on null folders
(tests/test_search_null.py) and its stated power on gain folders (tests/test_search_gain.py), two files so that
the slow tier's two workers run them side by side (each is some forty searches)."""
import jax

from experiments.search_bias import CFG, OPTS  # noqa: F401 (the search as table2 runs it)
from pfd_jax.data import constructed
from pfd_jax.training.device import to_device

FOLDERS = 10  # re-drawn folders of each kind


def keys():
  return jax.random.split(jax.random.PRNGKey(0), 2)


def device(d):
  return to_device(d, 1)


folder = constructed.folder  # (seed, gain): a null folder, or one with a planted column
