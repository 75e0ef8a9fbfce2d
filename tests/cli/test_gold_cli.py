"""``pmrag candidates``, ``pmrag pool`` and ``pmrag judgments export``: output lines and one-line errors."""

from __future__ import annotations

import pytest

from pmrag.annotate.pooling import blind_positions, read_pool
from pmrag.cli import main
from conftest import make_tiny_study


def run(capsys, *args):
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err.splitlines()


def test_candidates_into_a_store_file(tmp_path, capsys):
    typed = tmp_path / "mine.csv"
    typed.write_text("text,type,phrase\nWhere?,contextual,ramen\nWho?,named_entity,\nBad,,x\n", encoding="utf-8")
    db = str(tmp_path / "s.sqlite")
    code, out, _ = run(capsys, "candidates", str(typed), "--db", db, "--permissive", "--accept")
    assert code == 0
    assert out == ["mine.csv: questions read 3, stored 2, already present 0, rejected 1",
                   "  rejected at line 4: key 'type': expected a non-empty string",
                   "accepted 2 proposed candidate(s) of mine.csv"]
    code, _, err = run(capsys, "candidates", str(typed), "--db", db)
    assert code == 2 and err == [f"pmrag candidates: error: {typed}, line 4: key 'type': expected a non-empty string"]
    code, _, err = run(capsys, "candidates", str(typed))
    assert code == 2 and err == ["pmrag candidates: error: give a params file or --db STORE (one of them)"]


def test_export_errors_are_one_line(tmp_path, capsys):
    db = str(tmp_path / "s.sqlite")
    code, _, err = run(capsys, "judgments", "export", "--db", db, "--annotator", "me", "--out", str(tmp_path / "g"))
    assert code == 2 and err == ["pmrag judgments: error: no judgment by annotator 'me' in the store (annotators: none)"]


def test_pool_names_a_bad_retriever_before_opening_the_study(tmp_path, capsys):
    code, _, err = run(capsys, "pool", str(tmp_path / "none.yaml"), "--retrievers", "raw_text_bm25", "raw_text_foo")
    assert code == 2 and len(err) == 1
    assert err[0].startswith("pmrag pool: error: --retrievers: unknown retriever method 'foo' (registered: bm25, ")


@pytest.mark.integration
def test_pool_refuses_what_it_cannot_pool(tmp_path, capsys):
    study = make_tiny_study(tmp_path, "retrieval: {retrievers: [raw_text_bm25, summary_bm25, embedding_text_bm25]}\n"
                            "hybrid: {pairings: [[raw_text_bm25, embedding_text_bm25]]}\n"
                            "analysis: {aggregate_type: contextual, diagnostic_hybrid: [raw_text_bm25, embedding_text_bm25, 0.5]}\n")
    params = str(tmp_path / "p.yaml")
    code, _, err = run(capsys, "pool", params)
    assert code == 2 and "no accepted or edited question candidate in the study's store" in err[0]
    code, _, err = run(capsys, "pool", params, "--depth", "0")
    assert code == 2 and err == ["pmrag pool: error: --depth: an integer ≥ 1, got 0"]
    code, _, err = run(capsys, "pool", params, "--name", "my pool")
    assert code == 2 and err == ["pmrag pool: error: --name: a pool name is one word without whitespace, got 'my pool'"]
    code, out, _ = run(capsys, "pool", params, "--of", "both", "--retrievers", "raw_text_bm25", "--depth", "1")
    assert code == 0 and out[-1].startswith("total ")       # no candidate yet: the study's questions alone
    code, out, _ = run(capsys, "pool", params, "--of", "study", "--retrievers", "raw_text_bm25", "--depth", "3")
    n_questions = len(study.evaluation().questions)
    assert code == 0 and out[-1] == f"total {3 * n_questions} chunk(s) for {n_questions} question(s)"
    assert out[0] == "pool 'pool': depth 3, 1 retriever(s), seed 0"
    written = (tmp_path / "p.yaml").read_text(encoding="utf-8")
    (tmp_path / "p.yaml").write_text(written + "pool: {depth: 2, seed: 7}\n", encoding="utf-8")
    code, out, _ = run(capsys, "pool", params, "--of", "study", "--retrievers", "raw_text_bm25")
    assert code == 0 and out[0] == "pool 'pool': depth 2, 1 retriever(s), seed 7"      # the params' pool section
    pooled = read_pool(study.store, "pool")
    first = pooled[pooled["question_id"] == pooled["question_id"].iloc[0]]
    assert first["position"].tolist() == sorted(first["position"]) and len(first) == 2
    assert dict(zip(first["chunk_id"], first["position"])) == dict(zip(
        first["chunk_id"], blind_positions(first["question_id"].iloc[0], first["chunk_id"].tolist(), 7)))
    code, out, _ = run(capsys, "pool", params, "--of", "study", "--retrievers", "raw_text_bm25", "--seed", "3")
    assert code == 0 and out[0] == "pool 'pool': depth 2, 1 retriever(s), seed 3"      # the option overrides it
    code, _, err = run(capsys, "pool", params, "--seed", "-1")
    assert code == 2 and err == ["pmrag pool: error: --seed: an integer ≥ 0, got -1"]
    (tmp_path / "p.yaml").write_text(written, encoding="utf-8")
    typed = tmp_path / "t.yaml"
    typed.write_text("- {text: 誰と会った？, type: contextual}\n", encoding="utf-8")
    assert main(["candidates", str(typed), params, "--accept"]) == 0
    code, _, err = run(capsys, "pool", params, "--retrievers", "summary_graph_interest")
    assert code == 2 and "summary_graph_interest reads" in err[0] and "BM25 and vector retrievers" in err[0]


