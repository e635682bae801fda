"""Draws that outlive the machine (experiments/framework/drawstore.py): a draw's record round-trips, is committed
alone, is read from HEAD only (in a fresh clone too), and a run with --draw_store reads its committed draws
instead of training them, to the same comparisons."""
import dataclasses
import os
import subprocess

import numpy as np
import pytest

from conftest import tiny
from experiments.framework import drawstore, outputs, pairs
from experiments.page import declared
from experiments.framework.records import FoldRecord, RowRecord, RunRecord
from pfd_jax.config import ConfigError


def _git(root, *args):
  return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


def _repo(tmp_path):
  root = tmp_path / "repo"
  root.mkdir()
  _git(root, "init", "-q")
  _git(root, "config", "user.email", "t@example.org")
  _git(root, "config", "user.name", "t")
  (root / "README").write_text("x")
  _git(root, "add", "README")
  _git(root, "commit", "-qm", "first")
  return root


def _fold(seed=0, lists=7):
  rng = np.random.default_rng(seed)
  valid = np.r_[np.ones(lists, bool), np.zeros(3, bool)]
  rows = {name: RowRecord(best={"vali": [[0.3, 0.4]], "test": [[0.25, 0.35]]}, best_epoch=[5], seconds=1.5,
                          test_lists=rng.random(valid.size).astype(np.float32)) for name in ("no_distill", "pfd")}
  return FoldRecord(rows=rows, data={"data_fingerprint": f"fp{seed}"}, train_groups=40, positive_train_groups=12,
                    seconds=3.0, test_lists_valid=valid)


def test_a_record_round_trips_exactly_and_writes_the_same_bytes(tmp_path):
  fold = _fold()
  back = drawstore.from_record(drawstore.to_record(fold, "k", {"host": "h"}))
  valid = np.asarray(fold.test_lists_valid)
  for name, r in fold.rows.items():
    np.testing.assert_array_equal(back.rows[name].test_lists, np.asarray(r.test_lists)[valid])
    assert back.rows[name].best == r.best and back.rows[name].best_epoch == r.best_epoch
  assert back.test_lists_valid.all() and back.data == fold.data
  a = drawstore.write(str(tmp_path / "a.json.gz"), drawstore.to_record(fold, "k", {"host": "h"}))
  b = drawstore.write(str(tmp_path / "b.json.gz"), drawstore.to_record(fold, "k", {"host": "h"}))
  assert open(a, "rb").read() == open(b, "rb").read()


def test_a_look_reads_only_committed_draws_in_a_fresh_clone_too(tmp_path):
  root = _repo(tmp_path)
  (root / "other.txt").write_text("staged, not mine")
  _git(root, "add", "other.txt")
  for k in (1, 2):
    f = drawstore.write(drawstore.path(str(root), "run", "rankbce", k), drawstore.to_record(_fold(k), "key"))
    drawstore.commit(str(root), f, f"draw {k}")
  assert "other.txt" in _git(root, "diff", "--cached", "--name-only")  # another staged change stays uncommitted
  drawstore.write(drawstore.path(str(root), "run", "rankbce", 3), drawstore.to_record(_fold(3), "key"))  # on disk only
  assert sorted(drawstore.committed(str(root), "run", "rankbce", "key")) == [1, 2]
  clone = tmp_path / "clone"
  subprocess.run(["git", "clone", "-q", str(root), str(clone)], check=True)
  got = drawstore.committed(str(clone), "run", "rankbce", "key")
  assert sorted(got) == [1, 2] and got[2]["data"]["data_fingerprint"] == "fp2"
  with pytest.raises(ConfigError, match="draw-0001.json.gz is a draw of another recipe"):
    drawstore.committed(str(clone), "run", "rankbce", "another")
  assert drawstore.committed(str(tmp_path), "run", "rankbce") == {}  # not a checkout: nothing committed


