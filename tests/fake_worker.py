"""Test helper: a stand-in for a driver process under experiments.launch (python -m fake_worker <mode> <flags>).

Prints 'ready <process id> <pid>' and then, by mode:
  die:   process 1 kills itself with SIGKILL once process 0 is ready (they meet on the FIFO <marker dir>/ready,
         which the test makes); process 0 ignores SIGTERM and waits forever (as a process blocked in a collective
         with a dead peer does), so only the launcher's SIGKILL ends it;
  wait:  every process waits; on SIGTERM it writes <marker dir>/term<id> and exits 143.
"""
import os
import signal
import sys
import threading

mode, marker_dir = [a for a in sys.argv[1:] if not a.startswith("--")][:2]  # the launcher adds flags
pid_flag = [a for a in sys.argv if a.startswith("--process_id=")]
index = int(pid_flag[0].split("=")[1]) if pid_flag else 0
if mode == "die" and index == 0:
  signal.signal(signal.SIGTERM, signal.SIG_IGN)
if mode == "wait":
  def on_term(signum, frame):
    open(os.path.join(marker_dir, f"term{index}"), "w").close()
    os._exit(143)
  signal.signal(signal.SIGTERM, on_term)
print(f"ready {index} {os.getpid()}", flush=True)
if mode == "die":
  # Without the meeting, process 1 could die before process 0 ignores SIGTERM, and the launcher's SIGTERM
  # would end process 0 before it says it is ready. Opening a FIFO blocks until the other end is opened.
  with open(os.path.join(marker_dir, "ready"), "w" if index == 0 else "r"):
    pass
  if index == 1:
    os.kill(os.getpid(), signal.SIGKILL)
threading.Event().wait()
