"""Scores a LETOR/SVMlight file with an exported pfd_jax student and ONNX Runtime alone (no JAX, no pfd_jax).

  python examples/serve_onnx.py EXPORT_DIR serve.txt scores.tsv

EXPORT_DIR holds model.onnx and serving.json (python -m experiments.export --format=onnx). Writes
qid<TAB>index within its query<TAB>score per line of the file, in file order (as experiments.predict).
"""
import json
import os
import sys

import numpy as np
import onnxruntime as ort
from sklearn.datasets import load_svmlight_file


def main(export_dir, data, out):
  spec = json.load(open(os.path.join(export_dir, "serving.json")))
  session = ort.InferenceSession(os.path.join(export_dir, spec["artifact"]))
  x, _, qid = load_svmlight_file(data, query_id=True, zero_based=False, n_features=max(spec["feature_ids"]))
  cols = np.asarray(x[:, np.asarray(spec["feature_ids"]) - 1].todense(), np.float32)  # the graph's columns
  starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]])
  with open(out, "w") as f:
    for a, b in zip(starts, np.r_[starts[1:], len(qid)]):  # one query per call: what a service sends
      scores = session.run(None, {session.get_inputs()[0].name: cols[a:b]})[0]
      f.writelines(f"{qid[a]}\t{i}\t{s!r}\n" for i, s in enumerate(scores.tolist()))


if __name__ == "__main__":
  main(*sys.argv[1:4])
