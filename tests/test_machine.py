"""experiments.machine: what a run records of the machine and packages its bits depend on."""
import os

import jax
import numpy as np

from experiments import machine
from experiments.framework import rundir


def test_numerics_describe_this_process(monkeypatch):
  monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_max_isa=AVX2")
  n = machine.numerics()
  assert n["cpu"] and n["python"] and n["xla_flags"] == "--xla_cpu_max_isa=AVX2"
  assert n["threads"] == len(os.sched_getaffinity(0))
  assert n["packages"]["jax"] == jax.__version__ and n["packages"]["numpy"] == np.__version__
  assert set(n["packages"]) == set(machine.NUMERIC_PACKAGES) and set(n["isa"]) <= set(machine.ISA_FEATURES)
  if os.path.exists("/proc/cpuinfo") and "avx2" in open("/proc/cpuinfo").read():
    assert "avx2" in n["isa"]
  env = rundir.environment()
  assert env["numerics"]["packages"] == machine.numerics()["packages"] and env["packages"]["jax"] == jax.__version__


def test_differences_name_each_field_and_package():
  a = dict(cpu="Xeon", threads=2, xla_flags="", packages=dict(jax="0.10.2", scipy="1.17.1"))
  assert machine.differences(a, dict(a)) == []
  b = dict(a, threads=1, packages=dict(jax="0.9.2", scipy="1.17.1"))
  assert machine.differences(a, b) == ["jax 0.10.2 vs 0.9.2", "threads: 2 vs 1"]
