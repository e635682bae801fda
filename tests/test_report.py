"""experiments.report: RESULTS.md from results folders, verdicts from the intervals, stale runs marked, a
missing run an error."""
import gzip
import json
import os
import shutil
import subprocess

import numpy as np
import pytest
from scipy import stats as sps

from conftest import tiny
from experiments.page import judged
import experiments
from experiments import report
from experiments.paper import table2, table3_logs, table5_positive_groups, table6_imputation
from experiments.framework import outputs, rundir, tabulate
from experiments.page import claims, family, familypage, pagefiles, published, staleness, sweeps
from pfd_jax.ops import stats


def _record(diff, sd, n=10, ref=0.5):
  """A comparison record of n paired runs with these differences' mean and spread (exactly)."""
  z = np.random.default_rng(0).normal(size=n)
  d = (z - z.mean()) / z.std(ddof=1) * sd + diff
  return tabulate.comparison_record(stats.paired(ref + d, np.full(n, ref)))


def test_verdicts_follow_the_interval():
  """The diagnostic superiority verdict of a comparison record: symmetric (an interval below +2% but above 0
  is no refutation), with the seeds a test would need when undecided."""
  assert claims.diagnostic(_record(0.05, 0.01))[:2] == ("holds", "")
  v, at, detail = claims.diagnostic(_record(-0.05, 0.01))
  assert (v, at) == ("does not reproduce", "") and "reversed" in detail
  v, at, detail = claims.diagnostic(_record(0.001, 0.002))  # interval ~[-0.3%, +0.5%]: undecided, a 2% gain ruled out
  assert (v, at) == ("undecided", "10 runs") and "ruled out" in detail
  c = _record(0.01, 0.05)  # +2% observed, wide interval
  v, at, detail = claims.diagnostic(c, folds=2)
  need = stats.runs_for_power(max(c["diff"], 0.02 * c["reference"]), c["sd"])
  assert (v, at) == ("undecided", "10 runs") and f"~{-(-need // 2):,} seeds per fold" in detail
  e = claims.estimate_of(_record(0.001, 0.002))
  assert claims.judge(e, "equivalence", 0.02)[0] == "holds"
  assert claims.judge(claims.estimate_of(_record(0.05, 0.01)), "equivalence", 0.02)[0] == "does not reproduce"
  wide = claims.estimate_of(_record(0.0, 0.05))
  assert claims.judge(wide, "equivalence", 0.02)[0] == claims.UNDECIDED
  said = claims.claim("c", wide, form="equivalence", margin=0.02)
  assert (said.word, said.at, said.verdict) == ("undecided", "10 runs", "undecided at 10 runs")
  s = sweeps.sweep("x", {"a": _record(0.05, 0.01), "b": _record(0.01, 0.05)})
  assert s.verdict == "undecided at 1 of 2 points" and "holds at a" in s.detail and "undecided at b" in s.detail


def _git(root, *args):
  env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
  return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True, env=env).stdout.strip()


@pytest.fixture(scope="module")
def table5_run():
  """Table 5 at the tiny size, once for the tests that build pages from it (outputs.as_json copies what it reads)."""
  return table5_positive_groups.run(tiny())


def _write_run(results, driver, label, res, commit):
  folder = results / driver / label / "abc"
  folder.mkdir(parents=True)
  drv = {"table5_positive_groups": table5_positive_groups.DRIVER, "table6_imputation": table6_imputation.DRIVER}[driver]
  res = dict(outputs.as_json(res), command=f"python -m {experiments.module(driver)}", wall_seconds=12.0)
  outputs.write_outputs(str(folder), res, drv)
  (folder / "provenance.json").write_text(json.dumps(dict(code=dict(git_commit=commit, git_dirty=False))))
  os.symlink("abc", results / driver / label / "latest")


def _canaries(repo, **drivers):
  (repo / "experiments" / "canaries.json").write_text(json.dumps(dict(numerics={}, drivers=drivers)))


