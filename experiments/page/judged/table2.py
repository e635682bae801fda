"""Table 2's claims: each registered row declares its own (pfd_jax.methods.rows.RowClaim), under every loss, and a
run is judged by the claims its rows declared when it ran (experiments.framework.pairs.declared_claims)."""
from __future__ import annotations

from typing import Dict

from experiments.framework.pairs import aggregate, declared_claims, primary, query_lists
from experiments.framework.records import LossRecord, RunRecord
from experiments.page.claims import beats
from experiments.page.declared import Declared, declare, row_declared
from pfd_jax.methods import rows as rows_lib
from pfd_jax.ops import losses as losses_lib


def claims_table2(res: RunRecord) -> list:
  """The claims a run of table2 states, with their verdicts: every row's claims (declared_claims) whose rows the run
  has, by run and per test query."""
  declared, out = declared_claims(res), []
  for loss, d in res["losses"].items():
    record = LossRecord.from_json(d)
    rows, folds = aggregate(record), len(record.folds)
    queries = query_lists(record)
    out += [row_declared(loss, name, c).judged(beats, rows, name, c.versus, folds, queries=queries,
                                               estimate=primary(record, name, c.versus))
            for name, row_claims in declared.items() for c in row_claims]
  return out


def declarations() -> Dict[str, Declared]:
  """Table 2's claims under each loss, as the registered rows declare them (a run of a user's rows reads those it
  recorded, declared_claims)."""
  return declare(*(row_declared(loss, name, c) for loss in losses_lib.REGISTRY.names()
                   for name, row in rows_lib.REGISTRY.items() for c in row.row_claims))
