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

A LightGBM row (:mod:`pfd_jax.methods.gbdt`) is a :class:`GBDTRanker`: the same recipe (``model.kind`` =
``lightgbm``) with one LightGBM model file per seed (``lightgbm_seed<s>.txt``, LightGBM's own text format,
readable by its C API and every LightGBM binding) in place of ``params.msgpack``; it scores through the
same :meth:`Ranker.score_groups`.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
from typing import Any, Dict, Optional

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np

from pfd_jax import files
from pfd_jax.config import JsonObject
from pfd_jax.data.groups import DataError, Groups
from pfd_jax.data.padding import bucketize
from pfd_jax.data.preprocess import file_labels, transform_features
from pfd_jax.ops.models import MATMUL_PRECISIONS, NORMS, Arch
from pfd_jax.ops.scoring import input_ids, scoring

FORMAT = "pfd_jax.ranker/1"
PARAMS_FILE = "params.msgpack"
GBDT_FILE = "lightgbm_seed{}.txt"
RECIPE_FILE = "model.json"


@dataclasses.dataclass(frozen=True)
class Ranker:
  """A trained, seed-stacked scorer and its recipe (see the module docstring)."""
  params: Any
  recipe: JsonObject

  @property
  def num_seeds(self) -> int:
    return int(self.recipe["num_seeds"])

  @property
  def best_seed(self) -> int:
    return int(self.recipe["best_seed"])

  @property
  def arch(self) -> Arch:
    """The scorer's architecture (:class:`pfd_jax.ops.models.Arch`) as model.json records it."""
    return Arch.from_json(self.recipe["model"])

  @property
  def input_ids(self) -> list:
    return list(self.recipe["input_ids"])

  @property
  def num_features(self) -> int:
    """The width of the raw files the model was trained on (ids above it were never seen)."""
    return int(self.recipe["num_features"])

  def inputs(self, groups: Groups) -> np.ndarray:
    """f32[N, D] model inputs of raw flat groups (columns = 1-based ids as in the files), recipe applied."""
    ids = np.asarray(self.input_ids, np.int64)
    if ids.size and ids.max() > groups.x.shape[1]:
      raise ValueError(f"the model reads feature ids up to {ids.max()}; the data has {groups.x.shape[1]} columns")
    t = self.recipe["transforms"]
    return transform_features(np.ascontiguousarray(groups.x[:, ids - 1]), groups.offsets,
                                       log1p=t["log1p"], query_norm=t["query_norm"])

  def seed_index(self, seed: Optional[int] = None) -> int:
    """The saved seed `seed` (None: the recorded best), checked against the seeds the model holds."""
    seed = self.best_seed if seed is None else int(seed)
    if not 0 <= seed < self.num_seeds:
      raise ValueError(f"seed {seed} out of range: the model holds seeds 0..{self.num_seeds - 1}")
    return seed

  def score(self, feats, seed: Optional[int] = None) -> jax.Array:
    """Logits ``[..., L]`` of model inputs ``[..., L, D]`` (padded lists welcome: padding is scored and can be
    ignored). seed: index into the saved seeds (None: the recorded best seed).

    The seed-stacked program of training scores every seed, so the numbers are the trained run's bit for bit.
    """
    fn = scoring(self.arch, tuple(self.recipe["ks"])).predict
    return fn(self.params, jnp.asarray(feats))[self.seed_index(seed)]

  def score_groups(self, groups: Groups, seed: Optional[int] = None, max_buckets: int = 8) -> np.ndarray:
    """f32[N] logits of raw flat groups, one per document in their order (recipe applied, padded in buckets)."""
    g = dataclasses.replace(groups, x=self.inputs(groups), z=None, y=None, g0=None, g1=None)
    out = np.zeros(g.num_docs, np.float32)
    for b in bucketize(g, max_buckets):
      s = np.asarray(self.score(b.x, seed))
      rows = g.offsets[b.index][:, None] + np.arange(b.list_size)[None, :]
      out[rows[b.mask]] = s[b.mask]
    return out

  def save(self, path: str) -> None:
    save_model(path, self)


