"""experiments.framework.machine: what a run records of the machine and packages its bits depend on."""
import os

import jax
import numpy as np

from experiments.framework import machine
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


def test_a_cpu_runs_numerics_are_what_they_were_and_an_accelerators_name_its_device(monkeypatch):
  """On a CPU the matrix products are float32 whatever the precision (pfd_jax.ops.precision), so a CPU run's numerics
  have no accelerator entry and equal a record made before the precision existed; the precision in force is in the
  run's env. On a GPU the entry names the device, the driver, JAX's plugins and the precision, and the page shows
  them."""
  from experiments import report
  assert jax.default_backend() != "cpu" or "accelerator" not in machine.numerics()
  assert rundir.environment()["matmul_precision"] == machine.matmul_precision()
  with jax.default_matmul_precision("highest"):
    assert machine.matmul_precision() == "highest"
  gpu = dict(platform="gpu", device="NVIDIA H200", count=1, driver="580.159.04",
             plugins={"jax-cuda13-plugin": "0.11.2"}, matmul_precision="highest")
  monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
  monkeypatch.setattr(machine, "_gpu_driver", lambda: "580.159.04")
  record = machine.accelerator({"jax-cuda13-plugin": "0.11.2", "numpy": "2.4"})
  assert set(record) == set(gpu) and record["plugins"] == gpu["plugins"] and record["driver"] == "580.159.04"
  n = dict(machine.numerics(), accelerator=gpu)
  assert machine.differences(n, {k: v for k, v in n.items() if k != "accelerator"}) == [
      f"accelerator: {gpu!r} vs None"]
  assert report._machine(dict(numerics=n, backend="gpu")).startswith(
      "1 x NVIDIA H200 (driver 580.159.04, matmul precision highest), ")
