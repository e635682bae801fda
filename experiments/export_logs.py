r"""Writes the Table 3 log simulator's sessions as a LETOR folder: PFD on "your own data", runnable here.

  python -m experiments.export_logs --out=logs_letor

Writes ``<out>/{train,vali,test}.txt`` (label = purchase; ids 1..20 the regular features; 21 = log2(1 +
shown position), 22 = click, 23 = add-to-cart: the privileged features, known in logs but not when serving;
with --random_share, 24 = randomised session)
and ``<out>/serve.txt``: the test sessions as a serving system sees them, without ids 21-23 (labels kept,
so that experiments.predict can report NDCG). qids: training sessions 0.., validation 100000..,
test 200000... Then (docs/own-data.md):

  python -m experiments.paper.table2 --dataset=letor --data_dir=logs_letor --privileged=21,22,23 --save_models
  python -m experiments.predict --model=results/table2/letor-logs_letor/latest/models/pfd --data=logs_letor/serve.txt \
      --out=scores.tsv
"""
import dataclasses
import os

from experiments.framework.records import RunRecord
from experiments.framework import lifecycle, schema
from pfd_jax.data.logs import SimulatorOptions
from pfd_jax import files
from pfd_jax.config import option
from pfd_jax.data import logs

QID_OFFSET = {"train": 0, "vali": 100000, "test": 200000}


@dataclasses.dataclass(frozen=True)
class Options(SimulatorOptions):
  out: str = option("logs_letor", "Folder to write.")
  eta: float = option(1.0, "Position-bias strength (examination k^-eta).", lo=0, omit_default=True)
  random_share: float = option(0.0, "Share of sessions shown in random order (> 0 adds id 24, 1 on their items: "
                               "table2 --randomized=24).", lo=0, hi=1, omit_default=True)


def write_folder(out: str, ds) -> dict:
  """{file name: lines} written under `out` (each file via a temporary name, then renamed)."""
  os.makedirs(out, exist_ok=True)
  texts = {f"{s}.txt": list(logs.to_letor_lines(ds[s], QID_OFFSET[s])) for s in ("train", "vali", "test")}
  texts["serve.txt"] = list(logs.to_letor_lines(ds["test"], QID_OFFSET["test"], privileged=False))
  for name, lines in texts.items():
    files.write_atomic(os.path.join(out, name), "".join(lines))
  return {k: len(v) for k, v in texts.items()}


def run(cfg: schema.Config) -> RunRecord:
  o = cfg.options
  ds = logs.simulate(sessions=o.sessions, seed=o.sim_seed, eta=o.eta, random_share=o.random_share)
  n = ds.config["num_regular"]
  names = {"add_to_cart": "add-to-cart"}
  return RunRecord(config=cfg, written=o.out, lines=write_folder(o.out, ds), num_regular=n,
              privileged={n + 1 + i: names.get(p, p) for i, p in enumerate(ds.config["privileged"])})


def to_markdown(res: RunRecord) -> str:
  n = res["num_regular"]
  return (f"{res['written']}: " + ", ".join(f"{k} {v} lines" for k, v in res["lines"].items()) +
          f"; labels = purchase; regular ids 1-{n}; privileged ids " +
          ", ".join(f"{k} {v}" for k, v in res["privileged"].items()) + " (absent from serve.txt)")


DRIVER = schema.Driver("export_logs", run, to_markdown, options=Options, groups=(), write=False)

if __name__ == "__main__":
  lifecycle.main(DRIVER)
