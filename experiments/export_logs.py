r"""Writes the Table 3 log simulator's sessions as a LETOR folder: PFD on "your own data", runnable here.

  python -m experiments.export_logs --out=logs_letor

Writes ``<out>/{train,vali,test}.txt`` (label = purchase; ids 1..20 the regular features; 21 = log2(1 +
shown position), 22 = click, 23 = add-to-cart: the privileged features, known in logs but not when serving)
and ``<out>/serve.txt``: the test sessions as a serving system sees them, without ids 21-23 (labels kept,
so that experiments.predict can report NDCG). qids: training sessions 0.., validation 100000..,
test 200000... Then (README, "PFD on your own data"):

  python -m experiments.table2 --dataset=letor --data_dir=logs_letor --privileged=21,22,23 --save_models
  python -m experiments.predict --model=results/table2/letor/models/rankbce/pfd --data=logs_letor/serve.txt \
      --out=scores.tsv
"""
import os

from absl import app, flags

from experiments import common
from pfd_jax.data import logs

common.flag(flags.DEFINE_string, "out", "logs_letor", "Folder to write.")
common.flag(flags.DEFINE_list, "sessions", ["800", "200", "800"], "Simulated sessions in train, vali, test.")
common.flag(flags.DEFINE_integer, "sim_seed", 0, "Seed of the log simulator.")
FLAGS = flags.FLAGS

QID_OFFSET = {"train": 0, "vali": 100000, "test": 200000}


def write_folder(out: str, ds) -> dict:
  """{file name: lines} written under `out` (each file via a temporary name, then renamed)."""
  os.makedirs(out, exist_ok=True)
  files = {f"{s}.txt": list(logs.to_letor_lines(ds[s], QID_OFFSET[s])) for s in ("train", "vali", "test")}
  files["serve.txt"] = list(logs.to_letor_lines(ds["test"], QID_OFFSET["test"], privileged=False))
  for name, lines in files.items():
    tmp = os.path.join(out, name + ".tmp")
    with open(tmp, "w") as f:
      f.writelines(lines)
    os.replace(tmp, os.path.join(out, name))
  return {k: len(v) for k, v in files.items()}


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments {argv[1:]}")
  try:
    sessions = tuple(int(s) for s in FLAGS.sessions)
  except ValueError:
    raise app.UsageError(f"--sessions={','.join(FLAGS.sessions)}: three integers expected") from None
  if len(sessions) != 3 or min(sessions) < 1:
    raise app.UsageError(f"--sessions={','.join(FLAGS.sessions)}: three positive integers expected")
  ds = logs.simulate(sessions=sessions, seed=FLAGS.sim_seed)
  counts = write_folder(FLAGS.out, ds)
  n = ds.config["num_regular"]
  print(f"{FLAGS.out}: " + ", ".join(f"{k} {v} lines" for k, v in counts.items()) +
        f"; labels = purchase; regular ids 1-{n}; privileged ids {n + 1} position, {n + 2} click, "
        f"{n + 3} add-to-cart (absent from serve.txt)")


if __name__ == "__main__":
  app.run(main)
