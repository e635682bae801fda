r"""RESULTS.md from the results files: every driver's latest run of each of its presets, its table and figures,
the command, commit, machine and wall time, and one verdict per claim.

  python -m experiments.report                          # reads results/, writes RESULTS.md, RESULTS.json, published/
  python -m experiments.report --results=runs --out=mine/RESULTS.md
  python -m experiments.report --check                  # do my runs in results/ reproduce RESULTS.md?
  python -m experiments.report --list                   # the runs of the page and the commands that make them

Nothing in RESULTS.md is typed by hand: each section is the run's own table.md, its PNGs, and what its results.json
and provenance.json say. Those files are copied beside the page, into published/<anchor>/ (tracked), which the
page links to and a later build reads for a run that its results tree lacks: the results tree (models,
checkpoints, caches) stays on the machine that ran it, so without the copy a fresh clone could not rebuild the page
(each run of the page takes minutes to an hour; together some four hours on two cores). The runs are the drivers' presets
(:class:`experiments.framework.schema.Preset`) and their verdicts the claims the page declares for each driver
(:mod:`experiments.page.judged`). A run whose code has changed its bits since (:mod:`experiments.page.staleness`) is marked
**stale**; a missing run is an error (exit 1) naming every missing one and the command that makes it, never a
silent gap. A run on another machine configuration than the reference run's is marked **other**
(:mod:`experiments.page.published`).
"""
from __future__ import annotations

import importlib
import os
import sys
import time
from typing import Any, Callable, Mapping, NamedTuple, Optional

from absl import flags

import experiments
from experiments.framework import guards, machine, outputs, tabulate, walltime
from experiments.framework.records import RunRecord
from experiments.page import claims as claims_lib
from experiments.page import analoguepage, family, familypage, judged, pagefiles, pagelayout, pageplan, published
from experiments.page.claims import MARGIN
from experiments.page.readme import BEGIN, END, NoSummaryBlock, readme_summary, update_readme  # noqa: F401
from experiments.page.staleness import ROOT, git, staleness
from pfd_jax import registry
from pfd_jax.config import JsonObject

# The benchmarks (speed, memory, latency: experiments/bench/) are not on the page: their figures need an idle machine and hold no claim;
# python -m experiments.bench.benchmark [--case=...] writes them to results/benchmark/<case>/.


class Entry(NamedTuple):
  """A run the page needs: <results>/<driver>/<label>/latest, the command that makes it, its claims."""
  driver: str
  label: str
  command: str
  title: str
  claims: Optional[Callable] = None
  accelerator: str = ""   # a run for an accelerator (its projected cost): 'not run' until one ran it, not missing
  needs: str = "an accelerator"  # what such a run waits for (an accelerator, the paper's files)

  @property
  def key(self) -> str:  # how runs are named on the command line and in RESULTS.json
    return f"{self.driver}/{self.label}"

  @property
  def anchor(self) -> str:  # its section's anchor on the page
    return f"{self.driver}-{self.label}"

  def claims_of(self, res: Mapping[str, Any]) -> list:
    out = [c for c in (self.claims(RunRecord.from_json(res)) if self.claims else []) if c is not None]
    return [claims_lib.in_draws(c) for c in out] if claims_lib.redrawn(res) else out


def entries(page: tuple = experiments.PAGE) -> list:
  """Every preset of the page's drivers, as the page's entries."""
  out = []
  for name in page:
    driver = importlib.import_module(experiments.module(name)).DRIVER
    for p in driver.presets:
      command = f"python -m {experiments.module(name)}" + ("" if p.name == "default" else f" --preset={p.name}")
      out.append(Entry(name, p.label, f"{p.before} && {command}" if p.before else command, p.title,
                       judged.of(name).claims, p.accelerator, p.needs))
  return out


EXPECTED = entries()


class Missing(Exception):
  """Runs the page needs are absent (the message names each and its command)."""


def _demote(md: str) -> str:
  return "\n".join("##" + line if line.startswith("#") else line for line in md.strip().splitlines())


def _machine(env: JsonObject) -> str:
  n = env.get("numerics")
  if not n:  # a run from before the numerics were recorded
    return (f"{env.get('cpus', '?')} CPUs ({env.get('machine', '?')}), {env.get('backend', '?')} backend, "
            f"Python {env.get('python', '?')}, jax {env.get('jax', '?')}")
  a = n.get("accelerator")
  device = (f"{a['count']} x {a['device']} (driver {a['driver'] or '?'}, matmul precision {a['matmul_precision']}), "
            if a else "")
  return (device + f"{n['cpu']} ({machine.top_isa(n).upper()}; {n['caches'] or 'caches unknown'}), {n['threads']} "
          f"threads, {env.get('backend', '?')} backend, XLA_FLAGS '{n['xla_flags']}', Python {n['python']}, " +
          ", ".join(f"{p} {v}" for p, v in n["packages"].items()))