@pytest.mark.heavy
def test_a_run_reads_its_committed_draws_instead_of_training_them(tmp_path, monkeypatch):
  from experiments.paper import table2
  root = _repo(tmp_path)
  monkeypatch.setattr(drawstore, "ROOT", str(root))
  cfg = tiny(table2.Options(methods=("no_distill", "pfd"), draw_store="t"), data=dict(draws=2),
             train=dict(select_on="vali", curves="select"), run=dict(seeds=1, loss="rankbce"))
  first = table2.run(cfg)["losses"]["rankbce"]
  assert sorted(drawstore.committed(str(root), "t", "rankbce", drawstore.recipe_key(cfg))) == [1, 2]
  # the cost probe (a few epochs of the first draw) keeps no draw in the store
  from experiments.framework import costing
  probed = cfg.replace(options=dataclasses.replace(cfg.options, draw_store="probed"), data=dict(draws=3))
  costing.probe(table2.DRIVER, probed)
  assert drawstore.committed(str(root), "probed", "rankbce") == {}
  assert not (root / drawstore.FOLDER / "probed").exists()
  trained, real_run_fold = [], table2.run_fold
  monkeypatch.setattr(table2, "run_fold", lambda *a, **k: trained.append(a) or pytest.fail("a committed draw trained"))
  again = table2.run(cfg)["losses"]["rankbce"]
  assert not trained
  for k in ("fold1", "fold2"):
    a, b = first.folds[k], again.folds[k]
    valid = np.asarray(a.test_lists_valid, bool)
    np.testing.assert_array_equal(np.asarray(b.rows["pfd"].test_lists), np.asarray(a.rows["pfd"].test_lists)[valid])
  # the claims' per-draw units are the same numbers
  np.testing.assert_array_equal(pairs.aggregate(first)["pfd"], pairs.aggregate(again)["pfd"])
  # a decided comparison stops needing its rows: a run of the PFD rows alone (--nobaseline) continues the same store,
  # reads the committed draws' PFD rows and trains its third draw's only; its table compares with the PFD teacher
  monkeypatch.setattr(table2, "run_fold", real_run_fold)
  pfd_only = cfg.replace(options=dataclasses.replace(cfg.options, methods=("pfd",), baseline=False), data=dict(draws=3))
  assert drawstore.recipe_key(pfd_only) == drawstore.recipe_key(cfg)
  res = table2.run(pfd_only)
  third = drawstore.committed(str(root), "t", "rankbce", drawstore.recipe_key(cfg))[3]
  assert sorted(third["rows"]) == ["pfd", "pfd_teacher"] and third["data"]["draw"] == 3
  # a record keeps each validation list's NDCG@8 too: their mean is the best epoch's validation NDCG@8
  vali = drawstore.from_record(third).rows["pfd"].vali_lists
  assert vali.size > 0 and float(vali.mean()) == pytest.approx(third["rows"]["pfd"]["best"]["vali"][0][0], abs=1e-5)
  got = res["losses"]["rankbce"]
  np.testing.assert_array_equal(pairs.aggregate(got)["pfd"][:2], pairs.aggregate(first)["pfd"])
  assert sorted(got.folds["fold1"].rows) == ["pfd", "pfd_teacher"] and "vs PFD teacher* (runs): change" in table2.to_markdown(
      RunRecord.from_json(outputs.as_json(res)))
  with pytest.raises(ConfigError, match="draw-0003.json.gz was made without no_distill"):
    table2.run(cfg.replace(data=dict(draws=3)))
  with pytest.raises(ConfigError, match="draw_store"):
    table2.Options(draw_store="../elsewhere")


def _commit_draws(root, name, loss, per_row, n, first=1):
  """Draws first..n of store `name` committed: row r's best test NDCG@8 of draw k is per_row[r](k)."""
  for k in range(first, n + 1):
    rows = {r: RowRecord(best={"test": [[f(k)]]}, best_epoch=[3], seconds=1.0, test_lists=np.full(4, f(k), np.float32))
            for r, f in per_row.items()}
    fold = FoldRecord(rows=rows, data={"data_fingerprint": f"d{k}"}, seconds=60.0, test_lists_valid=np.ones(4, bool))
    drawstore.commit(str(root), drawstore.write(drawstore.path(str(root), name, loss, k),
                                                drawstore.to_record(fold, "key")), f"draw {k}")


def test_a_member_at_its_cap_needs_no_more_draws(tmp_path, monkeypatch):
  """PFD vs GenD, a null, undecided at the design's cap (60 draws) beside members decided early: the run has
  nothing left to draw (no rows for its next draws, and the page's plan lists it no more)."""
  from experiments.page import claims, deciding, family
  root = _repo(tmp_path)
  monkeypatch.setattr(drawstore, "ROOT", str(root))
  noise = np.random.default_rng(1).normal(0, 0.01, (deciding.DESIGN.cap + 1, 2))
  rows = {"no_distill": lambda k: 0.40, "self_distill": lambda k: 0.40, "gend": lambda k: 0.45 + noise[k, 0],
          "pfd": lambda k: 0.45 + noise[k, 1]}
  _commit_draws(root, deciding.store("yahoo_like", "rankbce"), "rankbce", rows, deciding.DESIGN.cap - 1)
  state, extra = deciding.next_draws("yahoo_like", "rankbce", claims.ALPHA / len(family.FAMILY))
  assert extra == " --methods=gend,pfd --nobaseline" and "next draws train gend and PFD" in state
  _commit_draws(root, deciding.store("yahoo_like", "rankbce"), "rankbce", rows, deciding.DESIGN.cap,
                deciding.DESIGN.cap)
  assert deciding.next_draws("yahoo_like", "rankbce", claims.ALPHA / len(family.FAMILY)) == (
      f"{deciding.DESIGN.cap} draws committed; {deciding.COMPLETE}", "")


