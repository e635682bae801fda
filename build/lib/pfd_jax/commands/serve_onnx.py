"""pfd-serve-onnx: scores a LETOR/SVMlight file with an exported student and ONNX Runtime alone (no JAX imported).

  pfd-serve-onnx --export=served --data=serve.txt --out=scores.tsv

--export holds model.onnx and serving.json (pfd-export --format=onnx). Writes qid<TAB>index within its
query<TAB>score per line of the file, in file order (as pfd-predict), one query a call (what a service sends).
Refused in one line, before anything is written: a file in which one of the graph's columns is on no line (each
named: another feature set, or a column lost on the way), or that holds ids the model was never trained on
(privileged ids left in are ignored, and said on stderr). Needs ONNX Runtime: pip install "pfd_jax[export]".
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np
from absl import flags

from pfd_jax.commands import main as common


def define(fv: flags.FlagValues) -> None:
  flags.DEFINE_string("export", "", "Folder of the exported graph (model.onnx + serving.json).", flag_values=fv)
  flags.DEFINE_string("data", "", "LETOR/SVMlight file to score (labelled lines, .txt or .gz).", flag_values=fv)
  flags.DEFINE_string("out", "", "Score file to write (qid, index within query, score; tab-separated).",
                      flag_values=fv)


def columns(spec: dict, x, data: str) -> tuple:
  """(f32[N, D] the graph's columns of the parsed file `x` (CSR, 1-based ids as columns 0..), the privileged ids
  left in the file); a ValueError naming the file for a column on no line or an id the model never saw."""
  ids, privileged = list(spec["feature_ids"]), set(spec.get("privileged_ids", ()))
  present = set((np.unique(x.indices) + 1).tolist())  # ids written on some line (an explicit 0 too)
  missing = [i for i in ids if i not in present]
  if missing:
    raise ValueError(f"{data}: the graph reads feature ids {','.join(map(str, missing))} that appear on no line of "
                     "this file (another feature set?)")
  unknown = sorted(present - set(ids) - privileged)
  if unknown:
    raise ValueError(f"{data}: feature ids {','.join(map(str, unknown))} were never seen by the model (it was "
                     f"trained on ids {','.join(map(str, sorted(set(ids) | privileged)))}): another feature set?")
  cols = np.asarray(x[:, np.asarray(ids) - 1].todense(), np.float32)
  return cols, sorted(present & privileged - set(ids))


def serve(export: str, data: str, out: str) -> str:
  """Scores `data` with the graph in `export` into `out` (written through a temporary file); its summary line."""
  import onnxruntime as ort
  from sklearn.datasets import load_svmlight_file
  spec = json.load(open(os.path.join(export, "serving.json")))
  session = ort.InferenceSession(os.path.join(export, spec["artifact"]))
  x, _, qid = load_svmlight_file(data, query_id=True, zero_based=False)
  cols, left_in = columns(spec, x, data)
  if left_in:
    print(f"warning: the file holds privileged feature ids {','.join(map(str, left_in))}, which the graph does not "
          "read (a serving file has none: is this a training file?)", file=sys.stderr)
  starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]])
  with open(out + ".tmp", "w") as f:
    for a, b in zip(starts, np.r_[starts[1:], len(qid)]):
      scores = session.run(None, {session.get_inputs()[0].name: cols[a:b]})[0]
      f.writelines(f"{qid[a]}\t{i}\t{s!r}\n" for i, s in enumerate(scores.tolist()))
  os.replace(out + ".tmp", out)
  return f"{out}: {len(qid)} documents in {len(starts)} queries scored by {os.path.join(export, spec['artifact'])}"


def main(argv=None) -> int:
  fv = common.parse(define, sys.argv if argv is None else argv, ("export", "data", "out"), __doc__)
  return common.run(lambda: serve(fv.export, fv.data, fv.out))


if __name__ == "__main__":
  sys.exit(main())
