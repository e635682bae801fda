r"""Table 1 of the paper for any loadable dataset: features, query groups, docs/query, % positive groups.

  python -m experiments.paper.data_summary --dataset=ohsumed
  python -m experiments.paper.data_summary --dataset=synthetic --synthetic_web30k
"""
import time

from experiments.framework.records import RunRecord
from experiments.framework import fold_data, lifecycle, rundir, schema, tabulate
from experiments.framework.schema import Preset
from pfd_jax import data as data_lib


def run(cfg: schema.Config) -> RunRecord:
  out = {}
  for fold in fold_data.folds_of(cfg.data):
    t0 = time.time()
    ds = fold_data.load_dataset(cfg.data, fold)
    s = data_lib.summary(ds, cfg.data.max_buckets)
    s["load_seconds"] = time.time() - t0
    out[f"fold{fold}"] = s
  return RunRecord(config=cfg, env=rundir.environment(), folds=out)  # env: the page's configuration column


def to_markdown(res: RunRecord) -> str:
  name = res["config"]["data"]["dataset"]
  rows = []
  for fold, s in res["folds"].items():
    sp = s["splits"]
    cell = lambda k, fmt: " / ".join(fmt.format(sp[x][k]) for x in sp)
    zero = s.get("zero_columns")  # absent from a summary made before it was counted
    rows.append([fold, s["regular_features"], s["privileged_features"],
                 "" if zero is None else f"{zero['regular']} / {zero['privileged']}", " / ".join(sp),
                 cell("query_groups", "{}"), cell("docs_per_query", "{:.2f}"),
                 cell("positive_groups_pct", "{:.2f}%"), cell("padding_ratio", "{:.3f}")])
  cfg = next(iter(res["folds"].values()))["config"]
  head = (f"Dataset **{name}** (t={cfg['t']}, tau_target={cfg['tau']}, min_docs={cfg['min_docs']}, "
          f"log1p={cfg['log1p']}, query_norm={cfg['query_norm']}, label seed={cfg['seed']}, "
          f"privileged split on {cfg['reference_split']})\n\n")
  return head + tabulate.markdown_table(
      ["fold", "regular", "privileged", "all-zero columns (regular / privileged)", "splits", "query groups", "docs / query", "% positive groups",
       "padded / real"], rows)


DRIVER = schema.Driver("data_summary", run, to_markdown, groups=("data", "output"), needs_privileged=False,
                       defaults=(("max_buckets", 8),),
                       presets=(Preset("default", "synthetic", "", "Data summary (Table 1 columns)"),))

if __name__ == "__main__":
  lifecycle.main(DRIVER)
