"""Files written whole or not at all, and file identities that see edits.

:func:`write_atomic` writes through a temporary file in the target's folder and renames it over the target:
a reader sees the old file or the new one, never a partial one, and a failure (a full disk, a kill) leaves
no temporary behind. The temporary's name is unique per call (process id and random bytes), so two processes
writing the same file never collide on it: the last rename wins, whole.

:func:`sha256` is a file's content hash, memoised per (path, inode, size, mtime, ctime) within a process, so that
provenance and the parse cache can both key on content without reading a large file twice.
"""
from __future__ import annotations

import functools
import hashlib
import os
import secrets
from typing import Callable, Union


def temporary_name(path: str) -> str:
  """A unique temporary file name beside `path` (hidden, so that a folder listing never shows it)."""
  folder, name = os.path.split(os.path.abspath(path))
  return os.path.join(folder, f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def write_atomic(path: str, data: Union[str, bytes, Callable]) -> None:
  """Writes `data` to `path` atomically: a str (text), bytes, or a function called with the open binary file.

  The parent folder is created. Errors are the OS's (an OSError naming the file: a write that fails for a full
  disk names `path`); nothing is left behind.
  """
  folder = os.path.dirname(os.path.abspath(path))
  os.makedirs(folder, exist_ok=True)
  if os.path.isdir(path):
    raise IsADirectoryError(21, "is a folder, not a file", path)
  tmp = temporary_name(path)
  try:
    with open(tmp, "xb") as f:
      if callable(data):
        data(f)
      else:
        f.write(data.encode() if isinstance(data, str) else data)
    os.replace(tmp, path)
  except BaseException as e:
    try:
      os.remove(tmp)
    except OSError:
      pass
    if isinstance(e, OSError) and e.filename is None and e.errno:  # a failed write names no file: name the target
      raise OSError(e.errno, e.strerror or str(e), path) from None
    raise


def check_writable(path: str) -> None:
  """Raises the OSError that writing `path` atomically would meet (a parent that is a file, a read-only folder,
  `path` a folder), before any work is spent on what would be written there."""
  if os.path.isdir(path):
    raise IsADirectoryError(21, "is a folder, not a file", path)
  folder = os.path.dirname(os.path.abspath(path))
  os.makedirs(folder, exist_ok=True)
  tmp = temporary_name(path)
  with open(tmp, "xb"):
    pass
  os.remove(tmp)


@functools.lru_cache(maxsize=256)
def _sha256(path: str, ino: int, size: int, mtime_ns: int, ctime_ns: int) -> str:
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      h.update(block)
  return h.hexdigest()


def sha256(path: str) -> str:
  """The SHA-256 of a file's bytes, read once per process while the file's inode, size, mtime and ctime stay
  (ctime changes on every write and cannot be set back, so an edit that restores size and mtime is seen)."""
  st = os.stat(path)
  return _sha256(os.path.abspath(path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
