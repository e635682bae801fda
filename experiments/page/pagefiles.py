"""The page's copy of its runs: what RESULTS.md is built from, kept beside it so that any clone rebuilds it.

``python -m experiments.report`` reads each run from ``<results>/<driver>/<label>/latest`` (the results tree, which
holds models, checkpoints and caches and stays on the machine that made it) and copies what the page reads of it
into ``published/<anchor>/`` beside the page (tracked): results.json (gzipped), provenance.json, table.md, the
PNGs the page links to, and the results folder's name. A later build reads a run that the results tree lacks from
there. A run with neither (one lost before this copy existed) can be **carried**: the page being replaced keeps
its section verbatim, marked, its verdicts in that page's rules.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import shutil
from typing import Dict, Optional

from experiments.framework.records import ARCHIVED
from experiments.page import pagelayout, published
from pfd_jax.config import JsonObject
from experiments.page.staleness import staleness

ARCHIVE = "published"  # beside the page
FINGERPRINT = "fingerprint.txt"  # the run's fingerprint (published.fingerprint) before its copy left out HISTORIES
HISTORIES = ("curves", "loss")
ORIGIN = "origin.txt"  # the results folder the run was made in, as the page names it
KEPT = ("provenance.json", "table.md", ORIGIN)
CARRIED = "**Carried**"


def load_run(results: str, e, archive: Optional[str] = None) -> Optional[JsonObject]:
  """The run of `e` under <results>/<driver>/<label>/latest; else, given `archive` (the page's own copy of its runs'
  files, :func:`archive_run`), from <archive>/<anchor>/; None when neither has it."""
  folder = os.path.join(results, e.driver, e.label, "latest")
  path = os.path.join(folder, "results.json")
  if not os.path.exists(path) and archive:
    folder = os.path.join(archive, e.anchor)
    path = os.path.join(folder, ARCHIVED)
  if not os.path.exists(path):
    return None
  with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
    res = json.load(f)
  prov = res.get("provenance")
  if prov is None and os.path.exists(os.path.join(folder, "provenance.json")):
    with open(os.path.join(folder, "provenance.json")) as f:
      prov = json.load(f)
  shown = os.path.join(os.path.dirname(folder), os.readlink(folder)) if os.path.islink(folder) else folder
  if os.path.exists(os.path.join(folder, ORIGIN)):
    with open(os.path.join(folder, ORIGIN)) as f:
      shown = f.read().strip()
  run = dict(res=res, prov=prov or {}, folder=os.path.realpath(folder), shown=shown)
  if os.path.exists(os.path.join(folder, FINGERPRINT)):
    with open(os.path.join(folder, FINGERPRINT)) as f:
      run["fingerprint"] = f.read().strip()
  return run


def archive_run(run: JsonObject, folder: str) -> None:
  """Copies the files the page reads of `run` into `folder` (tracked beside the page, so that a fresh clone rebuilds
  the page without the results tree, which holds models and checkpoints and stays on the machine that ran it)."""
  if os.path.realpath(folder) == run["folder"]:
    return
  shutil.rmtree(folder, ignore_errors=True)
  os.makedirs(folder)
  base = os.path.dirname(os.path.dirname(os.path.abspath(folder)))  # the page's folder
  # mtime 0: the same results give the same bytes (git sees no change when a page is rebuilt from the same runs)
  results = os.path.join(run["folder"], "results.json")
  with open(os.path.join(folder, ARCHIVED), "wb") as raw:
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as out:
      out.write(json.dumps(_without_histories(json.loads(_portable_json(results, base))), indent=1).encode())
  with open(results) as r, open(os.path.join(folder, FINGERPRINT), "w") as f:  # the whole run's: not the copy's
    f.write(published.fingerprint(json.load(r)) + "\n")
  for name in sorted(os.listdir(run["folder"])):
    if name == "provenance.json":
      with open(os.path.join(folder, name), "w") as f:
        f.write(_portable_json(os.path.join(run["folder"], name), base))
    elif name in KEPT or name.endswith(".png"):
      shutil.copyfile(os.path.join(run["folder"], name), os.path.join(folder, name))
  with open(os.path.join(folder, ORIGIN), "w") as f:
    f.write(run["shown"] + "\n")


def _without_histories(res: JsonObject) -> JsonObject:
  """A table2-style run without its rows' per-epoch histories (curves, losses), and one seed's per-seed lists (its
  test_lists): what no page reads back (the figures drawn from them are copied as PNGs, the tables as table.md;
  claims read the best epochs and per-list NDCG), and most of a many-draw run's bytes."""
  for loss in (res.get("losses") or {}).values():
    for fold in (loss.get("folds") or {}).values() if isinstance(loss, dict) else ():
      for row in (fold.get("rows") or {}).values():
        for k in HISTORIES:
          row.pop(k, None)
        if len(row.get("seed_lists") or ()) == 1:  # one seed: its lists are test_lists
          del row["seed_lists"]
  return res


