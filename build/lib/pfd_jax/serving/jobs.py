"""A saved model's two jobs on files: scoring a LETOR/SVMlight file (RankLib's score-file layout) and exporting an
MLP as a serving graph. What the installed commands (``pfd-predict``, ``pfd-export``: :mod:`pfd_jax.commands`) and
the clone's drivers (``python -m experiments.predict`` / ``experiments.export``) run, so both give the same bits.

A bad request is refused before anything is scored or written: :class:`pfd_jax.config.ConfigError` naming the
setting (an ``out`` that is the data file, or a folder; a seed the model lacks), :class:`pfd_jax.data.DataError`
naming the file and line (a bad line; feature ids the model reads that no line holds), ModelError for a damaged model
folder. The score file is written whole or not at all.
"""
from __future__ import annotations

import os
from typing import Optional

import numpy as np

from pfd_jax import data as D
from pfd_jax import files
from pfd_jax.config import ConfigError, JsonObject
from pfd_jax.ops import metrics
from pfd_jax.serving import export as graph
from pfd_jax.serving.model import Ranker, load_model, serving_labels

IMPUTE = ("none", "zero")


def _seed(ranker: Ranker, seed: Optional[int]) -> None:
  if seed is not None and not 0 <= seed < ranker.num_seeds:
    raise ConfigError("seed", f"{seed}: the model holds seeds 0..{ranker.num_seeds - 1}")


def check_out(out: str, data: str) -> None:
  """Refuses a score file that would destroy the input or cannot be written, before any scoring."""
  if os.path.abspath(out) == os.path.abspath(data) or (
      os.path.exists(out) and os.path.exists(data) and os.path.samefile(out, data)):
    raise ConfigError("out", "is the --data file: scoring would replace the input; name another file")
  if os.path.isdir(out):
    raise ConfigError("out", "is a folder; name the score file to write, e.g. --out=scores.tsv")
  files.check_writable(out)


def ndcg(ranker: Ranker, groups: D.Groups, scores: np.ndarray) -> Optional[tuple]:
  """({k: mean NDCG@k}, lists) over the lists with >= min_docs documents and a positive (the drivers'
  evaluation); None when the file has no labels or the model's labels were Gumbel draws."""
  if groups.rel is None:
    return None
  y = serving_labels(ranker, groups.rel)
  if y is None:
    return None
  g = D.Groups(x=scores[:, None], rel=groups.rel, y=y, qid=groups.qid, offsets=groups.offsets)
  keep = np.flatnonzero((g.sizes >= ranker.recipe["min_docs"]) & D.positive_groups(g))
  if keep.size == 0:
    return None
  tot = 0.0
  for b in D.bucketize(g, 8, keep):
    tot = tot + np.asarray(metrics.ndcg_table(b.x[..., 0], b.y, b.mask, tuple(ranker.recipe["ks"]))).sum(-1)
  return dict(zip(ranker.recipe["ks"], (tot / keep.size).tolist())), int(keep.size)


def write_scores(path: str, groups: D.Groups, scores: np.ndarray) -> None:
  """qid<TAB>index within its query (0-based)<TAB>score per document, in input order; written to a temporary file
  and renamed (never partial)."""
  qid = groups.qid[groups.group_index]
  lines = (f"{q}\t{i}\t{s!r}\n".encode() for q, i, s in zip(qid.tolist(), groups.position.tolist(), scores.tolist()))
  files.write_atomic(path, lambda f: f.writelines(lines))


def _ids(ids, every: bool = False) -> str:
  """The ids, the first 20 and their count unless `every`."""
  return ",".join(map(str, ids if every else ids[:20])) + (f",... ({len(ids)} in all)" if len(ids) > 20 and
                                                          not every else "")


