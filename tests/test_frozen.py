"""The family frozen before its runs (experiments/page/frozen.py): a run records the members it decides, a
member changed after its run is marked amended or fails here."""
import json
import os

import pytest

from experiments.page import family, frozen
from experiments.page.staleness import ROOT

PUBLISHED = os.path.join(ROOT, "published")


def _prov(members, run, commit=None):
  return dict(family=family.declaration(run, members), code=dict(git_commit=commit))


def test_a_member_hash_covers_what_its_verdict_depends_on_and_not_its_words_about_it():
  m = family.FAMILY[0]._replace(declared=family.FAMILY[0].declaration)  # as its driver declares it (the same hash)
  assert family.member_hash(m) == family.member_hash(family.FAMILY[0])
  for field, value in (("text", m.text + "!"), ("run", "x/y"), ("population", "fixed"), ("unit", "runs")):
    assert family.member_hash(m._replace(**{field: value})) != family.member_hash(m), field
  for field, value in (("form", "equivalence"), ("margin", 0.05), ("source", "SDR")):  # the claim's declaration
    moved = m._replace(declared=m.declaration._replace(**{field: value}))
    assert family.member_hash(moved) != family.member_hash(m), field
  assert family.member_hash(m._replace(quote="a sentence", amended="abc: why")) == family.member_hash(m)
  decl = family.declaration(m.run)
  assert decl["hash"] == family.family_hash() and decl["members"][m.claim] == family.member_hash(m)
  assert sorted(decl["members"]) == sorted(x.claim for x in family.FAMILY if x.run == m.run)  # by id, one each
  assert family.declaration("no/such_run")["members"] == {}


def test_a_member_changed_after_its_run_is_caught_unless_marked_amended():
  m = family.FAMILY[2]._replace(amended="", declared=family.FAMILY[2].declaration)
  prov = _prov((m,), m.run)
  assert frozen.frozen(m, prov) == (frozen.Frozen("frozen", frozen.frozen(m, prov).detail, False))
  planted = m._replace(declared=m.declaration._replace(margin=m.margin + 0.01))  # its margin moved after the run
  caught = frozen.frozen(planted, prov)
  assert caught.status == "changed after its run" and caught.unmarked
  marked = frozen.frozen(planted._replace(amended="0123456: its margin, 1% -> 2%"), prov)
  assert marked == frozen.Frozen("amended after its run", "0123456: its margin, 1% -> 2%", False)
  reworded = frozen.frozen(m._replace(text="another claim"), prov)  # found by its id: its words changed
  assert reworded.unmarked and family.member_hash(m) in reworded.detail
  other = frozen.frozen(m._replace(claim="table2:rankbce:another"), prov)  # a member its run never declared
  assert other.unmarked and "not declared" in other.detail
  by_text = dict(prov, family=dict(prov["family"], members={m.text: family.member_hash(m)}))  # an older run's record
  assert frozen.frozen(m, by_text).status == "frozen"


def test_a_run_without_a_recorded_family_is_read_against_family_py_at_its_commit():
  """family.py where it lay at the run's commit (it moved with the page's modules, whose old names the older
  declaration imports), and no verdict on a run that changed the declarations uncommitted."""
  first = frozen.git(ROOT, "log", "--diff-filter=A", "--format=%H", "--", frozen.FAMILY_FILES[-1]).stdout.split()
  if not first:
    pytest.skip("no git history of family.py here")
  before = frozen.git(ROOT, "rev-parse", f"{first[-1]}^").stdout.strip()
  m = family.FAMILY[0]
  assert frozen.frozen(m, dict(code=dict(git_commit=before))).status == "declared after its run"
  at = frozen.declared_at(first[-1])  # experiments/framework/family.py, importing experiments.framework.claims
  assert at is not None and all(len(h) == 12 for h in at.values())
  assert "experiments.framework.claims" not in __import__("sys").modules  # the old names lent only while it ran
  edited = dict(code=dict(git_commit=first[-1], git_changed=["experiments/page/family.py", "README.md"]))
  assert frozen.frozen(m, edited) == frozen.Frozen(
      "unknown", "the declarations had uncommitted changes when it ran (experiments/page/family.py)", False)
  other = dict(code=dict(git_commit=first[-1], git_changed=["README.md"]))
  assert frozen.frozen(m, other).status != "unknown"



def test_members_that_share_a_claim_id_and_text_are_read_against_their_own_run_at_a_commit():
  """Each analogue's Table 2 run declares members of the same claim id and text; read at a commit, each is its own
  run's member (keyed by run and claim), not the last of that text: at HEAD every member is declared before its run."""
  head = frozen.git(ROOT, "rev-parse", "HEAD").stdout.strip()
  if not head or frozen.git(ROOT, "diff", "--quiet", "HEAD", "--", *frozen.DECLARING).returncode != 0:
    pytest.skip("no git history here, or the declarations are edited uncommitted")
  shared = [m for m in family.FAMILY if m.claim == "table2:rankbce:pfd-vs-gend"]
  assert len({m.run for m in shared}) >= 3  # the synthetic default's and the analogues' runs
  at = {m: frozen.frozen(m, dict(code=dict(git_commit=head))).status for m in family.FAMILY}
  assert set(at.values()) == {"declared before its run"}, {m.run: s for m, s in at.items() if "before" not in s}

def test_every_published_deciding_run_is_frozen_or_its_change_marked():
  """The page's runs (published/, as the report archives them): no member changed after its run unmarked."""
  if not os.path.isdir(PUBLISHED):
    pytest.skip("no published runs")
  unmarked = []
  for m in family.FAMILY:
    path = os.path.join(PUBLISHED, m.run.replace("/", "-"), "provenance.json")
    if os.path.exists(path):
      with open(path) as f:
        found = frozen.frozen(m, json.load(f))
      unmarked += [f"{m.run}: {m.text}: {found.detail}"] if found.unmarked else []
  assert not unmarked, unmarked