@pytest.mark.heavy
def test_report_builds_marks_stale_and_fails_on_a_missing_run(tmp_path, table5_run):
  # a repository whose library changes twice: a refactor that keeps every canary's bits, then one that moves
  # Table 5's canary (Table 6's stays)
  repo = tmp_path / "repo"
  (repo / "pfd_jax").mkdir(parents=True)
  (repo / "experiments").mkdir()
  (repo / "pfd_jax" / "lib.py").write_text("A = 1\n")
  _canaries(repo, table5_positive_groups={"t5": "aa"}, table6_imputation={"t6": "bb"})
  _git(repo, "init", "-q")
  _git(repo, "add", "-A")
  _git(repo, "commit", "-qm", "one")
  old = _git(repo, "rev-parse", "HEAD")
  (repo / "pfd_jax" / "lib.py").write_text("A = 2\n")  # the same bits: every run stays current
  _git(repo, "commit", "-qam", "two")
  head = _git(repo, "rev-parse", "HEAD")
  (repo / "pfd_jax" / "lib.py").write_text("A = 3\n")
  _canaries(repo, table5_positive_groups={"t5": "ac"}, table6_imputation={"t6": "bb"})
  _git(repo, "commit", "-qam", "three")
  tip = _git(repo, "rev-parse", "HEAD")
  assert staleness.canary_base("table6_imputation", str(repo)) == old
  assert staleness.canary_base("table5_positive_groups", str(repo)) == tip
  assert staleness.canary_base("table2", str(repo)) is None  # no canaries: the code rule
  assert staleness.staleness(dict(git_commit=head), "table2", str(repo)).startswith("code changed since")
  # a run in a tree with uncommitted changes: its commit's code when its sources are the commit's (an untracked
  # virtualenv link beside them), else not comparable; the digest of a tree is rundir.source_digest of its files
  assert staleness.sources_at(tip, str(repo)) == rundir.source_digest({"pfd_jax/lib.py": b"A = 3\n"})
  clean = dict(git_commit=tip, git_dirty=True, source_sha256=staleness.sources_at(tip, str(repo)))
  assert staleness.staleness(clean, "table6_imputation", str(repo)) is None
  edited = dict(clean, source_sha256=rundir.source_digest({"pfd_jax/lib.py": b"A = 4\n"}))
  assert "uncommitted changes" in staleness.staleness(edited, "table6_imputation", str(repo))

  results = tmp_path / "results"
  # a real (tiny) Table 5 run, on the old commit: stale
  _write_run(results, "table5_positive_groups", "synthetic", table5_run, old)
  # Table 6 with known rows, on commit two (its canaries unchanged since one): no-distillation 5% above mean
  # imputation in every run; zero imputation
  # indistinguishable (+0.1% +- 1% around it)
  rng = np.random.default_rng(1)
  base = 0.3 + 0.01 * rng.normal(size=(10, 3))
  rows = dict(no_distill=base, mean=base / 1.05, zero=base * (1 + 0.01 * rng.normal(size=(10, 3))), teacher=base + 0.3)
  res6 = dict(config=tiny(), env=rundir.environment(), rows=rows, comparisons=tabulate.compare(rows, "no_distill"),
              seconds=1.0)
  _write_run(results, "table6_imputation", "synthetic", res6, head)

  expected = [e for e in report.EXPECTED if e.driver in ("table5_positive_groups", "table6_imputation") and
              e.label == "synthetic"]
  out = tmp_path / "page" / "RESULTS.md"
  out.parent.mkdir()
  readme = tmp_path / "README.md"
  readme.write_text(f"# x\n\n{report.BEGIN}\nPLACEHOLDER\n{report.END}\n\nafter\n")
  # a family declared for these runs: Table 6's two claims, decided by its fixed-data run, and Table 5's (whose run
  # is stale, so not decided)
  members = tuple(family.Member("Tables 5 and 6", f"{d}/synthetic", k, t, population="fixed", unit="runs")
                  for d, k, t in (("table6_imputation", "table6:no_distill-vs-mean-imputed",
                                   "No-distillation beats the PFD teacher served with mean"),
                                  ("table6_imputation", "table6:no_distill-vs-zero-imputed",
                                   "No-distillation beats the PFD teacher served with zero"),
                                  ("table5_positive_groups", "table5:positive-vs-all-groups",
                                   "Data loss on positive groups beats all groups")))
  s = report.build(str(results), str(out), root=str(repo), expected=expected, readme=str(readme), members=members)
  text = readme.read_text()
  assert "PLACEHOLDER" not in text and text.endswith("\n\nafter\n") and f"commit `{tip[:10]}`" in text
  # the README counts each group's verdicts after Holm, in lines a landing page keeps short; the page says each
  # group's conclusion, naming the claims that do not hold
  assert "| Tables 5 and 6 | 3 | 1 | 0 | 1 | 0 | 1 |" in text and max(map(len, text.splitlines())) <= 250
  md = out.read_text()
  assert ("Tables 5 and 6** (3 claims; on the synthetic default): after Holm, 1 holds, 1 undecided, 1 not decided "
          "(No-distillation beats the PFD teacher served with zero: undecided at 10 runs; Data loss on positive groups "
          "beats all groups: not decided, stale (the canaries") in " ".join(md.split())
  assert "mean-imputed z (paper, Table 6) | PFD | superiority |" in md and "| **holds** | **holds (p=" in md
  assert "Data loss on positive groups beats all groups | PFD | superiority |" in md and "| **not decided: stale (" in md
  assert s["stale"] == ["table5_positive_groups/synthetic"]
  assert ("**Stale**: the canaries of table5_positive_groups changed bits after " + old[:10] +
          f" (unchanged since {tip[:10]})") in md
  assert md.count("**Stale**") == 1 and "| current |" in md
  found = {t: v for _, t, v in s["claims"]}
  assert found["No-distillation beats the PFD teacher served with mean-imputed z (paper, Table 6)"] == "holds"
  # the paper's claims first, each with its form, the run that decides it, population, selection and
  # Holm-adjusted verdict (the declared family of three); ours marked exploratory
  top = md[md.index("## The paper's claims"):md.index("## The runs")]
  assert top.count("| PFD | superiority | [table6_imputation/synthetic](#table6_imputation-synthetic) | fixed (one "
                   "draw) | test |") == 2 and "exploratory" not in top and "| **not decided: stale (" in top
  assert "| exploratory |" in md and "After Holm" in md
  # the runs table counts the verdicts after Holm (ours apart); the stale run's member is not decided
  assert "| [Table 6: the teacher served with imputed z](#table6_imputation-synthetic) | 1 holds; 1 undecided |" in md
  assert "](#table5_positive_groups-synthetic) | 1 not decided; 1 exploratory |" in md
  assert "The 2 runs with results files took 24 s of wall time in all" in " ".join(md.split())
  assert found["No-distillation beats the PFD teacher served with zero-imputed z (paper, Table 6)"] != "holds"
  # each run's own table, command, commit and figure
  assert "### Table 6: PFD teacher with imputed privileged features" in md
  assert "Command: `python -m experiments.paper.table6_imputation`" in md and f"Commit: `{head[:10]}`" in md
  assert (out.parent / "published" / "table6_imputation-synthetic" / "table6.png").stat().st_size > 1000
  assert "](published/table6_imputation-synthetic/table6.png)" in md

  # the page's own copy of its runs: a clone without the results tree rebuilds the same page from it
  archived = sorted(p.name for p in (out.parent / "published" / "table6_imputation-synthetic").iterdir())
  assert archived == ["fingerprint.txt", "origin.txt", "provenance.json", "results.json.gz", "table.md", "table6.png"]
  json_before = (out.parent / "RESULTS.json").read_text()
  shutil.move(str(results), str(tmp_path / "elsewhere"))
  again = report.build(str(results), str(out), root=str(repo), expected=expected, readme=str(readme), members=members)
  assert out.read_text() == md and (out.parent / "RESULTS.json").read_text() == json_before
  assert again["claims"] == s["claims"] and again["stale"] == s["stale"]
  shutil.move(str(tmp_path / "elsewhere"), str(results))

  # a driver without results: an error naming it and its command, and the page is left as it was
  expected.append(next(e for e in report.EXPECTED if e.driver == "table3_logs"))
  with pytest.raises(report.Missing, match=r"table3_logs/logs .*run: python -m experiments.paper.table3_logs"):
    report.build(str(results), str(out), root=str(repo), expected=expected)
  assert out.read_text() == md
  # unless asked to mark it: then the page says it is missing, with its command
  s = report.build(str(results), str(out), root=str(repo), expected=expected, mark_missing=True)
  assert "table3_logs/logs" in s["stale"] and "| **missing** |" in out.read_text()
  assert "run `python -m experiments.paper.table3_logs`" in out.read_text()
  # a run for an accelerator that none has made yet: not missing, no section of its own, counted under the runs
  # table with the pointer to `report --plan`
  web = next(e for e in report.EXPECTED if e.accelerator)
  s = report.build(str(results), str(out), root=str(repo), expected=expected[:-1] + [web])
  flat = " ".join(out.read_text().split())  # prose is wrapped on the page (pagelayout.wrap)
  assert web.key not in s["stale"] and f'<a id="{web.anchor}">' not in flat and web.title not in flat
  assert "1 declared run has not run yet: `python -m experiments.report --plan` lists each" in flat


