"""Pre-bucketed, padded training data on disk, for data larger than memory (``--data_source=streamed``).

A shard folder holds bucket sets (``train_all``, ``train_pos``, ``test``, ...), each a list of buckets
``<set>/b<k>/{x,z,y,mask}.npy`` with the shapes of :class:`pfd_jax.data.padding.Padded` (``x f32[Q, L,
Dx]``, ...), written by :class:`BucketWriter` group by group (so the writer never holds a split) and read
by :class:`ShardBucket` with positioned reads (one per run of consecutive groups), so that the operating
system's page cache, not the process, holds what was read. A set is complete once its
``done.json`` exists (written last, atomically), so an interrupted conversion is redone from its start and a
finished one is reused.

Why plain ``.npy`` files rather than Grain + ArrayRecord: the records here are fixed-shape padded arrays
and the reader needs random groups in the order of a batch plan it already has; a group of a ``.npy`` is
a known byte range, read with no per-record decoding, no extra dependency and no format of our own, and
any NumPy can open the files (``np.load(..., mmap_mode='r')``). Grain's strengths (shuffling, sharding and
transforming a record stream, worker processes) duplicate the batch plan and would add per-record
serialisation for no gain.
"""
from __future__ import annotations

import json
import os
from typing import Dict, Iterable, Optional, Sequence

import numpy as np

from pfd_jax.config import JsonObject
from pfd_jax.data import letor
from pfd_jax.data.groups import Groups
from pfd_jax.data.letor import pad_features
from pfd_jax.data.padding import Padded, pad
from pfd_jax.files import write_atomic

FIELDS = ("x", "z", "y", "mask")


class _Field:
  """One ``.npy`` file read by rows with ``os.pread``: what was read sits in the page cache, which the kernel
  can evict, not in the process (a memory map's touched pages would count as the process's memory)."""

  def __init__(self, path: str):
    with open(path, "rb") as f:
      version = np.lib.format.read_magic(f)
      read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
      self.shape, fortran, self.dtype = read(f)
      self.offset = f.tell()
    if fortran:
      raise ValueError(f"{path}: Fortran-ordered array, not a shard")
    self.path = path
    self.row = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize

  def take(self, rows: np.ndarray, length: Optional[int] = None) -> np.ndarray:
    """The rows `rows` (sorted, distinct), each run of consecutive rows one read; with `length`, in an array
    of that many rows, zeros after them (read in place: no padded copy)."""
    rows = np.asarray(rows, np.int64)
    out = np.zeros((rows.size if length is None else length,) + tuple(self.shape[1:]), self.dtype)
    buf = out.reshape(-1).view(np.uint8)
    starts = np.flatnonzero(np.diff(rows, prepend=-2) != 1)
    ends = np.append(starts[1:], rows.size)
    fd = os.open(self.path, os.O_RDONLY)
    try:
      for a, b in zip(starts, ends):
        want = (b - a) * self.row
        got = os.preadv(fd, [buf[a * self.row:b * self.row]], self.offset + int(rows[a]) * self.row)
        if got != want:
          raise OSError(f"{self.path}: short read ({got} of {want} bytes): the shard was truncated")
    finally:
      os.close(fd)
    return out


class ShardBucket:
  """One on-disk bucket: x, z (or none), y, mask; groups are read by index (:class:`_Field`)."""

  def __init__(self, folder: str, block: int = 4096):
    self.folder = folder
    self.fields = {f: _Field(os.path.join(folder, f + ".npy")) for f in FIELDS
                   if os.path.exists(os.path.join(folder, f + ".npy"))}
    self.block = block

  @property
  def num_groups(self) -> int:
    return int(self.fields["x"].shape[0])

  def read(self, rows: np.ndarray, view: str = "xz", length: Optional[int] = None) -> Dict[str, np.ndarray]:
    """The groups `rows` (sorted, distinct indices), the fields `view` needs (x, z, y, mask) and pos (the
    group has a y = 1); with `length`, padded to that many groups with zeros."""
    base = view.partition(":")[0]
    need = {"y", "mask"} | ({"x"} if "x" in base else set()) | ({"z"} if "z" in base else set())
    out = {f: a.take(rows, length) for f, a in self.fields.items() if f in need}
    out["pos"] = ((out["y"] * out["mask"]).max(-1) > 0).astype(np.float32)
    return out

  def whole(self, fields: Sequence[str]) -> Dict[str, np.ndarray]:
    """Fields of every group, read whole (the small ones: y, mask)."""
    return {f: self.fields[f].take(np.arange(self.num_groups)) for f in fields}

  def blocks(self):
    """The bucket as consecutive blocks of groups (dicts as :meth:`read` gives them)."""
    for a in range(0, self.num_groups, self.block):
      yield self.read(np.arange(a, min(a + self.block, self.num_groups)))