def _portable_json(path: str, base: str) -> str:
  """The JSON file at `path` (written by outputs.write_json) with every absolute path made relative to `base`, the
  page's folder: a tracked copy names no folder of the machine that ran it (a run's provenance records its data
  files by absolute path; ../shared/data/... is what a clone beside that folder resolves)."""
  def portable(v):
    if isinstance(v, dict):
      return {k: portable(x) for k, x in v.items()}
    if isinstance(v, list):
      return [portable(x) for x in v]
    return os.path.relpath(v, base) if isinstance(v, str) and os.path.isabs(v) else v
  with open(path) as f:
    return json.dumps(portable(json.load(f)), indent=1)


# A carried section is the earlier page's text but for the tables' shared legend, which the page now shows once
# at its top (experiments.page.pagelayout.shorten replaces each copy by a pointer to it).
_VERBATIM = "that page's, verbatim,"
_VERBATIM_NOW = "that page's, verbatim but for the tables' shared legend (at the top),"


def carried(page: str, entries: list, root: str, ref_numerics: Optional[JsonObject]) -> Dict[str, tuple]:
  """The sections of `entries` on the published `page` (and their RESULTS.json records), for runs whose results
  files this machine does not have: {anchor: (summary row, section, record)}. Each is the earlier page's text
  verbatim under a note that says so; its figures move beside the page (<dir>/published/<anchor>/)."""
  text = published._read(page)
  records = json.loads(published._read(os.path.splitext(page)[0] + ".json") or "{}")
  at = re.search(r"at commit `([0-9a-f]+)`", text)
  out = {}
  for e in entries:
    start = text.find(f'<a id="{e.anchor}"></a>')
    row = next((line for line in text.splitlines() if f"](#{e.anchor}) |" in line), None)
    if start < 0 or row is None:
      continue
    # it ends at the next section's anchor or the next question's heading (experiments.page.pagelayout)
    stops = [i for i in (text.find('<a id="', start + 1), text.find("\n# ", start)) if i > 0]
    section = text[start:min(stops, default=len(text))].rstrip() + "\n"
    if "**Missing**: no run in" in section:
      continue  # absent from that page too: nothing to carry
    old_figures = os.path.join(os.path.dirname(os.path.abspath(page)), "figures", e.anchor)
    if os.path.isdir(old_figures):  # a page from before the published/ folder
      shutil.copytree(old_figures, os.path.join(os.path.dirname(os.path.abspath(page)), ARCHIVE, e.anchor),
                      dirs_exist_ok=True, ignore=lambda _, names: [n for n in names if not n.endswith(".png")])
      section = section.replace(f"](figures/{e.anchor}/", f"]({ARCHIVE}/{e.anchor}/")
    record = records.get(e.key)
    section = pagelayout.shorten(section).replace(_VERBATIM, _VERBATIM_NOW, 1)
    if CARRIED not in section:
      head = f"## {e.title}\n\n" if f"## {e.title}\n\n" in section else section.split("\n\n")[1] + "\n\n"
      section = section.replace(head, head + f"{CARRIED} from the page of commit `{at.group(1) if at else '?'}`: no "
                                f"results files of this run were at hand when the page was rebuilt, so this section is "
                                f"{_VERBATIM_NOW} and its verdicts are in that page's rules, outside this page's "
                                f"Holm family. `{e.command}` brings it under this page's rules.\n\n", 1)
    cells = [c.strip() for c in row.strip().strip("|").split(" | ")]
    cells = cells[next(i for i, c in enumerate(cells) if f"](#{e.anchor})" in c):]  # less a Question column
    why = staleness(dict(git_commit=record["commit"]), e.driver, root) if record and record.get("commit") else None
    cells[2] = ("**stale**, " if why else "current, ") + "**carried**"
    if ref_numerics and record and record.get("numerics"):  # against this page's reference run
      cells[3] = "reference" if record["numerics"] == ref_numerics else "**other**"
    out[e.anchor] = (cells, section, record)
  return out


DRAWS = "draws"  # published/draws/: the deciding runs' committed draws (experiments/framework/drawstore.py), no copy


def prune(archive: str, kept: set) -> None:
  """Removes the copies of runs no longer on the page (anchors not in `kept`); never the committed draws."""
  for name in os.listdir(archive) if os.path.isdir(archive) else []:
    if name not in kept and name != DRAWS:
      shutil.rmtree(os.path.join(archive, name))