class GBDTRanker(Ranker):
  """A LightGBM ranker: params is the tuple of its seeds' LightGBM model texts (see the module docstring)."""

  @functools.cached_property
  def boosters(self) -> list:
    import lightgbm  # deferred on purpose: an MLP model loads and scores without LightGBM
    return [lightgbm.Booster(model_str=m) for m in self.params]

  def score(self, feats, seed: Optional[int] = None) -> np.ndarray:
    """Scores ``[..., L]`` of model inputs ``[..., L, D]`` (padding is scored and can be ignored)."""
    feats = np.asarray(feats, np.float32)
    flat = feats.reshape(-1, feats.shape[-1])
    return np.asarray(self.boosters[self.seed_index(seed)].predict(flat), np.float32).reshape(feats.shape[:-1])

  def score_groups(self, groups: Groups, seed: Optional[int] = None, max_buckets: int = 8) -> np.ndarray:
    """f32[N] scores of raw flat groups, one per document in their order (recipe applied; trees need no padding)."""
    del max_buckets
    return self.score(self.inputs(groups), seed)


def jsonable(o):
  """Plain JSON data of nested dicts, lists and arrays."""
  if isinstance(o, dict):
    return {str(k): jsonable(v) for k, v in o.items()}
  if isinstance(o, (list, tuple)):
    return [jsonable(v) for v in o]
  if isinstance(o, (np.ndarray, np.generic)) or hasattr(o, "dtype"):
    return np.asarray(o).tolist()
  return o


class ModelError(DataError):
  """A saved model that cannot be used as it is: a missing or damaged file, a recipe that contradicts itself
  or its parameters. The message names the file and what is wrong."""


def save_model(path: str, ranker: Ranker) -> None:
  """Writes `ranker` to the folder `path` (created): params.msgpack (LightGBM: a model file per seed), then
  model.json (each atomically)."""
  os.makedirs(path, exist_ok=True)
  if isinstance(ranker, GBDTRanker):
    for name, text in zip(ranker.recipe["model"]["files"], ranker.params):
      files.write_atomic(os.path.join(path, name), text)
  else:
    files.write_atomic(os.path.join(path, PARAMS_FILE),
                       flax.serialization.to_bytes(jax.tree_util.tree_map(np.asarray, ranker.params)))
  files.write_atomic(os.path.join(path, RECIPE_FILE), json.dumps(ranker.recipe, indent=1))


# Recipe keys and their types (nested dicts by their own keys); what load_model checks before any use.
_RECIPE = dict(format=str, model=dict(kind=str), view=str, input_ids=list,
               regular_ids=list, privileged_ids=list, num_features=int,
               transforms=dict(query_norm=bool, log1p=bool), labels=dict(mode=str), min_docs=int, ks=list,
               num_seeds=int, best_seed=int)


_MODEL = dict(mlp=dict(hidden=int, layers=int), lightgbm=dict(files=list, params=dict))


def _check_keys(recipe, spec: Dict[str, Any], where: str, prefix: str = "") -> None:
  if not isinstance(recipe, dict):
    raise ModelError(f"{where}: {prefix.rstrip('.') or 'the recipe'} is not a JSON object")
  for key, kind in spec.items():
    if key not in recipe:
      raise ModelError(f"{where}: key {prefix + key!r} is missing")
    if isinstance(kind, dict):
      _check_keys(recipe[key], kind, where, prefix + key + ".")
    elif not isinstance(recipe[key], kind) or (kind is int and isinstance(recipe[key], bool)):
      raise ModelError(f"{where}: {prefix + key!r} should be a {kind.__name__}, got {recipe[key]!r}")


def check_recipe(recipe: JsonObject, where: str = RECIPE_FILE) -> None:
  """Raises ModelError unless `recipe` is a complete, self-consistent ranker recipe: every key, its feature ids
  the ones its view reads from its regular and privileged ids (in order), within 1..num_features."""
  _check_keys(recipe, _RECIPE, where)
  if recipe["format"] != FORMAT:
    raise ModelError(f"{where}: format {recipe['format']!r}, expected {FORMAT!r}")
  kind = recipe["model"]["kind"]
  if kind not in _MODEL:
    raise ModelError(f"{where}: model kind {kind!r} is not one this version scores ({', '.join(_MODEL)})")
  _check_keys(recipe["model"], _MODEL[kind], where, "model.")
  if kind == "mlp":
    _check_arch(recipe["model"], where)
  if kind == "lightgbm" and len(recipe["model"]["files"]) != recipe["num_seeds"]:
    raise ModelError(f"{where}: model.files lists {len(recipe['model']['files'])} files for {recipe['num_seeds']} "
                     "seeds")
  ids = recipe["regular_ids"] + recipe["privileged_ids"]
  if not all(isinstance(i, int) and not isinstance(i, bool) and 1 <= i <= recipe["num_features"] for i in ids):
    raise ModelError(f"{where}: feature ids must be integers in 1..num_features={recipe['num_features']}")
  if len(set(ids)) != len(ids):
    raise ModelError(f"{where}: a feature id is both regular and privileged, or repeated")
  try:
    expected = input_ids(recipe["view"], recipe["regular_ids"], recipe["privileged_ids"])
  except (KeyError, ValueError, IndexError):
    raise ModelError(f"{where}: view {recipe['view']!r} is not x, z, xz or z:<columns>") from None
  if recipe["input_ids"] != expected:
    raise ModelError(f"{where}: input_ids {recipe['input_ids'][:8]}... are not the ids view "
                     f"{recipe['view']!r} reads from regular_ids and privileged_ids, in that order")
  if not 0 <= recipe["best_seed"] < recipe["num_seeds"]:
    raise ModelError(f"{where}: best_seed {recipe['best_seed']} is not below num_seeds {recipe['num_seeds']}")


