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
(:class:`experiments.framework.claims.Preset`) and their verdicts the drivers' own claims; this module only
renders them. A run whose code has changed its bits since (:mod:`experiments.framework.staleness`) is marked
**stale**; a missing run is an error (exit 1) naming every missing one and the command that makes it, never a
silent gap. A run on another machine configuration than the reference run's is marked **other**
(:mod:`experiments.framework.published`).
"""
from __future__ import annotations

import importlib
import os
import sys
import time
from typing import Any, Callable, Mapping, NamedTuple, Optional

import numpy as np
from absl import flags

from experiments import guards, machine
from experiments.framework import claims as claims_lib
from experiments.framework import outputs, pagefiles, pagelayout, published, tabulate
from experiments.framework.claims import MARGIN
from experiments.framework.records import RunRecord
from experiments.framework.staleness import ROOT, git, staleness
from pfd_jax import registry

# The drivers whose presets make the page, in its order.
PAGE = ("table2", "power", "table3_logs", "debias", "theory", "fig3_alpha", "alpha_robustness", "fig4_sparsity", "fig5_correlation",
        "table5_positive_groups", "table6_imputation", "pfd_teacher_loss", "sdr", "rank_distill",
        "committee_perceptron", "data_summary")
# The benchmarks (speed, memory, latency) are not on it: their figures need an idle machine and hold no claim;
# python -m experiments.benchmark [--case=...] writes them to results/benchmark/<case>/.


class Entry(NamedTuple):
  """A run the page needs: <results>/<driver>/<label>/latest, the command that makes it, its claims."""
  driver: str
  label: str
  command: str
  title: str
  claims: Optional[Callable] = None
  headline: bool = False  # its claims go into the README's summary too
  accelerator: str = ""   # a run for an accelerator (its projected cost): 'not run' until one ran it, not missing

  @property
  def key(self) -> str:  # how runs are named on the command line and in RESULTS.json
    return f"{self.driver}/{self.label}"

  @property
  def anchor(self) -> str:  # its section's anchor on the page
    return f"{self.driver}-{self.label}"

  def claims_of(self, res: Mapping[str, Any]) -> list:
    return [c for c in (self.claims(RunRecord.from_json(res)) if self.claims else []) if c is not None]


def entries(page: tuple = PAGE) -> list:
  """Every preset of the page's drivers, as the page's entries."""
  out = []
  for name in page:
    driver = importlib.import_module(f"experiments.{name}").DRIVER
    for p in driver.presets:
      command = f"python -m experiments.{name}" + ("" if p.name == "default" else f" --preset={p.name}")
      out.append(Entry(name, p.label, f"{p.before} && {command}" if p.before else command, p.title,
                       driver.claims, p.headline, p.accelerator))
  return out


EXPECTED = entries()


class Missing(Exception):
  """Runs the page needs are absent (the message names each and its command)."""


def _demote(md: str) -> str:
  return "\n".join("##" + line if line.startswith("#") else line for line in md.strip().splitlines())


def _machine(env: dict) -> str:
  n = env.get("numerics")
  if not n:  # a run from before the numerics were recorded
    return (f"{env.get('cpus', '?')} CPUs ({env.get('machine', '?')}), {env.get('backend', '?')} backend, "
            f"Python {env.get('python', '?')}, jax {env.get('jax', '?')}")
  return (f"{n['cpu']} ({machine.top_isa(n).upper()}; {n['caches'] or 'caches unknown'}), {n['threads']} threads, "
          f"{env.get('backend', '?')} backend, XLA_FLAGS '{n['xla_flags']}', Python {n['python']}, " +
          ", ".join(f"{p} {v}" for p, v in n["packages"].items()))


def check_reproduction(results: str, page: str, expected: list = EXPECTED, required: bool = False) -> tuple:
  """:func:`experiments.framework.published.check_reproduction` of the runs under `results`."""
  return published.check_reproduction(results, page, expected, pagefiles.load_run, required)


def _wall(res: dict) -> str:
  s = res.get("wall_seconds", res.get("seconds"))
  return "?" if s is None else (f"{s:.0f} s" if s < 120 else f"{int(s // 60)} min {int(round(s % 60))} s")


BEGIN, END = "<!-- results summary: generated by python -m experiments.report -->", "<!-- end of results summary -->"


def readme_summary(head: str, headline: list) -> str:
  """The README's block: the paper's claims of the headline runs with their verdicts (raw and after Holm),
  linking to their sections (ours, exploratory, are on the page only). headline: [(entry, claim, (adjusted p,
  adjusted verdict))]."""
  rows = [[f"[{e.title}](RESULTS.md#{e.anchor})", c.text, f"**{c.verdict}**", _adjusted(c, a), c.detail]
          for e, c, a in headline if c.confirmatory]
  return (f"{BEGIN}\nFrom RESULTS.md at commit `{head[:10]}`:\n\n" +
          tabulate.markdown_table(["Run", "Claim", "Verdict", "After Holm (page)", "Evidence (change [95% CI], p)"],
                                  rows) + END)


def _adjusted(c, a: tuple) -> str:
  """The adjusted verdict of a confirmatory claim with its Holm-adjusted p; 'exploratory' for ours."""
  p, word = a
  if not c.confirmatory:
    return "exploratory"
  return word if not np.isfinite(p) else f"{word} (p={p:.2g})"


def _population(res: dict) -> str:
  """Which data the run's runs saw: re-drawn per run (--draws) or one fixed draw; a file's folds."""
  data = res.get("config", {}).get("data", {})
  if data.get("draws"):
    return f"re-drawn: {data['draws']} draws"
  if not data:
    return "-"
  return "fixed (one draw)" if data.get("dataset", "synthetic") == "synthetic" else "the files' folds"


def _selection(res: dict) -> str:
  return res.get("config", {}).get("train", {}).get("select_on", "-")


def paper_claims(rows: list, carried: tuple = ()) -> str:
  """'The paper's claims': one row per confirmatory claim of the page, with its form, population, selection, raw
  and adjusted verdicts. rows: [(entry, run, claim, adjusted)]; carried: the entries whose sections were carried
  from an earlier page (their claims are not in the family; said under the table)."""
  table = [[f"[{e.title}](#{e.anchor})", c.text, c.source, c.form_text, _population(run["res"]),
            _selection(run["res"]), f"**{c.verdict}**", _adjusted(c, a),
            "-" if not np.isfinite(c.power) else f"{c.power:.2f}",
            "-" if not np.isfinite(c.mde) else f"{100 * c.mde:.1f}%"] for e, run, c, a in rows if c.confirmatory]
  return ("## The paper's claims\n\nEvery claim of the papers on this page, tested in the form its paper states "
          f"it (one-sided tests at {100 * claims_lib.ALPHA:g}%: a claim holds when its 95% interval lies inside the "
          "region it claims, does not reproduce when the interval lies outside it); the page's family of these "
          "claims is adjusted by Holm's step-down method (the family-wise error rate at "
          f"{100 * claims_lib.ALPHA:g}%). Population: whether the runs re-drew the data and labels (each run its own "
          "draw) or shared one fixed draw, whose verdicts speak of that draw only. Selection: the split of the best "
          f"epoch (test: the paper's protocol, optimistic). Power: the achieved power of the claim's test to find a "
          f"true {100 * MARGIN:.0f}% gain at its measured spread (the smallest over a sweep's points). MDE: the "
          "smallest true change beyond the claim's threshold that its test finds with 80% power at that spread "
          "(equivalence: the smallest margin it could establish; the largest over a sweep's points).\n\n" +
          tabulate.markdown_table(["Run", "Claim", "Source", "Form", "Population", "Selection", "Verdict (raw)",
                                   "After Holm", "Power", "MDE"], table) + "\n" + (
              "\nNot in this family: the runs carried from an earlier page (" +
              ", ".join(f"[{e.key}](#{e.anchor})" for e in carried) + "), whose results files were not at hand "
              "when the page was rebuilt; their verdicts are that page's, in its rules.\n" if carried else ""))


def update_readme(path: str, block: str) -> None:
  with open(path) as f:
    text = f.read()
  if BEGIN not in text or END not in text:
    raise Missing(f"{path} has no results summary block ({BEGIN} ... {END}) to update")
  start, stop = text.index(BEGIN), text.index(END) + len(END)
  with open(path, "w") as f:
    f.write(text[:start] + block + text[stop:])


def _without_files(e: Entry, carried: dict, results: str) -> tuple:
  """(summary row, section, RESULTS.json record or None) of a run the page has no files of: one for an accelerator
  not run yet, one carried from the page being replaced, or a missing one."""
  if e.anchor in carried:
    return carried[e.anchor]
  if e.accelerator:
    return ([f"[{e.title}](#{e.anchor})", "-", "not run: needs an accelerator", "-", "-", "-"],
            f'<a id="{e.anchor}"></a>\n\n## {e.title}\n\n**Not run yet**: it needs an accelerator '
            f"({e.accelerator}). Run `{e.command}` on one; this section then shows it.\n", None)
  return ([f"[{e.title}](#{e.anchor})", "-", "**missing**", "-", "-", "-"],
          f'<a id="{e.anchor}"></a>\n\n## {e.title}\n\n**Missing**: no run in '
          f"`{os.path.join(results, e.driver, e.label, 'latest')}`; run `{e.command}`.\n", None)


def _counts(claims: list) -> str:
  counts = {}
  for c in claims:
    counts[c.verdict.split(" at ")[0]] = counts.get(c.verdict.split(" at ")[0], 0) + 1
  return "; ".join(f"{v} {k}" for k, v in counts.items()) or "-"


def _figures(e: Entry, folder: str, out_dir: str) -> list:
  """The run's PNGs (in its archived folder beside the page) as Markdown image lines."""
  return [f"\n![{e.title}: {png}]({os.path.relpath(os.path.join(folder, png), out_dir)})\n"
          for png in sorted(p for p in os.listdir(folder) if p.endswith(".png"))]


