r"""Scores a LETOR/SVMlight file with a saved model: RankLib's score-file layout, one line per document.

  python -m experiments.predict --model=results/table2/letor-logs_letor/latest/models/pfd --data=serve.txt --out=scores.tsv
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
import dataclasses
import os
from typing import Optional

import numpy as np

from experiments import common
from pfd_jax import data as D
from pfd_jax import metrics
from pfd_jax import serving
from pfd_jax.config import ConfigError, check, option


@dataclasses.dataclass(frozen=True)
class Options:
  model: str = option("", "Saved model folder (model.json + params.msgpack).")
  data: str = option("", "LETOR/SVMlight file to score (.txt or .gz; labels optional).")
  out: str = option("", "Score file to write (qid, index within query, score; tab-separated).")
  seed: Optional[int] = option(None, "Index of the saved seed to score with (default: the recorded best).", lo=0)

  def __post_init__(self):
    for name in ("model", "data", "out"):
      if not getattr(self, name):
        raise ConfigError(name, "required")
    check(self)


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


def run(cfg: common.Config) -> dict:
  o = cfg.options
  try:
    ranker = serving.load_model(o.model)
  except FileNotFoundError as e:
    raise ConfigError("model", str(e)) from None
  if o.seed is not None and o.seed >= ranker.num_seeds:
    raise ConfigError("seed", f"{o.seed}: the model holds seeds 0..{ranker.num_seeds - 1}")
  groups = D.load_serving(o.data, ranker.num_features)
  scores = ranker.score_groups(groups, o.seed)
  write_scores(o.out, groups, scores)
  res = ndcg(ranker, groups, scores)
  return dict(options=o, docs=groups.num_docs, queries=groups.num_queries, seeds=ranker.num_seeds,
              seed=ranker.best_seed if o.seed is None else o.seed, view=ranker.recipe["view"],
              input_ids=ranker.input_ids, ndcg=res, labelled=groups.rel is not None,
              label_mode=ranker.recipe["labels"]["mode"])


def to_markdown(res: dict) -> str:
  o = res["options"]
  lines = [f"{o['out']}: {res['docs']} documents in {res['queries']} queries scored with seed {res['seed']} of "
           f"{res['seeds']} (model {o['model']}: view {res['view']}, feature ids {','.join(map(str, res['input_ids']))})"]
  if res["ndcg"] is not None:
    vals, n = res["ndcg"]
    lines.append(f"NDCG over {n} lists with a positive: " + "  ".join(f"@{k} {v:.4f}" for k, v in vals.items()))
  elif res["labelled"]:
    lines.append("no NDCG: the model was trained on Gumbel labels (Eq. 2), which a new file's labels cannot "
                 "reproduce" if res["label_mode"] == "gumbel" else "no NDCG: no list with a positive")
  return "\n".join(lines)


DRIVER = common.Driver("predict", run, to_markdown, options=Options, groups=(), write=False)

if __name__ == "__main__":
  common.main(DRIVER)
