"""LETOR / SVMlight ranking files -> :class:`Groups`, with an ``.npz`` cache and line-numbered errors.

Parsing is done by scikit-learn's C parser (``load_svmlight_file(..., query_id=True)``). It is fast but
its errors name neither file nor line, so when it fails (or when its output violates one of our rules) a
slow pure-Python pass re-reads the file only to find and name the first offending line.

Rules (each violation raises ``ValueError`` naming the file, and the line where one is to blame):
  * every data line is ``label qid:Q idx:val ...`` with an optional ``# comment``; blank and ``#`` lines
    are skipped; feature ids are 1-based (id 0 is an error), values are finite floats;
  * the lines of one query are contiguous. A qid that reappears after another qid is an error, never a
    silent merge: LETOR files are always written grouped, so a split group means a broken file;
  * an empty file (no data line) is an error.
Sparse files are read as dense with absent features = 0. Splits of one dataset may have different maximal
feature ids (a sparse file need not mention the last feature); :func:`pad_features` zero-fills them to a
common width, which is what the SVMlight format means by an absent feature.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import os
from typing import Optional

import numpy as np

from pfd_jax.data.groups import DataError, Groups

_CACHE_VERSION = "1"


def _open_text(path: str):
  return gzip.open(path, "rt") if path.endswith(".gz") else open(path, "rt")


def _locate_error(path: str, labelled: bool = True, num_features: Optional[int] = None) -> None:
  """Re-read `path` line by line and raise ValueError at the first line breaking the format.

  labelled=False: lines are ``qid:Q idx:val ...`` without a label (a serving file). num_features: feature
  ids above it are errors (ids a model never saw).
  """
  seen, last = set(), None
  with _open_text(path) as f:
    for lineno, line in enumerate(f, 1):
      body = line.split("#", 1)[0].strip()
      if not body:
        continue
      where = f"{path}:{lineno}"
      tokens = body.split()
      if not labelled:
        if tokens[0].startswith("qid:"):
          tokens = ["0"] + tokens
        else:
          raise DataError(f"{where}: this file's first line has no label, so no line may have one; got "
                           f"{tokens[0]!r} before the qid")
      try:
        label = float(tokens[0])
      except ValueError:
        raise DataError(f"{where}: label {tokens[0]!r} is not a number") from None
      if not np.isfinite(label):
        raise DataError(f"{where}: non-finite label {tokens[0]!r}")
      if len(tokens) < 2 or not tokens[1].startswith("qid:"):
        raise DataError(f"{where}: expected 'qid:<id>' after the label, got {body[:60]!r}")
      qid = tokens[1][4:]
      if qid != last:
        if qid in seen:
          raise DataError(f"{where}: qid {qid} reappears after other queries (its lines are not contiguous)")
        seen.add(qid)
        last = qid
      prev = 0
      for tok in tokens[2:]:
        idx, sep, val = tok.partition(":")
        if not sep:
          raise DataError(f"{where}: malformed feature {tok!r} (expected idx:value)")
        try:
          i, v = int(idx), float(val)
        except ValueError:
          raise DataError(f"{where}: non-numeric feature {tok!r}") from None
        if i < 1:
          raise DataError(f"{where}: feature id {i} (ids are 1-based)")
        if i <= prev:
          raise DataError(f"{where}: feature ids must increase, {i} after {prev}")
        if not np.isfinite(v):
          raise DataError(f"{where}: non-finite value {tok!r}")
        if num_features is not None and i > num_features:
          raise DataError(f"{where}: feature id {i} was never seen by the model (it knows ids 1..{num_features})")
        prev = i


def _parse(path: str, data: Optional[bytes] = None):
  """Groups of the file at `path`, or of `data` (lines of that file: a process's shard)."""
  from sklearn.datasets import load_svmlight_file  # heavy import, only when a file is parsed
  try:
    x, rel, qid = load_svmlight_file(path if data is None else io.BytesIO(data), query_id=True, zero_based=False,
                                     dtype=np.float32)
  except ValueError:
    _locate_error(path)
    raise  # the C parser saw something the line check did not: keep its message
  n = x.shape[0]
  if n == 0 and data is not None:  # a shard that starts no query
    return Groups(x=np.zeros((0, 0), np.float32), rel=np.zeros(0, np.float32), qid=np.zeros(0, np.int64),
                  offsets=np.zeros(1, np.int64))
  if n == 0:
    raise DataError(f"{path}: empty file (no data line)")
  if qid.shape[0] != n:
    _locate_error(path)
    raise DataError(f"{path}: some lines have no qid")
  x = np.asarray(x.todense(), dtype=np.float32)
  if not np.isfinite(x).all() or not np.isfinite(rel).all():
    _locate_error(path)
    raise DataError(f"{path}: non-finite values")
  starts = np.flatnonzero(np.concatenate([[True], qid[1:] != qid[:-1]]))
  if len(np.unique(qid[starts])) != len(starts):
    _locate_error(path)
    raise DataError(f"{path}: a qid's lines are not contiguous")
  offsets = np.concatenate([starts, [n]]).astype(np.int64)
  return Groups(x=x, rel=rel.astype(np.float32), qid=qid[starts].astype(np.int64), offsets=offsets)


def _cache_file(path: str, cache_dir: str) -> str:
  st = os.stat(path)
  key = f"{_CACHE_VERSION}|{os.path.abspath(path)}|{st.st_size}|{st.st_mtime_ns}"
  base = os.path.basename(path).replace(".", "_")
  return os.path.join(cache_dir, f"{base}-{hashlib.sha1(key.encode()).hexdigest()[:12]}.npz")


def load_letor(path: str, cache_dir: Optional[str] = None) -> Groups:
  """Reads one LETOR/SVMlight ranking file (plain or .gz) into flat :class:`Groups`.

  Args:
    path: the file.
    cache_dir: if given, the parsed arrays are saved there as ``.npz`` (keyed by path, size and mtime)
      and later loads read the cache instead of parsing.
  Raises:
    FileNotFoundError: no such file.
    ValueError: the file breaks the format (see the module docstring); the message names file and line.
  """
  if not os.path.isfile(path):
    raise FileNotFoundError(f"no such LETOR file: {path}")
  if cache_dir is not None:
    cached = _cache_file(path, cache_dir)
    if os.path.exists(cached):
      with np.load(cached) as f:
        return Groups(x=f["x"], rel=f["rel"], qid=f["qid"], offsets=f["offsets"])
  groups = _parse(path)
  if cache_dir is not None:
    os.makedirs(cache_dir, exist_ok=True)
    tmp = cached + ".tmp.npz"
    np.savez(tmp, x=groups.x, rel=groups.rel, qid=groups.qid, offsets=groups.offsets)
    os.replace(tmp, cached)  # atomic: a killed run never leaves a half-written cache
  return groups


def _qid(line: bytes) -> Optional[bytes]:
  parts = line.split(None, 2)
  return parts[1][4:] if len(parts) > 1 and parts[1].startswith(b"qid:") else None


def _line_containing(f, pos: int) -> bytes:
  """The whole line of the open binary file `f` that holds byte `pos`."""
  lo = pos
  while lo > 0:
    back = max(0, lo - (1 << 16))
    f.seek(back)
    k = f.read(lo - back).rfind(b"\n")
    if k >= 0:
      lo = back + k + 1
      break
    lo = back
  f.seek(lo)
  return f.readline()


def shard_lines(path: str, index: int, count: int) -> bytes:
  """The lines of process `index` of `count`: every query whose first line starts in the process's
  :func:`pfd_jax.distributed.shard_bytes` range, with all of its lines (a query that runs past the range's end
  is completed by reading on; one that began before its start is left to the process before). Reads about
  1/count of the file and never parses another process's lines."""
  from pfd_jax.distributed import shard_bytes
  if path.endswith(".gz"):
    raise DataError(f"{path}: a gzip file cannot be read in shards by byte range; decompress it for a "
                    "multi-process run")
  start, length = shard_bytes(os.path.getsize(path), index, count)
  end = start + length
  with open(path, "rb") as f:
    before = None
    if start > 0:
      before = _qid(_line_containing(f, start - 1))  # the last line that starts before this shard
      f.seek(start - 1)
      f.readline()
    pos = f.tell()
    body = f.read(end - pos) if pos < end else b""
    if body and not body.endswith(b"\n"):
      body += f.readline()  # the last line that starts in range, whole
    lines = body.splitlines(keepends=True)
    i = 0
    while i < len(lines) and before is not None and _qid(lines[i]) == before:
      i += 1  # the previous shard's last query goes on here: its lines are that shard's
    lines = lines[i:]
    if lines:
      last = _qid(lines[-1])
      for line in f:  # this shard's last query may go on past the range
        if _qid(line) != last:
          break
        lines.append(line)
  return b"".join(lines)


def load_letor_shard(path: str, index: int, count: int) -> Groups:
  """Process `index` of `count`'s query groups of one LETOR file (:func:`shard_lines`); the union over the
  processes, in process order, is :func:`load_letor` of the file."""
  if not os.path.isfile(path):
    raise FileNotFoundError(f"no such LETOR file: {path}")
  if count == 1:
    return _parse(path)
  return _parse(path, shard_lines(path, index, count))


def pad_features(splits: dict, width: Optional[int] = None) -> dict:
  """Zero-fills the feature columns of every split to the widest split, or to `width` (absent SVMlight
  feature = 0)."""
  width = max(g.x.shape[1] for g in splits.values()) if width is None else width
  out = {}
  for name, g in splits.items():
    if g.x.shape[1] < width:
      x = np.zeros((g.num_docs, width), np.float32)
      x[:, :g.x.shape[1]] = g.x
      g = Groups(x=x, rel=g.rel, qid=g.qid, offsets=g.offsets)
    out[name] = g
  return out


def load_serving(path: str, num_features: Optional[int] = None) -> Groups:
  """Reads a LETOR/SVMlight file as it exists at serving time: labels optional, sparse ids.

  Every data line either starts with a label (``label qid:Q ...``) or none does (``qid:Q ...``); the
  returned :class:`Groups` has ``rel=None`` when the file has no label. Absent feature ids read as 0 (the
  privileged ids of a model's training data are normally absent). Raises DataError naming file:line for a
  malformed line, a label on only some lines, or (with `num_features`) an id above `num_features`.
  """
  import io
  from sklearn.datasets import load_svmlight_file
  if not os.path.isfile(path):
    raise FileNotFoundError(f"no such LETOR file: {path}")
  with _open_text(path) as f:
    lines = f.read().splitlines()
  first = next((ln.split("#", 1)[0].strip() for ln in lines if ln.split("#", 1)[0].strip()), None)
  if first is None:
    raise DataError(f"{path}: empty file (no data line)")
  labelled = not first.startswith("qid:")
  if not labelled:
    if any((b := ln.split("#", 1)[0].strip()) and not b.startswith("qid:") for ln in lines):
      _locate_error(path, labelled, num_features)
      raise DataError(f"{path}: some lines have a label and others not")
    lines = ["0 " + ln if ln.lstrip().startswith("qid:") else ln for ln in lines]
  try:
    x, rel, qid = load_svmlight_file(io.BytesIO("\n".join(lines).encode()), query_id=True, zero_based=False,
                                     dtype=np.float32)
  except ValueError:
    _locate_error(path, labelled, num_features)
    raise
  if qid.shape[0] != x.shape[0]:
    _locate_error(path, labelled, num_features)
    raise DataError(f"{path}: some lines have no qid")
  if (num_features is not None and x.shape[1] > num_features) or not np.isfinite(x.data).all() \
      or not np.isfinite(rel).all():
    _locate_error(path, labelled, num_features)
    raise DataError(f"{path}: a feature id above {num_features} or a non-finite value")
  width = x.shape[1] if num_features is None else num_features
  dense = np.zeros((x.shape[0], width), np.float32)
  dense[:, :x.shape[1]] = x.toarray()
  starts = np.flatnonzero(np.concatenate([[True], qid[1:] != qid[:-1]]))
  if len(np.unique(qid[starts])) != len(starts):
    _locate_error(path, labelled, num_features)
    raise DataError(f"{path}: a qid's lines are not contiguous")
  offsets = np.concatenate([starts, [x.shape[0]]]).astype(np.int64)
  return Groups(x=dense, rel=rel.astype(np.float32) if labelled else None, qid=qid[starts].astype(np.int64),
                offsets=offsets)