def _section(e: Entry, run: dict, claims: list, why: Optional[str], other: Optional[str], ref_title: str,
             adjusted: list) -> list:
  """A run's section of the page, less its figures (adjusted: each claim's (Holm p, verdict))."""
  res, code = run["res"], run["prov"].get("code", {})
  parts = [f'<a id="{e.anchor}"></a>\n\n## {e.title}\n\n',
           f"Command: `{res.get('command', e.command)}`  \nCommit: `{(code.get('git_commit') or '?')[:10]}`"
           f"{' (uncommitted changes)' if code.get('git_dirty') else ''}; run {res.get('env', {}).get('time', '?')} "
           f"on {_machine(res.get('env', {}))}; wall time {_wall(res)}.  \nResults: `{run['shown']}`\n"]
  if why:
    parts.append(f"\n**Stale**: {why}. Re-run `{e.command}`.\n")
  if other:
    parts.append(f"\n**Other configuration** than the reference run ({ref_title}): {other}. Its bits "
                 f"are its configuration's (docs/reproducing.md).\n")
  if claims:
    second = any(c.queries for c in claims)  # the per-query verdicts: a second column, never the first
    head = ["Claim", "Form", "Verdict", "After Holm (page)", "Evidence (the claim's unit)"] + (
        ["Diagnostic: per test query (these models on these queries)"] if second else [])
    parts.append("\n" + tabulate.markdown_table(head, [[c.text, c.form_text, f"**{c.verdict}**", _adjusted(c, a),
                                                         c.detail] + ([c.queries or "-"] if second else [])
                                                        for c, a in zip(claims, adjusted)]))
  table = os.path.join(run["folder"], "table.md")
  if os.path.exists(table):
    with open(table) as f:
      parts.append("\n" + _demote(pagelayout.shorten(f.read())) + "\n")
  return parts


