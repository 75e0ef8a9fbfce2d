"""The hybrid chosen once for the cohort, scored leave-one-participant-out: the held-out participant never takes
part in its own choice, and the choice is the paper's rule on macro metrics over the other participants."""

import itertools

import numpy as np
import pandas as pd
import pytest

from pmrag.cohort.selection import cohort_choice, leave_one_participant_out, participant_macros

PAIRINGS = [("summary_bm25", "summary_vector"), ("raw_text_bm25", "summary_vector")]
BETAS = (0.25, 0.5, 0.75)


def sweeps(levels: dict[str, dict[tuple[int, float], float]], n_questions=(3, 4, 5), seed=0) -> pd.DataFrame:
    """A sweep per participant: Recall@5 of configuration (pairing index, β) is ``levels[p][(i, β)]`` on every
    question (MRR and nDCG random), so each participant's macro Recall@5 is that level."""
    rng = np.random.default_rng(seed)
    rows = []
    for (participant, level), n in zip(levels.items(), n_questions):
        for (i, (bm25, vector)), beta, q in itertools.product(enumerate(PAIRINGS), BETAS, range(n)):
            rows.append({"participant": participant, "fusion": "minmax", "bm25": bm25, "vector": vector, "beta": beta,
                         "question_id": f"q{q}", "recall@5": level[(i, beta)], "mrr@5": rng.random(),
                         "ndcg@5": rng.random()})
    return pd.DataFrame(rows)


def level(best: tuple[int, float], value: float = 0.9, rest: float = 0.2) -> dict:
    return {(i, beta): (value if (i, beta) == best else rest) for i in range(2) for beta in BETAS}


def test_the_cohort_choice_is_the_best_mean_over_participants():
    table = sweeps({"a": level((0, 0.25), 0.9), "b": level((1, 0.75), 0.6), "c": level((1, 0.75), 0.6)})
    chosen = cohort_choice(participant_macros(table), ["a", "b", "c"], PAIRINGS)
    assert (chosen["bm25"], chosen["vector"], chosen["beta"]) == ("raw_text_bm25", "summary_vector", 0.75)


def test_the_held_out_participant_never_takes_part_in_its_own_choice():
    # a alone prefers (0, 0.25); b and c prefer (1, 0.75): with a held out the choice is b's and c's, and with
    # b held out a and c tie in count but a's 0.9 beats c's 0.6 on the mean
    table = sweeps({"a": level((0, 0.25), 0.99), "b": level((1, 0.75), 0.6), "c": level((1, 0.75), 0.6)})
    own = {"a": "hybrid:summary_bm25+summary_vector@0.25", "b": "hybrid:raw_text_bm25+summary_vector@0.75",
           "c": "hybrid:raw_text_bm25+summary_vector@0.75"}
    found = leave_one_participant_out(table, own, PAIRINGS).set_index("participant")
    assert found.loc["a", "lopo_hybrid"] == "hybrid:raw_text_bm25+summary_vector@0.75"
    assert found.loc["a", "lopo_recall@5"] == pytest.approx(0.2)     # a's recall at b's and c's choice
    assert found.loc["a", "own_recall@5"] == pytest.approx(0.99)     # in-sample, optimistic
    assert found.loc["b", "lopo_hybrid"] == "hybrid:summary_bm25+summary_vector@0.25"   # (0.99 + 0.2) / 2 > (0.2 + 0.6) / 2
    assert found.loc["b", "lopo_recall@5"] == pytest.approx(0.2)
    assert set(found["cohort_hybrid"]) == {"hybrid:raw_text_bm25+summary_vector@0.75"}   # (0.2+.6+.6)/3 > (.99+.2+.2)/3
    assert found["n_questions"].tolist() == [3, 4, 5] and set(found["n_participants"]) == {2}


def test_the_held_out_metrics_are_the_participants_own_macro_of_that_configuration():
    table = sweeps({"a": level((0, 0.5)), "b": level((0, 0.5)), "c": level((1, 0.25))}, seed=3)
    own = {p: "hybrid:summary_bm25+summary_vector@0.50" for p in "abc"}
    found = leave_one_participant_out(table, own, PAIRINGS).set_index("participant")
    rows = table[(table["participant"] == "c") & (table["bm25"] == "summary_bm25") & (table["beta"] == 0.5)]
    assert found.loc["c", "lopo_ndcg@5"] == pytest.approx(rows["ndcg@5"].mean(), abs=1e-12)
    assert found.loc["c", "lopo_mrr@5"] == pytest.approx(rows["mrr@5"].mean(), abs=1e-12)


def test_one_participant_cannot_be_left_out():
    with pytest.raises(ValueError, match="two participants or more"):
        leave_one_participant_out(sweeps({"a": level((0, 0.5))}), {"a": "x"}, PAIRINGS)
