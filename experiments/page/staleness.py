"""When is a published run still the code's result? Staleness by canaries, so a refactor that keeps every bit
keeps every run current, and a change of any bit marks the runs it touches stale.

Every driver has tiny end-to-end runs in the test suite (``tests/conftest.py: written``). Their results'
fingerprints (:func:`experiments.page.published.fingerprint`) are the driver's *canaries*, committed in
``experiments/canaries.json`` with the machine configuration (``numerics``) that computed them; on that
configuration the suite fails when a canary's bits change, so the file changes exactly when a change moves bits
(re-record it over every tier of the suite: ``PFD_CANARIES=cache/canaries python -m pytest -m ""``, then
``python -m experiments.page.staleness --collect=cache/canaries``; most canaries are in the slow tier, which
the default test command leaves out, and collecting refuses to drop a driver that the recording run did not reach).
A driver that had no canaries gets them from a recording of its own tests alone: ``--collect=FOLDER --add=DRIVER``
(on the configuration of the file's other canaries).

A run of a driver is **current** when its commit is at or after the commit from which HEAD's canaries of that
driver are unchanged: walking ``canaries.json``'s history back from HEAD while the driver's entry stays the same,
the oldest such version's commit, or an earlier commit recorded in its ``verified_since`` (where the same canary
bits were shown by running the canaries on that commit: ``--verify=FOLDER --commit=COMMIT``, FOLDER written by the
driver's canary tests run on that commit's code). Without canaries for the driver the older rule
applies: the library (less its serving side) and the driver's modules unchanged since the run's commit.

What the rule cannot see: a change that moves bits only at a scale or on data the canaries do not reach; a
change of that kind should re-run the runs it touches.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Dict, Optional

from experiments.framework import rundir
from pfd_jax.config import JsonObject

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CANARIES = "experiments/canaries.json"
# Library code that loads, checks and exports saved models: it never changes a number a driver records.
SERVING_SIDE = ("pfd_jax/serving",)


def git(root: str, *args) -> subprocess.CompletedProcess:
  return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=60)


def _canaries_at(root: str, commit: str) -> JsonObject:
  out = git(root, "show", f"{commit}:{CANARIES}")
  return json.loads(out.stdout) if out.returncode == 0 else {}


def canary_base(driver: str, root: str = ROOT) -> Optional[str]:
  """The oldest commit from which HEAD's canaries of `driver` are unchanged (module docstring); None when HEAD
  has none for it."""
  entry = _canaries_at(root, "HEAD").get("drivers", {}).get(driver)
  if not entry:
    return None
  base = None
  for commit in git(root, "log", "--format=%H", "HEAD", "--", CANARIES).stdout.split():
    version = _canaries_at(root, commit)
    if version.get("drivers", {}).get(driver) != entry:
      break
    base = version.get("verified_since", {}).get(driver) or commit
  return base


def _code_changes(commit: str, root: str) -> list:
  """The older rule's changed files: the library (less its serving side) and every experiments module."""
  paths = ["pfd_jax", "experiments"] + [f":(exclude){p}" for p in SERVING_SIDE]
  return git(root, "diff", "--name-only", commit, "HEAD", "--", *paths).stdout.split()


