"""The checkout itself: nothing tracked points outside the repository or names a path of one machine.

A fresh clone must work anywhere: commit 9083aec tracked `results` as a symbolic link to a temporary folder of the
machine that made it, and every new user's main job failed on the dangling link.
"""
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Absolute paths of one machine: temporary and home folders, the developers' work folder, macOS's per-user ones.
MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:" + "|".join(["tmp", "work", "root", "home", "Users", "mnt",
                                                          "private/var", "var/folders"]) + r")/")


def _tracked() -> list:
  out = subprocess.run(["git", "ls-files", "-s", "-z"], cwd=ROOT, capture_output=True, text=True)
  if out.returncode != 0:
    pytest.skip("not a git checkout")
  entries = []
  for item in filter(None, out.stdout.split("\0")):
    meta, path = item.split("\t", 1)
    entries.append((meta.split()[0], path))
  return entries


def test_no_tracked_symbolic_link_leaves_the_repository():
  for mode, path in _tracked():
    if mode != "120000":
      continue
    target = subprocess.run(["git", "cat-file", "-p", f"HEAD:{path}"], cwd=ROOT, capture_output=True,
                            text=True).stdout
    assert not os.path.isabs(target), f"{path} is a link to the absolute path {target}"
    inside = os.path.normpath(os.path.join(ROOT, os.path.dirname(path), target))
    assert inside.startswith(ROOT + os.sep), f"{path} links outside the repository ({target})"


def test_the_results_folder_is_not_tracked():
  assert not [p for _, p in _tracked() if p == "results" or p.startswith("results/")]


def test_no_tracked_file_names_an_absolute_path_of_a_machine():
  found = []
  for mode, path in _tracked():
    if mode == "120000" or path == "tests/test_repository.py":
      continue
    try:
      with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        text = f.read()
    except (UnicodeDecodeError, FileNotFoundError):  # figures; a file deleted in the working tree
      continue
    found += [f"{path}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}" for m in MACHINE_PATH.finditer(text)]
  assert not found, "absolute paths of one machine in tracked files:\n" + "\n".join(found)


def test_the_path_pattern_finds_what_it_should():
  assert MACHINE_PATH.search("results -> /tmp/rr/results") and MACHINE_PATH.search("cd /work/main")
  assert MACHINE_PATH.search('open("/home/me/x")') and MACHINE_PATH.search("/Users/me/data")
  assert not MACHINE_PATH.search("results/table2/synthetic") and not MACHINE_PATH.search("a/tmp/b")
  assert not MACHINE_PATH.search("~/tmp/x") and not MACHINE_PATH.search("https://example.org/home/page")


def test_results_md_names_run_folders_relative_to_the_results_root():
  with open(os.path.join(ROOT, "RESULTS.md"), encoding="utf-8") as f:
    folders = re.findall(r"^Results: `([^`]*)`", f.read(), re.M)
  assert folders, "RESULTS.md lists no run folders"
  assert not [p for p in folders if os.path.isabs(p) or p.startswith("..")], folders


def test_the_readme_opens_with_the_two_commands_ci_runs():
  with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    block = f.read().split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
  assert len(block) == 2, block
  assert block[0].endswith("python -m experiments.paper.table2") and block[1].endswith("python -m pytest -q")
  assert all("-c constraints.txt" in c for c in block), "both commands install the pinned versions"
  with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
    ci = f.read()
  assert "README.md" in ci and "experiments.report --check" in ci
  # the numeric tests once more under another instruction set: a tolerance that holds on one CPU only fails in CI
  assert re.search(r"XLA_FLAGS=--xla_cpu_max_isa=\w+ python -m pytest -q (--durations=\d+ )?-m 'numeric and not slow'", ci)
  # the heavy and slow tests, which the README's test command leaves out, run in CI (the montecarlo tests apart)
  assert re.search(r"python -m pytest -q (--durations=\d+ )?-m '\(slow or heavy\) and not montecarlo", ci)
  with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
    assert "-m 'not slow and not heavy'" in f.read()


def test_compile_times_charges_each_stage_to_the_running_tests_file_and_sums_the_processes(tmp_path, monkeypatch):
  """--compile_times: a process's JAX compile events summed per (test file, stage), one JSON line per process, and
  the controller's summary the sum over the lines, largest file first."""
  import conftest
  monkeypatch.setattr(conftest, "_COMPILING", {})
  monkeypatch.setattr(conftest, "_RUNNING", ["tests/test_a.py"])
  conftest._compiling("/jax/core/compile/backend_compile_duration", 2.0)
  conftest._compiling("/jax/core/compile/backend_compile_duration", 0.5)
  conftest._compiling("/jax/compilation_cache/cache_hits", 9.0)  # not a compile stage
  conftest._RUNNING[0] = "tests/test_b.py"
  conftest._compiling("/jax/core/compile/jaxpr_trace_duration", 1.0)
  path = str(tmp_path / "times.jsonl")

  class Config:
    def getoption(self, name):
      return path

  class Session:
    config = Config()

  conftest.pytest_sessionfinish(Session())
  conftest.pytest_sessionfinish(Session())  # a second process with the same times

  class Reporter:
    lines = []

    def section(self, title):
      self.lines.append(title)

    def write_line(self, line):
      self.lines.append(line)

  conftest.pytest_terminal_summary(Reporter(), Config())
  assert Reporter.lines[1:] == ["     5.0 s  tests/test_a.py: XLA compilation 5.0 s",
                                "     2.0 s  tests/test_b.py: tracing 2.0 s"]
