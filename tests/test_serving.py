"""PFD on your own data: file labels, named privileged ids, saved models, and scoring serving files."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pfd_jax
from conftest import logs_data, slow_after_first
from experiments import predict
from experiments.paper import table2
from experiments.framework import fold_data, outputs, schema, tabulate
from pfd_jax.config import ConfigError
from pfd_jax.data.config import DataConfig, parse_ids
from pfd_jax import data as data_lib
from pfd_jax.training import device
from pfd_jax.methods import distill
from pfd_jax import training as training_lib
from pfd_jax.ops import scoring

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRIV = [21, 22, 23]  # position, click, add-to-cart in the exported logs


@pytest.fixture
def folder(logs_folder):
  return logs_folder


def test_file_labels_are_kept_bit_for_bit_with_every_group(folder):
  raw = data_lib.load_raw("letor", folder)
  ds = fold_data.load_dataset(logs_data(folder))
  for split, g in raw.items():
    np.testing.assert_array_equal(ds[split].y, g.rel)  # 0/1 purchases as they are
    assert ds[split].num_queries == g.num_queries  # groups without a purchase stay
  assert not data_lib.positive_groups(ds["train"]).all()
  assert ds.config["labels"] == "file" and ds.config["t"] is None


def test_graded_file_labels_need_positive_grade(folder):
  raw = {"train": data_lib.Groups(x=np.ones((4, 2), np.float32), rel=np.array([0, 1, 2, 3], np.float32),
                                  qid=np.array([1]), offsets=np.array([0, 4]))}
  with pytest.raises(ValueError, match="--positive_grade"):
    data_lib.prepare(DataConfig(dataset="letor", labels="file", min_docs=1, privileged="2"), raw)
  ds = data_lib.prepare(DataConfig(dataset="letor", labels="file", positive_grade=2, min_docs=1, privileged="2"), raw)
  np.testing.assert_array_equal(ds["train"].y, [0, 0, 1, 1])


def test_privileged_ids_move_exactly_those_columns(folder):
  raw = data_lib.load_raw("letor", folder)
  ids = [22, 3]
  ds = fold_data.load_dataset(logs_data(folder, privileged="22,3"))
  x = data_lib.log1p_transform(raw["train"].x)
  np.testing.assert_array_equal(ds["train"].z, x[:, [21, 2]])
  regular = [i for i in range(1, 24) if i not in ids]
  np.testing.assert_array_equal(ds["train"].x, x[:, np.array(regular) - 1])
  assert ds.config["privileged_ids"] == ids and ds.config["regular_ids"] == regular
  auto = fold_data.load_dataset(logs_data(folder, privileged="auto", num_privileged=3))
  assert auto.config["privileged_choice"] == "auto" and len(auto.config["privileged_ids"]) == 3
  assert sorted(auto.config["privileged_ids"] + auto.config["regular_ids"]) == list(range(1, 24))


@pytest.mark.parametrize("text,what", [("abc", "not a feature id"), ("3,3", "duplicate"), ("0", "not a feature"),
                                       ("2.5", "not a feature id")])
def test_bad_privileged_value_names_the_setting(text, what):
  with pytest.raises(ConfigError, match=f"privileged: .*{what}"):
    parse_ids(text)
  with pytest.raises(ConfigError, match="privileged"):
    DataConfig(privileged=text)


def test_out_of_range_privileged_id_names_the_flag(folder):
  with pytest.raises(ConfigError, match=r"privileged: feature ids \[99\] are out of range.*1\.\.23"):
    fold_data.load_dataset(logs_data(folder, privileged="99"))


@pytest.mark.heavy
def test_save_load_score_equals_in_memory_bit_for_bit(folder, tmp_path):
  ds = fold_data.load_dataset(logs_data(folder))
  dd = device.to_device(ds, 2, ("test",))
  cfg = training_lib.TrainConfig(epochs=2, batch_size=16, hidden=16, layers=3)
  keys = jax.random.split(jax.random.PRNGKey(0), 3)
  rows = distill.run_methods(keys, cfg, dd, ["pfd"])
  for row, view in (("pfd", "x"), ("pfd_teacher", "xz")):
    ranker = pfd_jax.make_ranker(rows[row], cfg, view, ds.config, row=row)
    ranker.save(str(tmp_path / row))
    back = pfd_jax.load_model(str(tmp_path / row))
    assert back.recipe == json.loads(json.dumps(ranker.recipe))
    assert back.best_seed == int(np.argmax(rows[row].best["test"][:, 0]))
    mem = training_lib.predict(cfg, rows[row].params, dd.eval_sets["test"].buckets, view)
    for b, m in zip(dd.eval_sets["test"].buckets, mem):
      for s in range(3):
        np.testing.assert_array_equal(np.asarray(back.score(scoring.features(b, view), seed=s)), np.asarray(m[s]))
  # raw file -> recipe -> flat scores: the same inputs as training's, so the same scores
  student = pfd_jax.load_model(str(tmp_path / "pfd"))
  test = ds["test"]
  raw = data_lib.load_serving(os.path.join(folder, "serve.txt"), student.num_features)
  np.testing.assert_array_equal(student.inputs(raw), test.x)
  flat = student.score_groups(raw)
  mem = training_lib.predict(cfg, rows["pfd"].params, [dict(x=jnp.asarray(test.x))], "x")[0]
  np.testing.assert_allclose(flat, np.asarray(mem[student.best_seed]), rtol=1e-6, atol=1e-6)


def _run(module, *args):
  return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True,
                        timeout=300)


def _numpy_ndcg8(score_file, labelled_file, min_docs):
  """NDCG@8 over lists with a positive (and >= min_docs documents), from the score file: a few lines of NumPy."""
  rows = [ln.split("\t") for ln in open(score_file).read().splitlines()]
  qid = np.array([int(r[0]) for r in rows])
  score = np.array([float(r[2]) for r in rows])
  y = np.array([float(ln.split()[0]) for ln in open(labelled_file)])
  vals = []
  for q in np.unique(qid):
    s, t = score[qid == q], y[qid == q]
    if t.sum() == 0 or t.size < min_docs:
      continue
    disc = 1 / np.log2(np.arange(2, 10))
    dcg = ((2 ** t[np.argsort(-s, kind="stable")][:8] - 1) * disc[:min(8, t.size)]).sum()
    ideal = ((2 ** np.sort(t)[::-1][:8] - 1) * disc[:min(8, t.size)]).sum()
    vals.append(dcg / ideal)
  return float(np.mean(vals))


@pytest.mark.heavy
def test_driver_saves_models_and_predict_scores_serving_files(practitioner, tmp_path):
  folder, res = practitioner.folder, practitioner.result
  data = res["losses"]["rankbce"].first_fold.data
  assert data["privileged_ids"] == PRIV and data["regular_ids"] == list(range(1, 21))
  assert "Privileged feature ids (given): 21-23; regular: 1-20" in table2.to_markdown(outputs.as_json(res))
  models = Path(practitioner.models)
  assert sorted(os.listdir(models)) == ["no_distill", "pfd", "pfd_teacher"]
  assert sorted(os.listdir(models / "pfd")) == ["model.json", "params.msgpack"]
  recorded = np.asarray(res["losses"]["rankbce"].first_fold.rows["pfd"].best["test"])

  serve, full = str(tmp_path / "serve.tsv"), str(tmp_path / "full.tsv")
  # predict's command line once (the bad-input lines and exit codes of its main: test_faults); then its run()
  p = _run("experiments.predict", f"--model={models / 'pfd'}", f"--data={folder}/serve.txt", f"--out={serve}",
           "--seed=1")
  assert p.returncode == 0, p.stderr
  assert "NDCG over" in p.stdout
  _predict(models / "pfd", f"{folder}/test.txt", full, seed=1)
  assert open(serve).read() == open(full).read()  # privileged ids present or absent: same scores
  lines = open(serve).read().splitlines()
  assert len(lines) == sum(1 for _ in open(f"{folder}/test.txt"))
  assert lines[0].split("\t")[:2] == ["200000", "0"] and lines[1].split("\t")[:2] == ["200000", "1"]
  assert _numpy_ndcg8(serve, f"{folder}/test.txt", 5) == pytest.approx(recorded[1, 0], abs=1e-5)

  # unlabelled serving file (lines start with qid:): same scores, no NDCG
  unl = tmp_path / "unlabelled.txt"
  unl.write_text("".join(ln.split(" ", 1)[1] for ln in open(f"{folder}/serve.txt")))
  summary = _predict(models / "pfd", unl, tmp_path / "u.tsv", seed=1)
  assert "NDCG" not in predict.to_markdown(outputs.as_json(summary))
  assert open(tmp_path / "u.tsv").read() == open(serve).read()

  # bad input: the error names file:line and nothing is written
  bad = tmp_path / "bad.txt"
  text = open(f"{folder}/serve.txt").read().splitlines(True)
  for i, line, what in ((3, text[2].rstrip() + " 30:1.0\n", "feature id 30 was never seen"),
                        (2, text[1].replace("5:", "5-"), "malformed feature"),
                        (4, "1 " + text[3], "")):
    bad.write_text("".join(text[:i - 1] + [line] + text[i:]))
    out = tmp_path / "never.tsv"
    with pytest.raises(ValueError, match=re.escape(f"{bad}:{i}: {what}")):
      _predict(models / "pfd", bad, out)
    assert not out.exists() and not os.path.exists(str(out) + ".tmp")


def test_the_deploy_figure_is_the_shipped_models_and_dropped_lists_are_counted(practitioner, tmp_path):
  """The table's "as shipped" figure is what the saved model (the seed its selection split picked) scores on the
  table's test lists, as pfd-predict measures it; the lists the min_docs filter dropped are counted, per split."""
  from experiments.framework import practice
  record = practitioner.result["losses"]["rankbce"]
  text = practice._shipped(record, "pfd")
  shipped = float(re.search(r"test (\d\.\d+)\.$", text).group(1))
  res = _predict(Path(practitioner.models) / "pfd", f"{practitioner.folder}/test.txt", tmp_path / "s.tsv")
  assert res["ndcg"][0][8] == pytest.approx(shipped, abs=5e-4) and f"seed {res['seed']}," in text
  raw = data_lib.load_raw("letor", practitioner.folder)
  k = int(np.median(raw["train"].sizes))
  data = fold_data.load_dataset(logs_data(practitioner.folder, min_docs=k)).config
  assert "dropped_lists" not in record.first_fold.data  # min_docs=5 dropped none
  for split, g in raw.items():
    assert data["dropped_lists"][split] == [int(np.sum(g.sizes < k)), g.num_queries]
  said = tabulate.dropped_text(data)
  assert said.startswith(f"Lists dropped before training and scoring (fewer than {k} documents): train ")


