r"""Scores a LETOR/SVMlight file with a saved model: RankLib's score-file layout, one line per document.

  python -m experiments.predict --model=results/table2/letor/models/pfd --data=serve.txt --out=scores.tsv
  python -m experiments.predict --model=DIR --data=FILE --out=SCORES --seed=2

The file is read as it exists at serving time: privileged feature ids may be absent (ids the model does not
read are ignored), labels are optional (a line may start with ``qid:``). The model's recipe (its feature
ids, query-level normalisation, log1p) is applied, and ``--out`` gets ``qid<TAB>index within its query
(0-based)<TAB>score`` for every input line in input order; the score is the model's logit (sigmoid gives
the paper's probability; rankings are the same). ``--seed`` picks one of the saved seeds (default: the
best by the training run's selection metric).

Where the file has labels and the model was trained on file labels, NDCG@k (the training run's cut-offs) is
printed over the lists the training drivers evaluate: at least ``min_docs`` documents and one positive.
Nothing is written when the input is bad (the error names file:line).
"""
import os

import numpy as np
from absl import app, flags

from pfd_jax import data as D
from pfd_jax import metrics
from pfd_jax import serving

flags.DEFINE_string("model", None, "Saved model folder (model.json + params.msgpack).")
flags.DEFINE_string("data", None, "LETOR/SVMlight file to score (.txt or .gz; labels optional).")
flags.DEFINE_string("out", None, "Score file to write (qid, index within query, score; tab-separated).")
flags.DEFINE_integer("seed", None, "Index of the saved seed to score with (default: the recorded best).")
flags.mark_flags_as_required(["model", "data", "out"])
FLAGS = flags.FLAGS


def ndcg(ranker: serving.Ranker, groups: D.Groups, scores: np.ndarray):
  """Mean NDCG@ks over lists with >= min_docs documents and a positive (the drivers' evaluation), with the
  number of such lists; None when the file has no labels or the model's labels were Gumbel draws."""
  if groups.rel is None:
    return None
  y = serving.serving_labels(ranker, groups.rel)
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
  """qid<TAB>index<TAB>score per document, written to a temporary file and renamed (never partial)."""
  within = np.arange(groups.num_docs) - np.repeat(groups.offsets[:-1], groups.sizes)
  qid = np.repeat(groups.qid, groups.sizes)
  tmp = path + ".tmp"
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(tmp, "w") as f:
    f.writelines(f"{q}\t{i}\t{s!r}\n" for q, i, s in zip(qid.tolist(), within.tolist(), scores.tolist()))
  os.replace(tmp, path)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]} (flags need dashes: --model=DIR)")
  try:
    ranker = serving.load_model(FLAGS.model)
  except FileNotFoundError as e:
    raise app.UsageError(f"--model: {e}")
  if FLAGS.seed is not None and not 0 <= FLAGS.seed < ranker.num_seeds:
    raise app.UsageError(f"--seed={FLAGS.seed}: the model holds seeds 0..{ranker.num_seeds - 1}")
  groups = D.load_serving(FLAGS.data, ranker.num_features)
  scores = ranker.score_groups(groups, FLAGS.seed)
  write_scores(FLAGS.out, groups, scores)
  seed = ranker.best_seed if FLAGS.seed is None else FLAGS.seed
  print(f"{FLAGS.out}: {groups.num_docs} documents in {groups.num_queries} queries scored with seed {seed} of "
        f"{ranker.num_seeds} (model {FLAGS.model}: view {ranker.recipe['view']}, feature ids "
        f"{','.join(map(str, ranker.input_ids))})")
  res = ndcg(ranker, groups, scores)
  if res is not None:
    vals, n = res
    print(f"NDCG over {n} lists with a positive: " + "  ".join(f"@{k} {v:.4f}" for k, v in vals.items()))
  elif groups.rel is not None:
    print(f"no NDCG: the model was trained on labels mode {ranker.recipe['labels']['mode']!r}, which a new "
          "file's labels cannot reproduce" if ranker.recipe["labels"]["mode"] == "gumbel"
          else "no NDCG: no list with a positive")


if __name__ == "__main__":
  app.run(main)
