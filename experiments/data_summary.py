r"""Table 1 of the paper for any loadable dataset: features, query groups, docs/query, % positive groups.

  python -m experiments.data_summary --dataset=ohsumed
  python -m experiments.data_summary --dataset=synthetic --synthetic_web30k
"""
import os
import time

from absl import app, flags

from experiments import common
from pfd_jax import data as D

common.define_data_flags()
common.flag(flags.DEFINE_string, "out_dir", None, "Output root (default results/data_summary/).")
common.flag(flags.DEFINE_integer, "max_buckets", 8, "Length buckets.")
FLAGS = flags.FLAGS


def run(cfg: dict, max_buckets: int = 8) -> dict:
  out = {}
  for fold in common.folds_of(cfg):
    t0 = time.time()
    ds = common.load_dataset(cfg, fold)
    s = D.summary(ds, max_buckets)
    s["load_seconds"] = time.time() - t0
    out[f"fold{fold}"] = s
  return out


def to_markdown(name: str, res: dict) -> str:
  rows = []
  for fold, s in res.items():
    sp = s["splits"]
    cell = lambda k, fmt: " / ".join(fmt.format(sp[x][k]) for x in sp)
    rows.append([fold, s["regular_features"], s["privileged_features"], " / ".join(sp),
                 cell("query_groups", "{}"), cell("docs_per_query", "{:.2f}"),
                 cell("positive_groups_pct", "{:.2f}%"), cell("padding_ratio", "{:.3f}")])
  cfg = next(iter(res.values()))["config"]
  head = (f"Dataset **{name}** (t={cfg['t']}, tau_target={cfg['tau']}, min_docs={cfg['min_docs']}, "
          f"log1p={cfg['log1p']}, query_norm={cfg['query_norm']}, label seed={cfg['seed']}, "
          f"privileged split on {cfg['reference_split']})\n\n")
  return head + common.markdown_table(
      ["fold", "regular", "privileged", "splits", "query groups", "docs / query", "% positive groups",
       "padded / real"], rows)


def main(argv):
  del argv
  cfg = common.data_config_from_flags(needs_privileged=False)
  res = run(cfg, FLAGS.max_buckets)
  md = to_markdown(cfg["dataset"], res)
  out = common.out_root("data_summary")
  common.write_json(os.path.join(out, f"{cfg['dataset']}.json"), res)
  common.write_text(os.path.join(out, f"{cfg['dataset']}.md"), md)
  print(md)


if __name__ == "__main__":
  app.run(main)
