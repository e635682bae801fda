"""--preset=paper_<dataset> end to end at toy size, on folders generated in each distribution's layout: MSLR-WEB30K
(Fold1-5, 136 dense features, trailing spaces), Yahoo Set 1 (set1.{train,valid,test}.txt, sparse lines, ids up to
700 with most absent), Istella (full/{train,test}.txt, 220 features, a 1e30 value)."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _lines(rng, queries: int, ids, sparse: bool, first: int = 0) -> str:
  """LETOR lines: `queries` groups of 12 documents, grades 0-4, six of them 4 (Eq. 2 makes a 4 positive with
  probability 3.9%: about one group in five has a positive)."""
  out = []
  for q in range(queries):
    qid = 1000 + 7 * (first + q)  # non-contiguous qids, as Web30k's
    for grade in [4] * 6 + list(rng.integers(0, 4, 6)):
      vals = rng.random(len(ids)) + 0.25 * grade
      feats = [(i, v) for i, v in zip(ids, vals) if not sparse or rng.random() < 0.7]
      out.append(f"{grade} qid:{qid} " + " ".join(f"{i}:{v:.4f}" for i, v in feats) + " ")
  return "\n".join(out) + "\n"


def write_layout(name: str, root, seed: int = 0) -> str:
  """A folder in `name`'s distribution layout; returns its --data_dir."""
  rng = np.random.default_rng(seed)
  if name == "web30k":
    blocks = [_lines(rng, 40, range(1, 137), False, 40 * b) for b in range(5)]  # S1-S5, rotated into the folds
    for k in range(5):
      fold = root / f"Fold{k + 1}"
      fold.mkdir(parents=True)
      order = [blocks[(k + j) % 5] for j in range(5)]
      (fold / "train.txt").write_text("".join(order[:3]))
      (fold / "vali.txt").write_text(order[3])
      (fold / "test.txt").write_text(order[4])
  elif name == "yahoo":
    ids = sorted(rng.choice(np.arange(1, 701), 60, replace=False))
    root.mkdir(parents=True)
    for split, q, first in (("train", 120, 0), ("valid", 40, 120), ("test", 40, 160)):
      (root / f"set1.{split}.txt").write_text(_lines(rng, q, ids, True, first))
  else:
    full = root / "full"
    full.mkdir(parents=True)
    for split, q, first in (("train", 120, 0), ("test", 40, 120)):
      text = _lines(rng, q, range(1, 221), False, first)
      (full / f"{split}.txt").write_text(re.sub(r" 7:[0-9.]+", " 7:1e30", text, count=1) if split == "train" else text)
    return str(full)
  return str(root)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["web30k", "yahoo", "istella"])
def test_the_paper_preset_runs_on_a_folder_in_the_distributions_layout(tmp_path, name):
  """Table 2 / Table 4's rows (the teachers beside them), both losses, 5 runs: Web30k's five folds one run each,
  Yahoo's and Istella's one split five runs."""
  runs = 5
  data = write_layout(name, tmp_path / "data")
  out = tmp_path / "results"
  p = subprocess.run([sys.executable, "-m", "experiments.paper.table2", f"--preset=paper_{name}", f"--data_dir={data}",
                      "--epochs=2", "--max_buckets=1", f"--out_dir={out}", "--notensorboard", "--compile_cache="],
                     cwd=ROOT, capture_output=True, text=True, timeout=1200)
  assert p.returncode == 0, p.stderr[-3000:]
  latest, = [os.path.join(out, d, "latest") for d in os.listdir(out)]
  assert os.path.basename(os.path.dirname(latest)).endswith("-paper")
  with open(os.path.join(latest, "results.json")) as f:
    res = json.load(f)
  for loss in ("rankbce", "ranknet"):
    folds = res["losses"][loss]["folds"].values()
    for fold in folds:
      assert set(fold["rows"]) == {"no_distill", "self_distill", "gend_teacher", "gend", "pfd_teacher", "pfd"}
    assert {sum(len(f["rows"][r]["best"]["test"]) for f in folds) for r in ("pfd", "no_distill")} == {runs}


def test_a_decisive_run_past_a_sitting_names_its_hours_on_two_cores():
  """An analogue's decisive run whose draws (at its pilot's seconds a draw) pass three hours on two cores says it needs
  an accelerator, with those hours: 466 draws x 275 s = 35.6 hours."""
  from experiments.framework import protocol
  assert protocol._two_cores(dict(draws=30, seconds_per_draw=300)) == (
      "a run of its own (minutes a draw on a 2-core CPU; it resumes by row), or a GPU")  # 2.5 hours
  text = protocol._two_cores(dict(draws=466, seconds_per_draw=275))
  assert text.startswith("an accelerator: about 36 hours on two cores") and "pilot's 275 s a draw" in text
  assert protocol.decisive_plan("web30k_like", "rankbce", root="/nonexistent") == {}
  assert protocol.decisive_draws("web30k_like", "rankbce", root="/nonexistent") == 0
