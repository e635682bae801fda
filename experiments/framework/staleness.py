"""When is a published run still the code's result? Staleness by canaries, so a refactor that keeps every bit
keeps every run current, and a change of any bit marks the runs it touches stale.

Every driver has tiny end-to-end runs in the test suite (``tests/conftest.py: written``). Their results'
fingerprints (:func:`experiments.framework.published.fingerprint`) are the driver's *canaries*, committed in
``experiments/canaries.json`` with the machine configuration (``numerics``) that computed them; on that
configuration the suite fails when a canary's bits change, so the file changes exactly when a change moves bits
(re-record it over every tier of the suite: ``PFD_CANARIES=cache/canaries python -m pytest -m ""``, then
``python -m experiments.framework.staleness --collect=cache/canaries``; most canaries are in the slow tier, which
the default test command leaves out, and collecting refuses to drop a driver that the recording run did not reach).

A run of a driver is **current** when its commit is at or after the commit from which HEAD's canaries of that
driver are unchanged: walking ``canaries.json``'s history back from HEAD while the driver's entry stays the same,
the oldest such version's commit, or an earlier commit recorded in its ``verified_since`` (where the same canary
bits were shown by running the canaries on that commit). Without canaries for the driver the older rule
applies: the library (less its serving side) and the driver's modules unchanged since the run's commit.

What the rule cannot see: a change that moves bits only at a scale or on data the canaries do not reach; a
change of that kind should re-run the runs it touches.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Optional

from experiments.framework import rundir

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CANARIES = "experiments/canaries.json"
# Library code that loads, checks and exports saved models: it never changes a number a driver records.
SERVING_SIDE = ("pfd_jax/serving",)


def git(root: str, *args) -> subprocess.CompletedProcess:
  return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=60)


def _canaries_at(root: str, commit: str) -> dict:
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


def staleness(code: dict, driver: str, root: str = ROOT) -> Optional[str]:
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
  """A recording that would lose canaries: the drivers it did not reach are named."""


def collect(folder: str, path: str = os.path.join(ROOT, CANARIES), drop: tuple = ()) -> tuple:
  """Merges the canary files a test run wrote to `folder` ({driver, test, fingerprint, numerics} each) into
  `path`, keeping its verified_since entries of drivers whose canaries did not change. Returns (the new file's
  contents, lines to tell: each driver whose canary tests changed their node ids, re-recorded under the new ones).

  A driver of `path` with no canary in `folder` is a recording that did not reach it (a partial run, `-m` left at
  the default tier): CanaryError, nothing written, unless the driver is named in `drop` (its canaries removed on
  purpose)."""
  old = json.load(open(path)) if os.path.exists(path) else {}
  drivers, numerics = {}, None
  for name in sorted(os.listdir(folder)):
    with open(os.path.join(folder, name)) as f:
      c = json.load(f)
    drivers.setdefault(c["driver"], {})[c["test"]] = c["fingerprint"]
    numerics = c["numerics"]
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
  new = dict(numerics=numerics, drivers=dict(sorted(drivers.items())), verified_since=kept)
  with open(path, "w") as f:
    f.write(json.dumps(new, indent=1, sort_keys=True) + "\n")
  return new, notes


if __name__ == "__main__":
  args = dict(a.lstrip("-").split("=", 1) for a in sys.argv[1:] if "=" in a)
  if "collect" not in args:
    sys.exit("usage: python -m experiments.framework.staleness --collect=<folder the canary tests wrote> "
             "[--drop=DRIVER,...]")
  try:
    c, notes = collect(args["collect"], drop=tuple(filter(None, args.get("drop", "").split(","))))
  except CanaryError as e:
    sys.exit(f"error: {e}")
  for line in notes:
    print(line)
  print(f"wrote {CANARIES}: {sum(len(v) for v in c['drivers'].values())} canaries of {len(c['drivers'])} drivers")
