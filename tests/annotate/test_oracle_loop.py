"""The whole gold loop, headless, with an oracle annotator (the demo's own gold, 000 §4.2–4.3):

typed candidates (the demo's questions, one evidence hint each) → hint recovery → pool (``pmrag pool``) →
a grade for every pooled chunk from the demo's qrels → ``pmrag judgments export`` → a study on the exported
gold, read from the questions file and straight from the store (``dataset.questions: store:…#oracle``).
The exported qrels equal the demo's gold on every pooled chunk, and so does the second study's chunk gold.
"""

import json
import re

import pandas as pd
import pytest
import yaml

from pmrag.annotate.candidates import read_candidates
from pmrag.annotate.pooling import read_pool
from pmrag.cli import main
from pmrag.core.params import SyntheticSection
from pmrag.demo import generate_corpus
from pmrag.evaluate import trec

pytestmark = pytest.mark.integration

BM25 = ["raw_text_bm25", "summary_bm25", "embedding_text_bm25"]   # vectors would embed every chunk: minutes
SETTINGS = ("retrieval: {retrievers: [raw_text_bm25, summary_bm25, embedding_text_bm25]}\n"
            "hybrid: {pairings: [[raw_text_bm25, embedding_text_bm25]]}\n"
            "analysis: {diagnostic_hybrid: [raw_text_bm25, embedding_text_bm25, 0.5]}\n")


def params(root, name, questions):
    files = sorted(p.name for p in (root / "data").glob("*.json") if p.name not in ("questions.json", "manifest.json"))
    path = root / f"{name}.yaml"
    path.write_text(f"run: {name}\noutputs_dir: out\ncache_dir: cache\n"
                    f"dataset: {{inputs: [{', '.join('data/' + f for f in files)}], questions: '{questions}'}}\n"
                    + SETTINGS, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def loop(tmp_path_factory):
    from pmrag.study import Study

    root = tmp_path_factory.mktemp("oracle")
    generate_corpus(root / "data", seed=SyntheticSection().seed, n_messages=1300, n_questions=30)
    annotate = params(root, "annotate", "data/questions.json")
    study = Study.from_params(annotate)
    messages, evidence, questions = study.messages().set_index("message_id"), study.question_evidence(), study.questions()
    entries = []
    for i, q in enumerate(questions.itertuples(index=False)):
        primary = evidence[(evidence["question_id"] == q.question_id) & (evidence["relevance"] == 2)]["message_id"].iloc[0]
        message = messages.loc[primary]
        phrase = message.text[:12] if i % 5 else message.text[:6] + "とか何とか"   # every 5th: the excerpt search
        entries.append({"text": q.text, "type": q.type, "time": str(message.occurred_at), "phrase": phrase})
    typed = root / "typed.yaml"
    typed.write_text(yaml.safe_dump(entries, allow_unicode=True), encoding="utf-8")
    return root, annotate, study, typed


def test_the_oracle_loop(loop, capsys):
    root, annotate, study, typed = loop
    assert main(["candidates", str(typed), str(annotate), "--accept"]) == 0
    assert main(["candidates", str(typed), str(annotate)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "typed.yaml: questions read 30, stored 30, already present 0, rejected 0"
    assert out[1] == "accepted 30 proposed candidate(s) of typed.yaml"
    assert out[2] == "typed.yaml: questions read 30, stored 0, already present 30, rejected 0"

    assert main(["pool", str(annotate), "--depth", "10", "--retrievers", *BM25, "--name", "oracle_pool"]) == 0
    out = capsys.readouterr().out.splitlines()
    counts = dict(re.findall(r"(text|speaker|search|nothing) (\d+)", out[0]))
    assert out[0].startswith("hints: 30;") and counts["text"] == "24" and counts["speaker"] == "0"
    assert int(counts["search"]) >= 4 and int(counts["search"]) + int(counts["nothing"]) == 6
    pooled = read_pool(study.store, "oracle_pool")
    assert out[-1] == f"total {len(pooled)} chunk(s) for 30 question(s)"
    assert 30 < len(pooled) <= 30 * 10 * 3
    origins = pooled["origins"].map(json.loads)
    assert origins.map(lambda o: any("hint" in x for x in o)).sum() >= 24

    candidates = read_candidates(study.store)
    to_question = dict(zip(candidates["candidate_id"], candidates["text"].map(
        dict(zip(study.questions()["text"], study.questions()["question_id"])))))
    gold = study.qrels().set_index(["question_id", "chunk_id"])["relevance"]
    oracle = [(c, chunk, int(gold.get((to_question[c], chunk), 0))) for c, chunk in zip(pooled["question_id"], pooled["chunk_id"])]
    with study.store.begin() as conn:
        conn.exec_driver_sql("INSERT INTO judgments (question_id, chunk_id, annotator, relevance, pool, judged_at) "
                             "VALUES (?, ?, 'oracle', ?, 'oracle_pool', '2026-12-01 00:00:00')", oracle)

    assert main(["judgments", "export", str(annotate), "--annotator", "oracle", "--out", str(root / "gold")]) == 0
    out = capsys.readouterr().out.splitlines()
    exported = trec.read_qrels(root / "gold" / "qrels.trec")
    got = {(to_question[q], c): r for q, c, r in exported.itertuples(index=False)}
    dropped = {line.split()[1].rstrip(":") for line in out if line.startswith("  dropped ")}
    expected = {(to_question[c], chunk): r for c, chunk, r in oracle if c not in dropped}
    assert got == expected                                   # the demo's gold on every pooled chunk
    no_primary = {to_question[c] for c in pooled["question_id"]} - {q for (q, _), r in expected.items() if r == 2}
    assert {to_question[c] for c in dropped} == no_primary   # dropped: no relevance-2 chunk in the pool

    for name, source in (("from_file", "gold/questions.json"), ("from_store", "store:out/annotate/study.sqlite#oracle")):
        from pmrag.study import Study

        evaluated = Study.from_params(params(root, name, source))
        derived = {(to_question[q], c): r for q, c, r in
                   evaluated.qrels()[["question_id", "chunk_id", "relevance"]].itertuples(index=False)}
        assert derived == {k: r for k, r in expected.items() if r > 0}, name
        assert len(evaluated.evaluation().questions) == 30 - len(dropped)
        assert not evaluated.metrics().empty


def test_a_study_cannot_read_judgments_from_its_own_store(loop):
    from pmrag.core.errors import ParamsError
    from pmrag.study.params import load_params

    root = loop[0]
    (root / "out" / "self").mkdir(parents=True, exist_ok=True)
    (root / "out" / "self" / "study.sqlite").touch()
    with pytest.raises(ParamsError, match="names this study's own store"):
        load_params(params(root, "self", "store:out/self/study.sqlite#oracle"))
    with pytest.raises(ParamsError, match="store not found"):
        load_params(params(root, "other", "store:out/nowhere.sqlite#oracle"))
    with pytest.raises(ParamsError, match=r"expected 'store:PATH#ANNOTATOR'"):
        load_params(params(root, "other", "store:out/self/study.sqlite"))
