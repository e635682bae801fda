r"""Exports a saved MLP student as a graph a serving stack runs without Python or JAX (pfd_jax.serving.export).

  python -m experiments.export --model=results/table2/letor-logs_letor/latest/models/pfd --format=onnx --out=served
  python -m experiments.export --model=DIR --format=stablehlo --out=DIR --ensemble

Writes <out>/model.onnx (or model.stablehlo) and <out>/serving.json: the graph takes one query's raw documents
f32[n, D] (columns = serving.json's feature_ids in that order; n any size), applies the model's recipe
(query-level min-max, log1p) inside the graph and returns f32[n] logits. One seed (the recorded best, or
--seed) or the mean of every saved seed (--ensemble). pfd-serve-onnx scores a LETOR file with ONNX
Runtime alone.
"""
import dataclasses
from typing import Optional

from experiments.framework.records import RunRecord
from experiments.framework import lifecycle, schema
from pfd_jax.config import ConfigError, check, option
from pfd_jax.serving import jobs


@dataclasses.dataclass(frozen=True)
class Options:
  model: str = option("", "Saved model folder (model.json + params.msgpack).")
  format: str = option("onnx", "Graph format.", choices=("onnx", "stablehlo"))
  out: str = option("", "Folder to write the graph and serving.json to.")
  seed: Optional[int] = option(None, "Saved seed to export (default: the recorded best).", lo=0)
  ensemble: bool = option(False, "Export the mean logit of every saved seed instead of one seed.")

  def __post_init__(self):
    for name in ("model", "out"):
      if not getattr(self, name):
        raise ConfigError(name, "required")
    if self.ensemble and self.seed is not None:
      raise ConfigError("seed", "give --seed or --ensemble, not both")
    check(self)


def run(cfg: schema.Config) -> RunRecord:
  o = cfg.options
  return RunRecord(options=o, **jobs.export_model(o.model, o.out, o.format, o.seed, o.ensemble))


def to_markdown(res: RunRecord) -> str:
  return jobs.export_text(res, res["options"]["out"], res["options"]["format"])


DRIVER = schema.Driver("export", run, to_markdown, options=Options, groups=(), write=False)

if __name__ == "__main__":
  lifecycle.main(DRIVER)
