"""Flags from configuration: each field of a configuration dataclass is a flag (its name, default, help and
checks); a driver's flags are defined only when it runs as ``__main__``, so importing drivers defines nothing."""
from __future__ import annotations

import dataclasses
import os
import sys
import typing
from typing import Optional

from absl import app, flags

from pfd_jax import config as config_lib
from pfd_jax import data as data_lib
from pfd_jax.training.config import MODERN, MODERN_LOSS
from experiments.framework.schema import Config, Driver, GROUPS, RESULTS


FLAGS = flags.FLAGS


def _unwrap(t):
  """Optional[X] -> X."""
  args = [a for a in typing.get_args(t) if a is not type(None)]
  return args[0] if typing.get_origin(t) is typing.Union and len(args) == 1 else t


def _flag_items(cls):
  """(field, type) of the fields of `cls` that are flags (Optional unwrapped)."""
  hints = typing.get_type_hints(cls)
  return [(f, _unwrap(hints[f.name])) for f in dataclasses.fields(cls) if f.metadata.get("flag", False)]


def flag_fields(cls, prefix: str = ""):
  """(flag name, field, type, prefix) of every flag of `cls`, nested dataclasses flattened with '<field>_'
  prefixes (topk_k, topk_scheme, ...)."""
  for f, t in _flag_items(cls):
    if dataclasses.is_dataclass(t):
      yield from flag_fields(t, f"{prefix}{f.name}_")
    else:
      yield prefix + f.name, f, t, prefix


def _driver_fields(driver: Driver):
  for g in driver.groups:
    for item in flag_fields(GROUPS[g]):
      yield g, item
  if driver.options is not None:
    for item in flag_fields(driver.options):
      yield "options", item


def _text(value, f) -> Optional[str]:
  if value is None:
    return None
  if f.metadata.get("fmt"):
    return f.metadata["fmt"](value)
  return ",".join(map(str, value)) if isinstance(value, tuple) else value


def define_flags(driver: Driver, flag_values=FLAGS, key_module: Optional[str] = None) -> None:
  """Defines the driver's flags from its configuration fields (key flags of the main module, so that
  --help lists them)."""
  defaults = dict(driver.defaults)
  for group, (name, f, t, _) in _driver_fields(driver):
    default = defaults.get(name, f.default)
    help_ = f.metadata["help"]
    lo, hi = f.metadata.get("lo"), f.metadata.get("hi")
    if lo is not None or hi is not None:
      help_ += f" Range {'(' if f.metadata.get('lo_open') else '['}{lo if lo is not None else '-inf'}, " \
               f"{hi if hi is not None else 'inf'}{']' if hi is not None else ')'}."
    choices = config_lib.choices_of(f.metadata)
    if name == "loss":
      choices = driver.loss_names()
    if t is bool:
      flags.DEFINE_boolean(name, default, help_, flag_values=flag_values)
    elif t is int:
      flags.DEFINE_integer(name, default, help_, flag_values=flag_values)
    elif t is float:
      flags.DEFINE_float(name, default, help_, flag_values=flag_values)
    elif choices is not None and t is str:
      flags.DEFINE_enum(name, default, [c for c in choices if c], help_, flag_values=flag_values)
    else:  # strings, comma lists and parsed text
      if choices is not None:
        help_ += f" (each one of {', '.join(map(str, choices))})"
      flags.DEFINE_string(name, _text(default, f), help_, flag_values=flag_values)
    flag_values.register_key_flag_for_module(key_module or sys.argv[0], flag_values[name])
  flags.DEFINE_list("registry_modules", [], "Modules that register rows, losses, teachings or datasets "
                    "(pfd_jax.registry): import paths or .py files, imported before the flags are read; a run "
                    "records the ones it used (provenance.json's registered.modules).", flag_values=flag_values)
  flag_values.register_key_flag_for_module(key_module or sys.argv[0], flag_values["registry_modules"])
  if driver.presets:
    flags.DEFINE_string("preset", "", "A run of RESULTS.md: " + "; ".join(
        f"{p.name} = {p.flags or 'the defaults'}" for p in driver.presets) + " (later flags override its own).",
        flag_values=flag_values)
    flag_values.register_key_flag_for_module(key_module or sys.argv[0], flag_values["preset"])


