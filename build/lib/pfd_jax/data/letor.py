"""LETOR / SVMlight ranking files -> :class:`Groups`, with a parse cache and line-numbered errors.

Parsing is done by scikit-learn's C parser (``load_svmlight_file(..., query_id=True)``). It is fast but
its errors name neither file nor line, so when it fails (or when its output violates one of our rules) a
slow pure-Python pass re-reads the file only to find and name the first offending line.

Rules (each violation raises :class:`DataError`, a ValueError, naming the file, and the line where one is
to blame):
  * the file is UTF-8 text (LF or CRLF line ends);
  * every data line is ``label qid:Q idx:val ...`` with an optional ``# comment``; blank and ``#`` lines
    are skipped; qids are integers; feature ids are 1-based (id 0 is an error) and increase along a line;
    labels and values are finite and within float32's range (1e39 would read as inf);
  * a feature id whose dense ``[documents, id]`` float32 array would not fit in half of this machine's
    memory is refused before allocating (an id of 10^9 is a typo, not a feature);
  * the lines of one query are contiguous. A qid that reappears after another qid is an error, never a
    silent merge: LETOR files are always written grouped, so a split group means a broken file;
  * an empty file (no data line) is an error;
  * with ``dense=D`` (a format whose every line writes all of its D features, zeros too: Web30k's, Istella's),
    a line with another number of features is an error (a line cut after a whole token would otherwise read its
    missing features as 0). A chunk in the parse cache was checked when it was parsed.
Sparse files are read as dense with absent features = 0. Splits of one dataset may have different maximal
feature ids (a sparse file need not mention the last feature); :func:`pad_features` zero-fills them to a
common width, which is what the SVMlight format means by an absent feature. A registered dataset with a declared
width (``DatasetSpec.num_features``: Web30k 136, Yahoo 700, Istella 220) is filled to it, so an id absent from every
file (Yahoo has some) is a column of zeros, indistinguishable from a feature that is 0 on every document.
"""
from __future__ import annotations

import errno
import gzip
import io
import os
import zlib
from typing import Iterator, Optional

import numpy as np

from pfd_jax import files
from pfd_jax.distributed import shard_bytes
from pfd_jax.data import parse_cache
from pfd_jax.data.groups import DataError, Groups, Splits

CHUNK_EVERY = 64  # queries a cache chunk holds, on average (_chunks)


_F32_MAX = float(np.finfo(np.float32).max)


def _number(tok: str, what: str, where: str) -> float:
  """`tok` as a finite float32-representable number, else a DataError naming `where`."""
  try:
    v = float(tok)
  except ValueError:
    raise DataError(f"{where}: {what} {tok!r} is not a number") from None
  if not np.isfinite(v):
    raise DataError(f"{where}: non-finite {what} {tok!r}")
  if abs(v) > _F32_MAX:
    raise DataError(f"{where}: {what} {tok!r} overflows float32 (|value| > {_F32_MAX:.3g})")
  return v


