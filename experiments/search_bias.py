r"""The PFD search's claimed gains against fresh lists: how much of a candidate's gain is its selection's luck.

  python -m experiments.search_bias                    # 4 null and 4 planted folders, 2,000 fresh lists each
  python -m experiments.search_bias --folders=10 --out_dir=results/ten

On constructed practitioner folders (pfd_jax.data.constructed: null, privileged columns that carry nothing; planted,
one column that tells the relevance hidden from x) the search runs as table2's --search runs it (2 screening seeds,
patience 10, two stages, 3 cross-fitted folds). For the candidate it chose (when it chose one that distils) and for
the best one by its pooled score (chosen or not), this driver sets the gain the search read against the same models'
gain on fresh lists of the same folder, which the search never reads: the validation part's screened models (every
candidate's and no distillation's, the same seeds) scored on the fresh lists, relative to no distillation there.
claimed - fresh, over folders, is the bias of what the search reports; the fresh gain is that of the models the
validation part trained (fitted on every training list), so it measures selection, not a model trained otherwise.
Writes results/search_bias/constructed/{results.json, table.md}.
"""
from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np

from experiments.framework import lifecycle, practice, rundir, schema
from experiments.framework.schema import Preset
from experiments.framework.records import RunRecord
from pfd_jax.config import option
from pfd_jax.data import constructed
from pfd_jax.methods import search
from pfd_jax.training import TrainConfig
from pfd_jax.training.device import to_device

# The search as table2's --search runs it on a practitioner's folder (tests/search_folders.py reads these too).
CFG = TrainConfig(epochs=30, hidden=16, layers=3, select_on="vali", batch_size=25, lr=1e-2, lr_halve_every=10, ks=(8,))
OPTS = dict(seeds=2, patience=10, refine=1, folds=3)


@dataclasses.dataclass(frozen=True)
class Options:
  folders: int = option(4, "Constructed folders of each kind (null, planted).", lo=1)
  fresh_lists: int = option(2000, "Fresh lists per folder, never read by the search.", lo=10)
  first_seed: int = option(200, "The first folder's seed (folder i: first_seed + i).")
  epochs: int = option(CFG.epochs, "Epochs of every screened model (the search as table2 runs it: 30).", lo=1)


def one(cfg: TrainConfig, seed: int, gain: bool, fresh_lists: int) -> dict:
  ds = constructed.folder(seed, gain, test=fresh_lists)
  found = search.search(jax.random.split(jax.random.PRNGKey(0), 2), cfg, ds, lambda d: to_device(d, 1), **OPTS)
  return dict(seed=seed, kind="planted" if gain else "null", seconds=found.seconds, selection=found.selection,
              **practice.fresh_record(cfg, found, to_device(ds, 1).eval_sets["test"]))


def summary(rows: list) -> dict:
  """Per kind and candidate (the best, the chosen ones): the mean gains read and on fresh lists, on the validation
  part and pooled over every part, and each read - fresh with its standard error over folders."""
  out = {}
  for kind in ("null", "planted"):
    at = [r for r in rows if r["kind"] == kind]
    for which in ("best", "chosen"):
      got = [r[which] for r in at if r[which]]
      if not got:
        continue
      entry = dict(folders=len(got), of=len(at))
      for read, fresh in (("validation", "fresh_validation"), ("claimed", "fresh")):
        bias = np.array([g[read] - g[fresh] for g in got])
        entry[read] = dict(read=float(np.mean([g[read] for g in got])), fresh=float(np.mean([g[fresh] for g in got])),
                           bias=float(bias.mean()),
                           se=float(bias.std(ddof=1) / np.sqrt(bias.size)) if bias.size > 1 else None)
      out[f"{kind}/{which}"] = entry
  return out


def run(config: schema.Config) -> RunRecord:
  o, t0 = config.options, time.time()
  cfg = dataclasses.replace(CFG, epochs=o.epochs)
  rows = [one(cfg, o.first_seed + i, gain, o.fresh_lists) for gain in (False, True) for i in range(o.folders)]
  return RunRecord(config=config, env=rundir.environment(), rows=rows, summary=summary(rows),
                   fresh_lists=o.fresh_lists, search=dict(OPTS, epochs=o.epochs), seconds=time.time() - t0)


def to_markdown(res: RunRecord) -> str:
  pct = lambda x: f"{100 * x:+.1f}%"
  cell = lambda e: (f"{pct(e['read'])} / {pct(e['fresh'])} / {pct(e['bias'])}" +
                    ("" if e["se"] is None else f" ± {100 * e['se']:.1f}"))
  rows = [f"| {k} | {v['folders']} of {v['of']} | {cell(v['validation'])} | {cell(v['claimed'])} |"
          for k, v in res["summary"].items()]
  return ("# The PFD search's claimed gains against fresh lists\n\n"
          f"Constructed folders (pfd_jax.data.constructed: null, privileged columns that carry nothing; planted, one "
          f"column that tells the relevance hidden from x), searched as table2's --search searches "
          f"({res['search']['seeds']} screening seeds, {res['search']['epochs']} epochs, {res['search']['folds']} "
          f"cross-fitted folds); {res['fresh_lists']} fresh lists a folder, never read by the search; "
          f"{res['seconds']:.0f} s. Each cell: the chosen (or the best by pooled score) candidate's gain over no "
          "distillation as the search read it / the same screened models on the fresh lists / read - fresh (± SE "
          "over folders).\n\n"
          "| folders / candidate | folders | validation part | every part, pooled (the rule's estimate) |\n"
          "|---|---|---|---|\n" + "\n".join(rows) + "\n")


DRIVER = schema.Driver("search_bias", run, to_markdown, options=Options, groups=("output",),
                       folder=lambda cfg: "constructed", presets=(Preset(
                           "default", "constructed", "", "The PFD search's claimed gains against fresh lists "
                           "(constructed null and planted folders)"),))

if __name__ == "__main__":
  lifecycle.main(DRIVER)
