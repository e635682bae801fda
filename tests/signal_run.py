"""Test helper: runs experiments.table2 with SIGTERM sent to itself at one chosen point, deterministically.

  python tests/signal_run.py compile|row|between|twice <table2 flags>

compile: when the epoch program's backend compilation ends (a jax.monitoring event; run with
--compile_cache= so that it compiles); row: in the progress log of epoch 2 of the first row; between: right after the first row
is saved; twice: two signals in the log of epoch 2.
"""
import os
import signal
import sys

from jax import monitoring

from experiments import common, table2

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
  _progress = common.progress

  def progress(prefix, epochs):
    make = _progress(prefix, epochs)

    def make_row(row):
      log = make(row)

      def log_epoch(epoch, *args):
        if epoch == 1:
          _kill(2 if MODE == "twice" else 1)
        log(epoch, *args)
      return log_epoch
    return make_row
  common.progress = progress
elif MODE == "between":
  _save = common.save_result

  def save_result(path, result):
    _save(path, result)
    _kill()
  common.save_result = save_result
else:
  raise SystemExit(f"unknown mode {MODE}")

common.main(table2.DRIVER)
