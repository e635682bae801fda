"""A saved MLP ranker as a graph any serving stack can run (StableHLO).

The exported function takes one query's raw documents ``f32[n, D]`` (columns: the file's feature ids in
the order of ``feature_ids`` in ``serving.json``; n dynamic) and returns ``f32[n]`` logits, the recipe's
transforms applied inside the graph (query-level min-max over the query's documents, then log1p), so a
service sends the features it has and ranks by the output.

* StableHLO: :func:`jax.export.export` with a symbolic document count, serialised; a service deserialises it
  with :func:`jax.export.deserialize` (JAX only, no pfd_jax) or compiles it with any StableHLO consumer.
* ONNX: the same function converted by jax2onnx (a maintained JAX -> ONNX converter), input ``x`` of shape
  ``["n", D]``; scored by ONNX Runtime (C, C++, C#, Java, Python, JavaScript) with no JAX at all.

A LightGBM row is refused: its model file (``lightgbm_seed<s>.txt``) is already what a non-Python service
loads through LightGBM's C API.
"""
from __future__ import annotations

import json
import os
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from pfd_jax import files
from pfd_jax.config import JsonObject
from pfd_jax.serving.model import GBDTRanker, ModelError, Ranker

STABLEHLO_FILE = "model.stablehlo"
ONNX_FILE = "model.onnx"
SPEC_FILE = "serving.json"


def serving_function(ranker: Ranker, seed: Optional[int] = None, ensemble: bool = False):
  """``fn(x f32[n, D]) -> f32[n]``: raw columns in input-id order -> the recipe's transforms -> logits of one
  seed (default: the recorded best) or, with `ensemble`, the mean logit of every saved seed."""
  if isinstance(ranker, GBDTRanker):
    raise ModelError("a LightGBM model is served by its own model files (lightgbm_seed<s>.txt, "
                             "LightGBM's C API); export applies to MLP rankers")
  t = ranker.recipe["transforms"]
  model = ranker.arch.module()  # scoring mode: batch norm's running statistics, no noise or dropout
  if ensemble:
    # one graph per seed, unrolled (jax2onnx has no batching rule for flax's Dense; S is a handful), then the mean
    seeds = [jax.tree_util.tree_map(lambda a, s=s: a[s], ranker.params) for s in range(ranker.num_seeds)]
    score = lambda x: sum(model.apply(p, x) for p in seeds) / len(seeds)
  else:
    s = ranker.seed_index(seed)
    params = jax.tree_util.tree_map(lambda a: a[s], ranker.params)
    score = lambda x: model.apply(params, x)

  def fn(x):
    if t["query_norm"]:  # LETOR's QueryLevelNorm over this query's documents (constant column -> 0)
      lo, hi = jnp.min(x, axis=0), jnp.max(x, axis=0)
      span = hi - lo
      x = jnp.where(span > 0, (x - lo) / jnp.where(span > 0, span, 1.0), 0.0)
    if t["log1p"]:
      x = jnp.sign(x) * jnp.log1p(jnp.abs(x))
    return score(x)
  return fn


def export(ranker: Ranker, out_dir: str, fmt: str = "onnx", seed: Optional[int] = None,
           ensemble: bool = False) -> JsonObject:
  """Writes the ranker's serving graph to `out_dir` as ``model.onnx`` (fmt='onnx') or ``model.stablehlo``
  (fmt='stablehlo'), and ``serving.json`` beside it (the feature ids in input-column order, the seed, the
  recipe); returns that spec. The graph's input is one query's raw documents f32[n, D], n dynamic."""
  fn = serving_function(ranker, seed, ensemble)
  width = len(ranker.input_ids)
  if fmt == "stablehlo":
    n = jax.export.symbolic_shape("n")[0]
    blob = bytes(jax.export.export(jax.jit(fn))(jax.ShapeDtypeStruct((n, width), jnp.float32)).serialize())
    artifact = STABLEHLO_FILE
  elif fmt == "onnx":
    from jax2onnx import to_onnx
    blob = to_onnx(fn, [("n", width)], model_name="pfd_jax_ranker", return_mode="proto").SerializeToString()
    artifact = ONNX_FILE
  else:
    raise ValueError(f"format {fmt!r}: onnx or stablehlo")
  spec = dict(format="pfd_jax.serving.export/1", artifact=artifact, input="f32[n, D]: one query's documents, columns = "
              "feature_ids in this order", output="f32[n]: logits (sigmoid = the paper's score; rank by either)",
              feature_ids=ranker.input_ids, privileged_ids=list(ranker.recipe.get("privileged_ids", ())),
              seed=None if ensemble else ranker.seed_index(seed), ensemble=ensemble,
              transforms=ranker.recipe["transforms"], model=ranker.recipe["model"],
              # the products' precision inside the graph: StableHLO carries it; ONNX has no such attribute, so a
              # runtime computes float32 products its own way (ONNX Runtime's CUDA provider: TF32 unless use_tf32=0)
              matmul_precision=ranker.arch.matmul_precision)
  os.makedirs(out_dir, exist_ok=True)
  files.write_atomic(os.path.join(out_dir, artifact), blob)
  files.write_atomic(os.path.join(out_dir, SPEC_FILE), json.dumps(spec, indent=1))
  return spec


def raw_columns(groups, feature_ids) -> np.ndarray:
  """f32[N, D] the columns a served graph takes, from raw flat groups (1-based ids as in the files)."""
  return np.ascontiguousarray(groups.x[:, np.asarray(feature_ids, np.int64) - 1], np.float32)