@pytest.mark.heavy
def test_a_run_without_files_is_carried_from_the_page_it_replaces(tmp_path, table5_run):
  """--carry: a run absent from the results tree and the page's copy keeps the earlier page's section verbatim,
  marked carried, with its RESULTS.json record and figures; its claims leave the Holm family; a second rebuild
  carries it unchanged; without --carry it is missing."""
  t5, t6 = (next(e for e in report.EXPECTED if e.driver == d) for d in ("table5_positive_groups", "table6_imputation"))
  results, page = tmp_path / "results", tmp_path / "page" / "RESULTS.md"
  page.parent.mkdir()
  _git(tmp_path, "init", "-q")
  (tmp_path / "f").write_text("x")
  _git(tmp_path, "add", "-A")
  _git(tmp_path, "commit", "-qm", "one")
  commit = _git(tmp_path, "rev-parse", "HEAD")
  _write_run(results, "table5_positive_groups", "synthetic", table5_run, commit)
  rng = np.random.default_rng(1)
  base = 0.3 + 0.01 * rng.normal(size=(10, 3))
  rows = dict(no_distill=base, mean=base / 1.05, zero=base, teacher=base + 0.3)
  _write_run(results, "table6_imputation", "synthetic", dict(
      config=tiny(), env=rundir.environment(), rows=rows, comparisons=tabulate.compare(rows, "no_distill"),
      seconds=1.0), commit)
  report.build(str(results), str(page), root=str(tmp_path), expected=[t5, t6])
  first = page.read_text()
  section = first[first.index(f'<a id="{t6.anchor}"></a>'):]
  # an earlier page's layout: its figures under figures/<anchor>/, which the carried section moves beside the page
  shutil.move(str(page.parent / "published" / t6.anchor), str(tmp_path / "old6"))
  (page.parent / "figures" / t6.anchor).mkdir(parents=True)
  shutil.copy(str(tmp_path / "old6" / "table6.png"), str(page.parent / "figures" / t6.anchor))
  page.write_text(first.replace(f"](published/{t6.anchor}/", f"](figures/{t6.anchor}/"))
  shutil.rmtree(results / "table6_imputation")
  with pytest.raises(report.Missing, match="table6_imputation/synthetic"):
    report.build(str(results), str(page), root=str(tmp_path), expected=[t5, t6])
  s = report.build(str(results), str(page), root=str(tmp_path), expected=[t5, t6], carry=True)
  md = page.read_text()
  assert s["carried"] == [t6.key] and t6.key not in s["stale"]
  assert {k for k, _, _ in s["claims"]} == {t5.key}  # the carried run's claims are not re-judged nor adjusted
  carried = md[md.index(f'<a id="{t6.anchor}"></a>'):]
  assert carried.count("**Carried** from the page of commit") == 1 and f"commit `{commit[:10]}`" in carried
  note = carried[carried.index("**Carried**"):carried.index("\n\n", carried.index("**Carried**")) + 2]
  assert carried.replace(note, "") == section  # verbatim, figure links included
  assert (page.parent / "published" / t6.anchor / "table6.png").exists()
  assert "| carried from an older page | current, **carried** |" in md  # its verdicts are that page's: in no tally
  assert json.loads((page.parent / "RESULTS.json").read_text())[t6.key]["verdicts"]
  report.build(str(results), str(page), root=str(tmp_path), expected=[t5, t6], carry=True)
  assert page.read_text() == md


