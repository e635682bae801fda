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

Refused before anything is scored, each with one line: a model folder that is damaged or not a model
(exit 1), a serving file with a bad line (exit 1, naming file:line), a file that lacks feature ids the model
reads (exit 1: a teacher's privileged features are normally absent at serving time, and zero-filling them
changes its scores; ``--impute=zero`` scores anyway and says so), ``--out`` equal to ``--data`` or a folder
(exit 2), an ``--out`` that cannot be written (exit 1). The score file is written whole or not at all.
"""
import dataclasses
import os
import sys
from typing import Optional

import numpy as np

from experiments.framework.records import RunRecord
from experiments.framework import lifecycle, schema
from pfd_jax import data as D
from pfd_jax import files
from pfd_jax.ops import metrics
from pfd_jax import serving
from pfd_jax.config import ConfigError, check, option


@dataclasses.dataclass(frozen=True)
class Options:
  model: str = option("", "Saved model folder (model.json + params.msgpack).")
  data: str = option("", "LETOR/SVMlight file to score (.txt or .gz; labels optional).")
  out: str = option("", "Score file to write (qid, index within query, score; tab-separated).")
  seed: Optional[int] = option(None, "Index of the saved seed to score with (default: the recorded best).", lo=0)
  impute: str = option("none", "Feature ids the model reads that appear on no line of --data: none = refuse "
                       "to score (default), zero = score with them as 0 (said on stderr and in the summary).",
                       choices=("none", "zero"))

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
  lines = (f"{q}\t{i}\t{s!r}\n".encode() for q, i, s in zip(qid.tolist(), within.tolist(), scores.tolist()))
  files.write_atomic(path, lambda f: f.writelines(lines))


def check_out(o: Options) -> None:
  """Refuses an --out that would destroy the input or cannot be written, before any scoring."""
  if os.path.abspath(o.out) == os.path.abspath(o.data) or (
      os.path.exists(o.out) and os.path.exists(o.data) and os.path.samefile(o.out, o.data)):
    raise ConfigError("out", "is the --data file: scoring would replace the input; name another file")
  if os.path.isdir(o.out):
    raise ConfigError("out", "is a folder; name the score file to write, e.g. --out=scores.tsv")
  files.check_writable(o.out)


def run(cfg: schema.Config) -> RunRecord:
  o = cfg.options
  check_out(o)
  ranker = serving.load_model(o.model)
  if o.seed is not None and o.seed >= ranker.num_seeds:
    raise ConfigError("seed", f"{o.seed}: the model holds seeds 0..{ranker.num_seeds - 1}")
  groups, present = D.read_serving(o.data, ranker.num_features, ranker.recipe.get("dataset"))
  missing = sorted(set(ranker.input_ids) - set(present.tolist()))
  if missing and o.impute == "none":
    priv = sorted(set(missing) & set(ranker.recipe["privileged_ids"]))
    raise D.DataError(
        f"{o.data}: the model reads feature ids {_ids(missing)} that appear on no line of this file"
        + (f" ({_ids(priv)} are privileged: this model is a teacher, which needs them)" if priv else "")
        + "; score with a student model, or pass --impute=zero to score with them as 0")
  if missing:
    print(f"warning: {len(missing)} feature ids read as 0 (--impute=zero): {_ids(missing)}", file=sys.stderr)
  scores = ranker.score_groups(groups, o.seed)
  write_scores(o.out, groups, scores)
  res = ndcg(ranker, groups, scores)
  return RunRecord(options=o, docs=groups.num_docs, queries=groups.num_queries, seeds=ranker.num_seeds,
              seed=ranker.best_seed if o.seed is None else o.seed, view=ranker.recipe["view"],
              input_ids=ranker.input_ids, ndcg=res, labelled=groups.rel is not None,
              label_mode=ranker.recipe["labels"]["mode"], imputed=missing)


def _ids(ids) -> str:
  return ",".join(map(str, ids[:20])) + (f",... ({len(ids)} in all)" if len(ids) > 20 else "")


def to_markdown(res: RunRecord) -> str:
  o = res["options"]
  lines = [f"{o['out']}: {res['docs']} documents in {res['queries']} queries scored with seed {res['seed']} of "
           f"{res['seeds']} (model {o['model']}: view {res['view']}, feature ids {','.join(map(str, res['input_ids']))})"]
  if res.get("imputed"):
    lines.append(f"imputed as 0 (absent from {o['data']}): feature ids {_ids(res['imputed'])}")
  if res["ndcg"] is not None:
    vals, n = res["ndcg"]
    lines.append(f"NDCG over {n} lists with a positive: " + "  ".join(f"@{k} {v:.4f}" for k, v in vals.items()))
  elif res["labelled"]:
    lines.append("no NDCG: the model was trained on Gumbel labels (Eq. 2), which a new file's labels cannot "
                 "reproduce" if res["label_mode"] == "gumbel" else "no NDCG: no list with a positive")
  return "\n".join(lines)


DRIVER = schema.Driver("predict", run, to_markdown, options=Options, groups=(), write=False)

if __name__ == "__main__":
  lifecycle.main(DRIVER)
