"""Bootstrap clusters: which questions are resampled together.

Questions that share a document are not independent observations (seed 000,
"Oracle diagnostics and paired uncertainty": cluster by document). Two rules:

* ``first-document`` (the default): a question's cluster is its first gold
  document (``doc_ids[1]``). Simple, stable as a corpus grows, and the unit the
  seed names; but a question whose support spans two documents links two
  clusters the rule keeps apart.
* ``components``: connected components of the question-document graph
  (questions joined whenever they share any document). Never splits dependent
  questions, at the price of few, large clusters when documents are shared
  widely (on the Quillstack sample: 15 first-document clusters, 2 components),
  which widens the intervals.

``compare`` reports both counts and warns when they disagree badly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

#: how questions are grouped into bootstrap clusters (``compare --clusters``)
CLUSTER_RULES = ("first-document", "components")
RESAMPLING_UNITS = {
    "first-document": "document (first doc id; a question without one is its own)",
    "components": "connected component of the question-document graph (questions sharing any "
    "document; a question without one is its own)",
}
#: the two rules "disagree badly" when the smaller cluster count is at most this share of the larger
CLUSTER_DISAGREEMENT = 0.5


def question_documents(con: DuckDBPyConnection, arms: Sequence[str]) -> dict[str, set[str]]:
    """Every document each question's records name (``doc_ids``), over the given arms."""
    rows = con.execute(
        "SELECT DISTINCT qid, d FROM (SELECT qid, unnest(doc_ids) AS d FROM records "
        f"WHERE arm IN ({', '.join('?' * len(arms))})) WHERE d IS NOT NULL",
        list(arms),
    ).fetchall()
    out: dict[str, set[str]] = {}
    for qid, doc in rows:
        out.setdefault(qid, set()).add(doc)
    return out


def component_clusters(qids: Sequence[str], documents: dict[str, set[str]]) -> dict[str, str]:
    """Each question's connected component in the question-document graph (questions are joined
    when they share any document), named by its smallest document id; a question without documents
    is its own cluster (``qid:<qid>``). The components are scipy's (a question's documents are
    joined to its first one, so every document it names lands in one component)."""
    from scipy.sparse import coo_array
    from scipy.sparse.csgraph import connected_components

    names = sorted({d for q in qids for d in documents.get(q, ())})
    index = {d: i for i, d in enumerate(names)}
    rows, cols = [], []
    for q in qids:
        docs = sorted(documents.get(q, ()))
        if not docs:
            continue
        rows += [index[docs[0]]] * (len(docs) - 1)
        cols += [index[d] for d in docs[1:]]
    graph = coo_array((np.ones(len(rows), dtype=np.int8), (rows, cols)), shape=(len(names), len(names)))
    _, labels = connected_components(graph, directed=False)
    smallest: dict[int, str] = {}
    for d, label in zip(names, labels.tolist(), strict=True):
        smallest.setdefault(label, d)  # names are sorted: the first seen is the smallest
    return {q: smallest[labels[index[min(documents[q])]]] if documents.get(q) else f"qid:{q}" for q in qids}


def cluster_report(first_document: np.ndarray, components: np.ndarray, rule: str) -> dict[str, Any]:
    """Cluster counts under both rules, the rule used, and a warning when they disagree badly."""
    a, b = len(set(first_document.tolist())), len(set(components.tolist()))
    warning = None
    if max(a, b) and min(a, b) <= CLUSTER_DISAGREEMENT * max(a, b):
        warning = (
            f"{a} first-document clusters against {b} connected components: questions share documents "
            "beyond their first one, so the first-document rule treats dependent questions as "
            "independent and its intervals can be too narrow"
            + (
                "; `compare --clusters components` resamples whole components"
                if rule != "components"
                else "; with so few components the intervals are wide"
            )
        )
    return {"rule": rule, "first_document": a, "components": b, "warning": warning}