def _gapped_folder(root: Path, ids=(*range(1, 6), 101, 102, 103)) -> Path:
  """A team's log whose feature ids have a gap (1-5 regular, 101-103 privileged: position, random-order flag,
  click), as LETOR train/vali/test files, and a serving file of the regular ids only."""
  rng = np.random.default_rng(0)
  root.mkdir()
  for split, queries in (("train", 40), ("vali", 20), ("test", 20)):
    lines = []
    for q in range(queries):
      for d in range(8):
        v = rng.random(len(ids))
        label = int(v[0] + v[-1] + 0.3 * rng.random() > 1.2)
        lines.append(f"{label} qid:{1000 * len(split) + q} " + " ".join(f"{i}:{x:.4f}" for i, x in zip(ids, v)))
    (root / f"{split}.txt").write_text("\n".join(lines) + "\n")
  serve = [" ".join(t for t in ln.split() if ":" not in t or t.startswith("qid") or int(t.split(":")[0]) < 100)
           for ln in (root / "test.txt").read_text().splitlines()]
  (root / "serve.txt").write_text("\n".join(serve) + "\n")
  return root


@pytest.mark.heavy
def test_a_gap_in_the_feature_ids_is_no_model_input_and_serving_names_each_column(tmp_path):
  """The columns of a user's folder are the ids its training files hold: a model of ids 1-5 and 101-103 reads 1-5
  (not 58 ids no file has); a privileged id on no line is refused before training; serving refuses a file without
  one of the model's columns by its id, warns of privileged ids left in, and --impute names every id it fills."""
  folder = _gapped_folder(tmp_path / "log")
  data = logs_data(str(folder), privileged="101,102,103", min_docs=1)
  ds = fold_data.load_dataset(data)
  assert ds.config["regular_ids"] == [1, 2, 3, 4, 5] and ds.config["privileged_ids"] == [101, 102, 103]
  assert ds["train"].x.shape[1] == 5 and ds["train"].z.shape[1] == 3
  with pytest.raises(ValueError, match=r"privileged: feature ids \[100\] hold no value on any line"):
    fold_data.load_dataset(logs_data(str(folder), privileged="101,102,100", min_docs=1))
  from conftest import TINY
  cfg = TINY.replace(data=data, run=dict(save_models=True), output=dict(out_dir=str(tmp_path / "out")),
                     options=table2.Options(methods=("pfd",)))
  table2.run(cfg)
  student = tmp_path / "out" / "letor" / "models" / "pfd"
  assert pfd_jax.load_model(str(student)).input_ids == [1, 2, 3, 4, 5]
  summary = _predict(student, folder / "serve.txt", tmp_path / "s.tsv")  # the correct serving file scores
  assert summary["imputed"] == [] and summary["privileged_ignored"] == []
  full = _predict(student, folder / "test.txt", tmp_path / "t.tsv")  # privileged columns left in: said, ignored
  assert full["privileged_ignored"] == [101, 102, 103] and "is this a training file?" in jobs_warning(full)
  assert (tmp_path / "s.tsv").read_text() == (tmp_path / "t.tsv").read_text()
  lacking = tmp_path / "no_price.txt"
  lacking.write_text("".join(" ".join(t for t in ln.split() if not t.startswith("3:")) + "\n"
                             for ln in open(folder / "serve.txt")))
  with pytest.raises(ValueError, match=r"reads feature ids 3 that appear on no line of this file; 3 is a column it "
                                       r"was trained on \(is the file of another feature set\?\)"):
    _predict(student, lacking, tmp_path / "never.tsv")
  filled = _predict(student, lacking, tmp_path / "f.tsv", impute="zero")
  assert filled["imputed"] == [3] and "read as 0 (--impute=zero): 3" in jobs_warning(filled)


