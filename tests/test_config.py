"""One typed configuration: flags generated from the dataclasses, checked before any data is loaded."""
import importlib
import os
import subprocess
import sys

import pytest
from absl import app, flags

from conftest import heavy_after_first, slow_after_first
import experiments
from experiments.framework import cli, outputs, schema
from pfd_jax import config as config_lib
from pfd_jax.data.config import DataConfig
from pfd_jax.training import TrainConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DRIVERS = ["table2", "fig3_alpha", "alpha_robustness", "fig4_sparsity", "fig5_correlation", "table5_positive_groups",
           "table6_imputation", "table3_logs", "sdr", "rank_distill", "pfd_teacher_loss", "committee_perceptron",
           "data_summary", "theory", "benchmark", "bench_losses", "export_logs", "predict"]


def _driver(name):
  return importlib.import_module(experiments.module(name)).DRIVER


REQUIRED = {"predict": ("--model=m", "--data=d", "--out=o")}


def _parsed(driver, *argv):
  fv = flags.FlagValues()
  cli.define_flags(driver, fv, key_module="test")
  fv(["prog", *argv])
  return fv


@pytest.mark.parametrize("name", DRIVERS)
def test_generated_flag_defaults_are_the_dataclass_defaults(name):
  """No default is written twice: every flag's default is its field's (or the driver's declared override)."""
  driver = _driver(name)
  fv = _parsed(driver, *REQUIRED.get(name, ()))
  cfg = cli.config_from_flags(driver, fv)
  overrides = dict(driver.defaults)
  for group, (flag, f, _, prefix) in cli._driver_fields(driver):
    if flag == "out_dir" or any(a.startswith(f"--{flag}=") for a in REQUIRED.get(name, ())):
      continue  # out_dir None = results/<driver>, filled in below
    obj = getattr(cfg, group)
    for part in prefix.rstrip("_").split("_") if prefix else ():
      obj = getattr(obj, part)
    want = overrides.get(flag, f.default)
    assert getattr(obj, f.name) == want, flag
  if "output" in driver.groups:
    assert cfg.output.out_dir == os.path.join("results", name)


def test_every_shared_setting_is_a_flag_once():
  names = [flag for _, (flag, *_rest) in cli._driver_fields(_driver("table2"))]
  assert len(names) == len(set(names))
  assert {"dataset", "labels", "privileged", "seeds", "epochs", "alpha", "teaching", "topk_k", "mesh",
          "save_models", "out_dir", "methods"} <= set(names)
  assert "teacher_loss" not in names and "loss" in names  # one word per concept: teaching = how, loss = what


def test_flag_values_reach_the_config_typed():
  driver = _driver("fig3_alpha")
  cfg = cli.config_from_flags(driver, _parsed(driver, "--alphas=0.3,0.9", "--folds=1", "--mesh=data:2",
                                                 "--topk_k=4", "--privileged=3,5", "--seeds=2"))
  assert cfg.options.alphas == (0.3, 0.9) and cfg.data.folds == (1,) and cfg.train.mesh == (("data", 2),)
  assert cfg.train.topk.k == 4 and cfg.data.privileged_ids == (3, 5) and cfg.run.seeds == 2
  tc = cfg.train_config("ranknet")
  assert (tc.effective_batch_size, tc.effective_lr) == (300, 3e-4)  # the paper's for RankNet, from one place


@pytest.mark.parametrize("argv,message", [
    (["--seeds=0"], "--seeds=0: must be >= 1"),
    (["--epochs=0"], "--epochs=0: must be >= 1"),
    (["--alpha=2"], "--alpha=2.0: must be <= 1"),
    (["--alpha=-0.1"], "--alpha=-0.1: must be >= 0"),
    (["--batch_size=0"], "--batch_size=0: must be >= 1"),
    (["--tau=inf"], "--tau=inf: must be finite"),
    (["--folds=abc"], "--folds='abc': 'abc' is not an integer"),
    (["--methods=pfd,nope"], "--methods='pfd,nope': 'nope' is not one of"),
    (["--topk_eps=0"], "--topk_eps=0: must be >= 1"),
    (["--positive_grade=2"], "--positive_grade=2.0: applies to labels=file only"),
    (["--privileged=4", "--num_privileged=3"], "--num_privileged=3: applies to privileged=auto only"),
    (["--dataset=letor", "--data_dir=x"], "--privileged: dataset=letor reads your own folder"),
])
def test_bad_values_are_usage_errors_naming_the_flag(argv, message):
  driver = _driver("table2")
  with pytest.raises(app.UsageError, match=message.replace("(", r"\(").replace("+", r"\+")):
    cli.config_from_flags(driver, _parsed(driver, *argv))