def test_every_entry_has_a_driver_and_claims_for_each_paper_result():
  import importlib
  for e in report.EXPECTED:
    mod = importlib.import_module(experiments.module(e.driver))
    assert mod.DRIVER.name == e.driver and f"python -m {mod.__name__}" in e.command
  assert {e.driver for e in report.EXPECTED} >= {"table2", "table3_logs", "theory", "fig3_alpha", "alpha_robustness",
                                                 "fig4_sparsity", "fig5_correlation", "table5_positive_groups",
                                                 "table6_imputation", "sdr", "rank_distill", "committee_perceptron"}



def test_every_driver_on_the_page_has_canaries():
  """A driver without canaries goes stale at any change of the library or the experiments (staleness's older
  rule): each driver whose runs the page shows must have canaries in experiments/canaries.json."""
  with open(os.path.join(staleness.ROOT, staleness.CANARIES)) as f:
    have = set(json.load(f)["drivers"])
  assert sorted({e.driver for e in report.EXPECTED} - have) == []

# ------------------------------------------------------------------ configurations and --check


def _table6(results, label, rows, numerics, commit="c0"):
  """A Table 6 run with known rows (no training) recorded on the given numerics."""
  env = dict(rundir.environment(), numerics=numerics)
  res = dict(config=tiny(), env=env, rows=rows, comparisons=tabulate.compare(rows, "no_distill"), seconds=1.0)
  _write_run(results, "table6_imputation", label, res, commit)
  return results / "table6_imputation" / label / "abc" / "results.json"


def _rows(shift=0.0):
  base = 0.3 + 0.01 * np.random.default_rng(1).normal(size=(10, 3))
  return dict(no_distill=base + shift, mean=base / 1.05, zero=base * 0.99, teacher=base + 0.3)


def test_fingerprint_covers_results_not_circumstances():
  res = dict(rows=dict(a=[0.25, 0.5]), seconds=3.0, env=dict(cpus=2), command="x",
             config=dict(output=dict(out_dir="/a"), data=dict(data_dir="/b", t=4.0)))
  same = json.loads(json.dumps(res))
  same.update(seconds=9.0, env=dict(cpus=16), command="y")
  same["config"]["output"]["out_dir"], same["config"]["data"]["data_dir"] = "/c", "/d"
  assert published.fingerprint(res) == published.fingerprint(same)
  for path in (("rows", "a"), ("config", "data")):
    other = json.loads(json.dumps(res))
    if path[0] == "rows":
      other["rows"]["a"][1] = 0.5000000000000001  # one ulp is another result
    else:
      other["config"]["data"]["t"] = 2.0
    assert published.fingerprint(other) != published.fingerprint(res)


def test_cells_and_their_comparison(monkeypatch):
  t = "| a | 0.287 ± 0.024 (+0.0%) | 0.35 ± 0.1 |\n| b | -0.010 ± 0.002 | 12 |"
  assert published.cells(t) == [("0.287", "0.024"), ("0.35", "0.1"), ("-0.010", "0.002")]
  pub = [("0.287", "0.024"), ("0.308", "0.019"), ("0.733", "0.001")]
  assert published.compare_cells(pub, pub, 5) == (True, "all 3 cells equal")
  # tolerance = lambda * sqrt(2 / runs) * std + one unit of the last digit; with one measured ratio r = 0.25,
  # lambda = sqrt(r) * z, z the normal quantile for 95% over the 3 cells
  monkeypatch.setattr(published, "spread", lambda: dict(ratios=dict(cells=[0.25])))
  z = sps.norm.ppf(1 - (1 - 0.95 ** (1 / 3)) / 2)
  assert published.tolerance(pub[0], 5, 3) == pytest.approx(z * 0.5 * 0.4 ** 0.5 * 0.024 + 0.001, rel=1e-9)
  assert published.tolerance(("0.35", "0.1"), 20, 3) == pytest.approx(z * 0.5 * 0.1 ** 0.5 * 0.1 + 0.01, rel=1e-9)
  ok, detail = published.compare_cells([("0.305", "0.024"), ("0.295", "0.019"), ("0.734", "0.001")], pub, 5)
  assert ok and detail.startswith("3 of 3 cells differ; the largest move, 0.287 ± 0.024 -> 0.305, is 0.94 of")
  assert not published.compare_cells([("0.307", "0.024"), ("0.308", "0.019"), ("0.733", "0.001")], pub, 5)[0]
  assert not published.compare_cells([("0.287", "0.024"), ("0.308", "0.019"), ("0.735", "0.001")], pub, 5)[0]
  assert not published.compare_cells([("0.305", "0.024")] + pub[1:], pub, 20)[0]  # more runs per mean: tighter
  assert published.compare_cells(pub[:1], pub, 5)[0] is False
  ok, detail = published.compare_cells([], [], 5)  # no cells: said to be unchecked, never "all 0 cells equal"
  assert ok and detail.startswith("its table has no mean ± std cells")


def test_runs_per_cell_counts_folds_and_seeds():
  assert published.runs_per_cell(dict(config=dict(run=dict(seeds=5)), losses=dict(a=dict(folds=dict(fold1={}))))) == 5
  res = dict(config=dict(run=dict(seeds=3), data=dict(folds=[])), folds=dict(fold1={}, fold2={}, fold5={}))
  assert published.runs_per_cell(res) == 9 and published.runs_per_cell(dict(config={})) == 1