def jobs_warning(summary) -> str:
  from pfd_jax.serving import jobs
  return jobs.imputed_warning(summary) or ""


@pytest.mark.parametrize("command,flag", [("predict", "--help"), ("export", "-h"), ("serve_onnx", "--help")])
def test_the_installed_commands_answer_help(command, flag, capsys):
  import importlib
  main = importlib.import_module(f"pfd_jax.commands.{command}").main
  with pytest.raises(SystemExit) as done:
    main([f"pfd-{command}", flag])
  out = capsys.readouterr().out
  assert done.value.code == 0 and out.startswith(f"pfd-{command.replace('_', '-')}: ") and "--out: " in out


def _installed(command: str) -> str:
  path = os.path.join(os.path.dirname(sys.executable), command)
  assert os.path.exists(path), f"{command} is not installed beside {sys.executable}: pip install -e . installs it"
  return path


@pytest.mark.slow  # four processes, each importing JAX
def test_installed_commands_score_and_export_as_the_clones_drivers_do(practitioner, tmp_path):
  """pip install puts pfd-predict and pfd-export on the PATH (pyproject's scripts): the same scores, bit for bit, as
  python -m experiments.predict; a graph written; a missing flag and a teacher without its privileged ids refused
  in one line each, with the drivers' exit codes."""
  folder, models = practitioner.folder, Path(practitioner.models)
  run = lambda *a: subprocess.run([_installed(a[0]), *a[1:]], capture_output=True, text=True, timeout=300, cwd=tmp_path)
  p = run("pfd-predict", f"--model={models / 'pfd'}", f"--data={folder}/serve.txt", f"--out={tmp_path / 'a.tsv'}",
          "--seed=1")
  assert p.returncode == 0 and "NDCG over" in p.stdout, p.stderr[-1500:]
  _predict(models / "pfd", f"{folder}/serve.txt", tmp_path / "b.tsv", seed=1)
  assert (tmp_path / "a.tsv").read_bytes() == (tmp_path / "b.tsv").read_bytes()
  p = run("pfd-predict", f"--model={models / 'pfd'}", f"--data={folder}/serve.txt")
  assert (p.returncode, p.stderr.strip()) == (2, "error: --out: required")
  p = run("pfd-predict", f"--model={models / 'pfd_teacher'}", f"--data={folder}/serve.txt", "--out=t.tsv")
  assert p.returncode == 1 and "are privileged: this model is a teacher" in p.stderr and "Traceback" not in p.stderr
  assert not (tmp_path / "t.tsv").exists()
  p = run("pfd-export", f"--model={models / 'pfd'}", "--format=stablehlo", f"--out={tmp_path / 'served'}")
  assert p.returncode == 0 and "model.stablehlo" in p.stdout, p.stderr[-1500:]
  assert sorted(os.listdir(tmp_path / "served")) == ["model.stablehlo", "serving.json"]