@pytest.mark.integration
def test_candidates_are_ranked_as_the_study_ranks_its_own_questions(tmp_path, capsys):
    """A candidate worded as a study question gets that question's ranking from every retriever, vectors included."""
    import json

    from pmrag.annotate.candidates import candidate_id
    from pmrag.annotate.pooling import read_pool

    study = make_tiny_study(tmp_path, "retrieval: {retrievers: [raw_text_bm25, embedding_text_bm25, raw_text_vector]}\n"
                            "hybrid: {pairings: [[raw_text_bm25, raw_text_vector]]}\n"
                            "analysis: {aggregate_type: contextual, diagnostic_hybrid: [raw_text_bm25, raw_text_vector, 0.5]}\n")
    question = study.evaluation().questions.iloc[0]
    typed = tmp_path / "t.yaml"
    typed.write_text(json.dumps([{"text": question["text"], "type": question["type"]}]), encoding="utf-8")
    assert main(["candidates", str(typed), str(tmp_path / "p.yaml"), "--accept"]) == 0
    names = ["raw_text_bm25", "raw_text_vector"]
    assert main(["pool", str(tmp_path / "p.yaml"), "--retrievers", *names, "--depth", "2", "--of", "both"]) == 0
    pooled = read_pool(study.store, "pool")
    cid = candidate_id("typed", question["text"])
    for name in names:
        own = study.ranked(name).rankings
        top = own[(own["question_id"] == question["question_id"]) & (own["rank"] <= 2)]
        for chunk, rank in zip(top["chunk_id"], top["rank"]):
            for asked in (cid, question["question_id"]):
                origins = json.loads(pooled[(pooled["question_id"] == asked) & (pooled["chunk_id"] == chunk)]["origins"].iloc[0])
                assert {"retriever": name, "rank": int(rank)} in origins
    mine, theirs = (set(pooled.loc[pooled["question_id"] == q, "chunk_id"]) for q in (cid, question["question_id"]))
    assert mine == theirs


def test_propose_refuses_what_does_not_go_with_it(tmp_path, capsys):
    typed = str(tmp_path / "t.csv")
    code, _, err = run(capsys, "candidates", "--propose", "p.yaml", typed)
    assert code == 2 and err == ["pmrag candidates: error: --propose PARAMS reads the study's messages and stores into "
                                 "its store: give no file, second params file or --db with it"]
    code, _, err = run(capsys, "candidates", "--propose", "p.yaml", "--accept")
    assert code == 2 and err[0].startswith("pmrag candidates: error: --accept and --permissive are for typed files")
    code, _, err = run(capsys, "candidates", "--propose", "p.yaml", "--limit", "0")
    assert code == 2 and err == ["pmrag candidates: error: --limit: an integer ≥ 1, got 0"]
    code, _, err = run(capsys, "candidates", "--propose", "p.yaml", "--max-calls", "-1")
    assert code == 2 and err == ["pmrag candidates: error: --max-calls: an integer ≥ 0, got -1"]
    code, _, err = run(capsys, "candidates", typed, "--db", "s.sqlite", "--limit", "2")
    assert code == 2 and err == ["pmrag candidates: error: --limit: only with --propose PARAMS"]
    code, _, err = run(capsys, "candidates", typed, "--db", "s.sqlite", "--dry-run")
    assert code == 2 and err == ["pmrag candidates: error: --dry-run: only with --propose PARAMS"]
    code, _, err = run(capsys, "candidates")
    assert code == 2 and err == ["pmrag candidates: error: give a typed-questions file (.csv, .yaml), or --propose "
                                 "PARAMS for a model's proposals"]


