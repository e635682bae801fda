"""Registries: one ordered table per extension point (losses, rows, datasets), each entry declared once, where
it is defined, and read by everything that needs it (flags, checks, tables, saved models).

A new loss, row or dataset is one ``register(...)`` call, from this package or from a user's own module::

  from pfd_jax.ops import losses
  losses.REGISTRY.register(losses.Loss("my_loss", my_loss_fn, params={"scale": 1.0}))
  # a driver run from the same script sees it: lifecycle.main(table2.DRIVER) -> --loss=my_loss --loss_params=scale=2

A configuration field whose choices are a registry's (``option(..., choices=REGISTRY.names)``) accepts what is
registered when it is checked, so entries registered after the configuration classes were defined are flags and
values like any other.

Every entry remembers where it was registered (:meth:`Registry.origin`: the registering module's import path, and
its file when that module is a script) and :meth:`Registry.code` hashes what it runs: its fields, the source of its
functions and the files of the modules that define them. A run records both for what it used
(``provenance.json``'s ``registered``) and the resume store compares the hash before it loads a saved row, so an
entry changed between two runs of one configuration is trained again, never loaded stale. A user's module is
named to a later process (``report``, ``predict``, a resumed run) by ``--registry_modules`` (:func:`import_modules`).
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from typing import Any, Dict, Generic, Iterator, Mapping, Sequence, Tuple, TypeVar

T = TypeVar("T")


class Registry(Mapping[str, T], Generic[T]):
  """An ordered mapping name -> entry (entries have a ``name``), filled by :meth:`register`."""

  def __init__(self, kind: str):
    self.kind = kind
    self._entries: Dict[str, T] = {}
    self._origins: Dict[str, str] = {}

  def register(self, entry: T, *, replace: bool = False) -> T:
    """Adds `entry` under ``entry.name`` (after the entries registered before it) and returns it. A name
    registered already is an error unless `replace` (then the entry keeps its place)."""
    name = entry.name
    if name in self._entries and not replace:
      raise ValueError(f"{self.kind} {name!r} is registered already (pass replace=True to redefine it)")
    self._entries[name] = entry
    self._origins[name] = _caller_module()
    return entry

  def unregister(self, name: str) -> T:
    """Removes and returns the entry `name` (a test's temporary entry)."""
    self._origins.pop(name, None)
    return self._entries.pop(name)

  def origin(self, name: str) -> str:
    """The import path of the module that registered `name` (``__main__`` for a script run as one)."""
    self[name]  # a KeyError naming the known entries
    return self._origins[name]

  def code(self, name: str) -> str:
    """SHA-256 (16 hex digits) of what the entry `name` runs: its fields (functions by their source), and the
    source files of its registering module and of the modules of its functions (a helper they call is covered)."""
    entry = self[name]
    h = hashlib.sha256(canonical(entry).encode())
    modules = {self._origins[name]} | {m for m in _function_modules(entry)}
    for m in sorted(modules):
      h.update(m.encode() + _module_bytes(m))
    return h.hexdigest()[:16]

  def record(self, name: str) -> Dict[str, Any]:
    """How a run records the entry it used: {module, code} (and the script's file for ``__main__``)."""
    out = dict(module=self.origin(name), code=self.code(name))
    path = _module_file(out["module"])
    if out["module"] == "__main__" and path:
      rel = os.path.relpath(path)
      out["file"] = path if rel.startswith("..") else rel
    return out

  def names(self) -> Tuple[str, ...]:
    """The registered names, in order (a configuration field's ``choices``)."""
    return tuple(self._entries)

  def __getitem__(self, name: str) -> T:
    try:
      return self._entries[name]
    except KeyError:
      raise KeyError(f"unknown {self.kind} {name!r}; known: {', '.join(self._entries)}") from None

  def __iter__(self) -> Iterator[str]:
    return iter(self._entries)

  def __len__(self) -> int:
    return len(self._entries)


def _caller_module() -> str:
  """The module that called :meth:`Registry.register` (the first frame outside this file)."""
  frame = sys._getframe(1)
  while frame is not None and frame.f_code.co_filename == __file__:
    frame = frame.f_back
  return frame.f_globals.get("__name__", "?") if frame is not None else "?"


def canonical(value) -> str:
  """A text of `value` that is the same in every process: functions by module, name and source; dataclasses,
  named tuples, partials, mappings and sequences by their parts; anything else by repr."""
  if isinstance(value, functools.partial):
    return f"partial({canonical(value.func)}, {canonical(value.args)}, {canonical(value.keywords)})"
  if inspect.isfunction(value) or inspect.ismethod(value) or inspect.isbuiltin(value):
    try:
      source = inspect.getsource(value)
    except (OSError, TypeError):
      source = ""
    return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', '?')}:{source}"
  if dataclasses.is_dataclass(value) and not isinstance(value, type):
    fields = (f"{f.name}={canonical(getattr(value, f.name))}" for f in dataclasses.fields(value))
    return f"{type(value).__name__}({', '.join(fields)})"
  if isinstance(value, tuple) and hasattr(value, "_fields"):
    return f"{type(value).__name__}({', '.join(f'{k}={canonical(getattr(value, k))}' for k in value._fields)})"
  if isinstance(value, Mapping):
    items = sorted(value.items(), key=lambda kv: repr(kv[0]))
    return "{" + ", ".join(f"{k!r}: {canonical(v)}" for k, v in items) + "}"
  if isinstance(value, (list, tuple)):
    return "(" + ", ".join(canonical(v) for v in value) + ")"
  if callable(value) and not isinstance(value, type):  # an object with __call__: its class
    return canonical(type(value).__call__)
  return repr(value)


def _function_modules(value) -> set:
  """The modules of the functions inside `value` (as :func:`_canonical` walks it)."""
  if isinstance(value, functools.partial):
    return _function_modules(value.func) | _function_modules(value.args) | _function_modules(value.keywords)
  if inspect.isfunction(value) or inspect.ismethod(value):
    return {value.__module__}
  if dataclasses.is_dataclass(value) and not isinstance(value, type):
    return set().union(*(_function_modules(getattr(value, f.name)) for f in dataclasses.fields(value)))
  if isinstance(value, Mapping):
    return set().union(*map(_function_modules, value.values()))
  if isinstance(value, (list, tuple)):
    return set().union(*map(_function_modules, value))
  return set()


def _module_file(module: str):
  m = sys.modules.get(module)
  return getattr(m, "__file__", None) if m is not None else None


def _module_bytes(module: str) -> bytes:
  """The source file of a loaded module (b'' when it has none: a module made in memory)."""
  path = _module_file(module)
  if not path or not os.path.exists(path):
    return b""
  with open(path, "rb") as f:
    return f.read()


def resolve(fn):
  """A function an entry names: an import path ``module:function`` imported (big_vision's way: the registry that
  names it imports nothing), or the function itself."""
  if isinstance(fn, str):
    module, _, name = fn.partition(":")
    return getattr(importlib.import_module(module), name)
  return fn


def import_modules(names: Sequence[str]) -> None:
  """Imports the modules that register a run's entries: import paths (``my_rows``, ``team.rankers``) or files
  (``my_rows.py``, imported under their stem). ImportError / FileNotFoundError name the one that failed."""
  for name in names:
    if name.endswith(".py"):
      if not os.path.exists(name):
        raise FileNotFoundError(f"--registry_modules: no file {name}")
      stem = os.path.splitext(os.path.basename(name))[0]
      if stem in sys.modules:
        continue
      spec = importlib.util.spec_from_file_location(stem, name)
      module = importlib.util.module_from_spec(spec)
      sys.modules[stem] = module
      spec.loader.exec_module(module)
    else:
      try:
        importlib.import_module(name)
      except ImportError as e:
        raise ImportError(f"--registry_modules: cannot import {name!r} ({e})") from None
