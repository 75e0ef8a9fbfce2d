"""TREC run and qrels files: exact round trip, validation, and ranx reading them to our numbers."""

import numpy as np
import pandas as pd
import pytest
from ranx import Qrels, Run, evaluate

from pmrag.core.errors import InputError
from pmrag.evaluate.metrics import per_question_metrics
from pmrag.evaluate.trec import read_qrels, read_run, write_qrels, write_run


def rankings_frame(seed=0, n_questions=6, n_docs=40, depth=30):
    """Strictly decreasing scores per question, some differing only in the 16th significant digit."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_questions):
        chunks = rng.choice([f"c{j:03d}" for j in range(n_docs)], size=depth, replace=False)
        values = np.sort(rng.random(depth))[::-1].copy()
        values[1] = np.nextafter(values[0], 0.0)
        for rank, (chunk, value) in enumerate(zip(chunks, values), start=1):
            rows.append((f"q{i}", chunk, rank, float(value)))
    return pd.DataFrame(rows, columns=["question_id", "chunk_id", "rank", "score"])


def qrels_frame(rankings, seed=1):
    rng = np.random.default_rng(seed)
    rows = []
    for q, group in rankings.groupby("question_id"):
        picked = rng.choice(group["chunk_id"].to_numpy()[:12], size=4, replace=False)
        rows += [(q, picked[0], 2), (q, picked[1], rng.integers(1, 3)), (q, picked[2], 1), (q, picked[3], 0)]
        rows.append((q, "unretrieved", 1))
    return pd.DataFrame(rows, columns=["question_id", "chunk_id", "relevance"]).astype({"relevance": "int64"})


def test_run_round_trip_is_exact(tmp_path):
    rankings = rankings_frame()
    path = tmp_path / "run.trec"
    assert write_run(path, rankings, tag="summary_hybrid") == len(rankings)
    first = path.read_text(encoding="utf-8").splitlines()[0].split(" ")
    assert first[1] == "Q0" and first[3] == "1" and first[5] == "summary_hybrid"
    back = read_run(path)
    assert list(back.columns) == ["question_id", "chunk_id", "rank", "score", "tag"]
    pd.testing.assert_frame_equal(back.drop(columns="tag"), rankings, check_dtype=False)
    assert (back["score"].to_numpy() == rankings["score"].to_numpy()).all()
    assert set(back["tag"]) == {"summary_hybrid"}


def test_run_is_written_in_rank_order_truncated_at_depth(tmp_path):
    rankings = rankings_frame(depth=10).sample(frac=1.0, random_state=4)
    write_run(tmp_path / "run.trec", rankings, tag="t", depth=3)
    back = read_run(tmp_path / "run.trec")
    assert back["rank"].tolist() == [1, 2, 3] * 6
    assert back["question_id"].tolist() == [q for q in pd.unique(rankings["question_id"]) for _ in range(3)]


def test_scores_rank_encodes_the_order_and_accepts_ties(tmp_path):
    rankings = pd.DataFrame({"question_id": ["q"] * 3, "chunk_id": ["a", "b", "c"], "rank": [1, 2, 3], "score": [1.0, 1.0, 1.0]})
    write_run(tmp_path / "run.trec", rankings, tag="t", depth=200, scores="rank")
    assert read_run(tmp_path / "run.trec")["score"].tolist() == [200.0, 199.0, 198.0]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda r: r.assign(score=[1.0, 1.0, 0.5]), r"score at rank 2 .* not below"),
        (lambda r: r.assign(score=[1.0, 2.0, 0.5]), "not below"),
        (lambda r: r.assign(score=[1.0, np.nan, 0.5]), "missing values"),
        (lambda r: r.assign(rank=[1, 2, 4]), "without gaps"),
        (lambda r: r.assign(rank=[1, 2, 2]), "without gaps"),
        (lambda r: r.assign(chunk_id=["a", "b", "a"]), "ranked twice"),
        (lambda r: r.assign(chunk_id=["a", "b c", "d"]), "'b c'"),
        (lambda r: r.assign(question_id=["q 1"] * 3), "'q 1'"),
        (lambda r: r.drop(columns="score"), "lacks column"),
    ],
)
def test_invalid_rankings(tmp_path, change, message):
    rankings = pd.DataFrame({"question_id": ["q"] * 3, "chunk_id": ["a", "b", "c"], "rank": [1, 2, 3], "score": [3.0, 2.0, 1.0]})
    with pytest.raises(ValueError, match=message):
        write_run(tmp_path / "run.trec", change(rankings), tag="t")


def test_invalid_tag_and_depth(tmp_path):
    rankings = pd.DataFrame({"question_id": ["q"], "chunk_id": ["a"], "rank": [1], "score": [1.0]})
    with pytest.raises(ValueError, match="tag 'my run'"):
        write_run(tmp_path / "r", rankings, tag="my run")
    with pytest.raises(ValueError, match="depth"):
        write_run(tmp_path / "r", rankings, tag="t", depth=0)


def test_qrels_round_trip_keeps_every_judgment(tmp_path):
    qrels = qrels_frame(rankings_frame())
    assert write_qrels(tmp_path / "qrels.trec", qrels) == len(qrels)
    assert (tmp_path / "qrels.trec").read_text().splitlines()[0].split(" ")[1] == "0"
    pd.testing.assert_frame_equal(read_qrels(tmp_path / "qrels.trec"), qrels, check_dtype=False)


def test_invalid_qrels(tmp_path):
    qrels = pd.DataFrame({"question_id": ["q", "q"], "chunk_id": ["a", "a"], "relevance": [2, 1]})
    with pytest.raises(ValueError, match="twice"):
        write_qrels(tmp_path / "q", qrels)
    with pytest.raises(ValueError, match="'a\\\\tb'"):
        write_qrels(tmp_path / "q", qrels.assign(chunk_id=["a\tb", "c"]))


def test_malformed_files_name_the_line(tmp_path):
    path = tmp_path / "bad.trec"
    path.write_text("q Q0 a 1 0.5 t\n\nq Q0 b 2 0.4\n")
    with pytest.raises(InputError, match="line 3: expected 6 fields"):
        read_run(path)
    path.write_text("q Q0 a 1 0.5 t\nq Q0 b two 0.4 t\n")
    with pytest.raises(InputError, match="line 2: rank must be an integer"):
        read_run(path)
    path.write_text("q 0 a 2\nq 0 b x\n")
    with pytest.raises(InputError, match="line 2: relevance must be an integer"):
        read_qrels(path)


@pytest.mark.agreement
@pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaTypeSafetyWarning")
def test_ranx_reads_our_files_to_our_numbers(tmp_path):
    rankings = rankings_frame()
    qrels = qrels_frame(rankings)
    write_run(tmp_path / "run.trec", rankings, tag="hybrid")
    write_qrels(tmp_path / "qrels.trec", qrels)
    ks = (1, 5, 20)
    ours = per_question_metrics(read_run(tmp_path / "run.trec"), read_qrels(tmp_path / "qrels.trec"), ks=ks)
    pd.testing.assert_frame_equal(ours, per_question_metrics(rankings, qrels, ks=ks))

    run = Run.from_file(str(tmp_path / "run.trec"), kind="trec")
    names = {f"{m}@{k}": f"{r}@{k}{lvl}" for k in ks for m, r, lvl in
             (("recall", "recall", "-l2"), ("mrr", "mrr", "-l2"), ("ndcg", "ndcg_burges", ""))}
    evaluate(Qrels.from_file(str(tmp_path / "qrels.trec"), kind="trec"), run, list(names.values()),
             return_mean=False, threads=1)
    assert run.name == "hybrid"
    assert (ours["mrr@1"] > 0).any() and (ours["ndcg@20"] < 1).any()
    for ours_name, ranx_name in names.items():
        theirs = pd.Series(run.scores[ranx_name]).reindex(ours.index)
        np.testing.assert_allclose(ours[ours_name].to_numpy(), theirs.to_numpy(), rtol=0, atol=1e-9, err_msg=ours_name)