def test_a_verdict_near_its_bound_is_fragile(monkeypatch):
  """Fragile: a bound of the interval within lambda * sqrt(2 / n) * sd of the threshold the verdict reads (0 for
  the lower bound, +2% of the reference for the upper); lambda = 0.5 * 1.96 for measured ratios all 0.25."""
  monkeypatch.setattr(published, "spread", lambda: dict(ratios=dict(differences=[0.25, 0.25])))
  half, move = sps.t.ppf(0.975, 4) / 5 ** 0.5, 1.959964 * 0.5 * 0.4 ** 0.5  # in units of sd = 0.01
  # symmetric: both bounds are read at 0 (the upper decides "does not reproduce"); half-width 1.24 sd
  for lower, fragile in ((0.3, True), (-0.3, True), (1.0, False), (-3.0, True), (-4.0, False)):
    c = _record((half + lower) * 0.01, 0.01, n=5, ref=0.5)
    assert c["t_ci"][0] == pytest.approx(lower * 0.01) and bool(claims.fragility(c)) is fragile
  c = _record(0.01 - half * 0.01 + 0.5 * move * 0.01, 0.01, n=5, ref=0.5)  # upper bound near an equivalence margin
  assert c["t_ci"][1] - 0.01 == pytest.approx(0.5 * move * 0.01) and "fragile: another machine moves this change " \
      f"by up to ±{100 * move * 0.01 / 0.5:.1f}% (95%)" in claims.fragility(c, thresholds=(-0.02, 0.02))
  assert not claims.fragility(c)  # superiority reads the bound at 0 only
  rows = dict(a=0.5 + (half + 0.3) * 0.01 + np.zeros(5), b=np.full(5, 0.5))
  rows["a"] = rows["a"] + (np.arange(5) - 2) * 0.01 / np.std(np.arange(5) - 2, ddof=1)
  claim = claims.beats("a beats b", {k: v[:, None] for k, v in rows.items()}, "a", "b")
  assert claim.verdict == "holds" and claim.fragile and claim.detail.endswith("across a bound the verdict reads")


@pytest.mark.heavy
def test_page_marks_other_configurations_and_check_tells_a_newcomer(tmp_path):
  here = dict(cpu="Xeon", isa=["avx2", "avx512f"], caches="L2 2048K", threads=2, xla_flags="", python="3.11.7",
              packages=dict(jax="0.10.2"))
  there = dict(here, cpu="EPYC", isa=["avx2"], threads=16)
  entry = next(e for e in report.EXPECTED if e.driver == "table6_imputation")
  other = entry._replace(label="other", title="Table 6 again")
  pub_dir = tmp_path / "published"
  _table6(pub_dir, "synthetic", _rows(), here)
  _table6(pub_dir, "other", _rows(), there)
  page = tmp_path / "RESULTS.md"
  report.build(str(pub_dir), str(page), root=str(tmp_path), expected=[entry, other])
  md = page.read_text()
  assert md.count("| reference |") == 1 and md.count("| **other** |") == 1
  assert "**Other configuration** than the reference run (Table 6: the teacher served with imputed z): cpu: 'EPYC' " \
         "vs 'Xeon'" in md and "threads: 16 vs 2" in md
  side = json.loads((tmp_path / "RESULTS.json").read_text())
  assert side["table6_imputation/synthetic"]["numerics"] == here and len(side["table6_imputation/other"]["cells"]) > 3

  # a newcomer on the same configuration: bit-identical passes, any other bit fails
  mine = tmp_path / "mine"
  _table6(mine, "synthetic", _rows(), here)
  ok, lines = report.check_reproduction(str(mine), str(page), [entry])
  assert ok and lines == ["table6_imputation/synthetic: ok: bit-identical to the published run (same configuration)"]
  (mine / "table6_imputation").rename(tmp_path / "moved")
  _table6(mine, "synthetic", _rows(shift=1e-12), here)
  ok, lines = report.check_reproduction(str(mine), str(page), [entry])
  assert not ok and "DIFFERENT from the published run on the same configuration" in lines[0]
  # on another machine that computes the same bits (an AMD EPYC with AVX-512 and a Xeon did): bit-identical
  shutil.rmtree(mine / "table6_imputation")
  _table6(mine, "synthetic", _rows(), there)
  ok, lines = report.check_reproduction(str(mine), str(page), [entry])
  assert ok and lines[0].startswith("table6_imputation/synthetic: ok: bit-identical to the published run on another "
                                    "configuration (cpu: 'EPYC' vs 'Xeon'"), lines
  # on another machine: the cells, within the tolerance
  for shift, good in ((0.03, False), (1e-12, True), (0.002, True)):
    shutil.rmtree(mine / "table6_imputation")
    _table6(mine, "synthetic", _rows(shift=shift), there)
    ok, lines = report.check_reproduction(str(mine), str(page), [entry])
    assert ok is good and "another configuration (cpu: 'EPYC' vs 'Xeon'; isa" in lines[0], lines
  # a verdict that differs from the published one is said (not a failure: the cells decide)
  claim = "No-distillation beats the PFD teacher served with mean-imputed z (paper, Table 6)"
  assert side["table6_imputation/synthetic"]["verdicts"][claim] == "holds"
  side["table6_imputation/synthetic"]["verdicts"][claim] = "undecided at 10 runs"
  side["table6_imputation/synthetic"]["words"][claim] = "undecided"
  (tmp_path / "RESULTS.json").write_text(json.dumps(side))
  ok, lines = report.check_reproduction(str(mine), str(page), [entry])
  assert ok and lines[1:] == [f"  verdict changed: {claim}: undecided at 10 runs -> holds"]
  # a page without its .json: the page's own cells and verdicts, the configuration unknown
  assert published._page_record(md, "table6_imputation-synthetic")["verdicts"][claim] == "holds"
  (tmp_path / "RESULTS.json").unlink()
  ok, lines = report.check_reproduction(str(mine), str(page), [entry, other], required=True)
  assert not ok and "the published run's configuration is not recorded" in lines[0]
  assert lines[1] == f"table6_imputation/other: FAILED: no run in {mine}"
  assert report.check_reproduction(str(mine), str(page), [other])[0]  # absent and not required: skipped


