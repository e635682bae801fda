"""PNG plots of results (matplotlib, imported on first use: only the drivers that plot need it)."""
from __future__ import annotations

from typing import Optional

import numpy as np

from experiments.framework.records import RunRecord
from experiments.framework.tabulate import title


def bar_plot(res: RunRecord, path: str, labels: dict, scale_to: Optional[str] = None) -> None:
  """Horizontal bars of NDCG@8 (mean ± std over runs) of res['rows'][k] for k in `labels`, optionally
  divided by the mean of row `scale_to`."""
  plt = pyplot()
  keys = [k for k in labels if k in res["rows"]]
  vals = [np.asarray(res["rows"][k])[:, 0] for k in keys]
  div = np.asarray(res["rows"][scale_to])[:, 0].mean() if scale_to else 1.0
  fig, ax = plt.subplots(figsize=(7, 0.45 * len(keys) + 1.2))
  ax.barh(range(len(keys)), [v.mean() / div for v in vals], xerr=[v.std() / div for v in vals], color="C0",
          label="mean ± std over runs")
  ax.set_yticks(range(len(keys)), [labels[k] for k in keys], fontsize=8)
  ax.invert_yaxis()
  finish_plot(fig, ax, res, path, "test NDCG@8" + (f" / {labels[scale_to]}" if scale_to else ""), "")


def finish_plot(fig, ax, res: RunRecord, path: str, xlabel: str, ylabel: str = "test NDCG@8") -> None:
  """Labels, a '<dataset>, <loss>' title and the legend, then saves `fig` as a PNG at `path`."""
  plt = pyplot()
  ax.set_xlabel(xlabel)
  ax.set_ylabel(ylabel)
  ax.set_title(title(res["config"]))
  ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def pyplot():
  """matplotlib's pyplot on the file-only Agg backend (deferred on purpose: the drivers' optional extra)."""
  try:
    import matplotlib
  except ImportError:
    raise ImportError('the drivers\' plots need matplotlib: pip install -e ".[experiments]"') from None
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  return plt
