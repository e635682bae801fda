"""The README and docs say only what is true of the code and of the results files: every flag a
`python -m experiments.X ...` line uses is one that driver defines, and every measured figure they show sits in a
block that `python -m experiments.report` generates from results files."""
import ast
import functools
import glob
import importlib
import os
import re

from absl import flags

from experiments import report
from experiments.framework import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
# a command runs to the end of its line (a trailing backslash continues it), a comment, a table cell or code span
COMMAND = re.compile(r"python -m experiments\.(\w+(?:\.\w+)*)([^\n`|#]*)")
FLAG = re.compile(r"(?:^|\s|\[)--([a-z][a-z0-9_]*)")
ABSL = {"help", "helpfull", "helpshort", "helpxml", "flagfile", "undefok"}


@functools.lru_cache(maxsize=None)
def defined(module: str) -> frozenset:
  """The flags `python -m experiments.<module>` accepts: a driver's (its configuration's fields, defined as
  lifecycle.main defines them), or those its source defines with absl (flags.DEFINE_*('name', ...))."""
  mod = importlib.import_module(f"experiments.{module}")
  if hasattr(mod, "DRIVER"):
    fv = flags.FlagValues()
    cli.define_flags(mod.DRIVER, fv, key_module=module)
    return frozenset(fv) | ABSL
  tree = ast.parse(open(mod.__file__).read())
  return frozenset(n.args[0].value for n in ast.walk(tree) if isinstance(n, ast.Call)
                   and isinstance(n.func, ast.Attribute) and n.func.attr.startswith("DEFINE")
                   and n.args and isinstance(n.args[0], ast.Constant)) | ABSL


def wrong_flags(text: str) -> list:
  """(module, flag) for every flag of a `python -m experiments.X` command in `text` that X does not define (a
  boolean's --noname counts as name)."""
  out = []
  for module, args in COMMAND.findall(text.replace("\\\n", " ")):
    if module.rsplit(".", 1)[-1].isupper():  # a placeholder: experiments.X, experiments.paper.X
      continue
    runs = [(module, args)]
    if " -- " in args:  # experiments.launch's own flags, then the driver it starts and that driver's flags
      args, driver = args.split(" -- ", 1)
      runs = [(module, args), tuple((driver.strip().split(None, 1) + [""])[:2])]
      runs[1] = (runs[1][0].removeprefix("experiments."), runs[1][1])
    for mod, a in runs:
      if not os.path.exists(os.path.join(ROOT, "experiments", *mod.split(".")) + ".py"):
        out.append((mod, "(no such driver)"))
        continue
      known = defined(mod)
      out += [(mod, f) for f in FLAG.findall(a) if f not in known and not (f.startswith("no") and f[2:] in known)]
  return out


def test_every_documented_flag_exists():
  wrong = {page: wrong_flags(open(os.path.join(ROOT, page), encoding="utf-8").read()) for page in PAGES}
  assert not {p: w for p, w in wrong.items() if w}, wrong


def test_every_driver_defines_its_flags_and_help():
  """Each driver's flags define without a clash and render their --help text (in process, without starting the
  driver)."""
  for path in sorted(glob.glob(os.path.join(ROOT, "experiments", "**", "*.py"), recursive=True)):
    mod = importlib.import_module(os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".").removesuffix(".__init__"))
    if hasattr(mod, "DRIVER"):
      fv = flags.FlagValues()
      cli.define_flags(mod.DRIVER, fv, key_module=mod.__name__)
      assert "--seeds" in fv.get_help() or "seeds" not in fv, mod.__name__


def test_the_check_catches_a_planted_wrong_flag():
  assert wrong_flags("python -m experiments.paper.table2 --dataset=letor --data_dir=x --teaching=listwise") == []
  assert wrong_flags("run `python -m experiments.paper.table2 --nosearch --datset=letor`") == [("paper.table2", "datset")]
  assert wrong_flags("python -m experiments.paper.theory \\\n    --teaching=listwise") == [("paper.theory", "teaching")]
  assert wrong_flags("python -m experiments.tabel2") == [("tabel2", "(no such driver)")]
  assert wrong_flags("python -m experiments.table2") == [("table2", "(no such driver)")]  # a driver's old home
  assert wrong_flags("python -m experiments.launch --num_processes=2 -- experiments.paper.table2 --epochs=20") == []
  assert wrong_flags("python -m experiments.launch --epochs=2 -- experiments.paper.table2 --port=1") == [
      ("launch", "epochs"), ("paper.table2", "port")]


# A generated block: what `python -m experiments.report` writes between its two markers (the README's results
# summary); a page may hold any number of them.
GENERATED = re.compile(re.escape(report.BEGIN) + ".*?" + re.escape(report.END), re.S)
# Result-like figures, as a hand copy of a results file would show them: an NDCG-like value (0.xyz, not a setting
# read as "decay 0.005" or a level as "p < 0.025"), a signed change in percent, a wall time in minutes and seconds,
# a throughput in documents per second, a speed ratio.
FIGURE = re.compile(r"(?<!decay )(?<!p < )(?<![\w.])0\.\d{3}(?!\d)|[+-]\d+(?:\.\d+)?%|\b\d+ min \d+ s\b"
                    r"|\d[\d,.]* (?:documents|docs)/s|\b\d+(?:\.\d+)?x (?:slower|faster)")


def hand_figures(text: str) -> list:
  """(line number, figure) of every result-like figure of `text` outside its generated blocks."""
  kept = GENERATED.sub(lambda m: "\n" * m.group(0).count("\n"), text)
  return [(i, m.group(0)) for i, line in enumerate(kept.split("\n"), 1) for m in FIGURE.finditer(line)]


def test_every_measured_figure_is_generated():
  """A figure typed by hand drifts from the results it was copied from (an audit once found 13): the
  README and docs show measured figures only inside blocks the report writes, and link to RESULTS.md otherwise."""
  found = {page: hand_figures(open(os.path.join(ROOT, page)).read()) for page in PAGES}
  assert not {page: f for page, f in found.items() if f}


def test_the_figure_check_catches_a_planted_hand_copied_figure():
  readme = open(os.path.join(ROOT, "README.md")).read()
  block = GENERATED.search(readme).group(0)  # a figure the report writes into its block is not hand-copied
  inside = readme.replace(block, block.replace("\n<!-- end", "\n+9.9% [+1.0%, +2.0%]\n<!-- end"))
  assert "+9.9% [+1.0%, +2.0%]" in inside and hand_figures(inside) == hand_figures(readme)
  planted = readme.replace("## Documentation", "PFD gains +11.8% [+5.2%, +18.4%] (NDCG@8 0.634, 6 min 35 s, "
                           "18,567 documents/s, 7.4x slower).\n\n## Documentation", 1)
  assert [f for _, f in hand_figures(planted)] == ["+11.8%", "+5.2%", "+18.4%", "0.634", "6 min 35 s",
                                                    "18,567 documents/s", "7.4x slower"]
  assert hand_figures("weight decay 0.005; holds iff p < 0.025; Adam, lr 1e-3") == []


def test_the_readme_is_a_landing_page():
  """At most 200 lines, opening with the two set-up commands CI runs; its results summary at most 15 rows."""
  readme = open(os.path.join(ROOT, "README.md")).read()
  assert len(readme.splitlines()) <= 200
  commands = readme[readme.index("```bash\n") + 8:readme.index("\n```", readme.index("```bash\n"))].splitlines()
  assert len(commands) == 2 and commands[0].endswith("python -m experiments.paper.table2")
  assert commands[1].endswith("python -m pytest -q")
  assert GENERATED.search(readme).group(0).count("\n| [") <= 15