# The architecture options a recipe may record beside hidden and layers (absent = their defaults), and their checks
# (JSON's true is no number here, nor 1 a switch).
_number = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
_ARCH_CHECKS = dict(norm=lambda v: v in NORMS, dropout=lambda v: _number(v) and 0 <= v < 1,
                    noise=lambda v: _number(v) and v >= 0, clip=lambda v: _number(v) and v >= 0,
                    tower=lambda v: _number(v) and isinstance(v, int) and v >= 0,
                    input_affine=lambda v: isinstance(v, bool),
                    matmul_precision=lambda v: v in MATMUL_PRECISIONS)


def _check_arch(model: JsonObject, where: str) -> None:
  for key, ok in _ARCH_CHECKS.items():
    if key in model and not ok(model[key]):
      raise ModelError(f"{where}: model.{key} = {model[key]!r} is not a valid setting")


def _expected_shapes(recipe: JsonObject) -> Dict[str, Dict[str, Dict[str, tuple]]]:
  """{collection: {layer: {leaf: seed-stacked shape}}} of the recipe's architecture."""
  width, seeds = len(recipe["input_ids"]), recipe["num_seeds"]
  shapes = jax.eval_shape(Ranker(None, recipe).arch.module().init, jax.random.PRNGKey(0), jnp.zeros((1, width)))
  return {c: {name: {k: (seeds,) + tuple(v.shape) for k, v in layer.items()} for name, layer in tree.items()}
          for c, tree in shapes.items()}


def _by_layer(collections: Dict[str, Any]):
  """{layer: {leaf: value}} of a variables tree {collection: {layer: {leaf: value}}} (None if not of that form)."""
  out = {}
  for tree in collections.values():
    if not isinstance(tree, dict) or not all(isinstance(v, dict) for v in tree.values()):
      return None
    for name, layer in tree.items():
      out.setdefault(name, {}).update(layer)
  return out


def _check_params(params, recipe: JsonObject, where: str) -> None:
  """The parameter tree must be the recipe's architecture (Dense layers, and the norm layers and running
  statistics it has), seed-stacked, widths as recorded."""
  m, seeds, width = recipe["model"], recipe["num_seeds"], len(recipe["input_ids"])
  expected = _by_layer(_expected_shapes(recipe))
  layers = _by_layer(params) if isinstance(params, dict) and set(params) <= {"params", "batch_stats"} else None
  # a damaged file may decode a leaf as something else than an array (a list, bytes): no shape, a mismatch
  shape = lambda v: tuple(v.shape) if isinstance(v, (np.ndarray, np.generic)) else None
  got = {name: {k: shape(v) for k, v in layer.items()} for name, layer in layers.items()} if layers else None
  if got != expected:
    def show(d):
      by_name = lambda items: sorted(items, key=lambda kv: str(kv[0]))  # damaged files may hold non-str keys
      return "; ".join(f"{n} {', '.join(f'{k} {list(v) if v is not None else chr(8212)}' for k, v in by_name(l.items()))}"
                       for n, l in by_name(d.items())) if d else "no Dense layers"
    raise ModelError(f"{where}: parameters do not match model.json ({m['layers']} layers of width "
                     f"{m['hidden']}, {width} inputs, {seeds} seeds): expected {show(expected)}; found "
                     f"{show(got) if got is not None else 'another structure'}")