def _locate_error(path: str, labelled: bool = True, max_id: Optional[int] = None, why: str = "",
                  dense: int = 0) -> None:
  """Re-read `path` line by line and raise DataError at the first line breaking the format.

  labelled=False: lines are ``qid:Q idx:val ...`` without a label (a serving file). max_id: feature ids above
  it are errors, `why` saying why (ids a model never saw; ids too large to allocate). dense: every line writes
  this many features.
  """
  seen, last = set(), None
  opener = gzip.open if path.endswith(".gz") else open
  with opener(path, "rb") as f:
    for lineno, raw in enumerate(f, 1):
      where = f"{path}:{lineno}"
      try:
        line = raw.decode("utf-8")
      except UnicodeDecodeError as e:
        raise DataError(f"{where}: not UTF-8 text (byte 0x{raw[e.start]:02x} at column {e.start + 1})") from None
      body = line.split("#", 1)[0].strip()
      if not body:
        continue
      tokens = body.split()
      if not labelled:
        if tokens[0].startswith("qid:"):
          tokens = ["0"] + tokens
        else:
          raise DataError(f"{where}: this file's first line has no label, so no line may have one; got "
                          f"{tokens[0]!r} before the qid")
      _number(tokens[0], "label", where)
      if len(tokens) < 2 or not tokens[1].startswith("qid:"):
        raise DataError(f"{where}: expected 'qid:<id>' after the label, got {body[:60]!r}")
      qid = tokens[1][4:]
      try:
        int(qid)
      except ValueError:
        raise DataError(f"{where}: qid {qid!r} is not an integer") from None
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
          i = int(idx)
        except ValueError:
          raise DataError(f"{where}: non-numeric feature id in {tok!r}") from None
        _number(val, f"value of feature {i}", where)
        if i < 1:
          raise DataError(f"{where}: feature id {i} (ids are 1-based)")
        if i <= prev:
          raise DataError(f"{where}: feature ids must increase, {i} after {prev}")
        if max_id is not None and i > max_id:
          raise DataError(f"{where}: feature id {i} {why}")
        prev = i
      if dense and len(tokens) - 2 != dense:
        raise DataError(f"{where}: {len(tokens) - 2} features, where every line of this format writes all {dense} "
                        "(a line cut short?)")


def _memory_bytes() -> int:
  try:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  except (ValueError, OSError, AttributeError):
    return 1 << 36