def staleness(code: JsonObject, driver: str, root: str = ROOT) -> Optional[str]:
  """None when the run is current (module docstring); else why it is stale (or cannot be checked)."""
  commit = code.get("git_commit")
  if not commit:
    return "run outside a git checkout: its code cannot be compared with HEAD"
  if git(root, "cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
    return f"commit {commit[:10]} is not in this repository: its code cannot be compared with HEAD"
  if code.get("git_dirty") and code.get("source_sha256") != sources_at(commit, root):
    return f"run on {commit[:10]} with uncommitted changes: its code cannot be compared with HEAD"
  base = canary_base(driver, root)
  if base is not None:
    if git(root, "merge-base", "--is-ancestor", base, commit).returncode == 0:
      return None
    return f"the canaries of {driver} changed bits after {commit[:10]} (unchanged since {base[:10]})"
  changed = _code_changes(commit, root)
  if changed:
    shown = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
    return f"code changed since {commit[:10]} ({shown}) and {driver} has no canaries to show its bits kept"
  return None


def sources_at(commit: str, root: str = ROOT) -> str:
  """The source digest (rundir.source_digest) of `commit`'s tree: a run made in a tree with uncommitted changes
  that left every source as committed (an untracked virtualenv link, results, data) recorded this digest, and its
  code is the commit's."""
  names = [p for p in git(root, "ls-tree", "-r", "--name-only", commit, "--", *rundir.SOURCES).stdout.split()
           if p.endswith(".py")]
  show = lambda p: subprocess.run(["git", "show", f"{commit}:{p}"], cwd=root, capture_output=True, timeout=60).stdout
  return rundir.source_digest({p: show(p) for p in names})


class CanaryError(Exception):
  """A recording that would lose canaries or mix configurations: what is wrong is named, nothing is written."""


def _recorded(folder: str) -> tuple:
  """({driver: {test: fingerprint}}, numerics) of the canary files a test run wrote to `folder`; CanaryError where
  they were computed on more than one configuration."""
  drivers, numerics = {}, []
  for name in sorted(os.listdir(folder)):
    with open(os.path.join(folder, name)) as f:
      c = json.load(f)
    drivers.setdefault(c["driver"], {})[c["test"]] = c["fingerprint"]
    numerics += [c["numerics"]] if c["numerics"] not in numerics else []
  if len(numerics) > 1:
    raise CanaryError(f"{folder} mixes canaries computed on {len(numerics)} configurations; nothing written")
  return drivers, (numerics or [None])[0]


def _write(path: str, new: JsonObject) -> JsonObject:
  with open(path, "w") as f:
    f.write(json.dumps(new, indent=1, sort_keys=True) + "\n")
  return new


def collect(folder: str, path: str = os.path.join(ROOT, CANARIES), drop: tuple = (), add: tuple = ()) -> tuple:
  """Merges the canary files a test run wrote to `folder` ({driver, test, fingerprint, numerics} each) into
  `path`, keeping its verified_since entries of drivers whose canaries did not change. Returns (the new file's
  contents, lines to tell: each driver whose canary tests changed their node ids, re-recorded under the new ones).

  A driver of `path` with no canary in `folder` is a recording that did not reach it (a partial run, `-m` left at
  the default tier): CanaryError, nothing written, unless the driver is named in `drop` (its canaries removed on
  purpose). With `add`, only the drivers named are taken from `folder`: drivers that have no canaries yet, recorded
  on the file's configuration; every other entry stays as it is (a recording of the new drivers' tests alone
  suffices, since no other driver's canaries can move)."""
  old = json.load(open(path)) if os.path.exists(path) else {}
  drivers, numerics = _recorded(folder)
  if add:
    return _added(old, drivers, numerics, add, folder, path), []
  missing = sorted(set(old.get("drivers", {})) - set(drivers) - set(drop))
  if missing:
    raise CanaryError(f"{folder} holds no canary of {', '.join(missing)}: the recording run did not reach "
                      f"{'it' if len(missing) == 1 else 'them'} (record over every tier: PFD_CANARIES={folder} "
                      "python -m pytest -m \"\"); nothing written. To remove a driver's canaries on purpose: "
                      "--drop=NAME,...")
  notes = []
  for d, tests in sorted(drivers.items()):
    before, now = set(old.get("drivers", {}).get(d, {})), set(tests)
    if before and before != now:
      notes.append(f"{d}: canary tests re-recorded under new node ids (gone: {', '.join(sorted(before - now)) or '-'}; "
                   f"new: {', '.join(sorted(now - before)) or '-'})")
  kept = {d: c for d, c in old.get("verified_since", {}).items() if old.get("drivers", {}).get(d) == drivers.get(d)}
  return _write(path, dict(numerics=numerics, drivers=dict(sorted(drivers.items())), verified_since=kept)), notes


def _added(old: JsonObject, drivers: Dict[str, Dict[str, str]], numerics: JsonObject, add: tuple, folder: str,
           path: str) -> JsonObject:
  have = sorted(set(add) & set(old.get("drivers", {})))
  if have:
    raise CanaryError(f"{', '.join(have)} already {'has' if len(have) == 1 else 'have'} canaries in {path}: "
                      "re-record over every tier instead of --add; nothing written")
  absent = sorted(set(add) - set(drivers))
  if absent:
    raise CanaryError(f"{folder} holds no canary of {', '.join(absent)}; nothing written")
  if old and numerics != old.get("numerics"):
    raise CanaryError(f"{folder} was recorded on another configuration than {path}'s: canaries added must be "
                      "computed where the others were; nothing written")
  merged = dict(old.get("drivers", {}), **{d: drivers[d] for d in add})
  return _write(path, dict(old, numerics=numerics, drivers=dict(sorted(merged.items()))))


def verify(folder: str, commit: str, path: str = os.path.join(ROOT, CANARIES)) -> list:
  """Records that the canaries a test run wrote to `folder` on the code of `commit` are `path`'s own bits: each
  such driver's verified_since becomes `commit`, so its runs from `commit` on count as current. Every test of a
  driver must be in `folder` with the file's fingerprint, on the file's configuration; otherwise CanaryError and
  nothing written. Returns the drivers verified."""
  old = json.load(open(path))
  drivers, numerics = _recorded(folder)
  if numerics != old.get("numerics"):
    raise CanaryError(f"{folder} was recorded on another configuration than {path}'s: its bits prove nothing "
                      "here; nothing written")
  differ = sorted(d for d, tests in drivers.items() if old["drivers"].get(d) != tests)
  if differ:
    raise CanaryError(f"the canaries of {', '.join(differ)} recorded on {commit[:10]} are not {path}'s (another "
                      "fingerprint, or a test missing); nothing written")
  _write(path, dict(old, verified_since=dict(old.get("verified_since", {}), **{d: commit for d in drivers})))
  return sorted(drivers)


if __name__ == "__main__":
  args = dict(a.lstrip("-").split("=", 1) for a in sys.argv[1:] if "=" in a)
  names = lambda key: tuple(filter(None, args.get(key, "").split(",")))
  try:
    if "verify" in args and "commit" in args:
      print(f"verified since {args['commit'][:10]}: {', '.join(verify(args['verify'], args['commit']))}")
      sys.exit(0)
    if "collect" not in args:
      sys.exit("usage: python -m experiments.page.staleness --collect=<folder the canary tests wrote> "
               "[--drop=DRIVER,... | --add=DRIVER,...]  |  --verify=<folder written on COMMIT's code> --commit=COMMIT")
    c, notes = collect(args["collect"], drop=names("drop"), add=names("add"))
  except CanaryError as e:
    sys.exit(f"error: {e}")
  for line in notes:
    print(line)
  print(f"wrote {CANARIES}: {sum(len(v) for v in c['drivers'].values())} canaries of {len(c['drivers'])} drivers")