class BucketWriter:
  """Writes one bucket set group by group into ``.npy`` files of known shapes, with positioned writes (a
  memory map's written pages would count as the writer's memory until the kernel writes them back)."""

  def __init__(self, folder: str, name: str, counts: Sequence[int], lengths: Sequence[int], dx: int, dz: int):
    self.root = os.path.join(folder, name)
    self.next = np.zeros(len(counts), np.int64)
    self.files = []
    dx, dz = int(dx), int(dz)
    for k, (q, n) in enumerate(zip(counts, lengths)):
      q, n = int(q), int(n)  # plain ints: a NumPy integer would be written into the .npy header as a call
      d = os.path.join(self.root, f"b{k}")
      os.makedirs(d, exist_ok=True)
      shapes = dict(x=(q, n, dx), y=(q, n), mask=(q, n))
      if dz:
        shapes["z"] = (q, n, dz)
      self.files.append({f: _create(os.path.join(d, f + ".npy"), np.dtype(bool if f == "mask" else np.float32), s)
                         for f, s in shapes.items()})

  def add(self, b: Padded, k: int):
    """Appends the groups of a padded block to bucket k (its list length may be shorter than the bucket's)."""
    a, n, length = int(self.next[k]), b.mask.shape[0], b.mask.shape[1]
    for f, (fd, offset, shape, dtype) in self.files[k].items():
      block = np.zeros((n,) + shape[1:], dtype)
      block[:, :length] = getattr(b, f)
      row = block[0].nbytes if n else 0
      if n and os.pwrite(fd, block.tobytes(), offset + a * row) != block.nbytes:
        raise OSError(f"{self.root}: short write to bucket {k} ({f}): is the disk full?")
    self.next[k] += n

  def close(self, meta: Optional[JsonObject] = None):
    for files in self.files:
      for fd, *_ in files.values():
        os.fsync(fd)
        os.close(fd)
    write_atomic(os.path.join(self.root, "done.json"), json.dumps(dict(meta or {}, groups=self.next.tolist())))


def _create(path: str, dtype: np.dtype, shape: tuple) -> tuple:
  """A new ``.npy`` of `shape` (header written, data zero-filled sparsely): (open fd, data offset, shape, dtype)."""
  with open(path, "wb") as f:
    np.lib.format.write_array_header_1_0(f, dict(descr=np.lib.format.dtype_to_descr(dtype), fortran_order=False,
                                                 shape=shape))
    offset = f.tell()
    f.truncate(offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
  return os.open(path, os.O_WRONLY), offset, shape, dtype


def write_buckets(folder: str, name: str, buckets: Sequence[Padded], meta: Optional[JsonObject] = None):
  """Writes in-memory buckets as the set `name` (the resident buckets, on disk)."""
  z = buckets[0].z
  w = BucketWriter(folder, name, [b.mask.shape[0] for b in buckets], [b.mask.shape[1] for b in buckets],
                   buckets[0].x.shape[-1], 0 if z is None else z.shape[-1])
  for k, b in enumerate(buckets):
    w.add(b, k)
  w.close(meta)


def is_done(folder: str, name: str, meta: Optional[JsonObject] = None) -> bool:
  """Whether the set `name` was written whole (and, given `meta`, for the same recipe)."""
  p = os.path.join(folder, name, "done.json")
  if not os.path.exists(p):
    return False
  with open(p) as f:
    done = json.load(f)
  return meta is None or all(done.get(k) == v for k, v in meta.items())


def open_set(folder: str, name: str) -> list:
  """The buckets of a written set, shortest lists first."""
  root = os.path.join(folder, name)
  k = len([d for d in os.listdir(root) if d.startswith("b")])
  return [ShardBucket(os.path.join(root, f"b{i}")) for i in range(k)]


def bucket_sets_iter(chunks: Iterable, cuts: np.ndarray):
  """(bucket index, padded groups) of each chunk of flat groups, for :meth:`BucketWriter.add`."""
  for g in chunks:
    which = np.searchsorted(cuts, g.sizes)
    for k in np.unique(which):
      yield int(k), pad(g, np.flatnonzero(which == k))


def convert_letor(path: str, folder: str, chunk_bytes: int = 256 << 20) -> int:
  """One pass over a LETOR file of any size, in byte ranges of about `chunk_bytes`
  (:func:`pfd_jax.data.letor.load_letor_shard`: a query belongs to the range holding its first line), each
  range's parsed groups written as ``<folder>/r<i>/{x,rel,qid,offsets}.npy``. Resumable: a range whose
  ``done.json`` exists is not parsed again. Returns the number of ranges; :func:`converted_chunks` reads them."""
  count = max(1, -(-os.path.getsize(path) // chunk_bytes))
  meta = dict(source=os.path.abspath(path), size=os.path.getsize(path), ranges=count)
  for i in range(count):
    out = os.path.join(folder, f"r{i}")
    if is_done(folder, f"r{i}", meta):
      continue
    g = letor.load_letor_shard(path, i, count)
    os.makedirs(out, exist_ok=True)
    for f in ("x", "rel", "qid", "offsets"):
      np.save(os.path.join(out, f + ".npy"), getattr(g, f))
    write_atomic(os.path.join(out, "done.json"), json.dumps(meta))
  return count


def converted_chunks(folder: str, count: int, width: Optional[int] = None):
  """The groups of each converted range (:func:`convert_letor`), feature columns zero-filled to `width`
  (default: the widest range), in file order."""
  ranges = [os.path.join(folder, f"r{i}") for i in range(count)]
  if width is None:
    width = max(np.load(os.path.join(r, "x.npy"), mmap_mode="r").shape[1] for r in ranges)
  for r in ranges:
    g = Groups(**{f: np.load(os.path.join(r, f + ".npy")) for f in ("x", "rel", "qid", "offsets")})
    yield pad_features({"g": g}, width)["g"]
