r"""Exports a saved MLP student as a graph a serving stack runs without Python or JAX (pfd_jax.serving.export).

  python -m experiments.export --model=results/table2/letor-logs_letor/latest/models/pfd --format=onnx --out=served
  python -m experiments.export --model=DIR --format=stablehlo --out=DIR --ensemble

Writes <out>/model.onnx (or model.stablehlo) and <out>/serving.json: the graph takes one query's raw documents
f32[n, D] (columns = serving.json's feature_ids in that order; n any size), applies the model's recipe
(query-level min-max, log1p) inside the graph and returns f32[n] logits. One seed (the recorded best, or
--seed) or the mean of every saved seed (--ensemble). examples/serve_onnx.py scores a LETOR file with ONNX
Runtime alone.
"""
import dataclasses
import os
from typing import Optional

from experiments.framework.records import RunRecord
from experiments.framework import lifecycle, schema
from pfd_jax.serving import export
from pfd_jax import serving
from pfd_jax.config import ConfigError, check, option


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
  ranker = serving.load_model(o.model)
  if o.seed is not None and o.seed >= ranker.num_seeds:
    raise ConfigError("seed", f"{o.seed}: the model holds seeds 0..{ranker.num_seeds - 1}")
  spec = export.export(ranker, o.out, o.format, o.seed, o.ensemble)
  return RunRecord(options=o, spec=spec, bytes=os.path.getsize(os.path.join(o.out, spec["artifact"])))


def to_markdown(res: RunRecord) -> str:
  o, spec = res["options"], res["spec"]
  who = "the mean of every seed" if spec["ensemble"] else f"seed {spec['seed']}"
  return (f"{os.path.join(o['out'], spec['artifact'])}: {res['bytes']:,} bytes ({o['format']}, {who}); input f32[n, "
          f"{len(spec['feature_ids'])}] with columns = feature ids {','.join(map(str, spec['feature_ids']))} "
          f"(also in {os.path.join(o['out'], export.SPEC_FILE)})")


DRIVER = schema.Driver("export", run, to_markdown, options=Options, groups=(), write=False)

if __name__ == "__main__":
  lifecycle.main(DRIVER)