def _check_width(path: str, docs: int, width: int) -> None:
  """Refuses (naming the line) a feature id whose dense [docs, width] float32 array would not fit in half
  of this machine's memory, before allocating it (a typo such as id 10^9 would ask for terabytes)."""
  budget = _memory_bytes() // 2
  if docs * width * 4 > budget:
    limit = max(1, budget // (4 * max(docs, 1)))
    _locate_error(path, max_id=limit, why=f"needs a dense array of {docs:,} x {width:,} float32 "
                  f"({docs * width * 4 / 2 ** 30:,.1f} GiB; half of this machine's memory allows ids up to "
                  f"{limit:,}): is the id a typo?")
    raise DataError(f"{path}: feature ids up to {width:,} need {docs * width * 4 / 2 ** 30:,.1f} GiB dense")


def require_contiguous(path: str, group_qids: np.ndarray, *args, **kw) -> None:
  """Raises the DataError naming the line where a qid reappears, unless every group of `path` (their qids in
  file order, e.g. gathered from every process's shard) has its own qid. args / kw: :func:`_locate_error`'s."""
  if np.unique(group_qids).size != np.asarray(group_qids).size:
    _locate_error(path, *args, **kw)
    raise DataError(f"{path}: a qid's lines are not contiguous")


def _parse(path: str, data: Optional[bytes] = None, dense: int = 0):
  """Groups of the file at `path`, or of `data` (lines of that file: a process's shard); dense: every line writes
  this many features (module docstring)."""
  from sklearn.datasets import load_svmlight_file  # heavy import, only when a file is parsed
  try:
    x, rel, qid = load_svmlight_file(path if data is None else io.BytesIO(data), query_id=True, zero_based=False,
                                     dtype=np.float32)
  except ValueError as e:
    _locate_error(path)
    raise DataError(f"{path}: {e}") from None  # the C parser saw something the line check did not
  n = x.shape[0]
  if n == 0 and data is not None:  # a shard that starts no query
    return Groups(x=np.zeros((0, 0), np.float32), rel=np.zeros(0, np.float32), qid=np.zeros(0, np.int64),
                  offsets=np.zeros(1, np.int64))
  if n == 0:
    raise DataError(f"{path}: empty file (no data line)")
  if qid.shape[0] != n:
    _locate_error(path)
    raise DataError(f"{path}: some lines have no qid")
  if not np.isfinite(x.data).all() or not np.isfinite(rel).all() or np.abs(rel).max() > _F32_MAX:
    _locate_error(path)
    raise DataError(f"{path}: non-finite values")
  _check_width(path, n, x.shape[1])
  if dense and np.any(np.diff(x.indptr) != dense):
    _locate_error(path, dense=dense)
    raise DataError(f"{path}: some lines do not write all {dense} features")
  x = np.asarray(x.todense(), dtype=np.float32)
  starts = np.flatnonzero(np.concatenate([[True], qid[1:] != qid[:-1]]))
  require_contiguous(path, qid[starts])
  offsets = np.concatenate([starts, [n]]).astype(np.int64)
  return Groups(x=x, rel=rel.astype(np.float32), qid=qid[starts].astype(np.int64), offsets=offsets)


def _chunks(path: str) -> Iterator[bytes]:
  """The lines of `path` in chunks cut by content: a chunk ends before a query whose qid token's CRC-32 is 0 mod
  CHUNK_EVERY (about that many queries a chunk), so a block of queries is cut the same wherever it stands in a
  file. MSLR-WEB30K's folds are its five S-blocks rotated (a fold's train.txt is three of them, its vali.txt
  and test.txt one each): every S-block's chunks, but the one or two at its edges, are shared by the 15 files
  that hold it, and are parsed and stored once."""
  opener = gzip.open if path.endswith(".gz") else open
  buf, last = [], None
  with opener(path, "rb") as f:
    for line in f:
      q = _qid(line)
      if q is not None and q != last:
        if buf and zlib.crc32(q) % CHUNK_EVERY == 0:
          yield b"".join(buf)
          buf = []
        last = q
      buf.append(line)
  if buf:
    yield b"".join(buf)


def _join(path: str, parts: list) -> Groups:
  """The Groups of `path` from those of its chunks, in file order (each zero-filled to the widest)."""
  n = sum(g.num_docs for g in parts)
  if n == 0:
    raise DataError(f"{path}: empty file (no data line)")
  width = max(g.x.shape[1] for g in parts)
  _check_width(path, n, width)
  x = np.zeros((n, width), np.float32)
  at, offsets = 0, [np.zeros(1, np.int64)]
  for g in parts:
    x[at:at + g.num_docs, :g.x.shape[1]] = g.x
    offsets.append(g.offsets[1:] + at)
    at += g.num_docs
  qid = np.concatenate([g.qid for g in parts])
  require_contiguous(path, qid)
  return Groups(x=x, rel=np.concatenate([g.rel for g in parts]), qid=qid, offsets=np.concatenate(offsets))


def load_letor(path: str, cache_dir: Optional[str] = None, dense: int = 0) -> Groups:
  """Reads one LETOR/SVMlight ranking file (plain or .gz) into flat :class:`Groups`, chunk by chunk
  (:func:`_chunks`: the sparse parse of one chunk is in memory at a time, beside the dense result).

  Args:
    path: the file.
    cache_dir: if given, the parse cache (:mod:`pfd_jax.data.parse_cache`): each chunk stored there compressed,
      keyed by its bytes (shared by every file that holds the same lines), and the file's list of chunks keyed
      by its content; later loads read the cache instead of parsing; a damaged entry is parsed again.
    dense: every line writes this many features (0: a sparse file; module docstring).
  Raises:
    FileNotFoundError: no such file. NotADirectoryError: `cache_dir` is a file.
    DataError: the file breaks the format (see the module docstring); the message names file and line.
  """
  if not os.path.isfile(path):
    raise FileNotFoundError(f"no such LETOR file: {path}")
  if cache_dir is None:
    return _join(path, [_parse(path, data, dense) for data in _chunks(path)])
  if os.path.exists(cache_dir) and not os.path.isdir(cache_dir):
    raise NotADirectoryError(errno.ENOTDIR, "the cache folder (--cache_dir) is a file", cache_dir)
  manifest = parse_cache.manifest_file(path, cache_dir, files.sha256(path))  # read once a process (provenance)
  parts = parse_cache.read_manifest(manifest, cache_dir)
  if parts is not None:
    return _join(path, [Groups(**a) for a in parts])
  chunks, parts = [], []
  for data in _chunks(path):
    chunks.append(parse_cache.chunk_file(cache_dir, data))
    a = parse_cache.read_chunk(chunks[-1])
    if a is None:
      g = _parse(path, data, dense)
      a = dict(x=g.x, rel=g.rel, qid=g.qid, offsets=g.offsets)
      files.write_atomic(chunks[-1], parse_cache.chunk_writer(a))
    parts.append(Groups(**a))
  groups = _join(path, parts)
  files.write_atomic(manifest, parse_cache.manifest_text(chunks))
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


def load_letor_shard(path: str, index: int, count: int, dense: int = 0) -> Groups:
  """Process `index` of `count`'s query groups of one LETOR file (:func:`shard_lines`); the union over the
  processes, in process order, is :func:`load_letor` of the file."""
  if not os.path.isfile(path):
    raise FileNotFoundError(f"no such LETOR file: {path}")
  if count == 1:
    return _parse(path, dense=dense)
  return _parse(path, shard_lines(path, index, count), dense)


def pad_features(splits: Splits, width: Optional[int] = None) -> Splits:
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
  return read_serving(path, num_features)[0]


def read_serving(path: str, num_features: Optional[int] = None) -> tuple:
  """(:func:`load_serving`'s Groups, the sorted 1-based feature ids that appear on at least one line)."""
  from sklearn.datasets import load_svmlight_file
  if not os.path.isfile(path):
    raise FileNotFoundError(f"no such LETOR file: {path}")
  opener = gzip.open if path.endswith(".gz") else open
  with opener(path, "rb") as f:
    blob = f.read()
  try:
    lines = blob.decode("utf-8").splitlines()
  except UnicodeDecodeError:
    _locate_error(path, not blob.lstrip().startswith(b"qid:"))
    raise
  first = next((ln.split("#", 1)[0].strip() for ln in lines if ln.split("#", 1)[0].strip()), None)
  if first is None:
    raise DataError(f"{path}: empty file (no data line)")
  labelled = not first.startswith("qid:")
  unseen = dict(max_id=num_features, why=f"was never seen by the model (it knows ids 1..{num_features})")
  if not labelled:
    if any((b := ln.split("#", 1)[0].strip()) and not b.startswith("qid:") for ln in lines):
      _locate_error(path, labelled, **unseen)
      raise DataError(f"{path}: some lines have a label and others not")
    lines = ["0 " + ln if ln.lstrip().startswith("qid:") else ln for ln in lines]
  try:
    x, rel, qid = load_svmlight_file(io.BytesIO("\n".join(lines).encode()), query_id=True, zero_based=False,
                                     dtype=np.float32)
  except ValueError as e:
    _locate_error(path, labelled, **unseen)
    raise DataError(f"{path}: {e}") from None
  if qid.shape[0] != x.shape[0]:
    _locate_error(path, labelled, **unseen)
    raise DataError(f"{path}: some lines have no qid")
  if (num_features is not None and x.shape[1] > num_features) or not np.isfinite(x.data).all() \
      or not np.isfinite(rel).all() or np.abs(rel).max(initial=0) > _F32_MAX:
    _locate_error(path, labelled, **unseen)
    raise DataError(f"{path}: a feature id above {num_features} or a non-finite value")
  width = x.shape[1] if num_features is None else num_features
  _check_width(path, x.shape[0], width)
  dense = np.zeros((x.shape[0], width), np.float32)
  dense[:, :x.shape[1]] = x.toarray()
  starts = np.flatnonzero(np.concatenate([[True], qid[1:] != qid[:-1]]))
  require_contiguous(path, qid[starts], labelled, **unseen)
  offsets = np.concatenate([starts, [x.shape[0]]]).astype(np.int64)
  groups = Groups(x=dense, rel=rel.astype(np.float32) if labelled else None, qid=qid[starts].astype(np.int64),
                  offsets=offsets)
  return groups, np.unique(x.indices).astype(np.int64) + 1
