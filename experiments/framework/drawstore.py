"""Draws that outlive the machine: each finished draw of a deciding run (one fold of a run that re-draws its data,
--draws) written as a small gzipped record, ``published/draws/<name>/<loss>/draw-<k>.json.gz``, and committed to
the repository as it ends (``--draw_store=<name>``), so that the run continues later on any machine, and a look at
its claims reads only what is committed (:func:`committed`: the files of HEAD, not the working tree).

A record holds what a claim and the table read of a draw: per row its best epoch and best-epoch metrics, its
seconds, and each test and validation list's NDCG (the lists with a positive, float32 exactly, base64; validation's
in records made since it was kept); the draw's data recipe
(with its fingerprint), training groups, seconds and machine; and the recipe key (:func:`recipe_key`): the run's
configuration less its draw count, its rows (--methods, --baseline), its output and this store, so that draws of one recipe never mix with
another's and a change of code alone (which moves the run folder's hash) strands none of them.

A draw's rows are its record's: every row trains from the draw's data and the run's seed keys alone (no row's
result depends on which others run), so a run continues with fewer rows once the claims that need the others are
decided (``--methods``, ``--nobaseline``: a decided comparison stops needing its rows), reading of each committed draw the rows it
asks for; it refuses a draw that lacks one of them, naming its file."""
from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import platform
import subprocess
from typing import Dict, Optional

import numpy as np
from absl import logging

from experiments.framework.records import FoldRecord, RowRecord
from pfd_jax import config as config_lib
from pfd_jax.config import JsonObject

FOLDER = os.path.join("published", "draws")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout the driver runs from


def recipe_key(cfg) -> str:
  """16 hex digits of the configuration that makes a draw: cfg (a schema.Config) less its draw count, its rows
  (--methods, --baseline), its output and --draw_store."""
  d = config_lib.to_dict(cfg)
  d.pop("output", None)
  d.get("data", {}).pop("draws", None)
  for option in ("draw_store", "methods", "baseline"):
    d.get("options", {}).pop(option, None)
  return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _pack(values) -> str:
  return base64.b64encode(np.asarray(values, "<f4").tobytes()).decode()


def _unpack(text: str) -> np.ndarray:
  return np.frombuffer(base64.b64decode(text), "<f4").copy()


def _plain(v):
  return np.asarray(v).tolist() if isinstance(v, (np.ndarray, np.generic)) else v


def to_record(fold: FoldRecord, key: str, machine: Optional[JsonObject] = None) -> JsonObject:
  """A finished draw's record (module docstring)."""
  valid = np.asarray(fold.test_lists_valid, bool)
  rows = {name: dict(best={s: _plain(v) for s, v in r.best.items()}, best_epoch=_plain(r.best_epoch),
                     seconds=float(r.seconds), test=_pack(np.asarray(r.test_lists)[valid]),
                     **({} if r.vali_lists is None else dict(vali=_pack(r.vali_lists))))
          for name, r in fold.rows.items()}
  return dict(recipe=key, data=fold.data, train_groups=int(fold.train_groups),
              positive_train_groups=int(fold.positive_train_groups), seconds=float(fold.seconds),
              machine=machine or dict(host=platform.node(), processor=platform.processor() or platform.machine(),
                                      cpus=os.cpu_count()), rows=rows)


def from_record(d: JsonObject) -> FoldRecord:
  """The FoldRecord a record keeps: every row's per-list test NDCG over the lists with a positive (so its valid
  mask is all true), no curves."""
  rows = {name: RowRecord(best=r["best"], best_epoch=r["best_epoch"], seconds=r["seconds"],
                         test_lists=_unpack(r["test"]), vali_lists=_unpack(r["vali"]) if "vali" in r else None)
          for name, r in d["rows"].items()}
  n = next(iter(rows.values())).test_lists.size if rows else 0
  return FoldRecord(rows=rows, data=d["data"], train_groups=d["train_groups"],
                    positive_train_groups=d["positive_train_groups"], seconds=d["seconds"],
                    test_lists_valid=np.ones(n, bool))


def path(root: str, name: str, loss: str, draw: int) -> str:
  return os.path.join(root, FOLDER, name, loss, f"draw-{draw:04d}.json.gz")