def test_the_familys_sequential_members_are_decided_by_their_committed_draws(tmp_path, monkeypatch):
  """A planted effect on Yahoo RankBCE (PFD 0.05 over no-distillation and self-distillation, a draw's noise 0.01)
  holds at the first look whose boundary it crosses; PFD vs GenD, a null, is not decided while its draws come in;
  the other analogues, with nothing committed, are not decided; the members outside stay Holm's."""
  from experiments.page import claims, deciding, family
  root = _repo(tmp_path)
  monkeypatch.setattr(drawstore, "ROOT", str(root))
  rng = np.random.default_rng(0)
  noise = {k: rng.normal(0, 0.01, 4) for k in range(1, 21)}
  _commit_draws(root, deciding.store("yahoo_like", "rankbce"), "rankbce",
                {"no_distill": lambda k: 0.40 + noise[k][0], "self_distill": lambda k: 0.40 + noise[k][1],
                 "gend": lambda k: 0.45 + noise[k][2], "pfd": lambda k: 0.45 + noise[k][3]}, 12)
  decided = family.resolve({})
  seq = {d.member.claim: d for d in decided if d.member.sequential and d.member.sequential[0].startswith("yahoo_like")
         and d.member.sequential[1] == "rankbce"}
  vs = lambda versus: seq[declared.row_claim("rankbce", "pfd", versus)]
  assert vs("no_distill").adjusted.word == claims.HOLDS and vs("self_distill").adjusted.word == claims.HOLDS
  assert "decided at look" in vs("no_distill").claim.detail
  assert vs("gend").adjusted.word == claims.NOT_DECIDED and "next look at 15" in vs("gend").claim.detail
  # every row selected epoch 3 of 100 (the first 5%); a draw 60 s, so the 48 draws to its cap take 0.8 hours
  assert "24 of 24 in the first 5%, 0 in the last 10%" in vs("gend").claim.detail
  assert "a draw 60 s (sd 0 s); its cap 0.8 more hours" in vs("gend").claim.detail
  assert all(d.adjusted.word == claims.NOT_DECIDED for d in decided
             if d.member.sequential and not d.member.sequential[0].startswith("yahoo_like"))
  # the next draws train only the rows of the members still open (PFD's, GenD's), without no-distillation
  state, extra = deciding.next_draws("yahoo_like", "rankbce", claims.ALPHA / len(family.FAMILY))
  assert extra == " --methods=gend,pfd --nobaseline" and "decided against no_distill, self_distill" in state
  # a member the graph decided (its level raised by the others') needs its rows no more
  state, extra = deciding.next_draws("yahoo_like", "rankbce", claims.ALPHA / len(family.FAMILY), settled={"gend"})
  assert extra == "" and state.endswith(deciding.COMPLETE)
  state, extra = deciding.next_draws("yahoo_like", "rankbce", claims.ALPHA / len(family.FAMILY),
                                     settled={"no_distill"})
  assert extra == " --methods=gend,pfd --nobaseline"
  assert deciding.next_draws("istella_like", "rankbce", 0.025) == ("no draw committed yet", "")
  assert deciding.of_preset("yahoo_like_rankbce_sequential") == ("yahoo_like", "rankbce")
  # a sequential member decided frees its level; with none decided the others' verdicts are Holm's own
  nothing = family.resolve({}, [m for m in family.FAMILY if not m.sequential])
  assert [d.adjusted for d in nothing] == [d.adjusted for d in decided if not d.member.sequential]


def test_the_graph_over_a_family_without_sequential_decisions_is_holms():
  from experiments.page import claims
  rng = np.random.default_rng(1)
  for _ in range(100):
    m = 8
    p = rng.uniform(0, 0.01, m) ** rng.uniform(0.5, 2, m)
    fam = [claims.Claim(f"c{i}", claims.HOLDS if p[i] < 0.025 else claims.UNDECIDED, "", p=p[i], p_against=1 - p[i])
           for i in range(m)] + [None, None]
    plain = claims.adjust(fam)
    never = claims.adjust(fam, {m: (lambda level: 0, False), m + 1: (lambda level: 0, True)})
    assert [a.word for a in never[:m]] == [a.word for a in plain[:m]]
    assert never[m].word == claims.NOT_DECIDED and never[m + 1].word == claims.UNDECIDED
    always = claims.adjust(fam, {m: (lambda level: 1, False), m + 1: (lambda level: -1, False)})
    assert always[m].word == claims.HOLDS and always[m + 1].word == claims.AGAINST
    # two members decided at once free their levels: no claim Holm keeps is lost, some may be gained
    assert all(a.word == claims.HOLDS for a, b in zip(always[:m], plain[:m]) if b.word == claims.HOLDS)


def test_a_page_build_never_prunes_the_committed_draws(tmp_path):
  from experiments.page import pagefiles
  archive = tmp_path / "published"
  (archive / "old-run").mkdir(parents=True)
  drawstore.write(drawstore.path(str(tmp_path), "s", "rankbce", 1), drawstore.to_record(_fold(), "k"))
  pagefiles.prune(str(archive), set())
  assert not (archive / "old-run").exists() and (archive / pagefiles.DRAWS / "s" / "rankbce").is_dir()
  assert drawstore.FOLDER == os.path.join(pagefiles.ARCHIVE, pagefiles.DRAWS)
