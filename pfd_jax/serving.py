"""Saved rankers: a trained model with the recipe that turns raw LETOR rows into its inputs.

A :class:`Ranker` holds the parameters of every training seed (``[S, ...]`` leaves) and a JSON recipe:
the model shape, its input view, the 1-based feature ids it reads (in input order), the feature transforms
(query-level min-max, log1p; both per query or per value, so there are no fitted statistics to keep), the
label rule of its training data, the best seed and its measured metrics. Nothing else is needed to score a
raw file, and nothing about the training run (data files, flags) has to exist at serving time.

On disk a ranker is a folder of two files (no pickle):

* ``params.msgpack``: :func:`flax.serialization.to_bytes` of the seed-stacked parameters (exact float32
  bytes, so a reloaded model scores bit for bit as the trained one);
* ``model.json``: the recipe, readable and diffable.

``model.json`` is written last, so a folder that has it is complete.
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Optional

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np

from pfd_jax import data as data_lib
from pfd_jax import train as train_lib

FORMAT = "pfd_jax.ranker/1"
PARAMS_FILE = "params.msgpack"
RECIPE_FILE = "model.json"


def input_ids(view: str, regular_ids, privileged_ids) -> list:
  """The 1-based feature ids a model of `view` reads, in its input order (see train.features)."""
  base, _, cols = view.partition(":")
  priv = list(privileged_ids)
  if cols:
    priv = [priv[int(c)] for c in cols.split(",")]
  return {"x": list(regular_ids), "z": priv, "xz": list(regular_ids) + priv}[base]


@dataclasses.dataclass(frozen=True)
class Ranker:
  """A trained, seed-stacked scorer and its recipe (see the module docstring)."""
  params: Any
  recipe: dict

  @property
  def num_seeds(self) -> int:
    return int(self.recipe["num_seeds"])

  @property
  def best_seed(self) -> int:
    return int(self.recipe["best_seed"])

  @property
  def input_ids(self) -> list:
    return list(self.recipe["input_ids"])

  @property
  def num_features(self) -> int:
    """The width of the raw files the model was trained on (ids above it were never seen)."""
    return int(self.recipe["num_features"])

  def inputs(self, groups: data_lib.Groups) -> np.ndarray:
    """f32[N, D] model inputs of raw flat groups (columns = 1-based ids as in the files), recipe applied."""
    ids = np.asarray(self.input_ids, np.int64)
    if ids.size and ids.max() > groups.x.shape[1]:
      raise ValueError(f"the model reads feature ids up to {ids.max()}; the data has {groups.x.shape[1]} columns")
    t = self.recipe["transforms"]
    return data_lib.transform_features(np.ascontiguousarray(groups.x[:, ids - 1]), groups.offsets,
                                       log1p=t["log1p"], query_norm=t["query_norm"])

  def _seed(self, seed):
    seed = self.best_seed if seed is None else int(seed)
    if not 0 <= seed < self.num_seeds:
      raise ValueError(f"seed {seed} out of range: the model holds seeds 0..{self.num_seeds - 1}")
    return seed

  def score(self, feats, seed: Optional[int] = None) -> jax.Array:
    """Logits ``[..., L]`` of model inputs ``[..., L, D]`` (padded lists welcome: padding is scored and can be
    ignored). seed: index into the saved seeds (None: the recorded best seed).

    The seed-stacked program of training scores every seed, so the numbers are the trained run's bit for bit.
    """
    m = self.recipe["model"]
    fn = train_lib._scoring(m["hidden"], m["layers"], tuple(self.recipe["ks"]))["predict"]
    return fn(self.params, jnp.asarray(feats))[self._seed(seed)]

  def score_groups(self, groups: data_lib.Groups, seed: Optional[int] = None, max_buckets: int = 8) -> np.ndarray:
    """f32[N] logits of raw flat groups, one per document in their order (recipe applied, padded in buckets)."""
    g = dataclasses.replace(groups, x=self.inputs(groups), z=None, y=None, g0=None, g1=None)
    out = np.zeros(g.num_docs, np.float32)
    for b in data_lib.bucketize(g, max_buckets):
      s = np.asarray(self.score(b.x, seed))
      rows = g.offsets[b.index][:, None] + np.arange(b.list_size)[None, :]
      out[rows[b.mask]] = s[b.mask]
    return out

  def save(self, path: str) -> None:
    save_model(path, self)


def make_ranker(result: train_lib.TrainResult, cfg: train_lib.TrainConfig, view: str, data_config: dict,
                **info) -> Ranker:
  """The :class:`Ranker` of a training run (its best-epoch parameters of every seed).

  data_config: the dataset's recipe (:attr:`pfd_jax.data.Dataset.config`): feature ids and transforms.
  info: anything else to record (dataset, fold, row name, ...).
  """
  sel = np.asarray(result.best[cfg.select_on])[:, 0]
  regular = data_config.get("regular_ids")
  privileged = data_config.get("privileged_ids", [])
  if regular is None:
    raise ValueError("data_config has no regular_ids: build the dataset with pfd_jax.data.prepare")
  ids = input_ids(view, regular, privileged)
  recipe = dict(
      format=FORMAT, model=dict(kind="mlp", hidden=cfg.hidden, layers=cfg.layers), view=view, input_ids=ids,
      regular_ids=list(regular), privileged_ids=list(privileged),
      num_features=int(data_config.get("num_features", max(ids, default=0))),
      transforms=dict(query_norm=bool(data_config.get("query_norm", False)),
                      log1p=bool(data_config.get("log1p", True))),
      labels=dict(mode=data_config.get("labels", "gumbel"), positive_grade=data_config.get("positive_grade"),
                  t=data_config.get("t"), tau=data_config.get("tau"), seed=data_config.get("seed")),
      min_docs=int(data_config.get("min_docs", 1)), ks=list(cfg.ks), select_on=cfg.select_on,
      empty_rule=cfg.empty_rule, num_seeds=int(sel.shape[0]), best_seed=int(np.argmax(sel)),
      best_epoch=np.asarray(result.best_epoch).tolist(),
      metrics={s: np.asarray(v).tolist() for s, v in result.best.items()},
      train_config=_jsonable(dataclasses.asdict(cfg)), **_jsonable(info))
  return Ranker(params=result.params, recipe=recipe)


def _jsonable(o):
  if isinstance(o, dict):
    return {str(k): _jsonable(v) for k, v in o.items()}
  if isinstance(o, (list, tuple)):
    return [_jsonable(v) for v in o]
  if isinstance(o, (np.ndarray, np.generic)) or hasattr(o, "dtype"):
    return np.asarray(o).tolist()
  return o


def save_model(path: str, ranker: Ranker) -> None:
  """Writes `ranker` to the folder `path` (created): params.msgpack, then model.json (each atomically)."""
  os.makedirs(path, exist_ok=True)
  blob = flax.serialization.to_bytes(jax.tree_util.tree_map(np.asarray, ranker.params))
  for name, data, mode in ((PARAMS_FILE, blob, "wb"), (RECIPE_FILE, json.dumps(ranker.recipe, indent=1), "w")):
    tmp = os.path.join(path, name + ".tmp")
    with open(tmp, mode) as f:
      f.write(data)
    os.replace(tmp, os.path.join(path, name))


def load_model(path: str) -> Ranker:
  """The :class:`Ranker` saved in folder `path` by :func:`save_model` (or a training driver's --save_models)."""
  recipe_path = os.path.join(path, RECIPE_FILE)
  if not os.path.isfile(recipe_path):
    raise FileNotFoundError(f"{path}: not a saved model (no {RECIPE_FILE})")
  with open(recipe_path) as f:
    recipe = json.load(f)
  if recipe.get("format") != FORMAT:
    raise ValueError(f"{recipe_path}: format {recipe.get('format')!r}, expected {FORMAT!r}")
  with open(os.path.join(path, PARAMS_FILE), "rb") as f:
    params = flax.serialization.msgpack_restore(f.read())
  return Ranker(params=jax.tree_util.tree_map(jnp.asarray, params), recipe=recipe)


def serving_labels(ranker: Ranker, rel: np.ndarray) -> Optional[np.ndarray]:
  """The binary (or graded) labels the model was evaluated on, from a file's labels by its recipe; None when
  the training labels were drawn by Eq. 2 (a new file's labels cannot be redrawn the same way)."""
  lab = ranker.recipe["labels"]
  if lab["mode"] == "file":
    return data_lib.file_labels(rel, lab.get("positive_grade"))
  if lab["mode"] == "graded":
    return rel.astype(np.float32)
  return None
