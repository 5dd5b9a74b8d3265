"""Sources: sha256-versioned documents loaded from a directory or JSONL."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ledgerscope.common.errors import DigestMismatch, InputError
from ledgerscope.inputs.sources import (
    Corpus,
    load_corpus,
    make_source,
    text_version,
    write_corpus_jsonl,
)

DATA = Path(__file__).parent / "data"


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def write_jsonl(path: Path, rows: list) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ---------------------------------------------------------------------------
# versions


def test_text_version_is_sha256_of_utf8_bytes():
    text = "Grüße \U0001f600\r\n"
    assert text_version(text) == sha(text.encode("utf-8"))
    assert text_version("") == ("sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")


def test_make_source_accepts_the_right_version_and_fills_it_in():
    text = "Requests may be retained for 30 days."
    src = make_source("a", text, observed="2024-05-01", access=["internal"])
    assert src.version == sha(text.encode())
    assert src.observed == "2024-05-01"
    assert src.access == ("internal",)
    same = make_source("a", text, version=src.version, observed="2024-05-01", access=["internal"])
    assert same == src


def test_make_source_wrong_version_names_both_digests():
    text = "Requests may be retained for 30 days."
    wrong = "sha256:" + "0" * 64
    with pytest.raises(DigestMismatch) as info:
        make_source("policy.md", text, version=wrong)
    message = str(info.value)
    assert wrong in message
    assert sha(text.encode()) in message
    assert "policy.md" in message
    assert info.value.declared == wrong
    assert info.value.actual == sha(text.encode())


# ---------------------------------------------------------------------------
# directory corpora


def test_load_directory_nested_posix_ids_and_digests_of_file_bytes(tmp_path):
    files = {
        "top.txt": b"plain ascii\n",
        "docs/security/audit-logs.md": b"Audit logs: 30 days.\r\nCRLF kept.\r\n",
        "docs/plans/team.md": "Équipe \U0001f465 plan\n".encode(),
        "docs/notes.rst": b"rst file\n",
    }
    for rel, data in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    # skipped: unknown suffix, hidden file, file in hidden dir
    (tmp_path / "image.png").write_bytes(b"\x89PNG\r\n")
    (tmp_path / ".hidden.txt").write_text("secret")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD.txt").write_text("ref")

    corpus = load_corpus(tmp_path)
    assert sorted(s.doc_id for s in corpus) == sorted(files)
    assert [s.doc_id for s in corpus] == sorted(files)  # iteration is sorted by id
    assert len(corpus) == 4
    for rel, data in files.items():
        src = corpus.get(rel)
        assert src is not None
        assert src.text == data.decode("utf-8")  # exact: no newline translation
        assert src.version == sha(data)
    assert "docs/plans/team.md" in corpus
    assert "docs\\plans\\team.md" not in corpus
    assert corpus.total_chars() == sum(len(d.decode()) for d in files.values())


def test_load_directory_invalid_utf8_names_the_file(tmp_path):
    (tmp_path / "good.txt").write_text("fine")
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "bad.md").write_bytes(b"caf\xe9 latin-1\n")
    with pytest.raises(InputError) as info:
        load_corpus(tmp_path)
    [problem] = info.value.problems
    assert problem.file.endswith("bad.md")
    assert "sub" in problem.file
    assert "UTF-8" in problem.reason
    assert "byte 3" in problem.reason
    assert "bad.md" in str(info.value)


def test_load_seed002_corpus_dir():
    corpus = load_corpus(DATA / "seed002_corpus")
    assert [s.doc_id for s in corpus] == ["docs/plans/team.md", "docs/security/audit-logs.md"]
    raw = (DATA / "seed002_corpus" / "docs" / "plans" / "team.md").read_bytes()
    assert corpus.get("docs/plans/team.md").version == sha(raw)


def test_missing_path_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_corpus(tmp_path / "nope")


# ---------------------------------------------------------------------------
# JSONL corpora


def test_load_jsonl_with_version_observed_access(tmp_path):
    a_text = "Requests may be retained for 30 days."
    b_text = "Diese Frist beträgt 7 Tage \U0001f552."
    path = write_jsonl(
        tmp_path / "corpus.jsonl",
        [
            {
                "doc_id": "a",
                "text": a_text,
                "version": sha(a_text.encode()),
                "observed": "2024-05-01",
                "access": ["internal", "legal"],
            },
            "",
            {"doc_id": "b/c.md", "text": b_text, "access": "public"},
        ],
    )
    corpus = load_corpus(path)
    a, b = corpus.get("a"), corpus.get("b/c.md")
    assert a.version == sha(a_text.encode())
    assert a.observed == "2024-05-01"
    assert a.access == ("internal", "legal")
    assert b.text == b_text
    assert b.version == sha(b_text.encode("utf-8"))
    assert b.access == ("public",)
    assert b.observed is None


def test_jsonl_declared_wrong_version_names_both_digests_and_line(tmp_path):
    text = "Requests may be retained for 30 days."
    wrong = sha(b"something else")
    path = write_jsonl(
        tmp_path / "corpus.jsonl",
        [{"doc_id": "ok", "text": "x"}, {"doc_id": "a", "text": text, "version": wrong}],
    )
    with pytest.raises(InputError) as info:
        load_corpus(path)
    [problem] = info.value.problems
    assert problem.line == 2
    assert problem.field == "version"
    assert wrong in problem.reason
    assert sha(text.encode()) in problem.reason
    assert str(problem).startswith(f"{path}:2: version: ")


def test_jsonl_line_that_is_not_json_names_its_line(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text(
        '{"doc_id": "a", "text": "one"}\n\n{not json at all\n{"doc_id": "b", "text": "two"}\n["a", "list"]\n',
        encoding="utf-8",
    )
    with pytest.raises(InputError) as info:
        load_corpus(path)
    problems = info.value.problems
    assert [p.line for p in problems] == [3, 5]
    assert "not valid JSON" in problems[0].reason
    assert str(problems[0]).startswith(f"{path}:3: line: not valid JSON")
    assert "expected a JSON object" in problems[1].reason


def test_jsonl_invalid_utf8_line_and_bad_fields(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(
        b'{"doc_id": "a", "text": "caf\xe9"}\n'
        b'{"text": "no id"}\n'
        b'{"doc_id": "c", "text": 5}\n'
        b'{"doc_id": "d", "text": "x", "access": [1]}\n'
    )
    with pytest.raises(InputError) as info:
        load_corpus(path)
    got = [(p.line, p.field) for p in info.value.problems]
    assert got == [(1, "line"), (2, "doc_id"), (3, "text"), (4, "access")]
    assert "UTF-8" in info.value.problems[0].reason


def test_jsonl_same_doc_two_versions_is_a_problem(tmp_path):
    path = write_jsonl(
        tmp_path / "corpus.jsonl",
        [{"doc_id": "a", "text": "v1"}, {"doc_id": "a", "text": "v1"}, {"doc_id": "a", "text": "v2"}],
    )
    with pytest.raises(InputError) as info:
        load_corpus(path)
    [problem] = info.value.problems
    assert problem.line == 3
    assert text_version("v1") in problem.reason and text_version("v2") in problem.reason


def test_jsonl_crlf_line_endings(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(b'{"doc_id": "a", "text": "one\\r\\n"}\r\n{"doc_id": "b", "text": "two"}\r\n')
    corpus = load_corpus(path)
    assert corpus.get("a").text == "one\r\n"
    assert corpus.get("b").text == "two"


def test_corpus_add_conflict_and_write_round_trip(tmp_path):
    corpus = Corpus()
    corpus.add(make_source("z", "last"))
    corpus.add(make_source("a", "Grüße \U0001f600", observed="2024-01-02", access=["x"]))
    corpus.add(make_source("a", "Grüße \U0001f600", observed="2024-01-02", access=["x"]))
    with pytest.raises(InputError, match="different versions"):
        corpus.add(make_source("a", "changed"))
    out = tmp_path / "out" / "corpus.jsonl"
    write_corpus_jsonl(corpus, out)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["doc_id"] for line in lines] == ["a", "z"]
    assert "\U0001f600" in lines[0]  # written as UTF-8, not escaped
    again = load_corpus(out)
    assert again.sources == corpus.sources