def load_model(path: str) -> Ranker:
  """The :class:`Ranker` saved in folder `path` by :func:`save_model` (or a training driver's --save_models).

  Everything is checked before use, each failure a :class:`ModelError` (FileNotFoundError for a path that
  does not exist) naming the file: a results folder given instead of a model, unreadable or truncated files,
  missing keys, feature ids that contradict the view, parameters of other widths or seed counts.
  """
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path}: no such model folder")
  if not os.path.isdir(path):
    raise ModelError(f"{path}: a file, not a saved model folder (give the folder that holds {RECIPE_FILE})")
  recipe_path, params_path = os.path.join(path, RECIPE_FILE), os.path.join(path, PARAMS_FILE)
  if not os.path.isfile(recipe_path):
    models = os.path.join(path, "models")
    rows = sorted(os.listdir(models)) if os.path.isdir(models) else []
    hint = (f"; it looks like a run folder: give one of its models, e.g. {os.path.join(models, rows[0])}" if rows
            else "; a run folder has models only if it was trained with --save_models"
            if os.path.exists(os.path.join(path, "results.json")) or os.path.isdir(os.path.join(path, "runs"))
            else "")
    raise ModelError(f"{path}: not a saved model (no {RECIPE_FILE}){hint}")
  try:
    with open(recipe_path, "rb") as f:
      recipe = json.loads(f.read().decode("utf-8"))
  except UnicodeDecodeError:
    raise ModelError(f"{recipe_path}: not UTF-8 text (damaged)") from None
  except json.JSONDecodeError as e:
    raise ModelError(f"{recipe_path}:{e.lineno}: not valid JSON ({e.msg}; truncated or edited?)") from None
  check_recipe(recipe, recipe_path)
  if recipe["model"]["kind"] == "lightgbm":
    return _load_gbdt(path, recipe)
  if not os.path.isfile(params_path):
    raise ModelError(f"{params_path}: missing (the folder holds a recipe without parameters)")
  with open(params_path, "rb") as f:
    blob = f.read()
  try:
    params = flax.serialization.msgpack_restore(blob)
  except Exception as e:  # msgpack raises several unrelated types (ValueError, ExtraData, TypeError, ...)
    raise ModelError(f"{params_path}: damaged ({type(e).__name__}: {str(e)[:80] or 'truncated'}; "
                     f"{len(blob)} bytes)") from None
  _check_params(params, recipe, params_path)
  leaves = jax.tree_util.tree_leaves(params)
  if not all(np.issubdtype(np.asarray(v).dtype, np.floating) and np.isfinite(v).all() for v in leaves):
    raise ModelError(f"{params_path}: parameters are not finite floats")
  return Ranker(params=jax.tree_util.tree_map(jnp.asarray, params), recipe=recipe)


def _load_gbdt(path: str, recipe: JsonObject) -> GBDTRanker:
  """A LightGBM ranker's model files, each parsed and checked against the recipe's input width."""
  from lightgbm import Booster  # deferred on purpose: only a LightGBM model needs LightGBM
  from lightgbm.basic import LightGBMError
  texts = []
  for name in recipe["model"]["files"]:
    where = os.path.join(path, str(name))
    if os.path.basename(str(name)) != name or not os.path.isfile(where):
      raise ModelError(f"{where}: missing (model.json lists it)")
    with open(where, "rb") as f:
      blob = f.read()
    try:
      text = blob.decode("utf-8")
      width = Booster(model_str=text).num_feature()
    except (UnicodeDecodeError, LightGBMError) as e:
      raise ModelError(f"{where}: not a LightGBM model ({str(e).splitlines()[0][:80] or 'damaged'})") from None
    if width != len(recipe["input_ids"]):
      raise ModelError(f"{where}: the model reads {width} features; model.json lists {len(recipe['input_ids'])} "
                       "input ids")
    texts.append(text)
  return GBDTRanker(params=tuple(texts), recipe=recipe)


def serving_labels(ranker: Ranker, rel: np.ndarray) -> Optional[np.ndarray]:
  """The binary (or graded) labels the model was evaluated on, from a file's labels by its recipe; None when
  the training labels were drawn by Eq. 2 (a new file's labels cannot be redrawn the same way)."""
  lab = ranker.recipe["labels"]
  if lab["mode"] == "file":
    return file_labels(rel, lab.get("positive_grade"))
  if lab["mode"] == "graded":
    return rel.astype(np.float32)
  return None
