"""Run and Qrels (pmrag.evaluate.runs): validated once when made, accepted by every scoring function."""

import numpy as np
import pandas as pd
import pytest

from pmrag.evaluate import runs
from pmrag.evaluate.groups import evidence_groups, per_question_group_metrics
from pmrag.evaluate.metrics import per_question_metrics, per_question_table
from pmrag.evaluate.runs import Qrels, Run
from pmrag.evaluate.set_metrics import set_counts
from pmrag.evaluate.sweep import sweep_pairings

QRELS = pd.DataFrame({"question_id": ["q1", "q1", "q2"], "chunk_id": ["a", "b", "c"], "relevance": [2, 1, 2],
                      "note": ["x", "y", "z"]}, index=[7, 8, 9])
RUN = {"q1": ["b", "a", "z"], "q2": ["c"]}


def test_qrels_keep_their_columns_as_int8_without_changing_the_callers_frame():
    before = QRELS.copy()
    qrels = Qrels(QRELS)
    assert list(qrels.frame.columns) == ["question_id", "chunk_id", "relevance"]
    assert qrels.frame["relevance"].dtype == np.int8 and list(qrels.frame.index) == [0, 1, 2]
    assert len(qrels) == 3
    pd.testing.assert_frame_equal(QRELS, before)
    assert Qrels.of(qrels) is qrels
    with pytest.raises(AttributeError):
        qrels.frame = QRELS                                # frozen


@pytest.mark.parametrize("frame, error, message", [
    ([("q", "a", 2)], TypeError, "qrels must be a DataFrame, got list"),
    (QRELS.drop(columns="relevance"), ValueError, "qrels lacks column.s. relevance"),
    (QRELS.assign(chunk_id=["a", None, "c"]), ValueError, "qrels has missing question or chunk ids"),
    (QRELS.assign(relevance=[2, 3, 2]), ValueError, r"relevance must be one of \(0, 1, 2\) \(integers\); found \[3\]"),
    (QRELS.assign(relevance=[2.0, 1.0, 2.0]), ValueError, "relevance must be one of"),
    (pd.concat([QRELS, QRELS.iloc[:1]]), ValueError, "qrels has a duplicate judgment: {'question_id': 'q1', "
                                                    "'chunk_id': 'a'}"),
])
def test_bad_qrels_are_one_line_errors(frame, error, message):
    with pytest.raises(error, match=message) as raised:
        Qrels(frame)
    assert "\n" not in str(raised.value)


def test_runs_from_a_mapping_or_a_frame():
    run = Run(RUN)
    assert run.frame.to_dict("list") == {"question_id": ["q1", "q1", "q1", "q2"], "chunk_id": ["b", "a", "z", "c"],
                                         "rank": [1, 2, 3, 1]}
    frame = run.frame.assign(score=[3.0, 2.0, 1.0, 1.0])
    assert list(Run(frame).frame.columns) == ["question_id", "chunk_id", "rank"]
    assert Run(frame).frame["rank"].dtype == np.int64 and len(Run(frame)) == 4
    assert Run.of(run) is run
    assert "score" in frame.columns                        # the caller's frame is left as it was


@pytest.mark.parametrize("value, error, message", [
    (["b", "a"], TypeError, "run must be a mapping question_id -> ranked chunk ids or a DataFrame, got list"),
    (pd.DataFrame({"question_id": ["q"], "chunk_id": ["g"]}), ValueError, "run lacks column.s. rank"),
    (pd.DataFrame({"question_id": ["q", "q"], "chunk_id": ["g", "h"], "rank": [1, 1]}), ValueError,
     "run has a duplicate rank"),
    (pd.DataFrame({"question_id": ["q", "q"], "chunk_id": ["g", "g"], "rank": [1, 2]}), ValueError,
     "run has a duplicate chunk"),
    (pd.DataFrame({"question_id": ["q"], "chunk_id": ["g"], "rank": [0]}), ValueError, "integers ≥ 1"),
    (pd.DataFrame({"question_id": ["q"], "chunk_id": ["g"], "rank": [1.5]}), ValueError, "integers ≥ 1"),
    (pd.DataFrame({"question_id": [None], "chunk_id": ["g"], "rank": [1]}), ValueError, "missing question or chunk"),
    ({"q": ["g", "g"]}, ValueError, "run has a duplicate chunk"),
])
def test_bad_runs_are_one_line_errors(value, error, message):
    with pytest.raises(error, match=message) as raised:
        Run(value)
    assert "\n" not in str(raised.value)


def reference_run_error(frame: pd.DataFrame) -> str | None:
    """What a run's checks say by pandas' own ``isna`` and ``duplicated`` (keep the first; name the first repeat)."""
    if frame[["question_id", "chunk_id"]].isna().any().any():
        return "run has missing question or chunk ids"
    for keys, entity in ((["question_id", "rank"], "rank"), (["question_id", "chunk_id"], "chunk")):
        repeated = frame.duplicated(keys)
        if repeated.any():
            row = frame.loc[repeated.idxmax(), keys].tolist()
            return f"run has a duplicate {entity}: {dict(zip(keys, row))}"
    return None