def _preamble(results: str, head: str, ref: Optional[Entry], ref_env: dict) -> str:
  return (f"# pfd_jax results\n\nGenerated by `python -m experiments.report` from `{results}` at commit "
          f"`{head[:10]}` ({time.strftime('%Y-%m-%d')}); do not edit by hand. Every table below is the run's own "
          f"table.md. Each claim is declared with its form by its driver before it runs "
          f"(experiments/framework/claims.py): superiority, non-inferiority or equivalence with a margin, a trend, "
          f"a shape; **holds** = the 95% interval of the claim's unit lies inside the region the claim makes, "
          f"**does not reproduce** = it lies outside it, **undecided at n units** = neither (with the units a test "
          f"would need for 80% power at the observed change or {100 * MARGIN:.0f}%), **vacuous** = the two rows are "
          f"one model (every unit scores the same; no test, in no Holm family). The unit: the data draws when "
          f"the runs re-draw their data, seeds and test queries crossed when the data are fixed and the run kept "
          f"each seed's per-query NDCG, else the runs; run-level and per-test-query intervals are diagnostics. The "
          f"papers' claims are confirmatory (Holm's adjustment over the page), ours exploratory. A run is "
          f"**stale** when its "
          f"driver's canaries (tiny end-to-end runs of the test suite, experiments/canaries.json) changed bits "
          f"after the run's commit, or, for a driver without canaries, when the library (less its serving side) "
          f"or the experiments' code differs between the run's commit and HEAD. Configuration: **other** marks "
          f"a run whose machine or packages (`numerics`: CPU, instruction set, caches, threads, XLA_FLAGS, "
          f"numeric packages) differ from the reference run's" +
          (f" ({ref.title}: {_machine(ref_env)})" if ref is not None else "") +
          "; RESULTS.json beside this page has each run's fingerprint for `python -m experiments.report "
          "--check`.\n\n")