@pytest.mark.heavy  # three processes, each importing JAX
def test_installed_pfd_train_trains_a_folder_saves_its_students_and_pfd_predict_scores_them(logs_folder, tmp_path):
  """The practitioner's path without a clone: pfd-train on the team's folder (its own labels, its privileged ids)
  prints each row with its validation NDCG@8 and validation's pick, saves the servable rows only, and pfd-predict
  scores the saved student; a privileged id that no training line holds is refused in one line, nothing written."""
  run = lambda *a: subprocess.run([_installed(a[0]), *a[1:]], capture_output=True, text=True, timeout=600, cwd=tmp_path)
  p = run("pfd-train", f"--data_dir={logs_folder}", "--privileged=21,22,23", f"--out={tmp_path / 'models'}",
          "--methods=pfd", "--epochs=3", "--seeds=2")
  assert p.returncode == 0, p.stderr[-2000:]
  assert "best epoch of each row on vali" in p.stdout and "deploy: " in p.stdout
  assert "pfd_teacher: test NDCG@8" in p.stdout and "(reads privileged features: not saved)" in p.stdout
  assert sorted(os.listdir(tmp_path / "models")) == ["no_distill", "pfd"]
  with open(tmp_path / "models" / "pfd" / "model.json") as f:
    recipe = json.load(f)
  assert recipe["privileged_ids"] == [21, 22, 23] and 21 not in recipe["input_ids"]
  p = run("pfd-predict", f"--model={tmp_path / 'models' / 'pfd'}", f"--data={logs_folder}/serve.txt",
          f"--out={tmp_path / 's.tsv'}")
  assert p.returncode == 0 and "NDCG over" in p.stdout, p.stderr[-1500:]
  p = run("pfd-train", f"--data_dir={logs_folder}", "--privileged=21,22,99", f"--out={tmp_path / 'other'}",
          "--epochs=1", "--seeds=1")
  assert p.returncode in (1, 2) and "99" in p.stderr and "Traceback" not in p.stderr, p.stderr[-1500:]
  assert not (tmp_path / "other").exists()