@pytest.mark.parametrize("dtype", [object, "string"])
def test_a_runs_missing_ids_and_repeats_are_found_as_pandas_finds_them(dtype):
    """Random small runs with repeated ranks, repeated chunks and missing ids (None, NaN): Run accepts exactly the
    ones pandas' ``isna``/``duplicated`` find clean, and names the same first repeat."""
    rng = np.random.default_rng(7)
    verdicts = set()
    for _ in range(400):
        n = int(rng.integers(1, 12))
        ids = np.array(["q1", "q2", "q10", "q"], dtype=object)[rng.integers(0, 2 + int(rng.integers(0, 3)), n)]
        chunks = np.array([f"c{i}" for i in range(40)], dtype=object)[rng.integers(0, int(rng.integers(2, 40)), n)]
        if rng.random() < 0.1:
            (ids if rng.random() < 0.5 else chunks)[int(rng.integers(0, n))] = None if rng.random() < 0.5 else np.nan
        frame = pd.DataFrame({"question_id": ids, "chunk_id": chunks,
                              "rank": rng.integers(1, int(rng.integers(2, 30)), n)}).astype(
            {"question_id": dtype, "chunk_id": dtype})
        expected = reference_run_error(frame)
        if expected is None:
            assert len(Run(frame)) == n
        else:
            with pytest.raises(ValueError) as raised:
                Run(frame)
            assert str(raised.value) == expected
        verdicts.add(expected.split(":")[0] if expected else "valid")
    assert verdicts == {"valid", "run has missing question or chunk ids", "run has a duplicate rank",
                        "run has a duplicate chunk"}


def test_scoring_functions_take_the_values_or_what_they_are_made_from():
    expected = per_question_metrics(RUN, QRELS, ks=(1, 2))
    pd.testing.assert_frame_equal(per_question_metrics(Run(RUN), Qrels(QRELS), ks=(1, 2)), expected)
    counts = set_counts(pd.DataFrame({"retriever": "r", "question_id": ["q1"], "chunk_id": ["a"]}), Qrels(QRELS))
    assert counts["n_hit"].tolist() == [1, 0]
    evidence = pd.DataFrame({"question_id": ["q1", "q2"], "message_id": ["m1", "m2"], "relevance": [2, 2]})
    chunk_messages = pd.DataFrame({"chunk_id": ["a", "c"], "position": [0, 0], "message_id": ["m1", "m2"]})
    groups = evidence_groups(Qrels(QRELS), evidence, chunk_messages)
    pd.testing.assert_frame_equal(per_question_group_metrics(Run(RUN), Qrels(QRELS), groups),
                                  per_question_group_metrics(RUN, QRELS, groups))


def test_the_qrels_are_validated_once_for_many_runs(monkeypatch):
    calls = []
    original = runs._validated_qrels
    monkeypatch.setattr(runs, "_validated_qrels", lambda frame: calls.append(1) or original(frame))
    types = pd.Series({"q1": "a", "q2": "b"})
    table = per_question_table({"x": RUN, "y": {"q1": ["a"]}, "z": {"q2": ["c"]}}, QRELS, types, ks=(5,))
    assert len(calls) == 1 and table["retriever"].unique().tolist() == ["x", "y", "z"]
    calls.clear()
    ranking = {name: pd.DataFrame({"question_id": ["q1", "q2"], "chunk_id": ["a", "c"], "rank": [1, 1],
                                   "score": [1.0, 0.5]}) for name in ("summary_bm25", "summary_vector", "raw_text_bm25")}
    sweep_pairings(ranking, QRELS, [("summary_bm25", "summary_vector"), ("raw_text_bm25", "summary_vector")], [0.5])
    assert len(calls) == 1


def test_top_positions_are_the_rows_ranks_and_chunk_indices_of_the_top_entries():
    import pandas as pd
    import pytest

    from pmrag.evaluate.runs import Run

    run = Run({"q2": ["c", "a", "z"], "q1": ["b"]})
    row, slot, chunk = run.top_positions(2, pd.Index(["q1", "q2"]), pd.Index(["a", "b", "c"]), "is unknown")
    got = sorted(zip(row.tolist(), slot.tolist(), chunk.tolist()))
    assert got == [(0, 0, 1), (1, 0, 2), (1, 1, 0)]          # z at rank 3 is cut; an unknown chunk would be -1
    row, slot, chunk = run.top_positions(3, pd.Index(["q1", "q2"]), pd.Index(["a", "b", "c"]), "is unknown")
    assert sorted(chunk.tolist()) == [-1, 0, 1, 2]
    with pytest.raises(ValueError, match="the run ranks question 'q2', which is unknown"):
        run.top_positions(1, pd.Index(["q1"]), pd.Index(["a"]), "is unknown")
    with pytest.raises(ValueError, match="depth must be a positive integer"):
        run.top_positions(0, pd.Index(["q1"]), pd.Index(["a"]), "is unknown")
