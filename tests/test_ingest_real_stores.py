"""What real chunk stores hold, made by running the real libraries: each chunk placed (or reported).

* LlamaIndex's SentenceSplitter nodes, their metadata template in the embedded text: placed by the
  node's text, at the node's own ``start_char_idx``; the metadata recorded as generated context.
* LangChain's RecursiveCharacterTextSplitter (``add_start_index``) with E5's ``passage: `` prefix and
  a ``Document: X / Section: Y`` header: placed at LangChain's ``start_index``.
* LangChain's MarkdownHeaderTextSplitter (headers moved into metadata, lines re-joined): placed
  through the whitespace / Markdown-header normalisations onto the section's body.
* A PDF written by fpdf2 with ligatures and soft hyphens and read back by pypdf as the corpus, while
  the store holds the clean text: placed through the soft-hyphen/ligature normalisation.
* A chunk joined from a header line of one place and a body of another.
* (slow) a situating sentence written by the local SmolLM2 llama.cpp server before each chunk.

Each placement is checked against the library's own offsets where it reports them, and against
the source text always (the placed slice, normalised, equals the chunk's source-aligned part).
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from ledgerscope.ingest.derive.resolve import RESOLVED, resolve_chunks
from ledgerscope.ingest.read.chunkstore import Chunk
from ledgerscope.inputs.normalise import at_level
from ledgerscope.inputs.sources import Corpus, make_source

from .ingest_pipeline import CORPUS

DOC = "plans/plans-and-limits.md"
TEXT = (CORPUS / DOC).read_text(encoding="utf-8")


def _corpus(doc: str = DOC, text: str = TEXT) -> Corpus:
    c = Corpus()
    c.add(make_source(doc, text))
    return c


def _chunks(texts: list[str], doc: str = DOC) -> list[Chunk]:
    return [Chunk(f"c{i}", doc, t, i + 1) for i, t in enumerate(texts)]


def test_llamaindex_nodes_with_their_metadata_template_are_placed_at_start_char_idx():
    pytest.importorskip("llama_index.core")
    from llama_index.core import Document
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.schema import MetadataMode

    doc = Document(text=TEXT, metadata={"file_name": DOC, "section": "plans"})
    nodes = SentenceSplitter(chunk_size=128, chunk_overlap=16).get_nodes_from_documents([doc])
    embedded = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
    assert all(e != n.text and e.endswith(n.text) for e, n in zip(embedded, nodes, strict=True))
    rs = resolve_chunks(_chunks(embedded), _corpus())
    for r, n in zip(rs, nodes, strict=True):
        assert r.status == "located-in-context", (r.status, r.note)
        assert (r.start, r.end) == (n.start_char_idx, n.end_char_idx)
        (part,) = r.context
        assert part["kind"] == "generated" and part["position"] == "before"
        assert part["text"].strip() == f"file_name: {DOC}\nsection: plans"
        assert part["length"] == len(part["text"])


def test_langchain_chunks_with_a_passage_prefix_or_a_header_are_placed_at_start_index():
    pytest.importorskip("langchain_text_splitters")
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    docs = RecursiveCharacterTextSplitter(
        chunk_size=300, chunk_overlap=0, add_start_index=True
    ).create_documents([TEXT])
    stored = [
        f"passage: {d.page_content}"
        if i % 2
        else f"Document: {DOC} / Section: Plans and limits\n\n{d.page_content}"
        for i, d in enumerate(docs)
    ]
    rs = resolve_chunks(_chunks(stored), _corpus())
    placed = 0
    for r, d in zip(rs, docs, strict=True):
        if len(d.page_content) < 60:  # a short tail: too little source text to place it on
            assert r.status in ("located-in-context", "unlocatable", "ambiguous"), r.status
            continue
        assert r.status == "located-in-context", (r.status, r.note)
        start = d.metadata["start_index"]
        assert (r.start, r.end) == (start, start + len(d.page_content))
        assert [p["kind"] for p in r.context] == ["generated"]
        placed += 1
    assert placed >= len(docs) - 1
    assert rs[1].context[0]["text"] == "passage: "


def test_langchain_markdown_header_splitter_output_is_placed_through_its_normalisations():
    pytest.importorskip("langchain_text_splitters")
    from langchain_text_splitters import MarkdownHeaderTextSplitter

    sections = MarkdownHeaderTextSplitter([("#", "h1"), ("##", "h2")]).split_text(TEXT)
    assert len(sections) > 2 and all("##" not in s.page_content for s in sections)
    rs = resolve_chunks(_chunks([s.page_content for s in sections]), _corpus())
    for r, s in zip(rs, sections, strict=True):
        assert r.status in RESOLVED and r.status != "located-in-context", (r.status, r.note)
        placed = TEXT[r.start : r.end]
        assert at_level(placed, r.how).text == at_level(s.page_content, r.how).text, r.how
    assert {r.how for r in rs} - {"exact"}  # LangChain re-joins the lines: not all exact


def test_a_chunk_joined_from_a_line_of_one_place_and_a_distant_body_records_both_slices():
    header = "Numbers apply per workspace unless a row says otherwise"
    body_start = TEXT.index("Business costs €15")
    body = TEXT[body_start : TEXT.index(".", body_start + 150) + 1]
    (r,) = resolve_chunks(_chunks([f"{header}\n{body}"]), _corpus())
    assert r.status == "located-in-context" and (r.start, r.end) == (body_start, body_start + len(body))
    (part,) = r.context
    assert part["kind"] == "source" and TEXT[part["start"] : part["end"]] == header


def test_a_pdf_extracted_source_with_ligatures_and_soft_hyphens_is_placed_through_them(tmp_path):
    fpdf = pytest.importorskip("fpdf")
    pypdf = pytest.importorskip("pypdf")
    font = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
    if not font.is_file():
        pytest.skip("DejaVu Sans is not installed (fonts-dejavu-core)")
    clean = (
        "The official workflow defines five stages. Each confidential file flows through "
        "an efficient offline review before it is finally signed off by the staff."
    )
    typeset = (
        clean.replace("ffi", "\ufb03")
        .replace("fl", "\ufb02")
        .replace("fi", "\ufb01")
        .replace("workflow", "work\u00adflow")
        .replace("review", "re\u00adview")
    )
    pdf = fpdf.FPDF()
    pdf.add_page()
    pdf.add_font("dejavu", fname=str(font))
    pdf.set_font("dejavu", size=11)
    pdf.multi_cell(0, 6, "Handbook\n\n" + typeset)
    pdf.output(str(tmp_path / "h.pdf"))
    extracted = "\n".join(p.extract_text() for p in pypdf.PdfReader(tmp_path / "h.pdf").pages)
    assert "\ufb01" in extracted or "\u00ad" in extracted  # the corpus differs from the store
    assert clean not in extracted
    sentence = clean.split(". ", 1)[1]
    (r,) = resolve_chunks(_chunks([sentence], "h.pdf"), _corpus("h.pdf", extracted))
    assert r.status == "located-normalised", (r.status, r.note)
    assert r.how in ("nfkc", "soft-hyphens-ligatures")
    assert at_level(extracted[r.start : r.end], r.how).text == sentence


def test_a_normalised_match_must_still_be_unique():
    text = "Report ﬁled on Monday.\n\nReport filed on Monday.\n\nOther text follows here."
    (r,) = resolve_chunks(_chunks(["Report ﬁled on Monday."], "d"), _corpus("d", text))
    assert r.status == "located" and r.start == 0  # exact first
    text2 = "Report ﬁled on Monday.\n\nReport ﬁled on  Monday."
    (r2,) = resolve_chunks(_chunks(["Report filed on Monday."], "d"), _corpus("d", text2))
    assert r2.status == "ambiguous" and "nfkc" in r2.note


def test_html_entities_and_a_plugin_normalisation(tmp_path, monkeypatch):
    text = "Fees &amp; taxes are shown &lt;per seat&gt; on the invoice."
    plain = "Fees & taxes are shown <per seat> on the invoice."
    (r,) = resolve_chunks(_chunks([plain], "d"), _corpus("d", text))
    assert (r.status, r.how, r.start, r.end) == ("located-normalised", "html-entities", 0, len(text))
    (tmp_path / "mynorm.py").write_text("def upper(text):\n    return text.upper()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from ledgerscope.inputs.normalise import load_plugin

    name, fn = load_plugin("mynorm:upper")
    (r,) = resolve_chunks(
        _chunks(["FEES &AMP; TAXES ARE SHOWN"], "d"), _corpus("d", text), plugin=fn, plugin_name=name
    )
    assert (r.status, r.how, r.start) == ("located-normalised", "plugin:mynorm:upper", 0)
    assert text[r.start : r.end] == "Fees &amp; taxes are shown"


# ---------------------------------------------------------------------------
# a situating sentence written by a real model (contextual retrieval)


def _situate(base_url: str, chunk: str) -> str:
    body = {
        "model": "smollm2",
        "temperature": 0,
        "seed": 0,
        "max_tokens": 40,
        "messages": [
            {
                "role": "user",
                "content": "Write one short sentence that situates this "
                f"excerpt of a plans-and-limits page:\n\n{chunk}",
            }
        ],
    }
    req = urllib.request.Request(
        base_url + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=120) as resp:
        return json.loads(resp.read())["choices"][0]["message"]["content"].strip()


@pytest.mark.slow
def test_chunks_with_a_situating_sentence_from_smollm2_are_placed_at_start_index(smollm2_server):
    pytest.importorskip("langchain_text_splitters")
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    docs = RecursiveCharacterTextSplitter(
        chunk_size=400, chunk_overlap=0, add_start_index=True
    ).create_documents([TEXT])[:3]
    sentences = [_situate(smollm2_server.base_url, d.page_content) for d in docs]
    assert all(sentences)
    rs = resolve_chunks(
        _chunks([f"{s}\n\n{d.page_content}" for s, d in zip(sentences, docs, strict=True)]), _corpus()
    )
    for r, d, s in zip(rs, docs, sentences, strict=True):
        assert r.status == "located-in-context", (r.status, r.note)
        start = d.metadata["start_index"]
        assert (r.start, r.end) == (start, start + len(d.page_content)), (s, r.note)
        assert r.context[0]["position"] == "before" and r.context[0]["text"].strip() == s


# ---------------------------------------------------------------------------
# what the TUI shows of it


def test_the_context_pane_styles_generated_context_and_the_source_pane_lists_unplaced_units():
    from ledgerscope.tui.model import RecordDetail
    from ledgerscope.tui.render import make_palette
    from ledgerscope.tui.render_source import context_text, source_text

    body = TEXT[TEXT.index("Business costs €15") : TEXT.index(".", TEXT.index("Business costs €15")) + 1]
    added = "This excerpt gives the Business price."
    stored = f"{added}\n\n{body}"
    (r,) = resolve_chunks(_chunks([stored]), _corpus())
    unit = {
        "unit_id": "c0",
        "doc_id": DOC,
        "start": r.start,
        "end": r.end,
        "located": True,
        "placement": r.status,
        "placement_note": r.note,
        "context_json": json.dumps(list(r.context)),
    }
    lost = {
        "unit_id": "gone",
        "doc_id": DOC,
        "start": None,
        "end": None,
        "located": False,
        "placement": "unlocatable",
        "placement_note": "its text occurs nowhere",
        "context_json": None,
    }
    rd = RecordDetail(
        "a",
        "arm",
        "0",
        {"packed_context": stored, "packed_unit_ids": ["c0"]},
        {"packed": [{"unit_id": "c0", "rank": 1, "doc_id": DOC, "start": r.start, "end": r.end}]},
        [unit, lost],
        {},
        None,
        None,
        {DOC: TEXT},
    )
    palette = make_palette()
    out = context_text(rd, palette)
    styled = [out.plain[s.start : s.end] for s in out.spans if s.style == palette["generated"]]
    assert added in styled  # the added sentence, in its own style
    assert body not in "".join(styled)
    assert "generated context" in out.plain and "never gold support" in out.plain
    src = source_text(rd, "packed", palette).plain
    assert "1 unit(s) of this document could not be placed" in src and "gone (unlocatable)" in src
