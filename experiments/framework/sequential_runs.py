"""The sequential runs that decide Table 2 on the paper analogues, as runs (experiments/page/deciding.py judges
them): per analogue and loss one run on the sized population (pfd_jax.data.analogues.sizing; validation and test
generated as lists with a positive only), the paper's rows, 100 epochs as the cap with early stopping after
PATIENCE epochs without a better validation NDCG@8 (one learning-rate stage that brought nothing), one seed a
draw, and each finished draw committed to the repository (experiments/framework/drawstore.py)."""
from __future__ import annotations

from experiments.framework.schema import Preset
from pfd_jax.data import analogues
from pfd_jax.ops import sequential

# The test split of every run on an analogue: these times Table 1's test lists (experiments/framework/protocol.py
# says why: Yahoo's and Web30k's five times, Istella's once, declared before any run on them).
ANALOGUE_TEST_LISTS = dict(yahoo_like=5, web30k_like=5, istella_like=1)
DESIGN = sequential.Design((6, 10, 15, 20, 30, 40, 60), "hsd", -4.0)
PATIENCE = 20
METHODS = "no_distill,self_distill,gend,pfd"


def scale(name: str) -> float:
  """--synthetic_scale of the sized population: the sizing rule's fraction over the analogue's declared one."""
  return analogues.sizing(name).fraction / analogues.ANALOGUES[name].fraction


def store(name: str, loss: str) -> str:
  return f"{name}-sequential_{loss}"


def preset(store_name: str) -> str:
  """The table2 preset of a sequential run's store (yahoo_like-sequential_rankbce: yahoo_like_rankbce_sequential)."""
  name, _, loss = store_name.partition("-sequential_")
  return f"{name}_{loss}_sequential"


def run_key(name: str, loss: str) -> str:
  return f"table2/{store(name, loss)}"


def flags(name: str, loss: str) -> str:
  s = scale(name)
  test_scale = ANALOGUE_TEST_LISTS[name] / analogues.share(name, s)
  return (f"--dataset={name} --loss={loss} --analogue=calibrated_for={loss},test_scale={test_scale:g},scored=1 "
          f"--synthetic_scale={s:.6g} --tag=sequential_{loss} --draws={DESIGN.cap} --seeds=1 --label_seed=1 --seed=1 "
          f"--select_on=vali --curves=select --epochs=100 --patience={PATIENCE} --draw_store={store(name, loss)} "
          f"--methods={METHODS}")


COST = "minutes a draw on two cores; each draw is committed as it ends and the run continues from them"


def _needs(name: str, loss: str) -> str:
  share = analogues.share(name, scale(name))
  first = ("" if loss in analogues.calibrations(name, scale(name)) else
           f"its population calibrated at {share:.3g} of the paper's groups (docs/analogues.md), then ")
  return first + "draws on two cores (or a GPU): as many as its looks need"


PRESETS = tuple(Preset(preset(store(name, loss)), store(name, loss), flags(name, loss),
                       f"Table 2 / Table 4 on the {a.paper} analogue, {loss}, sequential: the sized population "
                       f"({analogues.share(name, scale(name)):.3g} of the paper's groups), draws committed as they "
                       f"end, looks at {', '.join(map(str, DESIGN.looks))} draws", accelerator=COST,
                       needs=_needs(name, loss))
                for name, a in analogues.ANALOGUES.items() for loss in analogues.LOSSES)
