"""A broader hybrid sweep than the paper's six pairings (``hybrid.pairings: auto``): the paper's six found inside it
and the configurations each selection chooses from counted."""

import pandas as pd

from pmrag.core.params import PAPER_PAIRINGS
from pmrag.evaluate.statistics import configuration_count, paper_pairings_within

SIX = [tuple(pair) for pair in PAPER_PAIRINGS]
MORE = [*SIX, ("raw_text_bm25_word", "raw_text_multivec_max")]


def test_the_papers_six_are_found_only_inside_a_broader_sweep():
    assert paper_pairings_within(MORE) == SIX
    assert paper_pairings_within(SIX) is None            # the paper's own sweep: nothing to set beside it
    assert paper_pairings_within(MORE[1:]) is None        # one of the six missing: no like-for-like comparison


def test_configurations_are_pairings_times_betas_of_one_fusion():
    sweep = pd.DataFrame([{"fusion": fusion, "bm25": a, "vector": b, "beta": beta, "question_id": q}
                          for fusion in ("minmax", "rrf") for a, b in MORE for beta in (0.0, 0.5, 1.0)
                          for q in ("q1", "q2")])
    assert configuration_count(sweep, MORE) == 7 * 3
    assert configuration_count(sweep, SIX) == 6 * 3
    assert configuration_count(sweep, ()) == 0