def check_reproduction(results: str, page: str, expected: list = EXPECTED, required: bool = False) -> tuple:
  """:func:`experiments.page.published.check_reproduction` of the runs under `results`."""
  return published.check_reproduction(results, page, expected, pagefiles.load_run, required)


def _without_files(e: Entry, carried: dict, results: str) -> tuple:
  """(summary row, section, RESULTS.json record or None) of a run the page has no files of: one carried from the
  page being replaced, a missing one, or one not run yet (no section: `report --plan` lists it). The row's claims
  cell says why it decides nothing (the family's members it would decide are not decided; its claims are in no
  tally)."""
  if e.anchor in carried:
    row, section, record = carried[e.anchor]
    return [row[0], "carried from an older page"] + row[2:], section, record
  if e.accelerator:
    return [e.title, f"not run: needs {e.needs}", f"not run: needs {e.needs}", "-", "-", "-"], "", None
  return ([f"[{e.title}](#{e.anchor})", "no run", "**missing**", "-", "-", "-"],
          f'<a id="{e.anchor}"></a>\n\n## {e.title}\n\n**Missing**: no run in '
          f"`{os.path.join(results, e.driver, e.label, 'latest')}`; run `{e.command}`.\n", None)


def _not_run(n: int) -> str:
  return (f"\n{n} declared run{' has' if n == 1 else 's have'} not run yet: `python -m experiments.report --plan` lists "
          "each with its command and cost; the claims above that they would decide say so.\n" if n else "")


def _counts(words: list) -> str:
  """The runs table's tally: the members' verdicts after Holm, then diagnostics and ours (exploratory)."""
  counts = {}
  for w in words:
    counts[w] = counts.get(w, 0) + 1
  return "; ".join(f"{v} {k}" for k, v in counts.items()) or "-"


def _figures(e: Entry, folder: str, out_dir: str) -> list:
  """The run's PNGs (in its archived folder beside the page) as Markdown image lines."""
  return [f"\n![{e.title}: {png}]({os.path.relpath(os.path.join(folder, png), out_dir)})\n"
          for png in sorted(p for p in os.listdir(folder) if p.endswith(".png"))]


def _section(e: Entry, run: JsonObject, claims: list, why: Optional[str], other: Optional[str], ref_title: str,
             adjusted: list) -> list:
  """A run's section of the page, less its figures (adjusted: each claim's 'After Holm' cell)."""
  res, code = run["res"], run["prov"].get("code", {})
  parts = [f'<a id="{e.anchor}"></a>\n\n## {e.title}\n\n',
           f"Command: `{res.get('command', e.command)}`  \nCommit: `{(code.get('git_commit') or '?')[:10]}`"
           f"{' (uncommitted changes)' if code.get('git_dirty') else ''}; run {res.get('env', {}).get('time', '?')} "
           f"on {_machine(res.get('env', {}))}; wall time {walltime.wall_time(res)}.  \nResults: `{run['shown']}`\n"]
  if why:
    parts.append(f"\n**Stale**: {why}. Re-run `{e.command}`.\n")
  if other:
    parts.append(f"\n**Other configuration** than the reference run ({ref_title}): {other}. Its bits "
                 f"are its configuration's (docs/reproducing.md).\n")
  if claims:
    second = any(c.queries for c in claims)  # the per-query verdicts: a second column, never the first
    head = ["Claim", "Form", "Verdict", "After Holm (page)", "Evidence (the claim's unit)"] + (
        ["Diagnostic: per test query (these models on these queries)"] if second else [])
    parts.append("\n" + tabulate.markdown_table(head, [[c.text, c.form_text, f"**{c.verdict}**", a, c.detail] +
                                                        ([c.queries or "-"] if second else [])
                                                        for c, a in zip(claims, adjusted)]))
  table = os.path.join(run["folder"], "table.md")
  if os.path.exists(table):
    with open(table) as f:
      parts.append("\n" + _demote(pagelayout.shorten(f.read())) + "\n")
  return parts


