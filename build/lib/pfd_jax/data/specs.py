"""The dataset registry: one :class:`DatasetSpec` per dataset name (--dataset), read by the folder layout, the
loaders, the recipe's defaults, the serving reader and the drivers' own-data defaults.

A new LETOR-like format is one spec and its reader (a function from a split file's path to
:class:`pfd_jax.data.groups.Groups`)::

  from pfd_jax.data import specs
  specs.REGISTRY.register(specs.DatasetSpec("my_csv", "my CSV export", read=read_my_csv, labels="file",
                                            own_folder=True, own_data=True))
  # then lifecycle.main(table2.DRIVER) in the same script: python my_data.py --dataset=my_csv --data_dir=exports/
  #   --privileged=21,22 (experiments.framework.lifecycle, experiments.paper.table2)

Folder layouts (the first that holds a split file wins, and every split comes from it; ``.gz`` is accepted
everywhere): ``DIR/Fold{k}/{split}.txt`` for a set of ``folds`` > 1 (and for an own folder that has ``Fold1``,
``Fold2``, ...), then ``DIR/<folders>/``, then ``DIR`` itself, each split under any of its aliases
(:data:`ALIASES`). Two of a dataset's ``folders`` that both hold split files (Istella's ``full/`` and ``sample/``
unpacked side by side) are refused: --data_dir names the one to use.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Mapping, Optional, Tuple

import numpy as np

from pfd_jax.data import analogues, synthetic
from pfd_jax.data.groups import Splits
from pfd_jax.data.letor import load_letor, load_letor_shard, read_serving
from pfd_jax.registry import Registry

SYNTHETIC_TAU = 4.4  # see third_party/DATASETS.md: tau 4.8 leaves ~16 positive training groups in the small default
SPLITS = ("train", "vali", "test")
ALIASES = {"train": ("train", "training", "trainingset", "set1.train"),
           "vali": ("vali", "valid", "validation", "validationset", "set1.valid"),
           "test": ("test", "testset", "set1.test")}


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
  """One dataset: where its files are, how they are read, and the recipe's defaults for it.

  about: one line on what it is; folds: its cross-validation folds (``Fold{k}`` subfolders); subdir: its folder
  under ``$PFD_DATA_DIR`` or ``../shared/data`` when no --data_dir is given (default: the name); folders: further
  subfolders that may hold its split files; num_privileged: the paper's number of privileged features (default:
  30% of the columns, the paper's ratio on Web30k); labels: the default label mode (gumbel = Eq. 2, file = the
  file's own); tau: Eq. 2's default tau_target (None: the top grade + 0.8); own_folder: any folder given by path,
  cross-validated over its own Fold1, Fold2, ... when it has them; own_data: a team's own data, so the drivers use
  the practitioner's defaults (the modern ranker, validation selection, seed ensembles); read(path, cache_dir) ->
  Groups: one split file; read_shard(path, index, count) -> Groups: a process's share of it (None: one process
  only); read_serving(path, num_features) -> (Groups, the feature ids present): a file to score; generate(kwargs,
  share) -> {split: Groups}: data made in memory instead of read (kwargs: DataConfig.synthetic_kwargs(), share:
  (process index, count)); num_features: the distribution's declared width (0: the widest split's highest id), so
  a feature id absent from every file is a column of zeros rather than a column less."""
  name: str
  about: str
  folds: int = 1
  subdir: Optional[str] = None
  folders: Tuple[str, ...] = ()
  num_privileged: Optional[int] = None
  num_features: int = 0
  labels: str = "gumbel"
  tau: Optional[float] = None
  own_folder: bool = False
  own_data: bool = False
  read: Optional[Callable] = load_letor
  read_shard: Optional[Callable] = load_letor_shard
  read_serving: Callable = read_serving
  generate: Optional[Callable] = None

  @property
  def in_memory(self) -> bool:
    """Made in memory (no files, no --data_dir)."""
    return self.generate is not None


def _synthetic(kwargs: Mapping[str, Any], share: tuple) -> Splits:
  """The synthetic generator's splits; in a multi-process run, this process's contiguous block of queries (with a
  chunk size each process draws only its own chunks)."""
  index, count = share
  if "chunk" in kwargs:
    return synthetic.generate_chunked(**kwargs, share=share)
  splits = synthetic.generate(**kwargs)
  if count == 1:
    return splits
  return {s: g.take(np.arange(g.num_queries * index // count, g.num_queries * (index + 1) // count))
          for s, g in splits.items()}


def _analogue(name: str) -> Callable:
  """The generate callable of paper analogue `name` (pfd_jax.data.analogues): --synthetic_scale multiplies its
  declared fraction of the paper's groups, --draws seeds it; the default synthetic generator's size flags do not
  apply (an error names them rather than a run that silently ignores them)."""
  def generate(kwargs: Mapping[str, Any], share: tuple) -> Splits:
    other = sorted(set(kwargs) - {"scale", "seed", "settings", "label_seed"})
    if other:
      raise ValueError(f"dataset {name!r}: the synthetic generator's size settings ({', '.join(other)}: "
                       f"--synthetic_web30k, --synthetic_queries, --synthetic_mean_docs, --synthetic_chunk) do not "
                       f"apply to a paper analogue (its shape is the paper's Table 1; --synthetic_scale scales it)")
    if share[1] != 1:
      raise ValueError(f"dataset {name!r}: generated in one process only")
    return analogues.generate(name, scale=kwargs.get("scale", 1.0), seed=kwargs.get("seed", 0),
                              settings=kwargs.get("settings"), label_seed=kwargs.get("label_seed", 0))
  return generate


def _dense(width: int) -> dict:
  """The readers of a format whose every line writes all `width` features (Web30k's, Istella's): a line with fewer
  is refused, naming it (pfd_jax.data.letor)."""
  return dict(read=functools.partial(load_letor, dense=width), read_shard=functools.partial(load_letor_shard,
                                                                                            dense=width))


REGISTRY: Registry[DatasetSpec] = Registry("dataset")
for _spec in (
    DatasetSpec("synthetic", "generated in memory, no files (pfd_jax.data.synthetic)", num_privileged=40,
                tau=SYNTHETIC_TAU, read=None, read_shard=None, generate=_synthetic),
    DatasetSpec("ohsumed", "LETOR 3.0 OHSUMED", folds=5, subdir="ohsumed_letor3"),
    DatasetSpec("mq2008", "LETOR 4.0 MQ2008", folds=5, subdir="mq2008_fold1_partial"),
    DatasetSpec("web10k", "MSLR-WEB10K", folds=5, subdir="mslr_web10k_fold1_5k_sample", num_privileged=40),
    # the paper's three: their declared widths (Table 1: 136, 700, 220 features), whatever ids a file leaves out
    DatasetSpec("web30k", "MSLR-WEB30K", folds=5, num_privileged=40, num_features=136, **_dense(136)),
    DatasetSpec("yahoo", "Yahoo! LTR challenge Set 1 (set1.{train,valid,test}.txt)", num_privileged=200,
                num_features=700),
    DatasetSpec("istella", "Istella LETOR / Istella-S ({full,sample}/)", folders=("full", "sample"),
                num_privileged=50, num_features=220, **_dense(220)),
    DatasetSpec("letor", "any LETOR folder by path: your own data", labels="file", own_folder=True, own_data=True),
    *(DatasetSpec(name, f"generated like the paper's {a.paper} (Table 1's shape; teachers: pfd_jax.data.analogues)",
                  num_privileged=a.num_privileged, tau=4.8, read=None, read_shard=None, generate=_analogue(name))
      for name, a in analogues.ANALOGUES.items()),
):
  REGISTRY.register(_spec)