def test_config_round_trips_through_json():
  from experiments.related import sdr
  cfg = schema.Config(data=DataConfig(dataset="ohsumed", folds=(1, 3), privileged="2,9"),
                      train=TrainConfig(loss="ranknet", mesh=(("seeds", 2), ("data", 2)), alpha=0.3),
                      run=schema.RunConfig(seeds=3, teaching="topk"), options=sdr.Options(temperatures=(0.5,)))
  js = outputs.as_json({"config": cfg})["config"]
  assert schema.config_from_json(js, sdr.Options) == cfg


def test_library_configs_check_themselves():
  with pytest.raises(config_lib.ConfigError, match="alpha"):
    TrainConfig(alpha=1.5)
  with pytest.raises(config_lib.ConfigError, match="dataset"):
    DataConfig(dataset="nope")
  assert TrainConfig(loss="ranknet").effective_batch_size == 300


def _run(*args):
  return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


BAD_FLAGS = [  # argv, what the one line names; the first in the default tier, the others in the slow tier
    (["--seeds=0", "--dataset=ohsumed", "--data_dir=/nonexistent"], "--seeds=0"),
    (["--alpha=2", "--dataset=ohsumed", "--data_dir=/nonexistent"], "--alpha=2.0"),
    (["seeds=5", "epochs=100"], "unexpected arguments ['seeds=5', 'epochs=100']"),
    (["--no_such_flag=1"], "Unknown command line flag 'no_such_flag'"),
    (["--seeds=abc"], "--seeds"),
    # a folder without --dataset=letor would silently train on the synthetic set
    (["--data_dir=mydata", "--labels=file", "--positive_grade=3", "--privileged=9,10"],
     "--data_dir='mydata': dataset=synthetic is generated in memory and reads no folder; to train on your own LETOR "
     "files add --dataset=letor")]


@pytest.mark.parametrize("argv,want", slow_after_first(BAD_FLAGS))
def test_bad_flags_fail_before_loading_data_in_a_real_process(argv, want):
  """Exit code 2 with one line naming the flag, before any data is read (the data folder does not exist)."""
  p = _run("experiments.paper.table2", *argv)
  assert p.returncode == 2 and want in p.stderr and "Traceback" not in p.stderr, p.stderr[-500:]
  assert len(p.stderr.strip().splitlines()) == 2


@pytest.mark.parametrize("name", heavy_after_first(["table2", "committee_perceptron", "predict"]))
def test_help_lists_the_drivers_flags(name):
  p = _run(experiments.module(name), "--help")
  assert p.returncode == 0, p.stderr[-500:]
  for _, (flag, f, t, _) in cli._driver_fields(_driver(name)):
    assert (f"--[no]{flag}" if t is bool else f"--{flag}") in p.stdout, flag


@pytest.mark.parametrize("name,flag", heavy_after_first([("launch", "--num_processes"), ("report", "--check"),
                                                          ("crossmachine", "--spread_file")]))
def test_help_of_the_tools_exits_0_and_lists_their_flags(name, flag):
  """The tools with their own flags answer --help as every driver does (absl's default exit is 1), and a flag
  they do not know is one line and exit 2."""
  p = _run(experiments.module(name), "--help")
  assert p.returncode == 0 and flag in p.stdout, (p.returncode, p.stderr[-500:])
  p = _run(experiments.module(name), "--no_such_flag")
  assert p.returncode == 2 and "no_such_flag" in p.stderr and "Traceback" not in p.stderr, p.stderr[-500:]


def test_installing_claims_no_experiments_package():
  import tomllib
  with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
    found = tomllib.load(f)["tool"]["setuptools"]["packages"]["find"]["include"]
  assert found == ["pfd_jax*"]


