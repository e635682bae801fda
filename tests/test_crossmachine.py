"""experiments.crossmachine: the measured spread behind report --check's tolerance, on constructed runs; and the
check itself on a main job made on another CPU (../shared/evidence, skipped where absent)."""
import gzip
import os
import shutil

import numpy as np
import pytest

from experiments import crossmachine, report
from experiments.page.staleness import ROOT
from pfd_jax.data import shared_data_root

pytestmark = pytest.mark.numeric


def _run(values: dict, cpu: str, flags: str = "") -> dict:
  """A table2 results.json with rows {name: [runs, 3]} under both losses, made on `cpu` with XLA_FLAGS `flags`."""
  rows = {k: dict(best=dict(test=np.asarray(v).tolist())) for k, v in values.items()}
  return dict(env=dict(numerics=dict(cpu=cpu, isa=["avx2"], threads=2, xla_flags=flags)),
              losses={loss: dict(folds=dict(fold1=dict(rows=rows))) for loss in ("rankbce", "ranknet")})


def test_ratios_are_recovered_and_unmoved_rows_left_out():
  rng = np.random.default_rng(0)
  runs, kappa, sd = 50, 0.5, 0.02
  seed_part = {k: 0.3 + sd * rng.normal(size=(runs, 3)) for k in ("no_distill", "pfd", "gend")}
  gbdt = 0.3 + sd * rng.normal(size=(runs, 3))  # a LightGBM row: the same bits on every configuration
  made = [_run(dict({k: v + kappa * sd * rng.normal(size=v.shape) for k, v in seed_part.items()}, lambdamart=gbdt),
               cpu) for cpu in ("A", "B", "C")]
  rec = crossmachine.measure(made + [made[0]])  # the same bits twice: not two configurations, left out
  assert len(rec["pairs"]) == 3 and rec["runs"][1]["name"] == "B (avx2), 2 threads"
  for p in rec["pairs"]:
    assert p["cells"]["values"] == 2 * 3 * 3 and p["differences"]["values"] == 2 * 3  # 3 rows moved of 4
  assert len(rec["ratios"]["cells"]) == 3 * 18 and len(rec["ratios"]["differences"]) == 3 * 6
  # the seed variance as printed is sd^2 (1 + kappa^2): each ratio estimates kappa^2 / (1 + kappa^2)
  assert abs(np.mean(rec["ratios"]["cells"]) / (kappa ** 2 / (1 + kappa ** 2)) - 1) < 0.2
  with pytest.raises(ValueError, match="nothing to measure"):
    crossmachine.measure([made[0], made[0]])


def test_a_main_job_made_on_another_cpu_passes_the_check(tmp_path):
  """The main job of 247f607 on a 2-core AMD EPYC without AVX-512: every cell within its tolerance of
  RESULTS.md (made on an Intel Xeon with AVX-512 and AMX), its changed verdicts said to be fragile."""
  evidence = os.path.join(os.path.dirname(shared_data_root()), "evidence")
  if not os.path.exists(os.path.join(evidence, "amd-epyc-main-job-results.json.gz")):
    pytest.skip(f"no evidence in {evidence}")
  run = tmp_path / "table2" / "synthetic" / "latest"
  run.mkdir(parents=True)
  with gzip.open(os.path.join(evidence, "amd-epyc-main-job-results.json.gz")) as f:
    (run / "results.json").write_bytes(f.read())
  for name in ("table.md", "provenance.json"):
    shutil.copyfile(os.path.join(evidence, f"amd-epyc-main-job-{name}"), run / name)
  entry = next(e for e in report.EXPECTED if e.key == "table2/synthetic")
  ok, lines = report.check_reproduction(str(tmp_path), os.path.join(ROOT, "RESULTS.md"), [entry], required=True)
  assert ok and "another configuration" in lines[0] and "of 78 cells differ" in lines[0], lines
  # a verdict that differs from the page's (if any: the page's were judged by the rules of its commit) is fragile
  assert all(line.endswith("(fragile: within the machine spread)") for line in lines[1:]), lines