def _preamble(results: str, head: str, ref: Optional[Entry], ref_env: JsonObject) -> str:
  return (f"# pfd_jax results\n\nGenerated by `python -m experiments.report` from `{results}` at commit "
          f"`{head[:10]}` ({time.strftime('%Y-%m-%d')}); do not edit by hand. Every table below is the run's own "
          f"table.md. Each claim is declared with its form by its driver before it runs "
          f"(experiments/page/claims.py): superiority, non-inferiority or equivalence with a margin, a trend, "
          f"a shape; **holds** = the 95% interval of the claim's unit lies inside the region the claim makes, "
          f"**does not reproduce** = it lies outside it, **undecided at n units** = neither (with the units a test "
          f"would need for 80% power at the observed change or {100 * MARGIN:.0f}%), **vacuous** = the two rows are "
          f"one model (every unit scores the same; no test, in no Holm family). The unit: the data draws when "
          f"the runs re-draw their data, seeds and test queries crossed when the data are fixed and the run kept "
          f"each seed's per-query NDCG, else the runs; run-level and per-test-query intervals are diagnostics. The "
          f"papers' claims are one declared family (experiments/page/family.py), each decided by one run and "
          f"adjusted by Holm in both directions; the same claim in another run is a diagnostic; ours are "
          f"exploratory. A run is "
          f"**stale** when its "
          f"driver's canaries (tiny end-to-end runs of the test suite, experiments/canaries.json) changed bits "
          f"after the run's commit, or, for a driver without canaries, when the library (less its serving side) "
          f"or the experiments' code differs between the run's commit and HEAD. Configuration: **other** marks "
          f"a run whose machine or packages (`numerics`: CPU, instruction set, caches, threads, XLA_FLAGS, "
          f"numeric packages) differ from the reference run's" +
          (f" ({ref.title}: {_machine(ref_env)})" if ref is not None else "") +
          "; RESULTS.json beside this page has each run's fingerprint for `python -m experiments.report "
          "--check`.\n\n")


def _other(res: JsonObject, ref_env: JsonObject) -> Optional[str]:
  """None when the run's configuration is the reference run's, else how it differs."""
  numerics = res.get("env", {}).get("numerics")
  if not ref_env or numerics == ref_env["numerics"]:
    return None
  return ("its configuration is not recorded (a run from before it was)" if not numerics else
          "; ".join(machine.differences(numerics, ref_env["numerics"])))


def _judged(status: dict, members: tuple, all_claims: list, summary: list) -> tuple:
  """(the family decided, the conclusion, {id(claim): (After Holm cell, word counted)}); fills the runs table's
  claims cells with the counts of those words."""
  decided = family.resolve(status, members)
  of = {id(c): familypage.page_verdict(e.key, c, decided) for e, _, c in all_claims}
  for row in summary:
    row[1] = _counts([of[id(c)][1] for c in row[1]]) if isinstance(row[1], list) else row[1]
  return decided, family.conclusion(decided), of


class Reading(NamedTuple):
  """What the page's runs say, each in the page's order (build's first half)."""
  summary: list     # the runs table's rows (a run's claims still as Claims: _judged counts their verdicts)
  sections: list    # (entry, run, claims, why stale, other configuration) of a run with files, else its text
  claims: list      # (entry, run, Claim) of every run
  stale: list       # (entry, why) of every stale or missing run
  records: dict     # {driver/label: its RESULTS.json record}
  status: dict      # {driver/label: (its claims, '' when it can decide the family's members, else why not)}


def _read(runs: list, carried: dict, results: str, root: str, ref_env: Mapping[str, Any]) -> Reading:
  """Each run's staleness, claims, summary row, section and record; a run without files, its carried or missing
  text."""
  out = Reading([], [], [], [], {}, {})
  for e, run in runs:
    if run is None:
      row, section, record = _without_files(e, carried, results)
      out.summary.append(row)
      out.sections.append(section)
      out.records.update({e.key: record} if record else {})
      out.stale.extend([(e, "missing")] if row[2] == "**missing**" else [])
      out.status[e.key] = ((), row[1])
      continue
    res, code = run["res"], run["prov"].get("code", {})
    why, claims = staleness(code, e.driver, root), e.claims_of(res)
    out.claims.extend((e, run, c) for c in claims)
    out.status[e.key] = (claims, f"stale ({why})" if why else "")
    out.stale.extend([(e, why)] if why else [])
    out.records[e.key] = published.published_record(run, claims)
    other = _other(res, ref_env)
    out.summary.append([f"[{e.title}](#{e.anchor})", claims, "**stale**" if why else "current",
                        "**other**" if other else "reference", (code.get("git_commit") or "?")[:10], walltime.wall_time(res)])
    out.sections.append((e, run, claims, why, other))
  return out


