"""The parse cache of LETOR files (``--cache_dir``): each chunk of lines (:func:`pfd_jax.data.letor.load_letor` cuts
a file by content) stored compressed under the hash of its bytes, so the same lines in several files (MSLR-WEB30K's
S-blocks, each in five of its folds' files) are parsed and stored once, and a list of a file's chunks stored under
the file's content (SHA-256), so a file edited in place is read again even when its size and modification time are
unchanged. A damaged or absent entry is parsed again and rewritten, never an error of the run. This module is the
cache's format (its keys, its layout, its encoding); :func:`pfd_jax.data.letor.load_letor` reads and writes it, every
write atomic (:func:`pfd_jax.files.write_atomic`), so a killed run never leaves a half-written entry."""
from __future__ import annotations

import hashlib
import json
import os
import zipfile
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

Arrays = Dict[str, np.ndarray]  # a chunk's Groups fields: x, rel, qid, offsets
FIELDS = ("x", "rel", "qid", "offsets")

VERSION = "3"  # 2: keyed by content; 3: compressed chunks cut by content, shared across files


def manifest_file(path: str, cache_dir: str, sha256: str) -> str:
  """The file listing the cached chunks of `path`, whose content's SHA-256 is `sha256`."""
  key = f"{VERSION}|{sha256}"
  base = os.path.basename(path).replace(".", "_")
  return os.path.join(cache_dir, f"{base}-{hashlib.sha1(key.encode()).hexdigest()[:12]}.json")


def chunk_file(cache_dir: str, data: bytes) -> str:
  """The cache file of one chunk of lines, keyed by its bytes: the same lines in another file share it."""
  key = hashlib.sha256(VERSION.encode() + b"|" + data).hexdigest()[:24]
  return os.path.join(cache_dir, "chunks", f"{key}.npz")


def read_chunk(cached: str) -> Optional[Arrays]:
  """The arrays of a chunk's file, or None when it is absent or damaged (truncated, not an .npz)."""
  try:
    with np.load(cached) as f:
      return {k: f[k] for k in FIELDS}
  except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
    return None


def read_manifest(manifest: str, cache_dir: str) -> Optional[List[Arrays]]:
  """The chunks a manifest lists, in file order, or None when it or one of its chunks is absent or damaged."""
  try:
    with open(manifest) as f:
      names = json.load(f)
  except (OSError, ValueError):
    return None
  parts = [read_chunk(os.path.join(cache_dir, "chunks", n)) for n in names] if isinstance(names, list) else [None]
  return None if any(g is None for g in parts) else parts


def chunk_writer(arrays: Arrays) -> Callable:
  """What writes a chunk's file, given the open binary file (compressed: LETOR's features compress 3-4 times)."""
  return lambda f: np.savez_compressed(f, **{k: arrays[k] for k in FIELDS})


def manifest_text(chunks: Sequence[str]) -> str:
  """The manifest listing the chunk files `chunks` (their paths) as a file's, in order."""
  return json.dumps([os.path.basename(c) for c in chunks])