def build(results: str, out: str, root: str = ROOT, expected: list = EXPECTED, readme: Optional[str] = None, *,
          mark_missing: bool = False, carry: bool = False) -> dict:
  """Writes `out` (Markdown) and, beside it, RESULTS.json and published/<anchor>/ (each run's results, table and
  figures, which the page links to and a later build reads when <results> lacks the run), and the headline claims
  into `readme`'s summary block when given; returns a summary {"entries", "stale", "carried", "claims"}.
  Raises Missing (writing nothing) if a run is absent from both, unless `carry` keeps its section from the page
  being replaced (:func:`experiments.framework.pagefiles.carried`) or `mark_missing` lists it as **missing** with its command."""
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
  summary, sections, all_claims, stale, records = [], [], [], [], {}
  for e, run in runs:
    if run is None:
      row, section, record = _without_files(e, carried, results)
      summary.append(row)
      sections.append(section)
      records.update({e.key: record} if record else {})
      stale += [(e, "missing")] if row[2] == "**missing**" else []
      continue
    res, code = run["res"], run["prov"].get("code", {})
    why, claims = staleness(code, e.driver, root), e.claims_of(res)
    all_claims += [(e, run, c) for c in claims]
    stale += [(e, why)] if why else []
    records[e.key] = published.published_record(run, claims)
    numerics, other = res.get("env", {}).get("numerics"), None
    if ref is not None and numerics != ref_env["numerics"]:
      other = ("its configuration is not recorded (a run from before it was)" if not numerics else
               "; ".join(machine.differences(numerics, ref_env["numerics"])))
    summary.append([f"[{e.title}](#{e.anchor})", _counts(claims), "**stale**" if why else "current",
                    "**other**" if other else "reference", (code.get("git_commit") or "?")[:10], _wall(res)])
    sections.append((e, run, claims, why, other))
  for e, run in runs:
    if run is not None:
      pagefiles.archive_run(run, os.path.join(archive, e.anchor))
  pagefiles.prune(archive, {e.anchor for e, run in runs if run is not None} | set(carried))
  adjusted = claims_lib.adjust([c for _, _, c in all_claims])
  of = {id(c): a for (_, _, c), a in zip(all_claims, adjusted)}
  sections = [s if isinstance(s, str) else "".join(
      _section(s[0], s[1], s[2], s[3], s[4], ref.title if ref else "", [of[id(c)] for c in s[2]]) +
      _figures(s[0], os.path.join(archive, s[0].anchor), out_dir)) for s in sections]
  rows, parts = pagelayout.arrange([pagelayout.question(e.driver, e.label) for e in expected], summary, sections)
  page = [_preamble(results, head, ref, ref_env), pagelayout.LEGEND,
          paper_claims([(e, run, c, of[id(c)]) for e, run, c in all_claims],
                       [e for e in expected if e.anchor in carried]),
          "\n## The runs\n\n",
          tabulate.markdown_table(["Question", "Run", "Claims", "Code", "Configuration", "Commit", "Wall time"], rows),
          "\n"] + parts
  if readme:
    update_readme(readme, readme_summary(head, [(e, c, of[id(c)]) for e, _, c in all_claims if e.headline]))
  with open(out, "w") as f:
    f.write(pagelayout.wrap("".join(page).rstrip()) + "\n")
  outputs.write_json(os.path.splitext(out)[0] + ".json", records)
  return dict(entries=[e.key for e in expected], stale=[e.key for e, _ in stale],
              carried=[e.key for e in expected if e.anchor in carried],
              claims=[(e.key, c.text, c.verdict) for e, _, c in all_claims])