def test_a_preset_stands_for_its_flags_and_later_flags_override_them():
  from absl import flags as absl_flags
  from experiments.paper import table2
  from experiments.framework import lifecycle
  argv = ["prog", "--seeds=3", "--preset=ohsumed", "--loss=ranknet"]
  assert lifecycle.expand_preset(table2.DRIVER, argv) == [
      "prog", "--seeds=3", "--dataset=ohsumed", "--loss=rankbce", "--preset=ohsumed", "--loss=ranknet"]
  with pytest.raises(absl_flags.Error, match="'nope' is not a preset of experiments.paper.table2; its presets: default"):
    lifecycle.expand_preset(table2.DRIVER, ["prog", "--preset=nope"])


def test_own_data_gets_validation_selection_the_modern_ranker_and_ensembles_not_the_search(tmp_path):
  """--dataset=letor (the team's own labels): selection on vali when the folder has one, MODERN and the ensemble
  rows, each overridden by its flag; the PFD search only when asked (--search: its cost is many rows'); the paper's
  datasets keep test selection and the paper's MLP."""
  from pfd_jax.training.config import MODERN
  driver = _driver("table2")
  for split in ("train", "vali", "test"):
    (tmp_path / f"{split}.txt").write_text("1 qid:1 1:0.5 2:1\n0 qid:1 1:0.1 2:0\n")
  own = cli.config_from_flags(driver, _parsed(driver, "--dataset=letor", f"--data_dir={tmp_path}", "--privileged=2"))
  assert own.train.select_on == "vali" and own.run.ensembles and own.run.loss == "approxndcg"
  assert not own.options.search  # asked for by --search, never by default
  assert cli.config_from_flags(driver, _parsed(driver, "--dataset=letor", f"--data_dir={tmp_path}", "--privileged=2",
                                               "--search")).options.search
  assert {k: getattr(own.train, k) for k in MODERN} == MODERN
  mine = cli.config_from_flags(driver, _parsed(driver, "--dataset=letor", f"--data_dir={tmp_path}", "--privileged=2",
                                               "--select_on=test", "--norm=layer", "--noensembles"))
  assert (mine.train.select_on, mine.train.norm, mine.run.ensembles, mine.train.hidden) == ("test", "layer", False,
                                                                                            MODERN["hidden"])
  (tmp_path / "vali.txt").unlink()
  novali = cli.config_from_flags(driver, _parsed(driver, "--dataset=letor", f"--data_dir={tmp_path}", "--privileged=2"))
  assert novali.train.select_on == "test"
  paper = cli.config_from_flags(driver, _parsed(driver))
  assert not paper.options.search  # the paper's tables and the main job: no search
  assert (paper.train.select_on, paper.train.norm, paper.train.hidden, paper.run.ensembles) == ("test", "none", 100,
                                                                                                False)


def test_a_letor_folder_with_folds_is_cross_validated(tmp_path):
  from pfd_jax import data as data_lib
  for k in (1, 2, 3):
    (tmp_path / f"Fold{k}").mkdir()
    for split in ("train", "test"):
      (tmp_path / f"Fold{k}" / f"{split}.txt").write_text(f"1 qid:{k} 1:0.5\n0 qid:{k} 1:0.1\n")
  assert data_lib.available_folds("letor", str(tmp_path)) == [1, 2, 3]
  assert data_lib.split_files("letor", str(tmp_path), 3)["test"] == str(tmp_path / "Fold3" / "test.txt")
  assert data_lib.load_raw("letor", str(tmp_path), fold=2)["train"].qid.tolist() == [2]
  with pytest.raises(data_lib.DataError, match="folds 1..3, got fold=4"):
    data_lib.split_files("letor", str(tmp_path), 4)


def test_every_preset_parses_and_writes_where_the_page_reads():
  """Each preset of the page, expanded and parsed as its command would be, writes to <driver>/<its label>/ (the
  folder experiments.report reads); the paper-scale preset draws its data chunk by chunk."""
  from experiments import report
  from experiments.framework import lifecycle, rundir
  for e in report.EXPECTED:
    driver = _driver(e.driver)
    preset = e.command.split("--preset=")[1] if "--preset=" in e.command else "default"
    argv = lifecycle.expand_preset(driver, ["prog", f"--preset={preset}"])[1:]
    cfg = cli.config_from_flags(driver, _parsed(driver, *argv))
    assert rundir.label(cfg, driver) == e.label, e.key
    if e.key == "table2/synthetic-web30k":
      assert cfg.data.synthetic_kwargs()["chunk"] == 500 and cfg.data.synthetic_kwargs()["num_queries"][0] == 18919


