"""Restricted source text stays home: what exports and the report write in place of it.

A source is *restricted* when it carries any access label (corpus ``access``; a sweep shows it
only to an arm whose ``[access] clearance`` holds every label). A ledger swept for a cleared
reader holds restricted text in its sources, units, packed contexts, answers and evidence
quotes; whatever leaves the terminal (an export, the HTML report) carries that text only when
asked (``--include-restricted``). By default it carries doc ids, offsets and version digests,
writes :data:`REDACTED` where the text was, and counts what it withheld.

Two rules decide what is withheld:

* by provenance: a document's text, a gold span's quote (and its prefix and suffix) in a
  restricted document, and the free-text fields of a record whose packed context holds a unit
  of a restricted document (context, answer, reasons, generator detail: the reader saw it);
* by content, as a safety net for any other field: a string that shares a run of
  :data:`WINDOW_WORDS` words with a restricted document (or, if shorter, is a substring of
  one of at least :data:`MIN_CHARS` characters) is withheld too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

REDACTED = "[redacted: restricted source text]"
WINDOW_WORDS = 5
MIN_CHARS = 12
#: record columns written from what the reader was shown
CONTEXT_FIELDS = (
    "packed_context",
    "answer",
    "answer_reason",
    "citation_reason",
    "generator_detail_json",
    "generator_error",
)
#: identifiers, labels and the annotator's question: never source text
KEEP_KEYS = frozenset(
    {
        "doc_id",
        "doc_ids",
        "unit_id",
        "version",
        "qid",
        "arm",
        "phase",
        "span",
        "stage",
        "question",
        "segment",
        "label",
        "step_name",
        "answer_verdict",
        "citation_verdict",
        "oracle_verdict",
        "flags",
        "gold_status",
        "config_digest",
        "stress_set",
        "format",
        "dependency",
        "relation",
        "name",
        "state",
    }
)
_WORD = re.compile(r"\w+")


def _windows(text: str) -> Iterable[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    return (tuple(words[i : i + WINDOW_WORDS]) for i in range(len(words) - WINDOW_WORDS + 1))


def unit_doc(unit_id: str) -> str:
    """The document of a unit id (``doc@start-end``)."""
    return unit_id.rsplit("@", 1)[0]


@dataclass
class Redactor:
    """Withholds restricted text and counts it; with ``include`` set it withholds nothing."""

    restricted: dict[str, dict[str, Any]] = field(default_factory=dict)  # doc_id -> version, access, chars
    texts: dict[str, str] = field(default_factory=dict)
    include: bool = False
    documents: set[str] = field(default_factory=set)
    spans: set[tuple[Any, ...]] = field(default_factory=set)
    fields: int = 0

    def __post_init__(self) -> None:
        self._windows = {w for t in self.texts.values() for w in _windows(t)}

    @classmethod
    def from_connection(cls, con: DuckDBPyConnection, include: bool = False) -> Redactor:
        """The restricted sources of a ledger's ``sources`` view."""
        rows = con.execute(
            "SELECT doc_id, version, access, text FROM sources WHERE access IS NOT NULL AND len(access) > 0"
        ).fetchall()
        restricted = {
            d: {"doc_id": d, "version": v, "access": list(a), "chars": len(t or "")} for d, v, a, t in rows
        }
        return cls(restricted, {d: t or "" for d, _v, _a, t in rows}, include)

    @property
    def active(self) -> bool:
        return bool(self.restricted) and not self.include

    def is_restricted(self, doc_id: Any) -> bool:
        return self.active and doc_id in self.restricted

    def leaks(self, value: Any) -> bool:
        """Whether a string holds restricted text (the content rule)."""
        if not self.active or not isinstance(value, str) or not value.strip():
            return False
        if any(w in self._windows for w in _windows(value)):
            return True
        text = value.strip()
        return (
            len(text) >= MIN_CHARS
            and len(_WORD.findall(text)) < WINDOW_WORDS
            and any(text in t for t in self.texts.values())
        )

    def _withhold(self, docs: Iterable[str] = ()) -> str:
        self.fields += 1
        self.documents.update(d for d in docs if d in self.restricted)
        return REDACTED

    def document_text(self, doc_id: str, text: str) -> str:
        """A whole document's text, or the marker."""
        if self.is_restricted(doc_id):
            self.documents.add(doc_id)
            return REDACTED
        return text

    def span_text(self, doc_id: str, start: Any, end: Any, text: str | None) -> str | None:
        """A span's quote (gold, unit or region), or the marker (the span counted once)."""
        if text is None:
            return None
        if self.is_restricted(doc_id) or self.leaks(text):
            self.spans.add((doc_id, start, end))
            self.documents.update([doc_id] if doc_id in self.restricted else [])
            return REDACTED
        return text

    def value(self, value: Any, shown: Iterable[str] = (), context: bool = False) -> Any:
        """Any JSON-like value with restricted text withheld: strings by content, span quotes by
        their document, and the strings under :data:`CONTEXT_FIELDS` keys (or all, with
        ``context``) when ``shown`` (the documents the reader was shown) holds a restricted one."""
        if not self.active:
            return value
        shown = [d for d in shown if self.is_restricted(d)]
        if isinstance(value, str):
            return self._withhold(shown) if (context and shown) or self.leaks(value) else value
        if isinstance(value, list | tuple):
            return [self.value(v, shown, context) for v in value]
        if isinstance(value, Mapping):
            out = {}
            for k, v in value.items():
                if k in ("quote", "prefix", "suffix", "text") and isinstance(v, str) and "doc_id" in value:
                    out[k] = self.span_text(value["doc_id"], value.get("start"), value.get("end"), v)
                elif k in KEEP_KEYS:
                    out[k] = v  # identifiers and labels leave: the text is reproduced from them
                else:
                    out[k] = self.value(v, shown, context or k in CONTEXT_FIELDS)
            return out
        return value

    def record_docs(self, row: Mapping[str, Any]) -> list[str]:
        """The restricted documents a record's reader was shown (its packed units)."""
        return [d for d in (unit_doc(u) for u in row.get("packed_unit_ids") or []) if self.is_restricted(d)]

    def record(self, row: dict[str, Any]) -> dict[str, Any]:
        """A selected record (record_view row plus ``_evidence``) with restricted text withheld."""
        if not self.active:
            return row
        shown = self.record_docs(row)
        out = dict(row)
        redacted = []
        for key, value in row.items():
            if (key.startswith("_") and key not in ("_evidence", "_walk")) or key in KEEP_KEYS:
                continue
            new = self.value(value, shown, key in CONTEXT_FIELDS)
            if new != value:
                redacted.append(key)
            out[key] = new
        out["_redacted"] = sorted(redacted)
        return out

    def summary(self) -> dict[str, Any]:
        """What was withheld: documents, spans and other text fields, and the documents' ids."""
        return {
            "documents": len(self.documents),
            "spans": len(self.spans),
            "fields": self.fields,
            "doc_ids": sorted(self.documents),
            "marker": REDACTED,
            "how_to_include": "--include-restricted",
        }

    def any(self) -> bool:
        return bool(self.documents or self.spans or self.fields)


def summary_line(summary: Mapping[str, Any] | None) -> str | None:
    """One line for the terminal, or None when nothing was withheld."""
    if not summary or not (summary["documents"] or summary["spans"] or summary["fields"]):
        return None
    return (
        f"restricted source text withheld: {summary['documents']} document(s), {summary['spans']} "
        f"span(s), {summary['fields']} other text field(s); ids, offsets and digests kept "
        "(--include-restricted to include the text)"
    )