@pytest.mark.heavy  # the package built and installed apart, three processes importing JAX
def test_the_practitioners_path_runs_from_the_package_installed_outside_a_clone(logs_folder, tmp_path):
  """README's path without a clone: the package built as a wheel and installed (not editable) into a folder of its
  own (its dependencies this environment's), the installed commands run from a folder that holds no source, each
  importing the installed copy, not the clone's."""
  site, root, source = tmp_path / "site", Path(__file__).resolve().parents[1], tmp_path / "source"
  # what the wheel is built from, copied (a build in place would leave build/ in the checkout)
  shutil.copytree(root / "pfd_jax", source / "pfd_jax", ignore=shutil.ignore_patterns("__pycache__"))
  for name in ("pyproject.toml", "README.md", "LICENSE"):
    shutil.copy(root / name, source / name)
  pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        f"--target={site}", str(source)], capture_output=True, text=True, timeout=600)
  assert pip.returncode == 0, pip.stderr[-2000:]
  work = tmp_path / "work"
  work.mkdir()
  env = dict(os.environ, PYTHONPATH=str(site))
  run = lambda *a: subprocess.run(list(a), capture_output=True, text=True, timeout=600, cwd=work, env=env)
  where = run(sys.executable, "-c", "import pfd_jax; print(pfd_jax.__file__)")
  assert where.returncode == 0 and where.stdout.strip().startswith(str(site)), (where.stdout, where.stderr[-500:])
  command = lambda name: str(site / "bin" / name)
  p = run(command("pfd-train"), "--help")
  assert p.returncode == 0 and "--data_dir" in p.stdout, p.stderr[-1000:]
  p = run(command("pfd-train"), f"--data_dir={logs_folder}", "--privileged=21,22,23", "--out=models",
          "--methods=pfd", "--epochs=2", "--seeds=1")
  assert p.returncode == 0 and "deploy: " in p.stdout, p.stderr[-2000:]
  p = run(command("pfd-predict"), "--model=models/pfd", f"--data={logs_folder}/serve.txt", "--out=scores.tsv")
  assert p.returncode == 0 and "NDCG over" in p.stdout, p.stderr[-1500:]
  p = run(command("pfd-export"), "--model=models/pfd", "--format=stablehlo", "--out=served")
  assert p.returncode == 0 and sorted(os.listdir(work / "served")) == ["model.stablehlo", "serving.json"], p.stderr[-1500:]

