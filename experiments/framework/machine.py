"""What a run's numbers depend on besides its code, configuration and data: the machine and the packages.

JAX's CPU backend compiles for the host, and its contractions (the MLP's weight gradients, whose inner dimension
is every document of a batch) are split by CPU type and by the number of threads it may use. Measured
(docs/reproducing.md): the same commit, packages and data give the same bits on the same CPU model with the
same schedulable CPUs, and other bits when any of these differ:
  * the thread count (a 5-epoch main job under ``taskset -c 0`` on the 2-core machine that made RESULTS.md);
  * the CPU type (products and gradients of the MLP's shapes under QEMU's EPYC-Milan model: no AVX-512, other
    caches), whatever XLA flag pins it (--xla_cpu_max_isa=AVX2, --xla_cpu_enable_platform_dependent_math=false,
    the library dots off): matrix products then agree, the large-K contractions of the gradients still do not;
  * jax/jaxlib (an unpinned install next to an older numpy resolved jax 0.9.2) and scipy (last bits of the
    statistics). numpy 2.1 - 2.4, scikit-learn 1.6 - 1.9 and LightGBM's thread count moved nothing.
So :func:`numerics` is what a run records to say which results it can equal bit for bit, and
``python -m experiments.report`` marks a run whose numerics differ from the reference run's.
"""
from __future__ import annotations

import glob
import importlib.metadata
import os
import platform
import subprocess
from typing import Dict, Optional

from pfd_jax.config import JsonObject

# CPU features that change what XLA's CPU backend and its kernel libraries emit (vector width, fused
# multiply-add, the AVX-512 / AMX dot kernels).
ISA_FEATURES = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile")
# Packages whose version changes recorded numbers (XLA is inside jaxlib; scipy computes the statistics).
NUMERIC_PACKAGES = ("jax", "jaxlib", "flax", "optax", "numpy", "scipy", "lightgbm")


def _cpuinfo() -> Dict[str, str]:
  """The first processor's fields of /proc/cpuinfo ({} where there is none, e.g. macOS)."""
  try:
    with open("/proc/cpuinfo") as f:
      text = f.read().split("\n\n")[0]
  except OSError:
    return {}
  pairs = (line.split(":", 1) for line in text.splitlines() if ":" in line)
  return {k.strip(): v.strip() for k, v in pairs}


def _caches() -> str:
  """'L1d 48K, L1i 32K, L2 2048K, L3 ...' of CPU 0 from sysfs ('' where unavailable)."""
  def field(d, name):
    with open(os.path.join(d, name)) as f:
      return f.read().strip()

  out = []
  for d in sorted(glob.glob("/sys/devices/system/cpu/cpu0/cache/index*")):
    try:
      level, kind, size = (field(d, n) for n in ("level", "type", "size"))
    except OSError:
      continue
    out.append(f"L{level}{dict(Data='d', Instruction='i').get(kind, '')} {size}")
  return ", ".join(out)


def threads() -> int:
  """CPUs this process may run on: the size of XLA's CPU thread pool."""
  return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def packages() -> Dict[str, str]:
  """{distribution: version} of every installed Python distribution, sorted by name."""
  found = {}
  for d in importlib.metadata.distributions():
    name = (d.metadata["Name"] or "").lower().replace("_", "-")
    if name:
      found[name] = d.version
  return dict(sorted(found.items()))


def matmul_precision() -> str:
  """The float32 products' precision in force in this process (jax_default_matmul_precision; the drivers set it
  from --matmul_precision): 'highest', 'tensorfloat32', ... or 'default' where nothing set it."""
  import jax
  return jax.config.jax_default_matmul_precision or "default"


def _gpu_driver() -> str | None:
  """The NVIDIA driver's version (nvidia-smi), None where there is none."""
  try:
    out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                         text=True, timeout=20)
  except (OSError, subprocess.SubprocessError):
    return None
  return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def accelerator(installed: Dict[str, str]) -> Optional[JsonObject]:
  """What an accelerator run's bits depend on besides the host: the platform, the devices' kind and count, the
  driver, JAX's plugin packages (CUDA, cuDNN, cuBLAS wheels) and the matrix products' precision in force. None
  on a CPU backend, whose products are float32 whatever the precision asks (pfd_jax.ops.precision), so a CPU run's
  record is what it was before accelerators were recorded."""
  import jax
  if jax.default_backend() == "cpu":
    return None
  devices = jax.devices()
  plugins = {p: v for p, v in installed.items() if p.startswith(("jax-cuda", "jax-rocm", "libtpu", "nvidia-"))}
  return dict(platform=jax.default_backend(), device=devices[0].device_kind, count=len(devices),
              driver=_gpu_driver(), plugins=plugins, matmul_precision=matmul_precision())


def numerics(installed: Optional[Dict[str, str]] = None) -> JsonObject:
  """The determinants of a run's bits beside its code, configuration and data (see the module docstring); on an
  accelerator, its record (:func:`accelerator`) too."""
  info = _cpuinfo()
  flags = set(info.get("flags", "").split())
  installed = packages() if installed is None else installed
  out = dict(cpu=info.get("model name") or platform.processor() or platform.machine(),
             isa=[f for f in ISA_FEATURES if f in flags], caches=_caches(), threads=threads(),
             xla_flags=os.environ.get("XLA_FLAGS", ""), python=platform.python_version(),
             packages={p: installed.get(p) for p in NUMERIC_PACKAGES})
  device = accelerator(installed)
  return dict(out, accelerator=device) if device else out


def top_isa(n: JsonObject) -> str:
  """The widest vector instruction set of a numerics record ('amx_tile', 'avx512f', 'avx2', 'avx', 'no AVX')."""
  return next((f for f in ("amx_tile", "avx512f", "avx2", "avx") if f in n.get("isa", [])), "no AVX")


def differences(a: JsonObject, b: JsonObject) -> list:
  """'field: a vs b' for each determinant in which two numerics records differ (packages one by one)."""
  out = []
  for k in sorted(set(a) | set(b)):
    if k == "packages":
      pa, pb = a.get(k) or {}, b.get(k) or {}
      out += [f"{p} {pa.get(p)} vs {pb.get(p)}" for p in sorted(set(pa) | set(pb)) if pa.get(p) != pb.get(p)]
    elif a.get(k) != b.get(k):
      out.append(f"{k}: {a.get(k)!r} vs {b.get(k)!r}")
  return out