def settled(results: str, page: str, root: str = ROOT, expected: list = EXPECTED) -> dict:
  """{its draw store's name: the versus rows of its sequential members decided after the graph}, from the runs the page
  would be built from (what `report --plan` leaves out of a sequential run's next draws)."""
  archive = os.path.join(os.path.dirname(os.path.abspath(page)), pagefiles.ARCHIVE)
  runs = [(e, pagefiles.load_run(results, e, archive)) for e in expected]
  ref_env = next((r["res"]["env"] for e, r in runs if r and r["res"].get("env", {}).get("numerics")), {})
  out = {}
  for d in family.resolve(_read(runs, {}, results, root, ref_env).status):
    if d.member.sequential and d.adjusted.word in (claims_lib.HOLDS, claims_lib.AGAINST):
      out.setdefault(d.member.sequential[0], set()).add(d.member.sequential[3])
  return out


def build(results: str, out: str, root: str = ROOT, expected: list = EXPECTED, readme: Optional[str] = None, *,
          mark_missing: bool = False, carry: bool = False, members: tuple = family.FAMILY) -> JsonObject:
  """Writes `out` (Markdown) and, beside it, RESULTS.json and published/<anchor>/ (each run's results, table and
  figures, which the page links to and a later build reads when <results> lacks the run), and the conclusion and
  the family's verdicts into `readme`'s summary block when given; returns a summary {"entries", "stale", "carried", "claims", "family"}.
  members: the declared family (experiments/page/family.py), adjusted together whatever runs are at hand.
  Raises Missing (writing nothing) if a run is absent from both, unless `carry` keeps its section from the page
  being replaced (:func:`experiments.page.pagefiles.carried`) or `mark_missing` lists it as **missing** with its command."""
  out_dir = os.path.dirname(os.path.abspath(out))
  archive = os.path.join(out_dir, pagefiles.ARCHIVE)
  runs = [(e, pagefiles.load_run(results, e, archive)) for e in expected]
  absent = [e for e, r in runs if r is None and not e.accelerator]
  # the reference configuration: the first run's (the main job's) that recorded its numerics
  ref, ref_env = next(((e, r["res"]["env"]) for e, r in runs if r and r["res"].get("env", {}).get("numerics")),
                      (None, {}))
  carried = pagefiles.carried(out, absent, root, ref_env.get("numerics")) if carry and absent else {}
  missing = [e for e in absent if e.anchor not in carried]
  if missing and not mark_missing:
    raise Missing("no results for " + "; ".join(
        f"{e.key} ({os.path.join(results, e.driver, e.label, 'latest')} is absent; run: {e.command})"
        for e in missing))
  head = git(root, "rev-parse", "HEAD").stdout.strip() or "unknown"
  summary, sections, all_claims, stale, records, status = _read(runs, carried, results, root, ref_env)
  for e, run in runs:
    if run is not None:
      pagefiles.archive_run(run, os.path.join(archive, e.anchor))
  pagefiles.prune(archive, {e.anchor for e, run in runs if run is not None} | set(carried))
  decided, conclusion, of = _judged(status, members, all_claims, summary)
  sections = [s if isinstance(s, str) else "".join(
      _section(s[0], s[1], s[2], s[3], s[4], ref.title if ref else "", [of[id(c)][0] for c in s[2]]) +
      _figures(s[0], os.path.join(archive, s[0].anchor), out_dir)) for s in sections]
  # a section per run the page has; a declared run not made yet is a line of `report --plan`, not a section
  shown = [i for i, (e, run) in enumerate(runs) if run is not None or e.anchor in carried or not e.accelerator]
  rows, parts = pagelayout.arrange([pagelayout.question(runs[i][0].driver, runs[i][0].label) for i in shown],
                                   [summary[i] for i in shown], [sections[i] for i in shown])
  page = [_preamble(results, head, ref, ref_env), pagelayout.LEGEND,
          familypage.paper_claims(decided, {e.key: run for e, run in runs if run is not None}, conclusion,
                                  {runs[i][0].key: runs[i][0].anchor for i in shown}),
          "\n## The runs\n\n",
          tabulate.markdown_table(["Question", "Run", "Claims", "Code", "Configuration", "Commit", "Wall time"], rows),
          walltime.total(runs), _not_run(len(runs) - len(shown)), "\n"] + parts + [analoguepage.section()]
  if readme:
    update_readme(readme, readme_summary(head, decided))
  with open(out, "w") as f:
    f.write(pagelayout.wrap("".join(page).rstrip()) + "\n")
  outputs.write_json(os.path.splitext(out)[0] + ".json", records)
  return dict(entries=[e.key for e in expected], stale=[e.key for e, _ in stale],
              carried=[e.key for e in expected if e.anchor in carried],
              claims=[(e.key, c.text, c.verdict) for e, _, c in all_claims],
              family=[(d.member.run, d.member.text, d.adjusted.word) for d in decided])


