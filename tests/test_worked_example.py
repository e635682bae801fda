"""The worked example of docs/layout.md, as the page prints it: a listwise-KL teacher term, its Table 2 row and
the row's claim in one module of the user's. Its loss against a float64 NumPy reference (padding out of both
softmaxes and of the gradient), and a Table 2 run that trains the row and states its claim by id."""
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _module(tmp_path) -> str:
  with open(os.path.join(ROOT, "docs", "layout.md")) as f:
    page = f.read()
  section = page.split("## Worked example", 1)[1]
  code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
  path = tmp_path / "my_listwise_kl.py"
  path.write_text(code)
  return str(path)


def _python(code: str, *argv) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, *(("-c", code) if code else ()), *argv], cwd=ROOT, capture_output=True,
                        text=True, timeout=900)


def test_the_listwise_kl_loss_is_the_closed_form_with_padding_out(tmp_path):
  """KL(softmax(t / T) || softmax(s)) per list in float64 NumPy; the padded copy (two more slots, a list of padding
  only) gives the same value and the padded slots no gradient."""
  code = textwrap.dedent(f"""
      import importlib.util, numpy as np, jax, jax.numpy as jnp
      spec = importlib.util.spec_from_file_location("my_listwise_kl", {_module(tmp_path)!r})
      mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
      rng = np.random.default_rng(0)
      s, t = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
      def ref(s, t, T):
        p = np.exp(t / T - np.log(np.exp(t / T).sum(-1, keepdims=True)))
        return float(np.sum(p * (np.log(p) - (s - np.log(np.exp(s).sum(-1, keepdims=True))))))
      for T in (1.0, 2.5):
        got = float(mod.listwise_kl(jnp.asarray(s, jnp.float32), jnp.asarray(t, jnp.float32), temperature=T))
        np.testing.assert_allclose(got, ref(s, t, T), rtol=1e-5)
      sp = np.concatenate([np.pad(s, ((0, 0), (0, 2)), constant_values=7.0), np.full((1, 7), 3.0)])
      tp = np.concatenate([np.pad(t, ((0, 0), (0, 2)), constant_values=-4.0), np.full((1, 7), 1.0)])
      mask = np.concatenate([np.pad(np.ones((3, 5), bool), ((0, 0), (0, 2))), np.zeros((1, 7), bool)])
      f = lambda x: mod.listwise_kl(x, jnp.asarray(tp, jnp.float32), jnp.asarray(mask))
      np.testing.assert_allclose(float(f(jnp.asarray(sp, jnp.float32))), ref(s, t, 1.0), rtol=1e-5)
      g = np.asarray(jax.grad(f)(jnp.asarray(sp, jnp.float32)))
      assert np.all(np.isfinite(g)) and np.all(g[~mask] == 0), g
      g0 = np.asarray(jax.grad(lambda x: mod.listwise_kl(x, jnp.asarray(t, jnp.float32)))(jnp.asarray(s, jnp.float32)))
      np.testing.assert_allclose(g[:3, :5], g0, rtol=1e-5, atol=1e-7)
      print("OK")
  """)
  p = _python(code)
  assert p.returncode == 0 and p.stdout.strip().endswith("OK"), p.stderr[-3000:]


@pytest.mark.heavy
def test_a_table2_run_trains_the_row_and_states_its_claim(tmp_path):
  """The documented command (on a tiny synthetic set): the row trains with the registered teacher term, and its
  claim is judged by its id in a process that never imported the module."""
  out = tmp_path / "out"
  p = _python("", "-m", "experiments.paper.table2", f"--registry_modules={_module(tmp_path)}",
              "--methods=no_distill,pfd,pfd_listwise_kl", "--synthetic_queries=80,20,60", "--synthetic_mean_docs=16",
              "--tau=4", "--min_docs=5", "--max_buckets=2", "--cache_dir=", "--epochs=2", "--hidden=16", "--layers=3",
              "--seeds=2", "--notensorboard", "--noprobe", f"--out_dir={out}",
              f"--compile_cache={os.path.join(ROOT, 'cache', 'jax')}")
  assert p.returncode == 0, p.stderr[-3000:]
  with open(os.path.join(os.path.realpath(out / "synthetic" / "latest"), "results.json")) as f:
    res = json.load(f)
  fold = res["losses"]["rankbce"]["folds"]["fold1"]
  assert {"no_distill", "pfd", "pfd_listwise_kl"} <= set(fold["rows"])
  row = res["provenance"]["registered"]["rows"]["pfd_listwise_kl"]
  assert row["module"] == "my_listwise_kl" and ["teacher_loss", "listwise_kl"] in row["overrides"]
  assert fold["rows"]["pfd_listwise_kl"]["best"]["test"] != fold["rows"]["pfd"]["best"]["test"]  # another term
  from experiments.page import judged
  from experiments.page.declared import row_claim
  ids = [c.id for c in judged.of("table2").claims(res) if c is not None]
  assert row_claim("rankbce", "pfd_listwise_kl", "no_distill") in ids
  assert row_claim("rankbce", "pfd_listwise_kl", "no_distill") == "table2:rankbce:pfd_listwise_kl-vs-no_distill"
