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
import sys
from typing import Optional

from experiments.framework.records import RunRecord
from experiments.framework import lifecycle, schema
from pfd_jax.config import ConfigError, check, option
from pfd_jax.serving import jobs


@dataclasses.dataclass(frozen=True)
class Options:
  model: str = option("", "Saved model folder (model.json + params.msgpack).")
  data: str = option("", "LETOR/SVMlight file to score (.txt or .gz; labels optional).")
  out: str = option("", "Score file to write (qid, index within query, score; tab-separated).")
  seed: Optional[int] = option(None, "Index of the saved seed to score with (default: the recorded best).", lo=0)
  impute: str = option("none", "Feature ids the model reads that appear on no line of --data: none = refuse "
                       "to score (default), zero = score with them as 0 (said on stderr and in the summary).",
                       choices=jobs.IMPUTE)

  def __post_init__(self):
    for name in ("model", "data", "out"):
      if not getattr(self, name):
        raise ConfigError(name, "required")
    check(self)


def run(cfg: schema.Config) -> RunRecord:
  o = cfg.options
  res = jobs.score_file(o.model, o.data, o.out, o.seed, o.impute)
  warning = jobs.imputed_warning(res)
  if warning:
    print(warning, file=sys.stderr)
  return RunRecord(options=o, **res)


def to_markdown(res: RunRecord) -> str:
  o = res["options"]
  return jobs.scores_text(res, o["model"], o["data"], o["out"])


DRIVER = schema.Driver("predict", run, to_markdown, options=Options, groups=(), write=False)

if __name__ == "__main__":
  lifecycle.main(DRIVER)
