"""The registries (pfd_jax.registry): a new row, a new loss with a hyper-parameter and a new dataset format are one
entry each, registered from this test module, and reach table2's flags, table, claims and a saved model's
model.json; the built-in losses' hyper-parameters are settable and bound exactly."""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl import flags

from conftest import TINY
from experiments.page import judged
from experiments.paper import table2
from experiments.framework import cli, outputs
from pfd_jax.config import ConfigError
from pfd_jax.data import specs
from pfd_jax.data.groups import Groups
from pfd_jax.methods import rows
from pfd_jax.ops import losses
from pfd_jax.training import TrainConfig


def scaled_bce(scores, labels, mask=None, *, scale: float = 1.0, reduce_fn=jnp.sum):
  """RankBCE on scale * scores: a loss with one hyper-parameter."""
  return losses.rank_bce(scale * scores, labels, mask, reduce_fn=reduce_fn)


def read_csv(path: str, cache_dir=None) -> Groups:
  """A LETOR-like CSV format: 'label,qid,f1,...,fn' per document, a query's documents on consecutive lines."""
  a = np.loadtxt(path, delimiter=",", ndmin=2)
  qid = a[:, 1].astype(np.int64)
  starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]])
  return Groups(x=a[:, 2:].astype(np.float32), rel=a[:, 0].astype(np.float32), qid=qid[starts],
                offsets=np.r_[starts, len(qid)].astype(np.int64))


ROW = rows.Row("pfd_alpha02", "PFD student, alpha 0.2",
               recipe=rows.Recipe(teacher="pfd_teacher", overrides=(("alpha", 0.2),)),
               claims=(("pfd", "PFD student at alpha 0.2 beats PFD at alpha 0.5 (a registered row)"),))
LOSS = losses.Loss("scaled_bce", scaled_bce, params={"scale": 1.0})
SPEC = specs.DatasetSpec("csvrank", "a CSV export (test)", labels="file", own_folder=True, own_data=True,
                         read=read_csv, read_shard=None)


@pytest.fixture
def registered():
  for registry, entry in ((rows.REGISTRY, ROW), (losses.REGISTRY, LOSS), (specs.REGISTRY, SPEC)):
    registry.register(entry)
  try:
    yield
  finally:
    for registry, entry in ((rows.REGISTRY, ROW), (losses.REGISTRY, LOSS), (specs.REGISTRY, SPEC)):
      registry.unregister(entry.name)


def _csv_folder(root) -> str:
  """train/vali/test CSV files: 6 features, the 6th the label's noisy copy (a privileged signal)."""
  rng = np.random.default_rng(0)
  os.makedirs(root, exist_ok=True)
  for split, queries in (("train", 60), ("vali", 20), ("test", 30)):
    lines, qid = [], 0
    for _ in range(queries):
      qid += 1
      n = rng.integers(8, 14)
      x = rng.normal(size=(n, 6))
      rel = (x[:, 0] + 0.5 * rng.normal(size=n) > 1.0).astype(int)
      x[:, 5] = rel + 0.3 * rng.normal(size=n)
      lines += [",".join([str(r), str(qid)] + [f"{v:.4f}" for v in row]) for r, row in zip(rel, x)]
    with open(os.path.join(root, f"{split}.txt"), "w") as f:
      f.write("\n".join(lines) + "\n")
  return str(root)


@pytest.mark.slow
def test_a_row_a_loss_and_a_dataset_are_one_entry_each(registered, tmp_path):
  folder = _csv_folder(tmp_path / "csv")
  fv = flags.FlagValues()
  cli.define_flags(table2.DRIVER, fv, key_module="test")  # the new names are flag values like any other
  fv(["prog", "--dataset=csvrank", f"--data_dir={folder}", "--privileged=6", "--loss=scaled_bce",
      "--loss_params=scale=2", "--methods=pfd,pfd_alpha02", "--save_models", f"--out_dir={tmp_path / 'out'}",
      "--epochs=2", "--hidden=16", "--layers=3", "--seeds=2", "--min_docs=5", "--cache_dir=", "--max_buckets=2",
      "--notensorboard", "--noensembles", "--nosearch", "--norm=none", "--dropout=0", "--noise=0"])
  cfg = cli.config_from_flags(table2.DRIVER, fv)
  assert cfg.train.select_on == "vali"  # the spec's own_data: the practitioner's defaults (less the flags given)
  assert table2.DRIVER.rows(cfg) == 4  # no_distill, pfd_teacher, pfd, pfd_alpha02
  res = outputs.as_json(table2.run(cfg))
  lr = res["losses"]["scaled_bce"]
  assert lr["train_config"]["loss_params"] == [["scale", 2.0]]
  fold = lr["folds"]["fold1"]
  assert set(fold["rows"]) == {"no_distill", "pfd_teacher", "pfd", "pfd_alpha02"}
  assert fold["data"]["name"] == "csvrank" and fold["data"]["privileged_ids"] == [6]
  assert "| PFD student, alpha 0.2 |" in table2.to_markdown(res)
  claim = [c for c in judged.of("table2").claims(res) if c and "a registered row" in c.text]
  assert [c.text for c in claim] == ["[scaled_bce] PFD student at alpha 0.2 beats PFD at alpha 0.5 (a registered row)"]
  # the row saves its own settings, the loss's hyper-parameter and the dataset's name
  with open(tmp_path / "out" / "csvrank" / "models" / "pfd_alpha02" / "model.json") as f:
    model = json.load(f)
  assert model["train_config"]["alpha"] == 0.2 and model["train_config"]["loss"] == "scaled_bce"
  assert model["train_config"]["loss_params"] == [["scale", 2.0]] and model["dataset"] == "csvrank"
  with open(tmp_path / "out" / "csvrank" / "models" / "pfd" / "model.json") as f:
    assert json.load(f)["train_config"]["alpha"] == 0.5