def test_per_query_second_verdict_on_a_constructed_case():
  """PFD beats no-distillation by exactly +0.05 NDCG on every test query once seeds are averaged, while the
  seeds' run-level differences swing by +-0.3 around it: per query the claim holds (constant difference), per run
  it is undecided; the reversed case does not reproduce per query. The run verdict is never replaced."""
  from experiments.paper import table2
  from experiments.framework.records import FoldRecord, LossRecord, RowRecord
  s, q = 5, 40
  rng = np.random.default_rng(0)
  base = rng.uniform(0.2, 0.6, (s, q))
  swing = np.array([0.3, -0.3, 0.25, -0.25, 0.0])  # per-seed effects, mean 0 over the seeds
  for delta, want in ((0.05, "inside the claimed region"), (-0.05, "outside the claimed region")):
    pfd = base + delta + swing[:, None]
    valid = np.ones(q, bool)
    valid[:3] = False  # lists without a positive: not counted
    rows = {name: RowRecord(best={"test": v[:, valid].mean(1, keepdims=True)}, best_epoch=np.zeros(s), curves={},
                            loss=np.zeros((s, 1)), seconds=0.0, test_lists=v.mean(0))
            for name, v in (("pfd", pfd), ("no_distill", base))}
    fold = FoldRecord(data={}, train_groups=q, positive_train_groups=q, seconds=0.0, rows=rows, test_lists_valid=valid)
    res = outputs.as_json(dict(losses={"rankbce": LossRecord(train_config={}, folds={"fold1": fold})}))
    claim = next(c for c in judged.of("table2").claims(res) if c and "beats no-distillation" in c.text)
    assert claim.verdict == "undecided at 5 runs"
    assert claim.queries.startswith(want + ": ")
    assert f"{100 * delta / base[:, valid].mean():+.1f}%" in claim.queries


def test_page_layout_groups_the_runs_keeps_the_legend_once_and_wraps_prose():
  """RESULTS.md's reading order: runs grouped by question, the tables' shared legend replaced by a
  pointer to the one at the top (each table.md keeps its own), every prose line within 200 characters while
  tables, headings and commands in code spans stay whole."""
  from experiments.framework import tabulate
  from experiments.page import pagelayout
  keys = [pagelayout.question(d, l) for d, l in [("table2", "synthetic"), ("debias", "logs"), ("theory", "fig6"),
                                                   ("table2", "letor-logs_letor"), ("fig3_alpha", "synthetic")]]
  assert keys == ["paper", "debiasing", "theory", "practice", "paper"]
  assert pagelayout.order(keys) == [0, 4, 2, 3, 1]
  note = tabulate.stats_note("no-distillation", 10, 2, 8)
  short = pagelayout.shorten("x\n" + note + "y\n")
  assert short == ("x\nChange vs no-distillation: NDCG@8 over the 10 runs (folds x seeds) "
                   "([how to read the tables](#how-to-read-the-tables)).\ny\n")
  assert pagelayout.shorten("Change vs X: something else.\n") == "Change vs X: something else.\n"
  line = "Run `python -m experiments.paper.table2 --preset=decisive --draws=16`, " + "then read the page, " * 12
  table = "| " + " | ".join(["cell"] * 60) + " |"
  wrapped = pagelayout.wrap("\n".join(["# " + "h" * 250, line, table, "* " + line + "  "]))
  out = wrapped.split("\n")
  assert out[0] == "# " + "h" * 250 and table in out
  assert all(len(l) <= pagelayout.WIDTH for l in out if l not in (out[0], table))
  assert "`python -m experiments.paper.table2 --preset=decisive --draws=16`," in wrapped  # a code span stays whole
  assert " ".join(wrapped.split()) == " ".join(("# " + "h" * 250 + " " + line + " " + table + " * " + line).split())
  assert out[-1].endswith("  ") and all(l.startswith("  ") for l in out[out.index(table) + 2:])


def test_the_pages_copy_of_a_run_names_no_absolute_path(tmp_path):
  # a run on real data records its files by absolute path (provenance, the results' data_dir); the tracked copy
  # beside the page names them relative to the page's folder (CI failed on the data paths of two runs in published/)
  run_dir, page_dir = tmp_path / "results" / "r", tmp_path / "page"
  run_dir.mkdir(parents=True)
  data = str(tmp_path / "shared" / "data" / "Fold1" / "train.txt")
  prov = dict(data=dict(folder=str(tmp_path / "shared" / "data"), files={"fold1/train": dict(path=data, bytes=3)}))
  outputs.write_json(str(run_dir / "provenance.json"), prov)
  outputs.write_json(str(run_dir / "results.json"), dict(config=dict(data_dir=data, positive_grade=2), rows=[0.5]))
  pagefiles.archive_run(dict(folder=str(run_dir), shown="results/r"), str(page_dir / "published" / "a"))
  kept = json.loads((page_dir / "published" / "a" / "provenance.json").read_text())
  assert kept["data"]["folder"] == os.path.join("..", "shared", "data")
  assert kept["data"]["files"]["fold1/train"] == dict(path=os.path.join("..", "shared", "data", "Fold1", "train.txt"),
                                                     bytes=3)
  with gzip.open(page_dir / "published" / "a" / "results.json.gz", "rt") as f:
    assert json.load(f) == dict(config=dict(data_dir=os.path.join("..", "shared", "data", "Fold1", "train.txt"),
                                            positive_grade=2), rows=[0.5])