@pytest.mark.integration
@pytest.mark.usefixtures("clean_env")
def test_propose_prints_the_calls_and_the_candidates_and_resumes(tmp_path, capsys, server):
    import json

    from responses_server import Reply

    study = make_tiny_study(tmp_path, f"candidates: {{base_url: '{server.base_url}', batch_chars: 300}}\n"
                                      "summarizer: {interval_s: 0}\n")
    proposal = {"questions": [{"question": "What did the family talk about?", "type": "contextual",
                               "evidence": [{"time": None, "speaker": None, "excerpt": "hello"}]}]}
    server.script(Reply.ok(json.dumps(proposal)), Reply.ok('{"questions": []}'))
    params = str(tmp_path / "p.yaml")
    code, out, _ = run(capsys, "candidates", "--propose", params, "--limit", "2", "--dry-run")
    assert code == 0 and out[0].startswith("model calls still to make (counted without calling a model; the batches")
    cells = out[2].split()
    assert cells[:4] == ["question_candidates", "openai/gpt-4o-mini", "2", "2"], out
    assert out[-1] == "dry run: no model was called; run without --dry-run to make these calls"
    code, _, err = run(capsys, "candidates", "--propose", params, "--limit", "2", "--max-calls", "1", "-q")
    assert code == 3 and err == ["pmrag candidates: error: --max-calls 1: the proposals would make 2 call(s); nothing "
                                 "was called (--limit N sends the first N batches only)"]
    assert server.response_requests() == []
    code, out, _ = run(capsys, "candidates", "--propose", params, "--limit", "2", "-q", "--max-calls", "2")
    assert code == 0, out
    n_batches = int(out[0].split(" of ")[1].split(";")[0])
    assert n_batches >= 2 and out[0] == f"batches: 2 of {n_batches}; called 2 (ok 2, failed 0), resumed 0, API calls 2"
    assert out[1].startswith("question proposal run ") and "(openai/gpt-4o-mini): done" in out[1]
    assert out[2] == "proposed by gpt-4o-mini: questions read 1, stored 1, already present 0, rejected 0"
    code, out, _ = run(capsys, "candidates", "--propose", params, "--limit", "2", "-q")
    assert code == 0 and len(server.response_requests()) == 2
    assert out[0] == f"batches: 2 of {n_batches}; called 0 (ok 0, failed 0), resumed 2, API calls 0"
    assert out[2] == "proposed by gpt-4o-mini: questions read 1, stored 0, already present 1, rejected 0"
    code, out, _ = run(capsys, "candidates", "--propose", params, "--limit", "2", "--dry-run")
    assert code == 0 and out[2].split()[:4] == ["question_candidates", "openai/gpt-4o-mini", "0", "0"], out
    from pmrag.annotate.candidates import read_candidates
    assert read_candidates(study.store)["origin"].tolist() == ["model"]


def test_agreement_prints_kappa_alpha_by_type_and_the_disagreements(tmp_path, capsys):
    from conftest import GRADING_POOL, make_grading_store
    from pmrag.annotate.judgments import record_grade

    db = tmp_path / "s.sqlite"
    engine, rows = make_grading_store(db)
    for r in rows.itertuples():
        record_grade(engine, r.question_id, r.chunk_id, "ann", r.position % 3, pool=GRADING_POOL)
        if r.question_id != "q10":
            record_grade(engine, r.question_id, r.chunk_id, "ben", min(r.position, 2), pool=GRADING_POOL)
    engine.dispose()
    code, out, _ = run(capsys, "judgments", "agreement", "--db", str(db), "--pool", GRADING_POOL)
    assert code == 0
    assert out[0] == ("annotators: ann, ben; 7 row(s) graded by two or more, 2 graded by one only (left out), "
                      "1 disagreement(s)")
    kappa = [line for line in out if line.lstrip().startswith("weighted κ")]
    alpha = [line for line in out if line.lstrip().startswith("Krippendorff's α")]
    assert [line.split()[4] for line in kappa] == ["all", "contextual", "named_entity"]
    assert len(alpha) == 3 and all("[" in line for line in kappa + alpha)
    assert any(line.startswith("  confusion ann (rows 0/1/2) × ben (columns 0/1/2): ") for line in out)
    assert out[-1] == "  (intervals: 95% percentile bootstrap over questions)"
    code, _, err = run(capsys, "judgments", "agreement")
    assert code == 2 and err == ["pmrag judgments: error: give a params file or --db STORE (one of them)"]
