"""Test helper: runs experiments.paper.table2 with SIGTERM sent to itself at one chosen point, deterministically.

  python tests/signal_run.py compile|row|between|twice <table2 flags>

compile: when the epoch program's backend compilation ends (a jax.monitoring event; run with
--compile_cache= so that it compiles); row: in the progress log of epoch 2 of the first row; between: right after the first row
is saved; twice: two signals in the log of epoch 2.
"""
import os
import signal
import sys

from jax import monitoring

from experiments.paper import table2
from experiments.framework import lifecycle, monitor, rowstore

MODE = sys.argv.pop(1)
_fired = []


def _kill(times=1):
  if not _fired:
    _fired.append(MODE)
    for _ in range(times):
      os.kill(os.getpid(), signal.SIGTERM)


if MODE == "compile":
  monitoring.register_event_duration_secs_listener(
      lambda event, duration, **kw: (event == "/jax/core/compile/backend_compile_duration" and
                                     "epoch" in str(kw.get("fun_name")) and _kill()))
elif MODE in ("row", "twice"):
  _progress = monitor.progress

  def progress(prefix):
    make = _progress(prefix)

    class Kill:
      def write_epoch(self, s):
        if s.epoch == 1:
          _kill(2 if MODE == "twice" else 1)

    def make_row(row):
      hooks = make(row)
      return hooks._replace(writers=(Kill(),) + tuple(hooks.writers))
    return make_row
  monitor.progress = progress
elif MODE == "between":
  _save = rowstore.save_result

  def save_result(path, result, fingerprint=""):
    _save(path, result, fingerprint)
    _kill()
  rowstore.save_result = save_result
else:
  raise SystemExit(f"unknown mode {MODE}")

lifecycle.main(table2.DRIVER)
