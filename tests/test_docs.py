"""The README and docs say only what is true of the code: every flag a `python -m experiments.X ...` line uses is
one that driver defines (issue 50)."""
import ast
import functools
import glob
import importlib
import os
import re

from absl import flags

from experiments.framework import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
# a command runs to the end of its line (a trailing backslash continues it), a comment, a table cell or code span
COMMAND = re.compile(r"python -m experiments\.(\w+)([^\n`|#]*)")
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
    if module.isupper():  # a placeholder: experiments.X
      continue
    runs = [(module, args)]
    if " -- " in args:  # experiments.launch's own flags, then the driver it starts and that driver's flags
      args, driver = args.split(" -- ", 1)
      runs = [(module, args), tuple((driver.strip().split(None, 1) + [""])[:2])]
      runs[1] = (runs[1][0].removeprefix("experiments."), runs[1][1])
    for mod, a in runs:
      if not os.path.exists(os.path.join(ROOT, "experiments", mod + ".py")):
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
  for path in sorted(glob.glob(os.path.join(ROOT, "experiments", "*.py"))):
    mod = importlib.import_module(f"experiments.{os.path.basename(path)[:-3]}")
    if hasattr(mod, "DRIVER"):
      fv = flags.FlagValues()
      cli.define_flags(mod.DRIVER, fv, key_module=mod.__name__)
      assert "--seeds" in fv.get_help() or "seeds" not in fv, mod.__name__


def test_the_check_catches_a_planted_wrong_flag():
  assert wrong_flags("python -m experiments.table2 --dataset=letor --data_dir=x --teaching=listwise") == []
  assert wrong_flags("run `python -m experiments.table2 --nosearch --datset=letor`") == [("table2", "datset")]
  assert wrong_flags("python -m experiments.theory \\\n    --teaching=listwise") == [("theory", "teaching")]
  assert wrong_flags("python -m experiments.tabel2") == [("tabel2", "(no such driver)")]
  assert wrong_flags("python -m experiments.launch --num_processes=2 -- experiments.table2 --epochs=20") == []
  assert wrong_flags("python -m experiments.launch --epochs=2 -- experiments.table2 --port=1") == [
      ("launch", "epochs"), ("table2", "port")]