def test_the_paper_presets_are_the_papers_protocol(tmp_path):
  """--preset=paper_<dataset>: Table 2 / Table 4's four rows, both losses, alpha 0.5, 100 epochs, the best epoch
  on test, 5 runs (Web30k: its 5 folds, one run each), the paper's preprocessing and labels; a --data_dir given
  after the preset reads the files there, and the run folder says it is the paper's protocol."""
  from experiments.framework import lifecycle, rundir
  from pfd_jax import data as data_lib
  driver = _driver("table2")
  for name, folds, seeds, k in (("web30k", 5, 1, 40), ("yahoo", 1, 5, 200), ("istella", 1, 5, 50)):
    argv = lifecycle.expand_preset(driver, ["prog", f"--preset=paper_{name}", f"--data_dir={tmp_path}"])[1:]
    cfg = cli.config_from_flags(driver, _parsed(driver, *argv))
    d, t = cfg.data, cfg.train
    assert (d.dataset, d.data_dir, d.t, d.min_docs, d.log1p, d.labels) == (name, str(tmp_path), 4.0, 10, True,
                                                                            "gumbel")
    assert d.num_privileged is None and data_lib.default_num_privileged(name, 0) == k  # the dataset's: the paper's k
    assert d.tau is None and data_lib.default_tau(4) == 4.8  # 0-4 grades: the paper's tau
    assert cfg.options.methods == ("no_distill", "self_distill", "gend", "pfd")
    assert cfg.losses == ("rankbce", "ranknet")
    assert (t.alpha, t.epochs, t.select_on, t.empty_rule) == (0.5, 100, "test", "exclude")
    assert cfg.run.seeds * (len(d.folds) or folds) == 5 and cfg.run.seeds == seeds
    assert rundir.label(cfg, driver) == f"{name}-{tmp_path.name}-paper"  # the page's: from $PFD_DATA_DIR/<name>


def test_istella_unpacked_with_both_folders_is_refused_and_each_folder_is_read_alone(tmp_path):
  """Istella's archive ships full/ (train, test) and sample/ (train, vali, test): one run's splits never come from
  both (they were: vali from sample/, train and test from full/)."""
  from pfd_jax import data as data_lib
  line = "1 qid:{q} 1:0.5 2:1e30\n0 qid:{q} 1:0.1 2:0.2\n"
  for folder, splits in (("full", ("train", "test")), ("sample", ("train", "vali", "test"))):
    (tmp_path / folder).mkdir()
    for split in splits:
      (tmp_path / folder / f"{split}.txt").write_text(line.format(q=len(split)))
  with pytest.raises(data_lib.DataError, match="full and .*sample both hold split files.*--data_dir"):
    data_lib.split_files("istella", str(tmp_path))
  assert data_lib.split_files("istella", str(tmp_path / "full")) == {s: str(tmp_path / "full" / f"{s}.txt")
                                                                     for s in ("train", "test")}
  assert set(data_lib.split_files("istella", str(tmp_path / "sample"))) == {"train", "vali", "test"}
  (tmp_path / "sample" / "vali.txt").rename(tmp_path / "vali.txt")  # a split beside a folder that holds others
  import shutil
  shutil.rmtree(tmp_path / "full")
  assert set(data_lib.split_files("istella", str(tmp_path))) == {"train", "test"}  # sample/'s own, not the root's vali


def test_a_generated_data_preset_never_runs_silently_on_files(tmp_path):
  """--preset=web30k (synthetic data at Web30k's size) with --dataset=web30k --data_dir=...: the size flags are
  refused, naming them, rather than ignored while the run's provenance records them."""
  with pytest.raises(config_lib.ConfigError, match="synthetic_web30k: .*dataset=web30k reads files"):
    DataConfig(dataset="web30k", data_dir=str(tmp_path), synthetic_web30k=True)
  with pytest.raises(config_lib.ConfigError, match="synthetic_queries, synthetic_mean_docs set"):
    DataConfig(dataset="ohsumed", synthetic_queries=(5, 5, 5), synthetic_mean_docs=10.0)
  DataConfig(dataset="synthetic", synthetic_web30k=True)  # generated data: as before
  DataConfig(dataset="web30k_like", synthetic_scale=20.0)
  DataConfig(dataset="web30k", data_dir=str(tmp_path))
  from experiments.paper import table2
  preset = next(p for p in table2.PRESETS if p.name == "web30k")
  fv = flags.FlagValues()
  cli.define_flags(table2.DRIVER, fv, key_module="t")
  fv(["prog", *preset.flags.split(), "--dataset=web30k", f"--data_dir={tmp_path}"])
  with pytest.raises(app.UsageError, match="--synthetic_web30k=True: .*dataset=web30k reads files: drop them"):
    cli.config_from_flags(table2.DRIVER, fv)


