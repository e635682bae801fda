"""The shape of the code (experiments/lint.py): one-way layers, short files and functions, and a serving path
that loads no training code."""
import subprocess
import sys
import textwrap

from experiments import lint


def test_limits_are_kept():
  assert lint.problems() == []


def test_no_driver_imports_another_driver(tmp_path):
  """The check finds a driver importing another (a planted pair), and the repository has none but the allowed one."""
  graph = lint.import_graph("experiments")[0]  # once: the set below walked it again for every driver
  assert lint.driver_imports() == [] and ("experiments.paper.alpha_robustness", "experiments.paper.fig3_alpha") in {
      (a, b) for a in lint.drivers() for b in graph.get(a, ())}
  pkg = tmp_path / "experiments"
  pkg.mkdir()
  (pkg / "__init__.py").write_text("")
  (pkg / "one.py").write_text("DRIVER = 1\n")
  (pkg / "two.py").write_text("from experiments import one\nDRIVER = 2\n")
  (pkg / "helper.py").write_text("from experiments import one\n")  # not a driver: may import one
  assert lint.driver_imports(str(tmp_path)) == [("experiments.two", "experiments.one")]


def test_the_page_lists_exactly_the_drivers_of_paper_and_related():
  """`ls experiments/paper experiments/related` is the page's drivers: each folder's DRIVERS (the page's order) names
  every module of it that defines a driver and no other, and experiments.module finds each one."""
  import experiments
  found = lint.drivers()
  for package in (experiments.paper, experiments.related):
    assert sorted(package.DRIVERS) == sorted(n.rsplit(".", 1)[1] for n in found
                                             if n.rsplit(".", 1)[0] == package.__name__), package.__name__
  assert experiments.PAGE == experiments.paper.DRIVERS + experiments.related.DRIVERS
  assert {experiments.module(n.rsplit(".", 1)[1]) for n in found} == found  # every driver's file is named as it


def test_the_graph_measures_what_python_runs(tmp_path):
  # a -> b -> c, and d <-> e: depth 3, one circle; an import inside a function is an edge and is listed
  pkg = tmp_path / "pkg"
  pkg.mkdir()
  (pkg / "__init__.py").write_text("")
  (pkg / "a.py").write_text("from pkg import b\n")
  (pkg / "b.py").write_text("import pkg.c\n")
  (pkg / "c.py").write_text("import os\n")
  (pkg / "d.py").write_text("def f():\n  from pkg import e\n")
  (pkg / "e.py").write_text("from pkg.d import f\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n  import pkg.a\n")
  graph, local = lint.import_graph("pkg", str(tmp_path))
  assert lint.longest_chain(graph) == ["pkg.a", "pkg.b", "pkg.c"]
  assert lint.circles(graph) == [["pkg.d", "pkg.e"]]
  assert ("pkg.d", 2, "pkg.e") in local and "pkg.a" not in graph["pkg.e"]  # annotations only: no edge


def test_bare_dict_annotations_are_found_and_typed_ones_are_not(tmp_path):
  pkg = tmp_path / "pkg"
  pkg.mkdir()
  (pkg / "__init__.py").write_text("")
  (pkg / "m.py").write_text(
      "from typing import Dict, Mapping, Optional\n"
      "def f(a: dict, b: Dict[str, int], c: Optional[dict] = None, *d: Dict, **e) -> Mapping[str, dict]:\n"
      "  x: dict = {}\n  y: Dict[str, float] = {}\n  return {}\n"
      "class C:\n  z: Dict\n  w: Mapping[str, int]\n")
  found = lint.untyped_dicts(("pkg",), str(tmp_path))
  # a, c, *d and the return's inner dict; x; z (b, y, w and e, unannotated, are not)
  assert found == ["pkg/m.py:2"] * 4 + ["pkg/m.py:3", "pkg/m.py:7"]


def test_no_driver_nor_its_harness_imports_the_page(tmp_path):
  """The page (experiments.page) is read by its own commands only: the check finds a planted harness module that
  imports it, and importing every driver in a fresh interpreter loads none of its modules."""
  assert lint.page_imports() == []
  pkg = tmp_path / "experiments"
  (pkg / "page").mkdir(parents=True)
  for f in ("__init__.py", "page/__init__.py", "page/claims.py"):
    (pkg / f).write_text("")
  (pkg / "harness.py").write_text("from experiments.page import claims\n")
  (pkg / "report.py").write_text("from experiments.page import claims\n")  # the page's own command
  assert lint.page_imports(str(tmp_path)) == [("experiments.harness", "experiments.page"),
                                              ("experiments.harness", "experiments.page.claims")]
  code = textwrap.dedent("""
      import importlib, sys
      from experiments import lint
      for name in sorted(lint.drivers()):
        importlib.import_module(name)
      print("PAGE", sorted(m for m in sys.modules if m.startswith("experiments.page")))
  """)
  p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
  assert p.returncode == 0, p.stderr[-2000:]
  assert p.stdout.strip().endswith("PAGE []"), p.stdout


