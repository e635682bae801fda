"""Multi-process runs: per-process shards of LETOR files, Gumbel draws at offsets, and 2 processes on loopback
against one process."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from experiments import launch
from pfd_jax import data as data_lib
from pfd_jax.data import letor
from pfd_jax.data import preprocess as pp

from conftest import CACHE


def _write_letor(path, rng, queries=23):
  lines = []
  for q in range(queries):
    for _ in range(int(rng.integers(1, 9))):  # lists of 1-8 lines: many queries cross a shard boundary
      feats = " ".join(f"{j}:{rng.normal():.4f}" for j in range(1, 6) if rng.random() < 0.8)
      lines.append(f"{int(rng.integers(0, 3))} qid:{1000 + q} {feats}\n")
  with open(path, "w") as f:
    f.writelines(lines)


@pytest.mark.parametrize("count", [1, 2, 3, 5, 8, 40])
def test_shards_partition_a_file(tmp_path, count):
  path = str(tmp_path / "train.txt")
  _write_letor(path, np.random.default_rng(count))
  whole = letor.load_letor(path)
  shards = [letor.load_letor_shard(path, i, count) for i in range(count)]
  width = whole.x.shape[1]
  shards = [letor.pad_features({"s": g}, width)["s"] for g in shards]
  assert sum(g.num_queries for g in shards) == whole.num_queries  # each query in exactly one shard
  np.testing.assert_array_equal(np.concatenate([g.qid for g in shards]), whole.qid)
  np.testing.assert_array_equal(np.concatenate([g.x for g in shards]), whole.x)
  np.testing.assert_array_equal(np.concatenate([g.rel for g in shards]), whole.rel)
  if count > 1:
    assert max(g.num_docs for g in shards) < whole.num_docs  # nobody holds the whole file


def test_gumbel_draws_at_offsets_equal_the_whole_split():
  g = data_lib.synthetic.generate(num_queries=(30, 5, 5), mean_docs=12.0)["train"]
  seed = [3, 99]
  whole = pp.with_labels(g, np.random.default_rng(seed), t=4.0, tau=3.0)
  cut = [0, 7, 19, 30]
  parts = [pp.with_labels_at(g.take(np.arange(a, b)), seed, int(g.offsets[a]), g.num_docs, t=4.0, tau=3.0)
           for a, b in zip(cut[:-1], cut[1:])]
  for f in ("g0", "g1", "y"):
    np.testing.assert_array_equal(np.concatenate([getattr(p, f) for p in parts]), getattr(whole, f))


def test_launcher_commands():
  cmds = launch.commands(["experiments.paper.table2", "--epochs=2"], 3, 1234)
  assert [c[-3:] for c in cmds] == [["--coordinator=127.0.0.1:1234", "--num_processes=3", f"--process_id={i}"]
                                    for i in range(3)]
  # the launcher's short local timeouts come before the driver's own flags, so that the user's win
  assert all(c[1:6] == ["-m", "experiments.paper.table2", *launch.LOCAL_TIMEOUTS, "--epochs=2"] for c in cmds)


def _run(args, cwd):
  r = subprocess.run([sys.executable, "-m"] + args, cwd=cwd, capture_output=True, text=True, timeout=300)
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
  return r.stdout + r.stderr


@pytest.mark.slow
@pytest.mark.long
def test_two_processes_equal_one(tmp_path):
  """table2 (Gumbel labels, automatic privileged split, a teacher and its student) as 2 processes on
  loopback: the same losses, curves and best epochs as one process within float tolerance, each process
  holding about half of every split; and as 2 processes each streaming its share from its own shards: the
  2-process resident run's bits."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  # the suite's shared compilation cache (conftest.CACHE): the streamed run loads the 2-process run's programs
  flags = ["--epochs=2", "--seeds=2", "--loss=rankbce", "--methods=no_distill,pfd", f"--compile_cache={CACHE}",
           "--synthetic_queries=80,40,80", "--max_buckets=2"]
  _run(["experiments.paper.table2", *flags, f"--out_dir={tmp_path / 'one'}"], root)
  log = _run(["experiments.launch", "--num_processes=2", "--", "experiments.paper.table2", *flags,
              f"--out_dir={tmp_path / 'two'}"], root)
  held = re.findall(r"\[p(\d)\].*process \d of 2 holds train (\d+)/(\d+) groups (\d+)/(\d+) documents", log)
  assert sorted(h[0] for h in held) == ["0", "1"]
  for _, q, q_all, n, n_all in held:
    assert int(q_all) == 80 and 0 < int(q) < 80 and int(n) < int(n_all)
  assert sum(int(h[1]) for h in held) == 80
  _run(["experiments.launch", "--num_processes=2", "--", "experiments.paper.table2", *flags, "--data_source=streamed",
        f"--shard_dir={tmp_path / 'shards'}", f"--out_dir={tmp_path / 'streamed'}"], root)
  assert sorted(os.listdir(tmp_path / "shards")) == [d for d in sorted(os.listdir(tmp_path / "shards")) if "-p" in d]
  assert len(os.listdir(tmp_path / "shards")) == 2  # each process wrote, and streams, its own share
  one, two, streamed = (json.load(open(tmp_path / d / "synthetic" / "latest" / "results.json"))
                        for d in ("one", "two", "streamed"))
  rows_s = streamed["losses"]["rankbce"]["folds"]["fold1"]["rows"]
  rows1, rows2 = (r["losses"]["rankbce"]["folds"]["fold1"]["rows"] for r in (one, two))
  assert set(rows1) == set(rows2) == {"no_distill", "pfd_teacher", "pfd"}
  for row in rows1:
    np.testing.assert_allclose(rows2[row]["loss"], rows1[row]["loss"], rtol=1e-5)
    np.testing.assert_allclose(rows2[row]["curves"]["test"], rows1[row]["curves"]["test"], atol=1e-6)
    assert rows2[row]["best_epoch"] == rows1[row]["best_epoch"]
    for k in ("loss", "curves", "best_epoch"):  # streamed windows: the resident run's arithmetic, its bits
      assert rows_s[row][k] == rows2[row][k]


def test_one_process_drivers_refuse_several(tmp_path):
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  r = subprocess.run([sys.executable, "-m", "experiments.related.rank_distill", "--num_processes=2", "--process_id=1",
                      f"--out_dir={tmp_path}"], cwd=root, capture_output=True, text=True, timeout=120)
  assert r.returncode == 2 and "runs in one process only" in r.stderr and "table2" in r.stderr