def test_yahoo_keeps_its_declared_width_when_an_id_is_absent_from_every_file(tmp_path):
  """Yahoo Set 1 declares 700 features, and ids that never occur: a file set whose highest id is 699 still reads
  as 700 columns (the absent ones 0, as an absent SVMlight feature is); an id past the width is refused."""
  from pfd_jax import data as data_lib
  for split, ids in (("train", (1, 5, 699)), ("valid", (2, 650)), ("test", (3,))):
    feats = " ".join(f"{i}:0.5" for i in ids)
    (tmp_path / f"set1.{split}.txt").write_text(f"1 qid:1 {feats}\n0 qid:1 {feats}\n")
  raw = data_lib.load_raw("yahoo", str(tmp_path))
  assert {s: g.x.shape[1] for s, g in raw.items()} == {"train": 700, "vali": 700, "test": 700}
  assert raw["train"].x[:, 698].tolist() == [0.5, 0.5] and not raw["train"].x[:, 699].any()
  (tmp_path / "set1.test.txt").write_text("1 qid:1 701:0.5\n0 qid:1 1:0.5\n")
  with pytest.raises(data_lib.DataError, match="set1.test.txt: feature id 701 past dataset yahoo's 700 features"):
    data_lib.load_raw("yahoo", str(tmp_path))


def test_the_data_summary_counts_the_columns_no_file_holds(tmp_path):
  """Table 1's feature count is the declared width; the summary says how many of its columns are 0 in every
  document of every split (ids 1, 2, 3, 5, 650 and 699 of Yahoo's 700 occur: 694 do not), split into the regular and
  privileged columns the run uses."""
  import numpy as np
  from pfd_jax import data as data_lib
  from pfd_jax.data.config import DataConfig
  rng = np.random.default_rng(0)
  for split, ids in (("train", (1, 5, 699)), ("valid", (2, 650)), ("test", (3,))):
    lines = [f"{g} qid:{q} " + " ".join(f"{i}:{v:.3f}" for i, v in zip(ids, rng.random(len(ids)) + 0.1))
             for q in range(1, 4) for g in rng.integers(0, 5, 12)]
    (tmp_path / f"set1.{split}.txt").write_text("\n".join(lines) + "\n")
  ds = data_lib.prepare(DataConfig(dataset="yahoo", data_dir=str(tmp_path)), data_lib.load_raw("yahoo", str(tmp_path)))
  s = data_lib.summary(ds, max_buckets=1)
  present = {1, 2, 3, 5, 650, 699}
  privileged = set(ds.config["privileged_ids"])
  assert s["regular_features"] + s["privileged_features"] == 700
  assert s["zero_columns"] == dict(regular=s["regular_features"] - len(present - privileged),
                                   privileged=s["privileged_features"] - len(present & privileged))


def test_a_tables_privileged_ids_are_every_folds():
  """An automatic choice is made on each fold's training split: the table says each fold's ids, not fold 1's alone
  (a Web30k fold shared 32 of its 40 with each other fold)."""
  from experiments.framework import tabulate
  d = lambda p, r: dict(privileged_choice="auto", privileged_ids=p, regular_ids=r)
  same = [d([1, 2, 3], [4, 5])] * 3
  assert tabulate.privileged_text(same) == "Privileged feature ids (auto): 1-3; regular: 4-5"
  two = [d([1, 2, 3], [4, 5]), d([1, 2, 5], [3, 4])]
  assert tabulate.privileged_text(two) == "Privileged feature ids (auto, per fold): fold 1: 1-3; fold 2: 1-2,5"
  many = [d([1, 2, 3], [4, 5])] + [d([1, 2, 5], [3, 4])] * 3 + [d([1, 2, 3], [4, 5])] * 2 + [d([4, 5, 6], [1])]
  assert tabulate.privileged_text(many) == ("Privileged feature ids (auto, chosen per fold): fold 1's 1-3; the other "
                                            "6 folds share 2.0 of its 3 on average")