def _predict(model, data, out, **kw):
  return predict.run(schema.Config(options=predict.Options(model=str(model), data=str(data), out=str(out), **kw)))


def test_serving_file_with_labels_on_some_lines_only(tmp_path):
  p = tmp_path / "s.txt"
  p.write_text("qid:1 1:0.5\n1 qid:1 1:0.2\n")
  with pytest.raises(ValueError, match=rf"{p}:2: this file's first line has no label"):
    data_lib.load_serving(str(p))
  p.write_text("qid:1 1:0.5 2:1\nqid:1 1:0.2\nqid:2 2:3\n")
  g = data_lib.load_serving(str(p), num_features=4)
  assert g.rel is None and g.x.shape == (3, 4) and list(g.offsets) == [0, 2, 3]


USAGE = [  # table2's flags, what its error says; the first in the default tier, the others in the slow tier
    (["--dataset=letor", "--data_dir={folder}", "--epochs=1"], "--privileged=ID,ID"),
    (["--dataset=letor", "--data_dir={folder}", "--privileged=7,x"],
     "--privileged='7,x': '7,x': 'x' is not a feature id"),
    (["--positive_grade=2"], "--positive_grade=2.0: applies to labels=file only")]


@pytest.mark.parametrize("argv,want", slow_after_first(USAGE))
def test_letor_folder_without_privileged_is_a_usage_error(folder, argv, want):
  p = _run("experiments.paper.table2", *[a.format(folder=folder) for a in argv])
  assert p.returncode != 0 and want in p.stderr, p.stderr[-500:]


def test_public_api_is_reexported():
  for name in pfd_jax.__all__:
    assert getattr(pfd_jax, name) is not None
  assert {"load_raw", "prepare", "run_methods", "make_ranker", "save_model", "load_model", "Ranker",
          "load_serving", "TrainConfig"} <= set(pfd_jax.__all__)


def test_serving_file_with_a_split_query_names_the_line(tmp_path):
  p = tmp_path / "s.txt"
  p.write_text("qid:1 1:0.5\nqid:2 1:0.2\nqid:1 1:0.3\n")
  with pytest.raises(data_lib.DataError, match=rf"{p}:3: qid 1 reappears"):
    data_lib.load_serving(str(p))
