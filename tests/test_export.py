"""A saved MLP student exported as StableHLO scores like Ranker.score_groups."""
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

import pfd_jax
from experiments import predict
from experiments.framework import fold_data, monitor, outputs, schema
from experiments import export as export_driver
from pfd_jax import data as data_lib
from pfd_jax.training import device
from pfd_jax.methods import distill
from conftest import logs_data
from pfd_jax.serving import export
from pfd_jax import serving
from pfd_jax import training as training_lib

pytestmark = pytest.mark.numeric


def _trained_student(folder, out, pfd=True, **arch):
  """A PFD student (3 seeds) of the simulated log folder (pfd=False: a model of the same view trained without a
  teacher, one row to train instead of three), saved under `out` and loaded back; the serving file; the saved
  model's folder."""
  ds = fold_data.load_dataset(logs_data(folder, query_norm=True))
  dd = device.to_device(ds, 2, ("test",))
  cfg = training_lib.TrainConfig(epochs=2, batch_size=16, hidden=16, layers=3, **arch)
  keys = jax.random.split(jax.random.PRNGKey(0), 3)
  trained = distill.run_methods(keys, cfg, dd, ["pfd"])["pfd"] if pfd else distill.train_on_data(keys, cfg, dd, "x")
  ranker = pfd_jax.make_ranker(trained, cfg, "x", ds.config)
  ranker.save(str(out / "model"))
  return (pfd_jax.load_model(str(out / "model")), data_lib.load_serving(os.path.join(folder, "serve.txt"), 23),
          str(out / "model"))


@pytest.fixture(scope="module")
def student(logs_folder, tmp_path_factory):
  return _trained_student(logs_folder, tmp_path_factory.mktemp("logs_export"))


@pytest.fixture(scope="module", params=[dict(norm="batch"), dict(norm="layer"),
                                        pytest.param(dict(norm="batch", input_affine=False), marks=pytest.mark.slow)],
                ids=["batch", "layer", "batch-noinput_affine"])
def modern_student(logs_folder, tmp_path_factory, request):
  """The modern options on: normalisation (running statistics saved for batch norm; the input's without scale and
  bias recorded in model.json), noise, dropout, clipping. What is exported is the architecture, the same for a
  student as for a model trained alone: trained alone (the PFD student's export: `student`)."""
  return _trained_student(logs_folder, tmp_path_factory.mktemp("logs_export_modern"), pfd=False, **request.param,
                          dropout=0.2, noise=0.1, clip=3.0)


def _query(raw, n):
  """One query of n documents drawn from the serving file's documents."""
  rows = np.random.default_rng(n).choice(raw.num_docs, size=n, replace=n > raw.num_docs)
  return data_lib.Groups(x=raw.x[rows], rel=None, qid=np.array([1]), offsets=np.array([0, n]))


def _runner(path, fmt):
  """f32[n, D] -> f32[n] of an exported artifact, run as a service would: StableHLO deserialised, ONNX in ONNX Runtime."""
  blob = open(path, "rb").read()
  if fmt == "stablehlo":
    return jax.export.deserialize(bytearray(blob)).call
  ort = pytest.importorskip("onnxruntime")
  sess = ort.InferenceSession(blob)
  return lambda x: sess.run(None, {sess.get_inputs()[0].name: x})[0]


@pytest.mark.heavy
@pytest.mark.parametrize("fmt", ["stablehlo", "onnx"])
def test_exported_graph_scores_like_the_ranker(student, tmp_path, fmt):
  ranker, raw, _ = student
  spec = export.export(ranker, str(tmp_path), fmt)
  call = _runner(tmp_path / spec["artifact"], fmt)
  for n in (1, 7, 300):  # n is dynamic: one artifact for every query size
    one = _query(raw, n)
    got = np.asarray(call(export.raw_columns(one, spec["feature_ids"])))
    assert got.shape == (n,)
    np.testing.assert_allclose(got, ranker.score_groups(one), rtol=1e-5, atol=1e-5)


@pytest.mark.heavy
@pytest.mark.parametrize("fmt", ["stablehlo", "onnx"])
def test_a_normalised_ensemble_exports_as_it_scores(modern_student, tmp_path, fmt):
  """A batch- or layer-normalised model with noise and dropout, exported as the mean logit of its seeds:
  the graph (scoring mode: running statistics, no noise, no dropout) equals in-process scoring to 1e-5."""
  ranker, raw, _ = modern_student
  assert ranker.arch.norm in ("batch", "layer") and ranker.recipe["model"]["dropout"] == 0.2
  spec = export.export(ranker, str(tmp_path), fmt, ensemble=True)
  call = _runner(tmp_path / spec["artifact"], fmt)
  for n in (1, 9, 100):
    one = _query(raw, n)
    want = np.mean([ranker.score_groups(one, seed=s) for s in range(ranker.num_seeds)], axis=0)
    np.testing.assert_allclose(np.asarray(call(export.raw_columns(one, spec["feature_ids"]))), want, rtol=1e-5,
                               atol=1e-5)


@pytest.mark.heavy
def test_ensemble_is_the_mean_of_the_seeds(student, tmp_path):
  ranker, raw, _ = student
  one = data_lib.Groups(x=raw.x[:12], rel=None, qid=np.array([1]), offsets=np.array([0, 12]))
  cols = export.raw_columns(one, ranker.input_ids)
  mean = np.mean([ranker.score_groups(one, seed=s) for s in range(ranker.num_seeds)], axis=0)
  np.testing.assert_allclose(np.asarray(export.serving_function(ranker, ensemble=True)(cols)), mean, atol=1e-5)


