"""What both commands share: flags parsed with absl into their own FlagValues, and an error as one line on stderr
with the exit code the clone's drivers use (2: a bad flag or setting; 1: bad data, a damaged model, a file that
cannot be written)."""
from __future__ import annotations

import sys
from typing import Callable, List

from absl import flags

from pfd_jax.config import ConfigError


HELP = ("--help", "-h", "--helpshort", "--helpfull", "-help")


def parse(define: Callable[[flags.FlagValues], None], argv: List[str], required: tuple,
          doc: str = "") -> flags.FlagValues:
  """`argv` parsed by the flags `define` declares; --help (or -h) prints `doc` and the flags and exits 0; a missing
  required flag, an unknown one or a stray argument ends the program with one line and exit 2."""
  fv = flags.FlagValues()
  define(fv)
  if any(a in HELP for a in argv[1:]):
    print(f"{doc.strip()}\n\nflags:\n{fv.get_help(include_special_flags=False)}")
    sys.exit(0)
  try:
    rest = fv(argv)
  except flags.Error as e:
    _fail(2, str(e))
  if rest[1:]:
    _fail(2, f"unexpected arguments {rest[1:]}: settings are flags with two dashes, e.g. --model=DIR")
  missing = [name for name in required if not fv[name].value]
  if missing:
    _fail(2, f"--{missing[0]}: required")
  return fv


def run(job: Callable[[], str]) -> int:
  """Runs `job` (which returns its summary) and prints the summary, or its error as one line."""
  try:
    print(job())
  except ConfigError as e:
    _fail(2, f"--{e}")
  except (ValueError, OSError) as e:  # DataError and ModelError are ValueErrors; a file that cannot be written
    _fail(1, str(e))
  return 0


def _fail(code: int, message: str) -> None:
  print(f"error: {message}", file=sys.stderr)
  sys.exit(code)
