#!/usr/bin/env python
"""The extractive reader's trade-off: oracle correct rate against false assertions on controls.

Captures, once, every context the embedded reader is asked to answer from:

* COVID-QA: the first six CC BY articles of ../shared/data/covidqa (52 questions), imported
  with ``--support sentence`` (and ``--repair-offsets``); the oracle prompt of every question
  (its cheapest sufficient set under the production budget) and the production contexts of
  the default arm at two phases (``auto:2``);
* ContractNLI dev (../shared/data/contractnli/dev.json, 61 NDAs): for every NotMentioned
  hypothesis (an unanswerable control) the production context of the default arm at phase 0,
  retrieved from **its own contract only** (the corpus is one document per run: a hypothesis
  that one NDA does not mention may well be entailed by another, so pooling the 61 contracts
  would count real answers as false assertions; the pooled figure is printed too); for the
  Entailment/Contradiction hypotheses
  (support-only, not answer-judged) the oracle prompt over their evidence;
* the Quillstack sample (sample_ledgers/fixtures.jsonl with its candidate arm, 8 phases): the
  oracle prompts and the production contexts of its unanswerable controls;

then scores every context once with the reader and replays its abstention rule at every
setting of ``abstain_threshold`` x ``abstain_margin`` (pipeline/generate.py), printing, per
setting, the oracle correct rate (COVID-QA, sample), the false-assertion rate
on the controls (ContractNLI NotMentioned, sample), the answer rate on ContractNLI evidence and
the production correct rate on COVID-QA. The answers are judged by the deterministic judge.

    .venv/bin/python scripts/bench_reader.py [--thresholds 0,0.2,...] [--margins 0,0.05,...] [--cache FILE]

``--cache`` keeps the captured contexts (pickle) so another reader can be replayed without
re-running retrieval (the capture does not depend on the reader).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ["LEDGERSCOPE_EMBEDDING_CACHE"] = "off"  # measure encoding, not a read of the cache
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("LEDGERSCOPE_DATA", "/work/shared/data"))  # ../shared/data of a checkout
if not DATA.is_dir() and (ROOT.parent / "shared" / "data").is_dir():
    DATA = ROOT.parent / "shared" / "data"
COVID_ARTICLES = 6  # --covid-articles
MUSIQUE = ROOT / "tests" / "data" / "musique" / "musique_ans_train_100.jsonl"
DEFAULT_THRESHOLDS = "0,0.2,0.3,0.4,0.5"
DEFAULT_MARGINS = "0,0.02,0.04,0.05,0.06,0.08,0.1,0.15"


class Capture:
    """A generator that remembers what it was asked and never answers."""

    kind = "capture"

    def __init__(self) -> None:
        self.seen: list[tuple[str, list]] = []

    def describe(self) -> dict:
        return {"kind": self.kind}

    def generate(self, question, blocks):
        from ledgerscope.pipeline.contracts.prompt import GenerationResult

        self.seen.append((question, list(blocks)))
        return GenerationResult("I cannot answer from the provided sources.", [], True, 0, 0)


def covid_subset(out: Path, articles: int = COVID_ARTICLES) -> Path:
    """The first ``articles`` articles whose context carries a ``License: cc-by`` line."""
    data = json.loads((DATA / "covidqa" / "200423_covidQA.json").read_text(encoding="utf-8"))
    keep = [a for a in data["data"] if any("License: cc-by" in p["context"] for p in a["paragraphs"])][
        :articles
    ]
    path = out / f"covidqa_cc_by_{articles}.json"
    path.write_text(json.dumps({"version": data.get("version"), "data": keep}), encoding="utf-8")
    return path


def cnli_slice(work: Path, docs: int | None) -> Path:
    """ContractNLI dev, or its first ``docs`` contracts (a modest slice for a shared machine)."""
    path = DATA / "contractnli" / "dev.json"
    if docs is None:
        return path
    data = json.loads(path.read_text(encoding="utf-8"))
    data["documents"] = data["documents"][:docs]
    out = work / f"contractnli_dev_{docs}.json"
    out.write_text(json.dumps(data), encoding="utf-8")
    return out


def _runtime(cfg):
    from ledgerscope.pipeline.embedding.encoder import shared_encoder
    from ledgerscope.pipeline.run.cascade import build_runtime

    rt = build_runtime(cfg, shared_encoder)
    capture = Capture()
    capture.count_tokens = rt.generator.count_tokens  # the evidence budget counts as the reader would
    rt.generator = capture
    return rt


def capture_oracle(rt, fixtures) -> list[tuple]:
    from ledgerscope.pipeline.run.oracle import run_oracle

    out = []
    for fx in fixtures:
        if not fx.sufficient_sets:
            continue
        rt.generator.seen.clear()
        row = run_oracle(rt, fx)
        _question, blocks = rt.generator.seen[0]
        out.append((fx, blocks, bool(row["feasible"])))
    return out


def capture_production(rt, fixtures, corpus, keep) -> list[tuple]:
    """(fixture, packed blocks, support packed) for every fixture ``keep`` accepts, every phase."""
    from ledgerscope.pipeline.run.cascade import build_phase, run_questions

    texts = {s.doc_id: s.text for s in corpus}
    chosen = [f for f in fixtures if keep(f)]
    out = []
    for phase in rt.config.phase_list():
        index = build_phase(rt, phase, list(corpus))
        rt.generator.seen.clear()
        records, _ = run_questions(rt, index, chosen, texts, {})
        for fx, rec, (_q, blocks) in zip(chosen, records, rt.generator.seen, strict=True):
            out.append((fx, blocks, rec["support_packed"]))
    return out


def capture_all(
    work: Path,
    covid_articles: int = COVID_ARTICLES,
    cnli_docs: int | None = None,
    pooled: bool = True,
    production: bool = True,
    sample_phases: int | None = None,
    cache: Path | None = None,
) -> dict[str, list[tuple]]:
    """Every context, by dataset; with ``cache``, each dataset is saved as soon as it is captured and a
    rerun captures only what the cache lacks (a capture interrupted on a busy machine loses one part)."""
    got: dict[str, list[tuple]] = pickle.loads(cache.read_bytes()) if cache and cache.is_file() else {}

    def save(name: str, t0: float) -> None:
        print(f"captured {name} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        if cache:
            cache.write_bytes(pickle.dumps(got))

    if "covid_oracle" not in got:
        t0 = time.perf_counter()
        _capture_covid(work, got, covid_articles, production)
        save("COVID-QA", t0)
    if "cnli_oracle" not in got:
        t0 = time.perf_counter()
        _capture_cnli(work, got, cnli_docs, pooled)
        save("ContractNLI", t0)
    if "sample_oracle" not in got:
        t0 = time.perf_counter()
        _capture_sample(got, sample_phases)
        save("the sample", t0)
    if "musique_oracle" not in got:
        t0 = time.perf_counter()
        _capture_musique(work, got)
        save("MuSiQue", t0)
    return got


def _capture_musique(work: Path, got: dict) -> None:
    """The oracle prompts of the committed MuSiQue-Ans slice (tests/data/musique, 100 questions)."""
    from ledgerscope.inputs.fixtures import load_fixtures
    from ledgerscope.inputs.importers.musique import import_musique
    from ledgerscope.inputs.sources import load_corpus
    from ledgerscope.pipeline.arm.config import arm_from_dict

    import_musique(MUSIQUE, work / "musique")
    corpus = load_corpus(work / "musique" / "corpus.jsonl")
    fixtures, corpus = load_fixtures(work / "musique" / "fixtures.jsonl", corpus)
    rt = _runtime(arm_from_dict({"name": "candidate", "phases": [0]}))
    got["musique_oracle"] = capture_oracle(rt, fixtures)


def _capture_covid(work: Path, got: dict, articles: int, production: bool) -> None:
    from ledgerscope.inputs.fixtures import load_fixtures
    from ledgerscope.inputs.importers.squad import import_squad
    from ledgerscope.inputs.sources import load_corpus
    from ledgerscope.pipeline.arm.config import arm_from_dict

    import_squad(covid_subset(work, articles), work / "covid", repair=True, support="sentence")
    corpus = load_corpus(work / "covid" / "corpus.jsonl")
    fixtures, corpus = load_fixtures(work / "covid" / "fixtures.jsonl", corpus)
    rt = _runtime(arm_from_dict({"name": "candidate", "phases": "auto:2"}))
    got["covid_production"] = capture_production(rt, fixtures, corpus, lambda f: True) if production else []
    got["covid_oracle"] = capture_oracle(rt, fixtures)


def _capture_cnli(work: Path, got: dict, docs: int | None, pooled: bool) -> None:
    from ledgerscope.inputs.fixtures import load_fixtures
    from ledgerscope.inputs.importers.contractnli import import_contractnli
    from ledgerscope.inputs.sources import Corpus, load_corpus
    from ledgerscope.pipeline.arm.config import arm_from_dict

    import_contractnli(cnli_slice(work, docs), work / "cnli")
    full = load_corpus(work / "cnli" / "corpus.jsonl")
    fixtures, full = load_fixtures(work / "cnli" / "fixtures.jsonl", full)
    rt = _runtime(arm_from_dict({"name": "candidate", "phases": [0]}))
    controls = []
    for doc in full:  # each control against its own contract only (see the module docstring)
        one = Corpus()
        one.add(doc)
        mine = [f for f in fixtures if not f.answerable and f.annotations.get("doc_id") == doc.doc_id]
        if mine:
            controls += capture_production(rt, mine, one, lambda f: True)
    got["cnli_controls"] = controls
    # the same controls retrieved from all the contracts pooled, as a plain sweep of the split would
    if pooled:
        got["cnli_controls_pooled"] = capture_production(rt, fixtures, full, lambda f: not f.answerable)
    got["cnli_oracle"] = capture_oracle(rt, fixtures)


def _capture_sample(got: dict, phases: int | None) -> None:
    from dataclasses import replace

    from ledgerscope.inputs.fixtures import load_fixtures
    from ledgerscope.inputs.sources import load_corpus
    from ledgerscope.pipeline.arm.config import load_arm

    sample = ROOT / "sample_ledgers"
    corpus = load_corpus(sample / "corpus")
    fixtures, corpus = load_fixtures(sample / "fixtures.jsonl", corpus)
    cfg = load_arm(sample / "arms" / "candidate.toml")
    if phases is not None:
        cfg = replace(cfg, phases=f"auto:{phases}")
    rt = _runtime(cfg)
    got["sample_controls"] = capture_production(rt, fixtures, corpus, lambda f: not f.answerable)
    got["sample_oracle"] = capture_oracle(rt, fixtures)


def _current(fx):
    """A fixture unpickled from an older cache, with the fields its classes have gained since."""
    from dataclasses import fields, replace

    from ledgerscope.inputs.fixtures import AnswerContract

    old = fx.answer
    values = {f.name: getattr(old, f.name) for f in fields(AnswerContract) if hasattr(old, f.name)}
    return replace(fx, answer=AnswerContract(**values))


def score_all(got: dict[str, list[tuple]], have: dict | None = None) -> dict[str, list[tuple]]:
    """Every captured context scored once: (fixture, scoring, flag, block labels); the datasets ``have``
    holds already (a scored cache) are kept as they are."""
    have = have or {}
    got = {k: v for k, v in got.items() if k not in have}
    from ledgerscope.pipeline.embedding.encoder import TokenCounter, shared_encoder
    from ledgerscope.pipeline.generation.reader import ExtractiveReader
    from ledgerscope.rules import judge as judging

    encoder = shared_encoder()
    reader = ExtractiveReader(encoder.get, TokenCounter(encoder.name).count)
    encoder.encode(
        sorted(
            {fx.question for rows in got.values() for fx, _b, _f in rows}
            | {b.text for rows in got.values() for _fx, blocks, _f in rows for b in blocks}
        )
    )
    out: dict[str, list[tuple]] = dict(have)
    for name, rows in got.items():
        out[name] = []
        for fx, blocks, flag in rows:
            fx = judging.with_inferred_default(_current(fx))
            scored = reader.score_sentences(fx.question, blocks)
            out[name].append((fx, scored, flag, [b.label for b in blocks]))
    return out


def _plan(
    fx, scoring, threshold: float, margin: float, sufficient: bool
) -> tuple[list[dict], str | None, str]:
    """(sentences answered with, abstention reason, answer text): this checkout's reader, or an older
    one's (the best sentence, abstain_reason) when its source has no ``reading`` module; ``sufficient``:
    an oracle prompt (a reader that does not take it is replayed without it)."""
    try:
        from ledgerscope.pipeline.generation.reading import answer_plan, answer_text
    except ImportError:  # the reader before issue 26
        from ledgerscope.pipeline.generation.reader import ExtractiveReader

        lead = ExtractiveReader.margin(scoring)
        reason = ExtractiveReader.abstain_reason(scoring, lead, threshold, margin)
        if reason:
            return [], reason, ""
        return scoring[:1], None, f"{scoring[0]['sentence']} [{scoring[0]['label']}]"
    try:
        chosen, reason = answer_plan(fx.question, scoring, threshold, margin, sufficient=sufficient)
    except TypeError:  # the reader of the first issue-26 session: no notion of a sufficient context
        chosen, reason = answer_plan(fx.question, scoring, threshold, margin)
    return chosen, reason, ("" if reason else answer_text(fx.question, chosen))


_VERDICTS: dict[tuple, str] = {}


def _verdict(fx, answer: str) -> str:
    from ledgerscope.rules import judge as judging

    key = (fx.qid, answer)
    if key not in _VERDICTS:
        _VERDICTS[key] = judging.judge_answer(answer, not answer, fx).verdict
    return _VERDICTS[key]


def replay(scored: dict[str, list[tuple]], threshold: float, margin: float) -> dict[str, float]:
    """The rates of one curve point: the reader's own rule over the scored contexts."""

    def verdicts(rows, sufficient=False):
        out = []
        for fx, scoring, flag, labels in rows:
            chosen, reason, answer = _plan(fx, scoring, threshold, margin, sufficient)
            if reason:
                verdict = "yes-no" if reason.startswith("yes-no") else "abstained"
            else:
                verdict = _verdict(fx, answer)
            joint = not reason and set(labels) <= {c["label"] for c in chosen}
            out.append((verdict, bool(reason), flag, joint))
        return out

    def rate(rows, verdict):
        return sum(v == verdict for v, _a, _f, _j in rows) / len(rows) if rows else float("nan")

    def answered(rows):
        return sum(not a for _v, a, _f, _j in rows) / len(rows) if rows else float("nan")

    def joint(rows):
        return sum(j for _v, _a, _f, j in rows) / len(rows) if rows else float("nan")

    covid_o, covid_p = verdicts(scored["covid_oracle"], True), verdicts(scored.get("covid_production", []))
    packed = [r for r in covid_p if r[2]]
    cnli_o, cnli_c = verdicts(scored["cnli_oracle"], True), verdicts(scored["cnli_controls"])
    multi = verdicts([r for r in scored["cnli_oracle"] if len(r[3]) >= 2], True)
    multi2 = verdicts([r for r in scored["cnli_oracle"] if len(r[3]) == 2], True)
    pooled = verdicts(scored["cnli_controls_pooled"]) if "cnli_controls_pooled" in scored else []
    sample_o, sample_c = verdicts(scored["sample_oracle"], True), verdicts(scored["sample_controls"])
    musique = verdicts(scored.get("musique_oracle", []), True)
    row = {
        "covid_oracle_correct": rate(covid_o, "correct"),
        "covid_oracle_abstained": 1 - answered(covid_o),
        "covid_oracle_yes_no": rate(covid_o, "yes-no"),
        "covid_production_correct": rate(covid_p, "correct"),
        "covid_packed_correct": rate(packed, "correct"),
        "cnli_oracle_answered": answered(cnli_o),
        "multi_answered": answered(multi),
        "multi_joint": joint(multi),
        "multi2_joint": joint(multi2),
        "multi_abstained": 1 - answered(multi),
        "musique_correct": rate(musique, "correct"),
        "musique_joint": joint(musique),
        "musique_abstained": 1 - answered(musique),
        "cnli_false_assertion": rate(cnli_c, "false-assertion"),
        "cnli_pooled_false_assertion": rate(pooled, "false-assertion"),
        "sample_oracle_correct": rate(sample_o, "correct"),
        "sample_oracle_abstained": 1 - answered(sample_o),
        "sample_oracle_yes_no": rate(sample_o, "yes-no"),
        "sample_oracle_cce": rate(sample_o, "critical-condition-error"),
        "sample_false_assertion": rate(sample_c, "false-assertion"),
    }
    # the worst dataset's oracle figure: the defaults maximise it (false assertions within target)
    row["worst_oracle"] = min(
        row["covid_oracle_correct"],
        row["sample_oracle_correct"],
        row["musique_correct"] if musique else row["multi_joint"],
        row["cnli_oracle_answered"],
    )
    # the worst oracle abstention (every reason, yes/no included; and yes/no counted apart)
    row["worst_abstained"] = max(
        row["covid_oracle_abstained"],
        row["sample_oracle_abstained"],
        1 - row["cnli_oracle_answered"],
        row["musique_abstained"] if musique else row["multi_abstained"],
    )
    row["worst_abstained_not_yes_no"] = max(
        row["covid_oracle_abstained"] - row["covid_oracle_yes_no"],
        row["sample_oracle_abstained"] - row["sample_oracle_yes_no"],
        1 - row["cnli_oracle_answered"],
        row["musique_abstained"] if musique else row["multi_abstained"],
    )
    return row