def test_a_registered_row_trains_from_its_entry(registered):
  """The plan of --methods=pfd_alpha02 is its teacher chain, and the row trains with its own alpha."""
  assert [r.name for r in rows.plan(["pfd_alpha02"])] == ["no_distill", "pfd_teacher", "pfd_alpha02"]
  assert ROW.recipe.config(TrainConfig()).alpha == 0.2 and rows.uses_privileged("pfd_alpha02")
  assert "pfd_alpha02" in table2.all_methods() and "pfd_alpha02" in rows.methods(one_process=False)
  with pytest.raises(ValueError, match="unknown methods"):
    rows.plan(["pfd_alpha03"])
  with pytest.raises(ValueError, match="registered already"):
    rows.REGISTRY.register(ROW)


@pytest.mark.parametrize("name, params, kw", [("approxndcg", (("temperature", 0.25),), dict(temperature=0.25)),
                                              ("lambdaloss", (("mu", 2.0),), dict(mu=2.0))])
def test_loss_hyper_parameters_are_settable_and_bound(name, params, kw):
  """ApproxNDCG's temperature and LambdaLoss's mu through TrainConfig.loss_params: the same value as the function
  called with the keyword, and another value than the default."""
  scores = jax.random.normal(jax.random.PRNGKey(0), (3, 7))
  labels = (jax.random.uniform(jax.random.PRNGKey(1), (3, 7)) > 0.6).astype(jnp.float32)
  mask = jnp.arange(7)[None, :] < jnp.array([[7], [5], [3]])
  fn = losses.REGISTRY[name].fn
  got = TrainConfig(loss=name, loss_params=params).make_loss()(scores, labels, mask)
  np.testing.assert_array_equal(got, fn(scores, labels, mask, **kw))
  assert not np.isclose(got, fn(scores, labels, mask))
  assert TrainConfig(loss=name).make_loss() is fn  # defaults bind nothing: the default runs keep their bits


def test_loss_params_errors_name_the_setting():
  with pytest.raises(ConfigError, match="loss_params: loss 'rankbce' has no hyper-parameter mu; it has none"):
    TrainConfig(loss="rankbce", loss_params=(("mu", 1.0),)).check_loss()
  with pytest.raises(ConfigError, match="loss_params: loss 'ranknet' has no hyper-parameter temperature"):
    TINY.replace(run=dict(loss="both"), train=dict(loss_params=(("temperature", 1.0),))).train_config("ranknet")
  with pytest.raises(ConfigError, match="expected name=number pairs"):
    TrainConfig.__dataclass_fields__["loss_params"].metadata["parse"]("temperature")
  with pytest.raises(ConfigError, match="loss: 'nope' is not one of"):
    TrainConfig(loss="nope")


def test_a_loss_that_draws_randomness_gets_a_key():
  """ListMLE declares needs_key: the step passes it a key, and no training code compares loss names."""
  assert losses.REGISTRY["listmle"].needs_key and not losses.REGISTRY["rankbce"].needs_key
  here = os.path.dirname(os.path.abspath(__file__))
  with open(os.path.join(here, "..", "pfd_jax", "training", "step.py")) as f:
    step = f.read()
  assert "cfg.loss ==" not in step and '== "listmle"' not in step  # (the top-K teacher term is a kind of teaching)


def test_the_dataset_registry_serves_the_layouts():
  """Every built-in name is a spec; the in-memory one reads no folder; an unknown name names the known ones."""
  from pfd_jax import data as data_lib
  from pfd_jax.data.config import DataConfig
  assert {"synthetic", "ohsumed", "mq2008", "web10k", "web30k", "yahoo", "istella", "letor"} <= set(specs.REGISTRY)
  assert data_lib.num_folds("ohsumed") == 5 and data_lib.spec("synthetic").in_memory and data_lib.spec("letor").own_data
  with pytest.raises(ConfigError, match="data_dir: dataset=synthetic is generated in memory"):
    DataConfig(dataset="synthetic", data_dir="x")
  with pytest.raises(data_lib.DataError, match="unknown dataset 'nope'; known: synthetic"):
    data_lib.split_files("nope", None)


def test_a_row_registered_later_changes_no_default_run():
  """table2's default --methods is its named list: a row registered after (a user's listwise-KL row, say) runs
  where --methods names it, and the default run trains what it trained before."""
  from experiments.paper import table2
  from pfd_jax.methods import rows
  before = table2.Options().methods_for(1)
  rows.REGISTRY.register(rows.Row("kl_student", "Listwise-KL student (a later row)",
                                  recipe=rows.Recipe(teacher="pfd_teacher")))
  try:
    assert "kl_student" in table2.all_methods() and table2.Options().methods_for(1) == before
    assert table2.Options(methods=("kl_student",)).methods_for(1) == ("kl_student",)
  finally:
    rows.REGISTRY.unregister("kl_student")
  assert before == table2.DEFAULT_METHODS and table2.Options().methods_for(2) == table2.DEFAULT_METHODS[:5]
