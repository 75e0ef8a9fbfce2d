"""A broader hybrid sweep than the paper's six pairings (``hybrid.pairings: auto``): found beside the paper's own
selection, the configurations each selection chooses from counted, and the paper's selection and Table 4 kept to
the paper's six."""

import pandas as pd

from pmrag.core.params import PAPER_PAIRINGS
from pmrag.evaluate.statistics import broader_pairings, configuration_count

SIX = [tuple(pair) for pair in PAPER_PAIRINGS]
MORE = [*SIX, ("raw_text_bm25_word", "raw_text_multivec_max")]


def test_a_broader_sweep_is_found_only_beyond_the_papers_selection():
    assert broader_pairings(SIX, MORE) == MORE
    assert broader_pairings(SIX, SIX) is None            # the paper's own sweep: nothing to set beside it
    assert broader_pairings(SIX, None) is None
    assert broader_pairings(SIX[:2], MORE[1:]) is None    # not a superset: no like-for-like comparison


def test_configurations_are_pairings_times_betas_of_one_fusion():
    sweep = pd.DataFrame([{"fusion": fusion, "bm25": a, "vector": b, "beta": beta, "question_id": q}
                          for fusion in ("minmax", "rrf") for a, b in MORE for beta in (0.0, 0.5, 1.0)
                          for q in ("q1", "q2")])
    assert configuration_count(sweep, MORE) == 7 * 3
    assert configuration_count(sweep, SIX) == 6 * 3
    assert configuration_count(sweep, ()) == 0


def test_the_papers_selection_and_table_4_keep_to_its_pairings_the_broader_winner_beside():
    import numpy as np

    from pmrag.core.names import RetrieverId
    from pmrag.evaluate.sweep import sweep_pairings, select_hybrids
    from pmrag.evaluate.runs import Qrels

    rng = np.random.default_rng(3)
    questions = [f"q{i}" for i in range(6)]
    chunks = [f"c{i:02d}" for i in range(12)]
    names = ["raw_text_bm25", "summary_bm25", "raw_text_vector"]

    def ranking(seed):
        order = np.random.default_rng(seed).permutation(chunks)
        return pd.DataFrame([{"question_id": q, "chunk_id": c, "rank": r + 1, "score": float(12 - r)}
                             for q in questions for r, c in enumerate(order)])

    rankings = {name: ranking(i) for i, name in enumerate(names)}
    qrels = Qrels.of(pd.DataFrame({"question_id": questions, "chunk_id": rng.choice(chunks, 6), "relevance": 2}))
    paper, more = [("raw_text_bm25", "raw_text_vector")], [("raw_text_bm25", "raw_text_vector"), ("summary_bm25", "raw_text_vector")]
    swept = sweep_pairings(rankings, qrels, more, [0.0, 0.5, 1.0])
    types = pd.Series("t", index=questions)
    ids = [(RetrieverId.parse(a), RetrieverId.parse(b)) for a, b in paper]
    rankings = {RetrieverId.parse(name): ranking for name, ranking in rankings.items()}
    chosen = select_hybrids(swept, rankings, qrels, types, ids, _hybrid("raw_text_bm25", "raw_text_vector"), (5,))
    assert list(zip(chosen.best["bm25"], chosen.best["vector"])) == paper
    assert (str(chosen.selected.first), str(chosen.selected.second)) == paper[0]
    assert set(zip(chosen.broader["bm25"], chosen.broader["vector"])) == set(more)
    assert chosen.broader_selected is not None
    alone = select_hybrids(swept, rankings, qrels, types, [tuple(map(RetrieverId.parse, p)) for p in more],
                           _hybrid("raw_text_bm25", "raw_text_vector"), (5,))
    assert alone.broader is None and alone.broader_selected is None and alone.selected == chosen.broader_selected


def _hybrid(first, second):
    from pmrag.core.names import HybridId

    return HybridId.of(first, second, 0.5, "minmax")
