"""Was a member of the family declared before the run that decides it? (experiments/framework/family.py)

A run records the family as declared when it starts (provenance.json's ``family``: the family's hash and the
hash of each member it decides by its claim id; runs before ids were recorded keyed them by the member's text,
:func:`experiments.framework.family.declaration`). A member is then

* **frozen** when the hash its run recorded is the member's hash now;
* **amended after its run** when its run recorded another hash and the member says why (``Member.amended``: the
  commit and what changed);
* **changed after its run, unmarked** when its run recorded another hash (or none for it) and the member does not
  say so: an error, which ``tests/test_frozen.py`` fails on for every run the page publishes.

A run made before runs recorded the family has no hash. Its member is read from the declaration as it stood at the
run's commit (family.py at that commit, in git): **declared before its run** when that declaration holds the member
with the same hash, **changed after its run, unmarked** when it holds another (or none), and **declared after its
run** when family.py did not exist yet at that commit.
"""
from __future__ import annotations

import functools
import types
from typing import NamedTuple, Optional

from experiments.framework import family
from experiments.framework.staleness import ROOT, git

FAMILY_FILE = "experiments/framework/family.py"


class Frozen(NamedTuple):
  status: str     # frozen, declared before its run, amended after its run, declared after its run, changed, unknown
  detail: str
  unmarked: bool  # its declaration changed after its run and the member does not say so


@functools.lru_cache(maxsize=None)
def declared_at(commit: str, root: str = ROOT) -> Optional[dict]:
  """{member text: member hash} of the family as family.py declared it at `commit`; None when family.py did not
  exist there. The file is run as a module of its own, with today's imports (what it imports is the library's
  claims module, which only names the forms)."""
  out = git(root, "show", f"{commit}:{FAMILY_FILE}")
  if out.returncode != 0:
    return None
  module = types.ModuleType(f"family_at_{commit[:10]}")
  exec(compile(out.stdout, f"{commit[:10]}:{FAMILY_FILE}", "exec"), module.__dict__)  # noqa: S102 (our own history)
  return {m.text: family.member_hash(m) for m in module.FAMILY}


def frozen(m: family.Member, prov: dict, root: str = ROOT) -> Frozen:
  """How the member `m` stands against the run `prov` (its provenance) that decides it (module docstring)."""
  mine = family.member_hash(m)
  recorded = (prov.get("family") or {}).get("members")
  commit = (prov.get("code") or {}).get("git_commit")
  if recorded is None and commit:
    try:
      recorded = declared_at(commit, root)
    except Exception as err:  # an old declaration that no longer runs: say so, never guess
      return Frozen("unknown", f"family.py at {commit[:10]} does not run today ({type(err).__name__})", False)
    if recorded is None:
      return (Frozen("amended after its run", m.amended, False) if m.amended else
              Frozen("declared after its run", f"family.py did not exist at the run's commit {commit[:10]}", False))
    where = f"as family.py declared it at the run's commit {commit[:10]}"
  elif recorded is None:
    return Frozen("unknown", "the run recorded neither the family nor its commit", False)
  else:
    where = f"its run recorded the family {prov['family'].get('hash')}"
  then = recorded.get(m.claim, recorded.get(m.text))
  if then == mine:  # a run made after an amendment is frozen with it
    return Frozen("frozen" if "family" in prov else "declared before its run", f"{mine}, {where}", False)
  if m.amended:
    return Frozen("amended after its run", m.amended, False)
  return Frozen("changed after its run", f"{mine} now, {then or 'not declared'} {where}: mark it amended", True)