flags.DEFINE_string("results", "results", "The results root the drivers wrote (<results>/<driver>/<label>/latest).")
flags.DEFINE_string("out", "RESULTS.md", "The page to write (RESULTS.json and published/, its runs' copies and figures, go beside it).")
flags.DEFINE_bool("mark_missing", False, "List runs that are absent as missing on the page instead of failing.")
flags.DEFINE_bool("carry", False, "Keep, verbatim and marked carried, the section of the page being replaced for a run "
                  "absent from --results and from the page's published/ copy (a machine without that run's files); "
                  "its verdicts stay that page's, outside this page's Holm family.")
flags.DEFINE_string("readme", "README.md", "A file whose results summary block gets the headline claims ('' = none).")
flags.DEFINE_bool("check", False, "Write nothing: compare each run under --results with the published page --out "
                  "(and its .json): bit-identical on the same configuration, within the tolerance on another. "
                  "Exit 1 if one is not.")
flags.DEFINE_list("only", [], "With --check: these runs only, as driver/label (e.g. table2/synthetic).")
flags.DEFINE_list("registry_modules", [], "Modules that register rows, losses, teachings or datasets the runs used "
                  "(import paths or .py files; a run records its own in provenance.json's registered.modules).")
flags.DEFINE_bool("list", False, "Print the runs of the page (driver/label, title) and the commands that make them.")


def main(argv):
  del argv
  registry.import_modules(flags.FLAGS.registry_modules)
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
  except Missing as e:
    print(f"error: {e}", file=sys.stderr, flush=True)
    sys.exit(1)
  verdicts = {}
  for _, _, v in s["claims"]:
    verdicts[v.split(" at ")[0]] = verdicts.get(v.split(" at ")[0], 0) + 1
  print(f"wrote {flags.FLAGS.out}: {len(s['entries'])} runs, {len(s['claims'])} claims "
        f"({', '.join(f'{n} {k}' for k, n in verdicts.items())}); stale: {', '.join(s['stale']) or 'none'}; "
        f"carried: {', '.join(s['carried']) or 'none'}")


if __name__ == "__main__":
  guards.run_app(main)
