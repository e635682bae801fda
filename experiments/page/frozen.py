"""Was a member of the family declared before the run that decides it? (experiments/page/family.py)

A run records its commit and the paths it ran with uncommitted changes (provenance.json's ``code``); runs made
before the page was a package of its own also recorded the family itself (``family``: the family's hash and the
hash of each member it decides by its claim id, or by its text in the oldest). A member is then

* **frozen** when the hash its run recorded is the member's hash now;
* **declared before its run** when the declaration at the run's commit (family.py there, in git, run with
  today's imports) holds the member with the same hash;
* **amended after its run** when the run's hash is another and the member says why (``Member.amended``: the
  commit and what changed);
* **changed after its run, unmarked** when the run's hash is another (or none) and the member does not say so:
  an error, which ``tests/test_frozen.py`` fails on for every run the page publishes;
* **declared after its run** when family.py did not exist yet at the run's commit, and **unknown** when the run
  changed the declarations uncommitted (a commit cannot say what they were) or recorded no commit.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import sys
import types
from typing import NamedTuple, Optional

from experiments.page import family
from experiments.page.staleness import ROOT, git

FAMILY_FILE = "experiments/page/family.py"
DECLARING = ("experiments/page/",)  # the family and every driver's claims (experiments/page/judged/)
FAMILY_FILES = (FAMILY_FILE, "experiments/framework/family.py")  # where it lies at a commit: today's, then before
# The page's modules moved out of experiments/framework; a declaration read from an older commit imports them by
# their old names, which are lent today's modules while it runs.
_PAGE_MODULES = ("claims", "declared", "sweeps", "family", "familypage", "frozen", "deciding", "pageplan",
                 "published", "pagefiles", "pagelayout", "analoguepage", "staleness")
MOVED = {**{f"experiments.framework.{m}": f"experiments.page.{m}" for m in _PAGE_MODULES},
         "experiments.framework.paper": "experiments.framework.reported"}


class Frozen(NamedTuple):
  status: str     # frozen, declared before its run, amended after its run, declared after its run, changed, unknown
  detail: str
  unmarked: bool  # its declaration changed after its run and the member does not say so


@contextlib.contextmanager
def _old_names():
  """While it runs, the old module names of MOVED import today's modules."""
  lent = [old for old in MOVED if old not in sys.modules]
  for old in lent:
    sys.modules[old] = importlib.import_module(MOVED[old])
  try:
    yield
  finally:
    for old in lent:
      sys.modules.pop(old, None)


@functools.lru_cache(maxsize=None)
def declared_at(commit: str, root: str = ROOT) -> Optional[dict]:
  """{(the member's run, its claim id or else its text): member hash} of the family as family.py declared it at
  `commit`; None when family.py did not exist there. The file is run as a module of its own, with today's imports
  (what it imports is the library's claims module, which only names the forms)."""
  for path in FAMILY_FILES:
    out = git(root, "show", f"{commit}:{path}")
    if out.returncode == 0:
      break
  else:
    return None
  module = types.ModuleType(f"family_at_{commit[:10]}")
  with _old_names():
    exec(compile(out.stdout, f"{commit[:10]}:{path}", "exec"), module.__dict__)  # noqa: S102 (our own history)
  # by the run that decides it and its claim id (its text where it has none): one claim id and text ("PFD student
  # beats the GenD student") name a member of each analogue's run
  return {(m.run, getattr(m, "claim", None) or m.text): family.member_hash(m) for m in module.FAMILY}


def frozen(m: family.Member, prov: dict, root: str = ROOT) -> Frozen:
  """How the member `m` stands against the run `prov` (its provenance) that decides it (module docstring)."""
  mine = family.member_hash(m)
  recorded = (prov.get("family") or {}).get("members")
  commit = (prov.get("code") or {}).get("git_commit")
  edited = [p for p in (prov.get("code") or {}).get("git_changed", ()) if p.startswith(DECLARING)]
  if recorded is None and commit and edited:
    return Frozen("unknown", f"the declarations had uncommitted changes when it ran ({', '.join(edited)})", False)
  if recorded is None and commit:
    try:
      recorded = declared_at(commit, root)
    except Exception as err:  # an old declaration that no longer runs: say so, never guess
      return Frozen("unknown", f"family.py at {commit[:10]} does not run today ({type(err).__name__})", False)
    if recorded is None:
      return (Frozen("amended after its run", m.amended, False) if m.amended else
              Frozen("declared after its run", f"family.py did not exist at the run's commit {commit[:10]}", False))
    where = f"as family.py declared it at the run's commit {commit[:10]}"
    then = recorded.get((m.run, m.claim), recorded.get((m.run, m.text)))
  elif recorded is None:
    return Frozen("unknown", "the run recorded neither the family nor its commit", False)
  else:  # the members of this run alone, by claim id (or text, in the oldest records)
    where = f"its run recorded the family {prov['family'].get('hash')}"
    then = recorded.get(m.claim, recorded.get(m.text))
  if then == mine:  # a run made after an amendment is frozen with it
    return Frozen("frozen" if "family" in prov else "declared before its run", f"{mine}, {where}", False)
  if m.amended:
    return Frozen("amended after its run", m.amended, False)
  return Frozen("changed after its run", f"{mine} now, {then or 'not declared'} {where}: mark it amended", True)