def test_a_lightgbm_model_is_refused_with_one_line():
  fake = serving.GBDTRanker(params=("",), recipe={})
  with pytest.raises(serving.ModelError, match="LightGBM model is served by its own model files"):
    export.serving_function(fake)


@pytest.mark.heavy
def test_export_driver_and_the_serving_example_without_jax(student, logs_folder, tmp_path):
  """experiments.export writes the ONNX graph; pfd-serve-onnx scores serve.txt with ONNX Runtime in a process that
  never imports JAX, giving experiments.predict's scores (1e-5) line for line; the test file (privileged ids left in)
  the same scores with a warning; a file without one of its columns, or with an id it never saw, refused in one line."""
  ranker, raw, model = student
  served = str(tmp_path / "served")
  res = export_driver.run(schema.Config(options=export_driver.Options(model=model, out=served)))
  assert res["spec"]["feature_ids"] == list(range(1, 21)) and res["spec"]["seed"] == ranker.best_seed
  data = os.path.join(logs_folder, "serve.txt")
  ours, theirs = str(tmp_path / "predict.tsv"), str(tmp_path / "onnx.tsv")
  predict.run(schema.Config(options=predict.Options(model=model, data=data, out=ours)))
  code = ("import sys; from pfd_jax.commands import serve_onnx; code = serve_onnx.main(sys.argv); "
          "assert 'jax' not in sys.modules, 'the ONNX server imported jax'; sys.exit(code)")
  serve = lambda f, out: subprocess.run([sys.executable, "-c", code, f"--export={served}", f"--data={f}",
                                         f"--out={out}"], capture_output=True, text=True, timeout=120)
  p = serve(data, theirs)
  assert p.returncode == 0, p.stderr[-800:]
  a = [ln.split("\t") for ln in open(ours).read().splitlines()]
  b = [ln.split("\t") for ln in open(theirs).read().splitlines()]
  assert [r[:2] for r in a] == [r[:2] for r in b] and len(a) == raw.num_docs
  np.testing.assert_allclose([float(r[2]) for r in b], [float(r[2]) for r in a], rtol=1e-5, atol=1e-5)
  p = serve(os.path.join(logs_folder, "test.txt"), tmp_path / "full.tsv")
  assert p.returncode == 0 and "privileged feature ids 21,22,23, which the graph does not read" in p.stderr
  assert (tmp_path / "full.tsv").read_text() == open(theirs).read()
  lines = open(data).read().splitlines()
  for name, edit, said in (("lacking", lambda t: not t.startswith("7:"), "feature ids 7 that appear on no line"),
                           ("another", lambda t: True, "feature ids 30 were never seen by the model")):
    bad = tmp_path / f"{name}.txt"
    bad.write_text("".join(" ".join(t for t in ln.split() if edit(t)) + (" 30:1" if name == "another" else "") + "\n"
                           for ln in lines))
    p = serve(bad, tmp_path / "never.tsv")
    assert p.returncode == 1 and said in p.stderr and "Traceback" not in p.stderr, p.stderr[-800:]
    assert not (tmp_path / "never.tsv").exists()


def _scalars(folder):
  """(tag, step, value) of every scalar in the event files of `folder`, read with tensorboardX's protobuf."""
  import glob
  import struct
  from tensorboardX.proto import event_pb2
  out = []
  for path in sorted(glob.glob(os.path.join(folder, "events.*"))):
    data, i = open(path, "rb").read(), 0
    while i < len(data):  # TFRecord framing: u64 length, u32 crc, record, u32 crc
      (n,) = struct.unpack("<Q", data[i:i + 8])
      ev = event_pb2.Event()
      ev.ParseFromString(data[i + 12:i + 12 + n])
      i += 16 + n
      out += [(v.tag, ev.step, v.simple_value) for v in ev.summary.value if v.HasField("simple_value")]
  return out


@pytest.mark.heavy
def test_tensorboard_files_hold_every_rows_scalars(tmp_path):
  from conftest import TINY
  from experiments.paper import table2
  cfg = TINY.replace(options=table2.Options(methods=("pfd",)))
  monitor.TENSORBOARD.open(str(tmp_path / "tb"), outputs.as_json({"c": cfg})["c"])
  try:
    res = table2.run(cfg)
  finally:
    monitor.TENSORBOARD.close()
  got = _scalars(str(tmp_path / "tb"))
  rows = res["losses"]["rankbce"].first_fold.rows
  for row in ("no_distill", "pfd_teacher", "pfd"):
    for s in range(2):
      loss = [(step, v) for tag, step, v in got if tag == f"rankbce/fold1/{row}/seed{s}/loss"]
      assert [step for step, _ in loss] == [1, 2]
      np.testing.assert_allclose([v for _, v in loss], np.asarray(rows[row].loss)[s, :, 0], rtol=1e-6)
      ndcg = [v for tag, step, v in got if tag == f"rankbce/fold1/{row}/seed{s}/test_ndcg8"]
      np.testing.assert_allclose(ndcg, np.asarray(rows[row].curves["test"])[s, :, 0], rtol=1e-6)
  assert len(got) == 3 * 2 * 2 * (1 + 3)  # rows x seeds x epochs x (loss + NDCG@8/16/32 on test)