flags.DEFINE_string("results", "results", "The results root the drivers wrote (<results>/<driver>/<label>/latest).")
flags.DEFINE_string("out", "RESULTS.md", "The page to write (RESULTS.json and published/, its runs' copies and figures, go beside it).")
flags.DEFINE_bool("mark_missing", False, "List runs that are absent as missing on the page instead of failing.")
flags.DEFINE_bool("carry", False, "Keep, verbatim and marked carried, the section of the page being replaced for a run "
                  "absent from --results and from the page's published/ copy (a machine without that run's files); "
                  "its verdicts stay that page's, outside this page's Holm family.")
flags.DEFINE_string("readme", "README.md", "A file whose results summary block gets the page's conclusion and the family's verdicts "
                    "('' = none).")
flags.DEFINE_bool("check", False, "Write nothing: compare each run under --results with the published page --out "
                  "(and its .json): bit-identical on the same configuration, within the tolerance on another. "
                  "Exit 1 if one is not.")
flags.DEFINE_list("only", [], "With --check: these runs only, as driver/label (e.g. table2/synthetic).")
flags.DEFINE_list("registry_modules", [], "Modules that register rows, losses, teachings or datasets the runs used "
                  "(import paths or .py files; a run records its own in provenance.json's registered.modules).")
flags.DEFINE_bool("plan", False, "Print every run the page (--out) lacks (missing, stale, carried, its preset changed), "
                  "in the page's order, with its command and expected time on two cores (experiments/page/pageplan.py).")
flags.DEFINE_bool("plan_run", False, "Make the runs --plan lists, one after another (each resumes what it saved; run "
                  "again to go on after a stop), then rebuild nothing: python -m experiments.report --carry does.")
flags.DEFINE_bool("list", False, "Print the runs of the page (driver/label, title) and the commands that make them.")


def main(argv):
  del argv
  registry.import_modules(flags.FLAGS.registry_modules)
  if flags.FLAGS.plan or flags.FLAGS.plan_run:
    steps = pageplan.needed(flags.FLAGS.results, flags.FLAGS.out, EXPECTED, ROOT,
                            settled(flags.FLAGS.results, flags.FLAGS.out))
    print(pageplan.show(steps), flush=True)
    sys.exit(pageplan.run(steps) if flags.FLAGS.plan_run else 0)
  if flags.FLAGS.list:
    print("\n".join(f"{e.key}: {e.title}\n  {e.command}" for e in EXPECTED))
    return
  if flags.FLAGS.check:
    chosen = [e for e in EXPECTED if not flags.FLAGS.only or e.key in flags.FLAGS.only]
    unknown = set(flags.FLAGS.only) - {e.key for e in EXPECTED}
    if unknown:
      print(f"error: --only: no expected run {', '.join(sorted(unknown))}", file=sys.stderr, flush=True)
      sys.exit(2)
    ok, lines = check_reproduction(flags.FLAGS.results, flags.FLAGS.out, chosen, required=bool(flags.FLAGS.only))
    print("\n".join(lines))
    sys.exit(0 if ok else 1)
  try:
    s = build(flags.FLAGS.results, flags.FLAGS.out, readme=flags.FLAGS.readme or None,
              mark_missing=flags.FLAGS.mark_missing, carry=flags.FLAGS.carry)
  except (Missing, NoSummaryBlock) as e:
    print(f"error: {e}", file=sys.stderr, flush=True)
    sys.exit(1)
  verdicts = {}
  for _, _, word in s["family"]:
    verdicts[word] = verdicts.get(word, 0) + 1
  print(f"wrote {flags.FLAGS.out}: {len(s['entries'])} runs, {len(s['claims'])} claims; the papers' "
        f"{len(s['family'])} after Holm: {', '.join(f'{n} {k}' for k, n in verdicts.items())}; stale or missing: "
        f"{', '.join(s['stale']) or 'none'}; "
        f"carried: {', '.join(s['carried']) or 'none'}")


if __name__ == "__main__":
  guards.run_app(main)
