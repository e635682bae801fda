"""The main job's fold, walked: which of the project's modules its configuration and its data pass through, and in
what order, from the moment Table 2's fold begins (``table2.run_fold`` of the run's first loss and fold) until its
first row starts to train (the first call of :func:`pfd_jax.training.loop.train`), recorded with
``sys.setprofile``.

Two walks: the configuration's (every call into the project's code handed a run's
:class:`~experiments.framework.schema.Config`, a DataConfig or a TrainConfig among its arguments) and the data's
(handed a Dataset, its Groups or a fold's DeviceData). Each is read as a walk through rooms: a room is a module; a
stay is a run of consecutive calls inside one room (read again with a room a layer: pfd_jax.data, pfd_jax.training,
pfd_jax.methods, ..., experiments.framework, experiments' drivers); a return is a stay in a room the walk had
already left; a crossing is a step from a stay in experiments/ to one in pfd_jax/ or back. Few rooms, returns and
crossings: a reader follows the configuration and the data to the training in one pass.

  python -m experiments.walk             # the main job's walks: counts, then the stays in order
  python -m experiments.walk --loss=ranknet --epochs=1   # any table2 flag: the walk of that configuration
  python -m experiments.walk --static    # the configuration followed through the source from table2.run, every
                                         # branch (experiments/staticwalk.py says how it counts)
"""
from __future__ import annotations

import collections
import os
import sys
from typing import Callable, Dict, List, NamedTuple, Tuple

from absl import app, flags

from experiments import staticwalk
from experiments.paper import table2
from experiments.framework import cli, fold_data, schema
from pfd_jax.data.config import DataConfig
from pfd_jax.data.datasets import Dataset
from pfd_jax.data.groups import Groups
from pfd_jax.training import loop
from pfd_jax.training.device import DeviceData
from pfd_jax.training.config import TrainConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("pfd_jax", "experiments")
KINDS = {"configuration": (schema.Config, DataConfig, TrainConfig),
         "data": (Dataset, Groups, DeviceData)}


class _Arrived(Exception):
  """Raised by the profiler when the walk reaches its end (the first call of the end's function)."""


class Walk(NamedTuple):
  stays: List[Tuple[str, int]]  # (module, calls) in order
  rooms: int
  returns: int
  crossings: collections.Counter  # {(from package, to package): steps}

  def line(self) -> str:
    return (f"{self.rooms} rooms entered in {len(self.stays)} stays, {self.returns} returns to a room already left, "
            f"crossings experiments -> pfd_jax {self.crossings['experiments', 'pfd_jax']}, "
            f"pfd_jax -> experiments {self.crossings['pfd_jax', 'experiments']}")


def _module(path: str) -> str:
  rel = os.path.relpath(path, ROOT)
  return rel[:-3].replace(os.sep, ".") if rel.split(os.sep)[0] in PACKAGES and rel.endswith(".py") else ""


def _handed(frame, kinds: tuple) -> bool:
  code = frame.f_code
  n = code.co_argcount + code.co_kwonlyargcount
  return any(isinstance(frame.f_locals.get(name), kinds) for name in code.co_varnames[:n])


def calls(fn: Callable[[], object], end: Callable, kinds: Dict[str, tuple]) -> Dict[str, List[str]]:
  """{kind: the modules of the project's functions that fn() calls with an argument of that kind's types, one entry
  per call}, until `end` is first called (or fn returns)."""
  seen, stop = {k: [] for k in kinds}, end.__code__

  def profile(frame, event, _):
    if event != "call":
      return
    if frame.f_code is stop:
      raise _Arrived
    module = _module(frame.f_code.co_filename)
    if module and module != __name__:
      for k, types in kinds.items():
        if _handed(frame, types):
          seen[k].append(module)

  sys.setprofile(profile)
  try:
    fn()
  except _Arrived:
    pass
  finally:
    sys.setprofile(None)
  return seen


def layer(module: str) -> str:
  """A module's layer: pfd_jax's subpackage (pfd_jax itself for its top-level modules), experiments' (framework,
  paper, related, bench), or experiments (a tool)."""
  parts = module.split(".")
  return ".".join(parts[:2]) if len(parts) > 2 else parts[0]


def walk(modules: List[str]) -> Walk:
  """The stays, rooms, returns and crossings of a sequence of calls' modules."""
  stays: List[Tuple[str, int]] = []
  for m in modules:
    if stays and stays[-1][0] == m:
      stays[-1] = (m, stays[-1][1] + 1)
    else:
      stays.append((m, 1))
  left, returns = set(), 0
  for i, (m, _) in enumerate(stays):
    if i:
      left.add(stays[i - 1][0])
    returns += m in left
  packages = [m.split(".")[0] for m, _ in stays]
  crossings = collections.Counter((a, b) for a, b in zip(packages, packages[1:]) if a != b)
  return Walk(stays, len({m for m, _ in stays}), returns, crossings)


def main(_):
  if flags.FLAGS.static:
    modules, functions = staticwalk.sequence(table2.__name__, "run")
    w = walk(modules)
    print(f"table2.run, statically ({functions} functions): modules: {w.line()}\n"
          f"layers: {walk([layer(m) for m in modules]).line()}\n\nstays:\n" +
          "\n".join(f"  {m} ({n})" for m, n in w.stays))
    return
  cfg = cli.config_from_flags(table2.DRIVER)
  fold = fold_data.folds_of(cfg.data)[0]
  seen = calls(lambda: table2.run_fold(cfg, cfg.losses[0], fold, cfg.options.methods_for(1), {}, first=True),
               loop.train, KINDS)
  walks = {k: walk(v) for k, v in seen.items()}
  for k, w in walks.items():
    print(f"{k}: modules: {w.line()}\n{k}: layers: {walk([layer(m) for m in seen[k]]).line()}")
  for k, w in walks.items():
    print(f"\n{k}'s stays:\n" + "\n".join(f"  {m} ({n})" for m, n in w.stays))


if __name__ == "__main__":
  flags.DEFINE_bool("static", False, "the configuration's walk through the source from table2.run, not one run's calls")
  cli.define_flags(table2.DRIVER)
  app.run(main)
