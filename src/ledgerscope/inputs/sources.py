"""Immutable, sha256-versioned source documents and the corpus that holds them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ledgerscope.common.errors import DigestMismatch, InputError, Problem


def text_version(text: str) -> str:
    """The version of a text: ``sha256:`` + hex digest of its UTF-8 bytes."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Source:
    """One immutable document version. Construct with :func:`make_source` to check the digest."""

    doc_id: str
    version: str
    text: str
    observed: str | None = None
    access: tuple[str, ...] = ()

    def to_json(self) -> dict:
        out: dict = {"doc_id": self.doc_id, "version": self.version, "text": self.text}
        if self.observed:
            out["observed"] = self.observed
        if self.access:
            out["access"] = list(self.access)
        return out


def make_source(
    doc_id: str,
    text: str,
    version: str | None = None,
    observed: str | None = None,
    access: Iterable[str] = (),
) -> Source:
    """Build a Source, verifying a declared version against the bytes.

    Raises DigestMismatch for a wrong declared version and InputError for text
    that has no UTF-8 form (a lone surrogate, e.g. from a JSON ``\\ud800`` escape).
    A single access label may be given as a plain string.
    """
    try:
        actual = text_version(text)
    except UnicodeEncodeError as exc:
        raise InputError(
            Problem(
                "<source>",
                None,
                "text",
                f"source {doc_id!r}: lone surrogate U+{ord(text[exc.start]):04X} at code point "
                f"{exc.start} has no UTF-8 encoding",
            )
        ) from None
    if version is not None and not isinstance(version, str):
        raise InputError(
            Problem("<source>", None, "version", f"source {doc_id!r}: must be a string 'sha256:<hex>'")
        )
    if version is not None and version != actual:
        raise DigestMismatch(doc_id, version, actual)
    if observed is not None and not isinstance(observed, str):
        raise InputError(
            Problem(
                "<source>",
                None,
                "observed",
                f"source {doc_id!r}: must be a string (a date), not {type(observed).__name__}",
            )
        )
    labels = (
        (access,)
        if isinstance(access, str)
        else tuple(access)
        if isinstance(access, list | tuple | set | frozenset)
        else (access,)
    )
    if not all(isinstance(a, str) for a in labels):
        raise InputError(Problem("<source>", None, "access", f"source {doc_id!r}: labels must be strings"))
    return Source(doc_id, actual, text, observed, labels)


@dataclass
class Corpus:
    """Sources by doc id. A doc id holds exactly one version per corpus."""

    sources: dict[str, Source] = field(default_factory=dict)

    def add(self, source: Source) -> None:
        old = self.sources.get(source.doc_id)
        if old is not None and old.version != source.version:
            raise InputError(
                Problem(
                    "<corpus>",
                    None,
                    "doc_id",
                    f"{source.doc_id!r} given twice with different versions "
                    f"({old.version} and {source.version})",
                )
            )
        self.sources[source.doc_id] = source

    def get(self, doc_id: str) -> Source | None:
        return self.sources.get(doc_id)

    def __contains__(self, doc_id: str) -> bool:
        return doc_id in self.sources

    def __iter__(self) -> Iterator[Source]:
        return iter(self.sources[k] for k in sorted(self.sources))

    def __len__(self) -> int:
        return len(self.sources)

    def total_chars(self) -> int:
        return sum(len(s.text) for s in self.sources.values())


TEXT_SUFFIXES = {".txt", ".md", ".rst", ".text", ".markdown"}


def load_corpus(path: str | Path) -> Corpus:
    """Load a corpus from a directory of text files or a JSONL file.

    Directory: every text file below it, doc id = path relative to the
    directory with ``/`` separators, read as strict UTF-8. JSONL: one object
    per line with ``doc_id``, ``text`` and optional ``version``, ``observed``,
    ``access``. All problems are collected and raised together.
    """
    path = Path(path)
    if path.is_dir():
        return _load_dir(path)
    if path.is_file():
        return _load_jsonl(path)
    raise InputError(Problem(str(path), None, "corpus", "no such file or directory"))


def _load_dir(root: Path) -> Corpus:
    corpus = Corpus()
    problems: list[Problem] = []
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        if file.suffix.lower() not in TEXT_SUFFIXES or any(
            part.startswith(".") for part in file.relative_to(root).parts
        ):
            continue
        doc_id = file.relative_to(root).as_posix()
        try:
            text = file.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(Problem(str(file), None, "text", f"not valid UTF-8 at byte {exc.start}"))
            continue
        corpus.add(make_source(doc_id, text))
    if problems:
        raise InputError(problems)
    return corpus