def test_saved_models_score_without_the_training_code(tmp_path):
  """import pfd_jax, loading a saved MLP and scoring it import neither optax, the training modules nor
  LightGBM (a fresh interpreter: what a serving process loads)."""
  code = textwrap.dedent(f"""
      import sys, numpy as np, jax
      import pfd_jax
      assert not any(m.startswith("pfd_jax.") for m in sys.modules), sorted(sys.modules)
      from pfd_jax.serving import model
      from pfd_jax.ops.models import MLP
      params = jax.vmap(lambda k: MLP(hidden=4, layers=2).init(k, np.zeros((1, 3))))(jax.random.split(jax.random.PRNGKey(0), 2))
      recipe = dict(format=model.FORMAT, view="x", input_ids=[1, 2, 3], model=dict(kind="mlp", hidden=4, layers=2),
                    regular_ids=[1, 2, 3], privileged_ids=[], num_features=3, transforms=dict(query_norm=False, log1p=True),
                    labels=dict(mode="file", positive_grade=None, t=None, tau=None, seed=0), min_docs=1, ks=[8],
                    select_on="test", empty_rule="exclude", num_seeds=2, best_seed=1, best_epoch=[0, 0],
                    metrics={{}}, train_config={{}})
      model.Ranker(params=params, recipe=recipe).save({str(tmp_path / "m")!r})
      ranker = pfd_jax.load_model({str(tmp_path / "m")!r})
      scores = ranker.score(np.ones((2, 5, 3), np.float32))
      assert scores.shape == (2, 5)
      loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("optax", "lightgbm") or
                      m.startswith(("pfd_jax.training", "pfd_jax.methods")))
      print("LOADED", loaded)
  """)
  p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
  assert p.returncode == 0, p.stderr[-2000:]
  assert p.stdout.strip().endswith("LOADED []"), p.stdout


def test_a_walk_counts_its_rooms_stays_returns_and_crossings():
  """experiments/walk.py's reading of a call sequence, on a planted one: consecutive calls in a room are one stay,
  a stay in a room left before is a return, a step between experiments/ and pfd_jax/ a crossing."""
  from experiments import walk
  w = walk.walk(["experiments.a", "experiments.a", "pfd_jax.b", "pfd_jax.c", "pfd_jax.b", "experiments.a",
                 "pfd_jax.c"])
  assert w.stays == [("experiments.a", 2), ("pfd_jax.b", 1), ("pfd_jax.c", 1), ("pfd_jax.b", 1),
                     ("experiments.a", 1), ("pfd_jax.c", 1)]
  assert (w.rooms, w.returns) == (3, 3)
  assert dict(w.crossings) == {("experiments", "pfd_jax"): 2, ("pfd_jax", "experiments"): 1}
  assert [walk.layer(m) for m in ("pfd_jax.data.groups", "pfd_jax.config", "experiments.paper.table2",
                                  "experiments.framework.fold_data")] == [
      "pfd_jax.data", "pfd_jax", "experiments.paper", "experiments.framework"]


def test_a_walk_records_the_calls_handed_its_kinds_until_its_end():
  """calls() records a project function's call when an argument is of the kind's types, and stops at the end's
  first call (what follows is never recorded)."""
  from experiments import walk
  from experiments.framework import fold_data
  from pfd_jax.data.config import DataConfig

  two, three = DataConfig(draws=2), DataConfig(draws=3)

  def run():
    fold_data.folds_of(two)  # handed a DataConfig: recorded
    lint.file_lines(root="/nonexistent")  # no configuration among its arguments: not recorded
    walk.layer("pfd_jax.data.groups")  # the end
    fold_data.folds_of(three)  # after the end: never called

  seen = walk.calls(run, walk.layer, {"configuration": (DataConfig,)})
  assert seen == {"configuration": ["experiments.framework.fold_data"]}


def test_the_static_walk_follows_the_configuration_through_the_source(tmp_path):
  """experiments/staticwalk.py on a planted package: a call without the configuration is not followed, a name
  assigned from it carries it, a keyword argument hands it on, a re-imported function already walked is not walked
  again, and the caller's module is entered again after each callee."""
  from experiments import staticwalk, walk
  pkg = tmp_path / "experiments"
  pkg.mkdir()
  (pkg / "__init__.py").write_text("")
  (pkg / "a.py").write_text("from experiments import b, c\n\ndef run(cfg):\n  b.untouched(1)\n  k = cfg.k\n"
                            "  b.f(k)\n  c.g(cfg=cfg)\n\ndef back(v):\n  return v\n")
  (pkg / "b.py").write_text("from experiments import a\n\ndef untouched(n):\n  return a.back(n)\n\n"
                            "def f(v):\n  return a.back(v)\n")
  (pkg / "c.py").write_text("from experiments.b import f\n\ndef g(cfg):\n  f(cfg)\n  return h(cfg)\n\n"
                            "def h(x):\n  return x\n")
  modules, functions = staticwalk.sequence("experiments.a", "run", root=str(tmp_path))
  assert modules == ["experiments." + m for m in ("a", "b", "a", "b", "a", "c", "c", "c", "a")]
  assert functions == 5  # run, f, back, g, h: not untouched
  w = walk.walk(modules)
  assert (w.rooms, w.returns) == (3, 4)