def score_file(model: str, data: str, out: str, seed: Optional[int] = None, impute: str = "none") -> JsonObject:
  """Scores `data` with the saved model `model` (seed `seed`, default the recorded best) into the score file `out`.
  impute='zero' scores a file that lacks feature ids the model reads with them as 0 (listed under 'imputed');
  'none' refuses it. Returns what was scored: documents, queries, seeds, the seed, view, input ids, NDCG (or None),
  whether the file had labels, the model's label mode and the imputed ids."""
  if impute not in IMPUTE:
    raise ConfigError("impute", f"{impute!r} is not one of {IMPUTE}")
  check_out(out, data)
  ranker = load_model(model)
  _seed(ranker, seed)
  groups, present = D.read_serving(data, ranker.num_features, ranker.recipe.get("dataset"))
  missing = sorted(set(ranker.input_ids) - set(present.tolist()))
  if missing and impute == "none":
    priv = sorted(set(missing) & set(ranker.recipe["privileged_ids"]))
    regular = sorted(set(missing) - set(priv))
    raise D.DataError(
        f"{data}: the model reads feature ids {_ids(missing, every=True)} that appear on no line of this file" +
        (f"; {_ids(regular, every=True)} {'is a column' if len(regular) == 1 else 'are columns'} it was trained on "
         "(is the file of another feature set?)" if regular else "") +
        (f"; {_ids(priv, every=True)} {'is' if len(priv) == 1 else 'are'} privileged: this model is a teacher, which "
         "needs them, so score with a student model" if priv else "") +
        ", or pass --impute=zero to score with them as 0")
  # a student reads no privileged id: one left in the file is ignored, and said (is this the training file?)
  left_in = sorted(set(present.tolist()) & set(ranker.recipe.get("privileged_ids", ())) - set(ranker.input_ids))
  scores = ranker.score_groups(groups, seed)
  write_scores(out, groups, scores)
  return dict(docs=groups.num_docs, queries=groups.num_queries, seeds=ranker.num_seeds,
              seed=ranker.best_seed if seed is None else seed, view=ranker.recipe["view"],
              input_ids=ranker.input_ids, ndcg=ndcg(ranker, groups, scores), labelled=groups.rel is not None,
              label_mode=ranker.recipe["labels"]["mode"], imputed=missing, privileged_ignored=left_in)


def scores_text(res: JsonObject, model: str, data: str, out: str) -> str:
  """What :func:`score_file` did, in a few lines."""
  lines = [f"{out}: {res['docs']} documents in {res['queries']} queries scored with seed {res['seed']} of "
           f"{res['seeds']} (model {model}: view {res['view']}, feature ids {','.join(map(str, res['input_ids']))})"]
  if res.get("imputed"):
    lines.append(f"imputed as 0 (absent from {data}): feature ids {_ids(res['imputed'])}")
  if res["ndcg"] is not None:
    vals, n = res["ndcg"]
    lines.append(f"NDCG over {n} lists with a positive: " + "  ".join(f"@{k} {v:.4f}" for k, v in vals.items()))
  elif res["labelled"]:
    lines.append("no NDCG: the model was trained on Gumbel labels (Eq. 2), which a new file's labels cannot "
                 "reproduce" if res["label_mode"] == "gumbel" else "no NDCG: no list with a positive")
  return "\n".join(lines)


def imputed_warning(res: JsonObject) -> Optional[str]:
  """The warning lines of a file scored with absent feature ids read as 0 (each named) and of privileged ids left in
  a file a student scored (ignored); None when neither."""
  n, left = len(res.get("imputed") or ()), res.get("privileged_ignored") or ()
  lines = ([f"warning: {n} feature ids read as 0 (--impute=zero): {_ids(res['imputed'], every=True)}"] if n else []) + (
      [f"warning: the file holds privileged feature ids {_ids(left, every=True)}, which this model does not read "
       "(a serving file has none: is this a training file?)"] if left else [])
  return "\n".join(lines) or None


def export_model(model: str, out: str, fmt: str = "onnx", seed: Optional[int] = None,
                 ensemble: bool = False) -> JsonObject:
  """Exports the saved MLP `model` as a serving graph in folder `out` (:func:`pfd_jax.serving.export.export`: one
  seed, the recorded best or `seed`, or every seed's mean logit with `ensemble`). Returns its serving spec and the
  graph's size in bytes."""
  if ensemble and seed is not None:
    raise ConfigError("seed", "give --seed or --ensemble, not both")
  ranker = load_model(model)
  _seed(ranker, seed)
  spec = graph.export(ranker, out, fmt, seed, ensemble)
  return dict(spec=spec, bytes=os.path.getsize(os.path.join(out, spec["artifact"])))


def export_text(res: JsonObject, out: str, fmt: str) -> str:
  """What :func:`export_model` wrote, in one line."""
  spec = res["spec"]
  who = "the mean of every seed" if spec["ensemble"] else f"seed {spec['seed']}"
  return (f"{os.path.join(out, spec['artifact'])}: {res['bytes']:,} bytes ({fmt}, {who}); input f32[n, "
          f"{len(spec['feature_ids'])}] with columns = feature ids {','.join(map(str, spec['feature_ids']))} "
          f"(also in {os.path.join(out, graph.SPEC_FILE)})")