def _load_jsonl(file: Path) -> Corpus:
    corpus = Corpus()
    problems: list[Problem] = []
    for lineno, obj in iter_jsonl(file, problems):
        where = (str(file), lineno)
        doc_id, text = obj.get("doc_id"), obj.get("text")
        if not isinstance(doc_id, str) or not doc_id:
            problems.append(Problem(*where, "doc_id", "missing or not a non-empty string"))
            continue
        if not isinstance(text, str):
            problems.append(Problem(*where, "text", "missing or not a string"))
            continue
        access = obj.get("access", [])
        if isinstance(access, str):
            access = [access]
        if not isinstance(access, list) or not all(isinstance(a, str) for a in access):
            problems.append(Problem(*where, "access", "must be a string or a list of strings"))
            continue
        try:
            corpus.add(make_source(doc_id, text, obj.get("version"), obj.get("observed"), access))
        except DigestMismatch as exc:
            problems.append(Problem(*where, "version", str(exc)))
        except InputError as exc:
            problems.extend(Problem(*where, p.field, p.reason) for p in exc.problems)
    if problems:
        raise InputError(problems)
    return corpus


class StrictJSONError(ValueError):
    """JSON that ``json`` would accept but an input may not hold: a repeated key, NaN or Infinity."""


def _unique_pairs(pairs: list[tuple[str, object]]) -> dict:
    obj: dict = {}
    for key, value in pairs:
        if key in obj:
            raise StrictJSONError(f"duplicate key {key!r} in one object")
        obj[key] = value
    return obj


def _no_constant(name: str) -> object:
    raise StrictJSONError(f"{name} is not JSON (write a number or null)")


def strict_loads(text: str):
    """``json.loads`` that refuses a key given twice in one object and the NaN/Infinity extensions."""
    return json.loads(text, object_pairs_hook=_unique_pairs, parse_constant=_no_constant)


def json_lines(
    raw: bytes,
    file: str,
    problems: list[Problem],
    not_object: Callable[[object], str],
    max_bytes: int | None = None,
) -> Iterator[tuple[int, dict]]:
    """(line number, object) for every non-blank line of ``raw``; a line longer than ``max_bytes``,
    not UTF-8, not strict JSON (:func:`strict_loads`) or not an object (``not_object`` says why)
    becomes a problem ``file:line: line: reason`` and the rest is still read, so one run lists every
    problem. Shared by every JSON-lines reader (this module's corpus, the fixtures, the ingest's
    traces and chunk store)."""
    for lineno, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        if max_bytes is not None and len(line) > max_bytes:
            problems.append(
                Problem(
                    file,
                    lineno,
                    "line",
                    f"{len(line):,} bytes, longer than the {max_bytes // (1024 * 1024)} MiB a line may hold",
                )
            )
            continue
        obj, why = _decode(line)
        if why is None and not isinstance(obj, dict):
            why = not_object(obj)
        if why is not None:
            problems.append(Problem(file, lineno, "line", why))
            continue
        yield lineno, obj


def _decode(line: bytes) -> tuple[object, str | None]:
    """A line's JSON value, or why it has none."""
    try:
        return strict_loads(line.decode("utf-8")), None
    except UnicodeDecodeError as exc:
        return None, f"not valid UTF-8 at byte {exc.start}"
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON: {exc.msg} (column {exc.colno}; a truncated line?)"
    except StrictJSONError as exc:
        return None, f"not valid JSON: {exc}"
    except RecursionError:
        return None, "not valid JSON: nested too deeply"


def iter_jsonl(file: Path, problems: list[Problem]) -> Iterator[tuple[int, dict]]:
    """Yield (line number, object) for each non-blank line; bad lines become problems."""
    try:
        raw = file.read_bytes()
    except OSError as exc:
        problems.append(Problem(str(file), None, "file", exc.strerror or str(exc)))
        return
    yield from json_lines(raw, str(file), problems, lambda _: "expected a JSON object")


def write_corpus_jsonl(corpus: Corpus, file: str | Path) -> None:
    """Write a corpus as JSONL (atomically)."""
    from ledgerscope.common.atomic import atomic_write_text

    lines = [json.dumps(s.to_json(), ensure_ascii=False) for s in corpus]
    atomic_write_text(file, "\n".join(lines) + ("\n" if lines else ""))
