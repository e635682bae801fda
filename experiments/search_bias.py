r"""The PFD search's claimed gains against fresh lists: how much of a candidate's gain is its selection's luck.

  python -m experiments.search_bias                    # 4 null and 4 planted folders, 2,000 fresh lists each
  python -m experiments.search_bias --folders=10 --bias_out=results/search_bias/ten

On constructed practitioner folders (pfd_jax.data.constructed: null, privileged columns that carry nothing; planted,
one column that tells the relevance hidden from x) the search runs as table2's --search runs it (2 screening seeds,
patience 10, two stages, 3 cross-fitted folds). For the candidate it chose (when it chose one that distils) and for
the best one by its pooled score (chosen or not), this driver sets the gain the search read against the same models'
gain on fresh lists of the same folder, which the search never reads: the validation part's screened models (every
candidate's and no distillation's, the same seeds) scored on the fresh lists, relative to no distillation there.
claimed - fresh, over folders, is the bias of what the search reports; the fresh gain is that of the models the
validation part trained (fitted on every training list), so it measures selection, not a model trained otherwise.
Writes <bias_out>/results.json and <bias_out>/table.md.
"""
from __future__ import annotations

import json
import os
import time

import jax
import numpy as np
from absl import app, flags

from pfd_jax.data import constructed
from pfd_jax.methods import search
from pfd_jax.ops import choice
from pfd_jax.training import TrainConfig
from pfd_jax.training.device import to_device
from pfd_jax.training.evaluation import per_list_ndcg

flags.DEFINE_integer("folders", 4, "Constructed folders of each kind (null, planted).", lower_bound=1)
flags.DEFINE_integer("fresh_lists", 2000, "Fresh lists per folder, never read by the search.", lower_bound=10)
flags.DEFINE_integer("first_seed", 200, "The first folder's seed (folder i: first_seed + i).")
flags.DEFINE_string("bias_out", "results/search_bias/latest", "Folder to write results.json and table.md to.")

# The search as table2's --search runs it on a practitioner's folder (tests/search_folders.py reads these too).
CFG = TrainConfig(epochs=30, hidden=16, layers=3, select_on="vali", batch_size=25, lr=1e-2, lr_halve_every=10, ks=(8,))
OPTS = dict(seeds=2, patience=10, refine=1, folds=3)


def measured(found: search.Search, fresh, candidate: search.Candidate) -> dict:
  """A candidate's gain over no distillation as the search read it (pooled over every part, and on the validation
  part alone) against the same models' gain on the fresh lists (pooled with the same part weights, and the
  validation part's alone), each relative to no distillation's mean."""
  lists = lambda model: per_list_ndcg(CFG, model.params, fresh, "x")
  base, cand, ok = [], [], None
  for b, c in zip(found.models[search.Candidate()], found.models[candidate]):
    got, ok = lists(b)
    base.append(float(got[:, ok].mean()))
    cand.append(float(lists(c)[0][:, ok].mean()))
  w = choice.by_lists(found.scores[search.Candidate()])
  pooled = lambda v: float(np.dot(w, v) / w.sum())
  scored = found.scores[search.Candidate()][0]
  est = found.estimates[candidate]
  return dict(candidate=candidate.label, claimed=float(est.diff / est.reference),
              validation=float((found.scores[candidate][0] - scored).mean() / scored.mean()),
              fresh_validation=(cand[0] - base[0]) / base[0],
              fresh=(pooled(cand) - pooled(base)) / pooled(base),
              fresh_lists=int(ok.sum()))


def one(seed: int, gain: bool, fresh_lists: int) -> dict:
  ds = constructed.folder(seed, gain, test=fresh_lists)
  found = search.search(jax.random.split(jax.random.PRNGKey(0), 2), CFG, ds, lambda d: to_device(d, 1), **OPTS)
  fresh = to_device(ds, 1).eval_sets["test"]
  best = max((c for c in found.choice["means"] if c.columns), key=found.choice["means"].get)
  chosen = found.candidate
  return dict(seed=seed, kind="planted" if gain else "null", seconds=found.seconds,
              selection=found.selection,
              best=measured(found, fresh, best), chosen=measured(found, fresh, chosen) if chosen.columns else None)


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
                           se=float(bias.std(ddof=1) / np.sqrt(bias.size)) if bias.size > 1 else float("nan"))
      out[f"{kind}/{which}"] = entry
  return out


def to_markdown(res: dict) -> str:
  pct = lambda x: f"{100 * x:+.1f}%"
  cell = lambda e: f"{pct(e['read'])} / {pct(e['fresh'])} / {pct(e['bias'])} ± {100 * e['se']:.1f}"
  rows = [f"| {k} | {v['folders']} of {v['of']} | {cell(v['validation'])} | {cell(v['claimed'])} |"
          for k, v in res["summary"].items()]
  return ("# The PFD search's claimed gains against fresh lists\n\n"
          f"{res['fresh_lists']} fresh lists a folder; commit {res['commit']}; {res['seconds']:.0f} s. Each cell: the "
          "gain the search read / the same models on fresh lists / read - fresh (± SE over folders).\n\n"
          "| folders / candidate | folders | validation part | every part, pooled (the rule's estimate) |\n"
          "|---|---|---|---|\n" + "\n".join(rows) + "\n")


def main(argv):
  del argv
  f = flags.FLAGS
  t0, rows = time.time(), []
  for gain in (False, True):
    for i in range(f.folders):
      rows.append(one(f.first_seed + i, gain, f.fresh_lists))
      print(json.dumps(rows[-1]), flush=True)
  commit = os.popen("git rev-parse --short HEAD 2>/dev/null").read().strip() or "unknown"
  res = dict(rows=rows, summary=summary(rows), fresh_lists=f.fresh_lists, commit=commit, seconds=time.time() - t0,
             config=dict(folders=f.folders, first_seed=f.first_seed, opts=OPTS))
  os.makedirs(f.bias_out, exist_ok=True)
  with open(os.path.join(f.bias_out, "results.json"), "w") as fh:
    json.dump(res, fh, indent=1)
  with open(os.path.join(f.bias_out, "table.md"), "w") as fh:
    fh.write(to_markdown(res))
  print(to_markdown(res))


if __name__ == "__main__":
  app.run(main)