def write(file: str, record: JsonObject) -> str:
  """Writes `record` gzipped (no time stamp: the same record gives the same bytes) through a temporary file."""
  os.makedirs(os.path.dirname(file), exist_ok=True)
  tmp = file + ".tmp"
  with open(tmp, "wb") as f:
    f.write(gzip.compress(json.dumps(record, sort_keys=True).encode(), mtime=0))
  os.replace(tmp, file)
  return file


def _git(root: str, *args: str, data: bool = False):
  out = subprocess.run(["git", "-C", root, *args], capture_output=True, check=False)
  if out.returncode:
    raise RuntimeError(f"git {' '.join(args)} in {root}: {out.stderr.decode().strip()}")
  return out.stdout if data else out.stdout.decode()


def commit(root: str, file: str, message: str) -> str:
  """Commits `file` alone (other staged changes stay staged, uncommitted); its commit's hash."""
  rel = os.path.relpath(file, root)
  _git(root, "add", "--", rel)
  _git(root, "commit", "-q", "--only", "-m", message, "--", rel)
  return _git(root, "rev-parse", "HEAD").strip()


def committed(root: str, name: str, loss: str, key: Optional[str] = None) -> Dict[int, JsonObject]:
  """{draw: record} of the draws committed at HEAD under `name`/`loss` (key: refuse a record of another recipe,
  naming its file)."""
  folder = os.path.relpath(os.path.dirname(path(root, name, loss, 1)), root)
  try:
    files = _git(root, "ls-tree", "-r", "--name-only", "HEAD", "--", folder).split()
  except RuntimeError:  # not a checkout, or no commit yet
    return {}
  out = {}
  for f in sorted(files):
    base = os.path.basename(f)
    if not (base.startswith("draw-") and base.endswith(".json.gz")):
      continue
    record = json.loads(gzip.decompress(_git(root, "show", f"HEAD:{f}", data=True)))
    if key is not None and record["recipe"] != key:
      raise config_lib.ConfigError("draw_store", f"{f} is a draw of another recipe ({record['recipe']}, this run's "
                                   f"{key}): name another store, or remove that folder")
    out[int(base[5:-8])] = record
  return out


def kept(cfg, loss: str, methods=None) -> Dict[int, JsonObject]:
  """The draws of cfg's --draw_store committed at HEAD for `loss` (a run reads them instead of training them), each
  with the rows named in `methods` only (None: all of its rows); {} without the store. A draw without one of them is
  refused by its file name (the run would train it again and replace a committed draw)."""
  name = getattr(cfg.options, "draw_store", "")
  if not name:
    return {}
  if not cfg.data.draws:
    raise config_lib.ConfigError("draw_store", "keeps the draws of a run that re-draws its data: add --draws")
  out = committed(ROOT, name, loss, recipe_key(cfg))
  for k, record in out.items() if methods is not None else ():
    lacking = [m for m in methods if m not in record["rows"]]
    if lacking:
      raise config_lib.ConfigError("methods", f"{os.path.relpath(path(ROOT, name, loss, k), ROOT)} was made without "
                                   f"{', '.join(lacking)}: run with the rows its draws have, or another --draw_store")
    record["rows"] = {m: record["rows"][m] for m in methods}
  if out:
    logging.info("[%s] %d draw(s) committed under %s: read, not trained", loss, len(out), name)
  return out


def keep(cfg, loss: str, draw: int, fold: FoldRecord) -> None:
  """With --draw_store: the finished draw written and committed (a failed commit leaves the file, said in the log)."""
  name = getattr(cfg.options, "draw_store", "")
  if not name:
    return
  file = write(path(ROOT, name, loss, draw), to_record(fold, recipe_key(cfg)))
  try:
    sha = commit(ROOT, file, f"Draw {draw} of {name} ({loss}): {fold.seconds:.0f} s")
    logging.info("[%s] draw %d committed (%s): %s", loss, draw, sha[:10], file)
  except RuntimeError as e:
    logging.warning("[%s] draw %d written to %s but not committed (%s): commit it to keep it", loss, draw, file, e)
