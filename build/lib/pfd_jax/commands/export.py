"""pfd-export: writes a saved MLP as a serving graph (:func:`pfd_jax.serving.jobs.export_model`).

  pfd-export --model=DIR --out=served [--format=onnx|stablehlo] [--seed=N | --ensemble]

Writes <out>/model.onnx (or model.stablehlo) and <out>/serving.json; the graph takes one query's raw documents
f32[n, D] (columns: serving.json's feature_ids) and returns f32[n] logits. ONNX needs the export extra
(pip install "pfd_jax[export]")."""
from __future__ import annotations

import sys

from absl import flags

from pfd_jax.commands import main as common
from pfd_jax.serving import jobs


def define(fv: flags.FlagValues) -> None:
  flags.DEFINE_string("model", "", "Saved model folder (model.json + params.msgpack).", flag_values=fv)
  flags.DEFINE_string("out", "", "Folder to write the graph and serving.json to.", flag_values=fv)
  flags.DEFINE_enum("format", "onnx", ("onnx", "stablehlo"), "Graph format.", flag_values=fv)
  flags.DEFINE_integer("seed", None, "Saved seed to export (default: the recorded best).", lower_bound=0,
                       flag_values=fv)
  flags.DEFINE_bool("ensemble", False, "Export the mean logit of every saved seed instead of one seed.",
                    flag_values=fv)


def main(argv=None) -> int:
  fv = common.parse(define, sys.argv if argv is None else argv, ("model", "out"), __doc__)

  def job() -> str:
    return jobs.export_text(jobs.export_model(fv.model, fv.out, fv.format, fv.seed, fv.ensemble), fv.out, fv.format)
  return common.run(job)


if __name__ == "__main__":
  sys.exit(main())