def test_recording_canaries_refuses_to_drop_a_driver_it_did_not_reach(tmp_path):
  """A recording over the default tier alone reaches few drivers: collecting it would drop the others' canaries."""
  path = tmp_path / "canaries.json"
  path.write_text(json.dumps(dict(numerics={"cpu": "x"}, drivers={"fig3_alpha": {"tests/a.py::t": "f1"},
                                                                   "table2": {"tests/b.py::t": "f2"}},
                                  verified_since={"table2": "abc"})))
  folder = tmp_path / "recorded"
  folder.mkdir()

  def record(name, driver, test, fp):
    (folder / name).write_text(json.dumps(dict(driver=driver, test=test, fingerprint=fp, numerics={"cpu": "y"})))

  record("1.json", "table2", "tests/b.py::t", "f2")
  before = path.read_text()
  with pytest.raises(staleness.CanaryError, match=r"no canary of fig3_alpha: the recording run did not reach it"):
    staleness.collect(str(folder), str(path))
  assert path.read_text() == before  # nothing written
  new, notes = staleness.collect(str(folder), str(path), drop=("fig3_alpha",))  # dropped on purpose
  assert set(new["drivers"]) == {"table2"} and new["verified_since"] == {"table2": "abc"} and notes == []
  record("1.json", "table2", "tests/c.py::t", "f2")  # the same canary under a new node id: said, re-recorded
  new, notes = staleness.collect(str(folder), str(path))
  assert new["drivers"] == {"table2": {"tests/c.py::t": "f2"}} and new["verified_since"] == {}
  assert notes == ["table2: canary tests re-recorded under new node ids (gone: tests/b.py::t; new: tests/c.py::t)"]


def test_canaries_added_for_a_new_driver_and_verified_on_an_earlier_commit(tmp_path):
  """--add records a driver that had no canaries from its own tests alone, the others kept; --verify sets a driver's
  verified_since only where the folder holds the file's bits on the file's configuration."""
  path = tmp_path / "canaries.json"
  path.write_text(json.dumps(dict(numerics={"cpu": "x"}, drivers={"table2": {"tests/b.py::t": "f2"}},
                                  verified_since={"table2": "abc"})))
  folder = tmp_path / "recorded"

  def record(driver, test, fp, cpu="x"):
    folder.mkdir(exist_ok=True)
    (folder / f"{driver}{test[-1]}.json").write_text(
        json.dumps(dict(driver=driver, test=test, fingerprint=fp, numerics={"cpu": cpu})))

  record("sweep", "tests/s.py::t", "f3")
  new, notes = staleness.collect(str(folder), str(path), add=("sweep",))
  both = {"sweep": {"tests/s.py::t": "f3"}, "table2": {"tests/b.py::t": "f2"}}
  assert new == dict(numerics={"cpu": "x"}, drivers=both, verified_since={"table2": "abc"}) and notes == []
  before = path.read_text()
  for add, match in ((("sweep",), "sweep already has canaries"), (("other",), "holds no canary of other")):
    with pytest.raises(staleness.CanaryError, match=match):
      staleness.collect(str(folder), str(path), add=add)
  record("other", "tests/o.py::t", "f4", cpu="y")
  with pytest.raises(staleness.CanaryError, match="mixes canaries computed on 2 configurations"):
    staleness.collect(str(folder), str(path), add=("other",))
  (folder / "sweept.json").unlink()
  with pytest.raises(staleness.CanaryError, match="another configuration"):
    staleness.collect(str(folder), str(path), add=("other",))
  assert path.read_text() == before  # nothing written
  (folder / "othert.json").unlink()
  record("sweep", "tests/s.py::t", "f3")
  assert staleness.verify(str(folder), "c0ffee", str(path)) == ["sweep"]
  assert json.loads(path.read_text())["verified_since"] == {"table2": "abc", "sweep": "c0ffee"}
  record("sweep", "tests/s.py::t", "f5")  # other bits on that commit: nothing verified
  with pytest.raises(staleness.CanaryError, match="the canaries of sweep recorded on d00d are not"):
    staleness.verify(str(folder), "d00d", str(path))


