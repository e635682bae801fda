"""Shared flags and output helpers of the experiment drivers (printing and files live here, not in pfd_jax)."""
from __future__ import annotations

import json
import os
import platform
import time
from typing import Optional

import numpy as np
from absl import flags

from pfd_jax import data as D

FLAGS = flags.FLAGS


def define_data_flags(default_dataset: str = "synthetic"):
  flags.DEFINE_enum("dataset", default_dataset, list(D.NAMES), "Dataset name (letor = any folder by --data_dir).")
  flags.DEFINE_string("data_dir", None, "Dataset folder; default $PFD_DATA_DIR/<name> or ../shared/data.")
  flags.DEFINE_string("cache_dir", "cache", "Where parsed LETOR files are cached as .npz.")
  flags.DEFINE_list("folds", None, "Folds to run (default: all folds of the dataset).")
  flags.DEFINE_float("t", 4.0, "Eq. 2 temperature.")
  flags.DEFINE_float("tau", None, "Eq. 2 tau_target (default: per dataset, see README).")
  flags.DEFINE_integer("num_privileged", None, "Privileged features (default: per dataset).")
  flags.DEFINE_integer("min_docs", 10, "Drop query groups with fewer documents.")
  flags.DEFINE_boolean("query_norm", False, "LETOR QueryLevelNorm (per-query min-max) before log1p.")
  flags.DEFINE_integer("label_seed", 0, "Seed of the Gumbel label draws (fixed across training seeds).")
  flags.DEFINE_float("synthetic_scale", 1.0, "Synthetic data: multiply query counts.")
  flags.DEFINE_boolean("synthetic_web30k", False, "Synthetic data at MSLR-WEB30K size (overrides scale).")


SYNTHETIC_TAU = 4.4  # see README: tau 4.8 leaves ~16 positive training groups in the small default


def data_config_from_flags() -> dict:
  return dict(dataset=FLAGS.dataset, data_dir=FLAGS.data_dir, cache_dir=FLAGS.cache_dir,
              folds=[int(f) for f in FLAGS.folds] if FLAGS.folds else None, t=FLAGS.t, tau=FLAGS.tau,
              num_privileged=FLAGS.num_privileged, min_docs=FLAGS.min_docs, query_norm=FLAGS.query_norm,
              label_seed=FLAGS.label_seed, synthetic_scale=FLAGS.synthetic_scale,
              synthetic_web30k=FLAGS.synthetic_web30k)


def folds_of(cfg: dict) -> list:
  have = D.available_folds(cfg["dataset"], cfg.get("data_dir"))
  folds = cfg.get("folds") or have
  bad = [f for f in folds if f not in have]
  if bad:
    raise ValueError(f"--folds {bad}: dataset {cfg['dataset']!r} has folds {have} on disk")
  return folds


def load_dataset(cfg: dict, fold: int = 1) -> D.Dataset:
  """Loads and preprocesses one fold as configured by `cfg` (see data_config_from_flags)."""
  name = cfg["dataset"]
  syn = None
  if name == "synthetic":
    syn = D.web30k_scale() if cfg.get("synthetic_web30k") else dict(scale=cfg.get("synthetic_scale", 1.0))
    syn.update(cfg.get("synthetic_kwargs") or {})
  raw = D.load_raw(name, cfg.get("data_dir"), fold=fold, cache_dir=cfg.get("cache_dir"), synthetic_kwargs=syn)
  tau = cfg.get("tau")
  if tau is None and name == "synthetic":
    tau = SYNTHETIC_TAU
  return D.prepare(name, raw, t=cfg.get("t", 4.0), tau=tau, num_privileged=cfg.get("num_privileged"),
                   min_docs=cfg.get("min_docs", 10), query_norm=cfg.get("query_norm", False),
                   seed=cfg.get("label_seed", 0))


def environment() -> dict:
  import jax
  import flax
  import optax
  return dict(python=platform.python_version(), jax=jax.__version__, flax=flax.__version__,
              optax=optax.__version__, numpy=np.__version__, backend=jax.default_backend(),
              devices=[str(d) for d in jax.devices()], machine=platform.machine(),
              cpus=os.cpu_count(), time=time.strftime("%Y-%m-%d %H:%M:%S"))


def _jsonable(o):
  if isinstance(o, dict):
    return {str(k): _jsonable(v) for k, v in o.items()}
  if isinstance(o, (list, tuple)):
    return [_jsonable(v) for v in o]
  if isinstance(o, np.ndarray):
    return o.tolist()
  if isinstance(o, (np.floating, np.integer, np.bool_)):
    return o.item()
  if hasattr(o, "shape") and hasattr(o, "dtype"):  # jax arrays
    return np.asarray(o).tolist()
  return o


def write_json(path: str, obj) -> None:
  """Writes atomically (tmp + rename) so an interrupted run never leaves a truncated file."""
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    json.dump(_jsonable(obj), f, indent=1)
  os.replace(tmp, path)


def write_text(path: str, text: str) -> None:
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  with open(path, "w") as f:
    f.write(text)


def markdown_table(header: list, rows: list) -> str:
  out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
  out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
  return "\n".join(out) + "\n"


def pyplot():
  """matplotlib's pyplot on the file-only Agg backend."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  return plt