COLUMNS = [
    ("threshold", "threshold"),
    ("margin", "margin"),
    ("covid_oracle_correct", "COVID-QA oracle correct"),
    ("covid_oracle_abstained", "COVID-QA oracle abstained (all reasons)"),
    ("covid_oracle_yes_no", "... of which yes/no"),
    ("covid_production_correct", "COVID-QA production correct"),
    ("covid_packed_correct", "COVID-QA correct when support packed"),
    ("cnli_oracle_answered", "ContractNLI evidence answered"),
    ("multi_answered", "multi-span ContractNLI answered"),
    ("multi_joint", "multi-span answered citing every span"),
    ("multi2_joint", "... two-span sets"),
    ("multi_abstained", "multi-span ContractNLI abstained"),
    ("musique_correct", "MuSiQue oracle correct"),
    ("musique_joint", "MuSiQue citing every hop"),
    ("musique_abstained", "MuSiQue oracle abstained"),
    ("cnli_false_assertion", "ContractNLI NotMentioned false assertion"),
    ("cnli_pooled_false_assertion", "the same, contracts pooled"),
    ("sample_oracle_correct", "sample oracle correct"),
    ("sample_oracle_abstained", "sample oracle abstained"),
    ("sample_oracle_yes_no", "... of which yes/no"),
    ("sample_oracle_cce", "sample oracle critical-condition error"),
    ("sample_false_assertion", "sample controls false assertion"),
    ("worst_oracle", "worst dataset (oracle)"),
    ("worst_abstained", "worst oracle abstention"),
    ("worst_abstained_not_yes_no", "... yes/no apart"),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--thresholds", default=DEFAULT_THRESHOLDS, help="abstain_threshold values")
    ap.add_argument("--margins", default=DEFAULT_MARGINS, help="abstain_margin values")
    ap.add_argument("--covid-articles", type=int, default=COVID_ARTICLES, help="COVID-QA articles (CC BY)")
    ap.add_argument("--cnli-docs", type=int, default=None, help="only the first N ContractNLI dev contracts")
    ap.add_argument("--no-pooled", action="store_true", help="skip the pooled ContractNLI controls")
    ap.add_argument("--no-production", action="store_true", help="skip COVID-QA's production contexts")
    ap.add_argument("--sample-phases", type=int, default=None, help="only the sample arm's first N phases")
    ap.add_argument(
        "--scored-cache",
        type=Path,
        default=None,
        help="pickle of the scored contexts: read if it exists, else written",
    )
    ap.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="pickle of the captured contexts: read if it exists, else written",
    )
    args = ap.parse_args()
    if not os.environ.get("PYTHONPATH"):
        sys.path.insert(0, str(ROOT / "src"))
    t0 = time.perf_counter()
    got = capture_all(
        Path(tempfile.mkdtemp(prefix="bench_reader_")),
        args.covid_articles,
        args.cnli_docs,
        not args.no_pooled,
        not args.no_production,
        args.sample_phases,
        args.cache,
    )
    have = {}  # the scoring does not depend on the rule replayed: a cache keeps it
    if args.scored_cache and args.scored_cache.is_file():
        have = pickle.loads(args.scored_cache.read_bytes())
    scored = score_all(got, have) if set(got) - set(have) else have
    if args.scored_cache and scored is not have:
        args.scored_cache.write_bytes(pickle.dumps(scored))
    print(
        f"contexts: {', '.join(f'{k} {len(v)}' for k, v in got.items())}; captured and scored in "
        f"{time.perf_counter() - t0:.0f} s"
    )
    print("| " + " | ".join(title for _k, title in COLUMNS) + " |")
    print("| " + " | ".join("---" for _ in COLUMNS) + " |")
    for t in (float(x) for x in args.thresholds.split(",")):
        for m in (float(x) for x in args.margins.split(",")):
            row = {"threshold": t, "margin": m, **replay(scored, t, m)}
            cells = [f"{t:.2f}", f"{m:.2f}"] + [f"{100 * row[k]:.0f}%" for k, _ in COLUMNS[2:]]
            print("| " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