def test_the_plan_lists_what_the_page_lacks_with_its_expected_time(tmp_path, monkeypatch):
  """report --plan: the runs table's wall times read back; a re-drawn preset that never ran estimated from its
  driver's fixed run x draws / seeds x the page's measured cost of a draw against a seed; a run whose recorded
  settings differ from its preset's now is lacking, one with the preset's own settings is not."""
  from experiments.paper import table5_positive_groups as t5
  from experiments.page import pageplan
  page = tmp_path / "RESULTS.md"
  page.write_text("| Question | Run | Claims | Code | Configuration | Commit | Wall time |\n|---|---|---|---|---|---|---|\n"
                  "| paper | [main](#table2-synthetic) | - | current | reference | abc | 5 min 0 s |\n"
                  "| paper | [decisive](#table2-synthetic-decisive_redrawn) | - | current | reference | abc | 100 min 0 s |\n"
                  "| paper | [T5](#table5_positive_groups-synthetic) | - | current | reference | abc | 50 s |\n")
  walls = pageplan.walls(str(page))
  assert walls == {"table2-synthetic": 300, "table2-synthetic-decisive_redrawn": 6000,
                   "table5_positive_groups-synthetic": 50}
  expected = [e for e in report.EXPECTED if e.driver == "table5_positive_groups"]
  steps = pageplan.needed(str(tmp_path / "no_results"), str(page), expected, str(tmp_path))
  redrawn = next(s for s in steps if s.key == "table5_positive_groups/synthetic-redrawn")
  # 50 s / 5 seeds x 20 draws x (6000 s / 40 draws) / (300 s / 5 seeds)
  assert redrawn.why == "missing" and redrawn.seconds == pytest.approx(50 / 5 * 20 * (6000 / 40) / (300 / 5))
  assert "python -m experiments.paper.table5_positive_groups --preset=redrawn" in pageplan.show(steps)
  def config_of(driver, argv):  # the config a run with these flags records
    fv = pageplan.absl_flags.FlagValues()
    pageplan.cli.define_flags(driver, fv)
    fv(["prog", *argv])
    return outputs.as_json(pageplan.cli.config_from_flags(driver, fv))

  # the preset's own settings: not lacking; other folds than its preset has now: lacking, the field named
  now = config_of(t5.DRIVER, ["--tag=redrawn", "--draws=20", "--seeds=1", "--select_on=vali", "--curves=select",
                              "--synthetic_queries=400,6306,6306"])
  assert pageplan.changed(t5.DRIVER, "redrawn", {"config": now}) == ""
  was = dict(now, data=dict(now["data"], draws=6))
  assert pageplan.changed(t5.DRIVER, "redrawn", {"config": was}) == "data.draws"
  # a run that streamed its buckets (data_source: the same numbers) is no other run
  assert pageplan.changed(t5.DRIVER, "redrawn", {"config": dict(now, data=dict(now["data"], data_source="streamed"))}) == ""
  # a group the driver has no flags for is what its run derived (table3_logs: data.draws from its --draws)
  t3 = table3_logs.DRIVER
  now = config_of(t3, pageplan.lifecycle.expand_preset(t3, ["prog", "--preset=redrawn"])[1:])
  ran = dict(now, data=dict(now["data"], draws=20))
  assert pageplan.changed(t3, "redrawn", {"config": ran}) == ""
  assert pageplan.changed(t3, "redrawn", {"config": dict(ran, options=dict(now["options"], draws=6))}) == "options.draws"
  # own data whose folder is absent here (logs_letor is made by its preset's `before` command): its preset asks for
  # the PFD search by name, so a run made with the search is its run and one made without it is not
  monkeypatch.chdir(tmp_path)
  t2 = table2.DRIVER
  ran = config_of(t2, pageplan.lifecycle.expand_preset(t2, ["prog", "--preset=logs_letor"])[1:])
  assert pageplan.changed(t2, "logs_letor", {"config": ran}) == ""
  assert pageplan.changed(t2, "logs_letor", {"config": dict(ran, options=dict(ran["options"], search=False))}) == (
      "options.search")
  ran["options"]["methods"] = ["pfd"]
  assert pageplan.changed(t2, "logs_letor", {"config": ran}) == "options.methods"
  # once the page has a re-drawn ablation run, its own ratio (a draw's seconds against a seed's of its fixed run)
  page.write_text(page.read_text() +
                  "| paper | [T6](#table6_imputation-synthetic) | - | current | reference | abc | 100 s |\n"
                  "| paper | [T6r](#table6_imputation-synthetic-redrawn) | - | current | reference | abc | 4 min 0 s |\n")
  t6 = [e for e in report.EXPECTED if e.driver == "table6_imputation"]
  steps = pageplan.needed(str(tmp_path / "no_results"), str(page), expected + t6, str(tmp_path))
  redrawn = next(s for s in steps if s.key == "table5_positive_groups/synthetic-redrawn")
  assert redrawn.seconds == pytest.approx(50 / 5 * 20 * (240 / 20) / (100 / 5)) and "median over" in redrawn.basis


def test_the_selection_column_reads_the_split_a_run_chose_on():
  """A driver that chooses by hand records the split per fold (the Committee Perceptron's K and C on vali, while its
  training configuration keeps the default best-epoch split 'test'); else the configuration's split."""
  hand = {"config": {"train": {"select_on": "test"}}, "folds": {f"fold{i}": {"selected_on": "vali"} for i in (1, 2)}}
  assert familypage.selection(hand) == "vali"
  assert familypage.selection({"config": {"train": {"select_on": "vali"}}, "folds": {"fold1": {}}}) == "vali"
  assert familypage.selection({}) == "-"


def test_a_resumed_runs_wall_time_counts_what_its_loaded_rows_took():
  """A run resumed from saved rows took its own command's time plus its loaded rows' (and searches') training in
  the processes that trained them: the runs table says both, and the page's total counts both."""
  from experiments.framework import walltime
  res = dict(wall_seconds=141.0, resumed=dict(rows=20, seconds=9000.0))
  assert walltime.wall_time(res) == "2 min 21 s + 150 min 0 s in 20 rows loaded from earlier processes"
  assert walltime.wall_time(dict(wall_seconds=141.0)) == "2 min 21 s" and walltime.seconds(res) == 9141.0
  assert walltime.loaded(res) == " + 150 min 0 s in 20 rows loaded from earlier processes" and walltime.loaded({}) == ""
  assert "2 h 35 min of wall time" in walltime.total([(None, dict(res=res)), (None, dict(res=dict(seconds=159.0)))])
