"""pfd-predict: scores a LETOR/SVMlight file with a saved model (:func:`pfd_jax.serving.jobs.score_file`).

  pfd-predict --model=DIR --data=serve.txt --out=scores.tsv [--seed=N] [--impute=zero]

Writes qid<TAB>index within its query<TAB>score per document, in input order, and prints what it scored (NDCG
where the file has labels the model can read)."""
from __future__ import annotations

import sys

from absl import flags

from pfd_jax.commands import main as common
from pfd_jax.serving import jobs


def define(fv: flags.FlagValues) -> None:
  flags.DEFINE_string("model", "", "Saved model folder (model.json + params.msgpack).", flag_values=fv)
  flags.DEFINE_string("data", "", "LETOR/SVMlight file to score (.txt or .gz; labels optional).", flag_values=fv)
  flags.DEFINE_string("out", "", "Score file to write (qid, index within query, score; tab-separated).",
                      flag_values=fv)
  flags.DEFINE_integer("seed", None, "Index of the saved seed to score with (default: the recorded best).",
                       lower_bound=0, flag_values=fv)
  flags.DEFINE_enum("impute", "none", jobs.IMPUTE, "Feature ids the model reads that appear on no line of --data: "
                    "none = refuse to score, zero = score with them as 0 (said on stderr).", flag_values=fv)


def main(argv=None) -> int:
  fv = common.parse(define, sys.argv if argv is None else argv, ("model", "data", "out"), __doc__)

  def job() -> str:
    res = jobs.score_file(fv.model, fv.data, fv.out, fv.seed, fv.impute)
    warning = jobs.imputed_warning(res)
    if warning:
      print(warning, file=sys.stderr)
    return jobs.scores_text(res, fv.model, fv.data, fv.out)
  return common.run(job)


if __name__ == "__main__":
  sys.exit(main())