def _value(name, f, t, text):
  """A flag's value as its field's type (comma lists and parsed text converted)."""
  if f.metadata.get("parse"):
    return f.metadata["parse"](text or "")
  if typing.get_origin(t) is tuple:
    elem = typing.get_args(t)[0]
    out = []
    for tok in filter(None, (text or "").split(",")):
      try:
        out.append(elem(tok.strip()))
      except ValueError:
        raise config_lib.ConfigError(name,
                                     f"{tok.strip()!r} is not {'an integer' if elem is int else 'a number'}") from None
    return tuple(out)
  return text


def _build(cls, flag_values, prefix: str = ""):
  """An instance of `cls` from the parsed flags (nested dataclasses from their prefixed flags), checked."""
  kw = {}
  for f, t in _flag_items(cls):
    name = prefix + f.name
    if dataclasses.is_dataclass(t):
      kw[f.name] = _build(t, flag_values, name + "_")
      continue
    try:
      kw[f.name] = _value(name, f, t, flag_values[name].value)
    except config_lib.ConfigError as e:
      raise config_lib.ConfigError(name, str(e).split(": ", 1)[1]) from None
  try:
    obj = cls(**kw)
    config_lib.check(obj)  # options classes need not call it themselves
    return obj
  except config_lib.ConfigError as e:
    raise config_lib.ConfigError(prefix + e.field, str(e).split(": ", 1)[1]) from None


def own_data_defaults(cfg: Config, given: set, losses: tuple = ()) -> Config:
  """A run on the team's own data (--dataset=letor with its file labels) answers the practitioner's question
  unless its flags say otherwise: the best epoch / boosting round chosen on the validation split, never on test
  (when the folder has one), the modern ranker (:data:`pfd_jax.training.config.MODERN`, loss MODERN_LOSS) and
  the seed-ensemble rows. table2's PFD search on validation stays off (it multiplies a run's cost; --search adds
  it, and a run without it says what it would cost). The paper's tables (Gumbel labels) keep its protocol: test
  selection, its MLP, no ensembles. `given`:
  the flags set on the command line (or by a preset), which always win; losses: the driver's (the loss is set
  only where it is one of them)."""
  if not data_lib.spec(cfg.data.dataset).own_data or cfg.data.label_mode != "file":
    return cfg
  train = {k: v for k, v in MODERN.items() if k not in given}
  try:
    fold = (list(cfg.data.folds) or data_lib.available_folds(cfg.data.dataset, cfg.data.data_dir))[0]
    if "select_on" not in given and "vali" in data_lib.split_files(cfg.data.dataset, cfg.data.data_dir, fold):
      train["select_on"] = "vali"
  except (OSError, data_lib.DataError):
    pass  # loading the data names the problem
  run = {} if "ensembles" in given else dict(ensembles=True)
  if "loss" not in given and MODERN_LOSS in losses:
    run["loss"] = MODERN_LOSS
  return cfg.replace(train=train, run=run)


def config_from_flags(driver: Driver, flag_values=FLAGS) -> Config:
  """The driver's :class:`Config` from the parsed flags; bad values raise app.UsageError naming the flag."""
  try:
    parts = {g: _build(GROUPS[g], flag_values) for g in driver.groups}
    if driver.options is not None:
      parts["options"] = _build(driver.options, flag_values)
    cfg = Config(**parts)
    if {"data", "train"} <= set(driver.groups):
      cfg = own_data_defaults(cfg, {n for n in flag_values if flag_values[n].present}, driver.loss_names())
    if cfg.output.out_dir is None:
      cfg = cfg.replace(output=dict(out_dir=os.path.join(RESULTS, driver.name)))
    if "train" in driver.groups:
      for loss in cfg.losses:
        cfg.train_config(loss)  # --loss_params names hyper-parameters of the loss (each loss of --loss=both)
    needs = driver.needs_privileged(cfg) if callable(driver.needs_privileged) else driver.needs_privileged
    if "data" in driver.groups and data_lib.spec(cfg.data.dataset).own_data and needs and not cfg.data.privileged:
      raise config_lib.ConfigError("privileged",
                                   f"dataset={cfg.data.dataset} reads your own folder, so say which features are "
                          "privileged (known at training time only): --privileged=ID,ID,... with 1-based feature "
                          "ids as in the files, or --privileged=auto for the paper's protocol (the "
                          "--num_privileged features most correlated with the labels)")
  except config_lib.ConfigError as e:
    value = flag_values[e.field].value if e.field in flag_values else None
    shown = f"={value!r}" if value not in (None, "") else ""
    raise app.UsageError(f"--{e.field}{shown}: {str(e).split(': ', 1)[1]}") from None
  return cfg
