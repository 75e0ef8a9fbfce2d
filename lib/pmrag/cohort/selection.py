"""The hybrid's selection per participant or once for the cohort, scored leave-one-participant-out.

Each participant's study selects its own hybrid on its own questions (§6.2): an in-sample choice, optimistic for
that participant.  A cohort can instead choose one configuration for everyone.  To score that choice honestly,
each participant h is held out in turn: the configuration is chosen on the other participants' sweeps and scored
on h's questions (leave-one-participant-out).  The rule is the paper's, unchanged
(:func:`pmrag.evaluate.sweep.best_per_pairing` then :func:`~pmrag.evaluate.sweep.select_overall`), applied to
macro metrics over participants: a configuration's metric is the mean over the training participants of their
macro (per-question mean) values, so every participant counts once, however many questions it has.

``sweeps`` is long: ``participant`` and a study's sweep table (``fusion, bm25, vector, beta, question_id`` and
the three metrics at 5) per participant; only configurations swept for every participant are candidates.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from pmrag.evaluate.metric_names import TABLE_METRICS
from pmrag.evaluate.sweep import CONFIGURATION, best_per_pairing, hybrid_ids, macro_by_configuration, select_overall

METRICS = tuple(map(str, TABLE_METRICS))


def participant_macros(sweeps: pd.DataFrame) -> pd.DataFrame:
    """Each participant's macro metrics of every configuration (``participant`` + :func:`macro_by_configuration`)."""
    frames = [macro_by_configuration(rows.drop(columns="participant")).assign(participant=participant)
              for participant, rows in sweeps.groupby("participant", sort=False)]
    return pd.concat(frames, ignore_index=True)


def cohort_choice(macros: pd.DataFrame, participants: Sequence[str], pairing_order) -> pd.Series:
    """The paper's selected hybrid on the mean over ``participants`` of their macro metrics (configurations swept
    for all of them); a row with ``fusion, bm25, vector, beta`` and the metrics."""
    rows = macros[macros["participant"].isin(list(participants))]
    pooled = rows.groupby(list(CONFIGURATION), sort=False).agg(
        **{m: (m, "mean") for m in METRICS}, swept=("participant", "nunique")).reset_index()
    pooled = pooled[pooled["swept"] == len(set(participants))].drop(columns="swept")
    return select_overall(best_per_pairing(pooled), pairing_order)


def leave_one_participant_out(sweeps: pd.DataFrame, own: dict[str, str], pairing_order) -> pd.DataFrame:
    """Per participant: its own selected hybrid and that hybrid's macro metrics on its questions (in-sample), the
    hybrid chosen on the other participants and its metrics on this one's questions (held out), and the hybrid
    chosen once on every participant.

    Parameters
    ----------
    sweeps : the participants' sweep tables with a ``participant`` column (see the module docstring).
    own : each participant's own selected hybrid, as its study names it (``hybrid:a+b@0.50``).
    pairing_order : the pairings in the study's order (the selection's last tie-break).

    Returns
    -------
    ``participant, own_hybrid, own_<metric>…, lopo_hybrid, lopo_<metric>…, cohort_hybrid, n_questions,
    n_participants`` (n_participants: the participants the held-out choice was made on).
    """
    macros = participant_macros(sweeps)
    participants = list(dict.fromkeys(sweeps["participant"]))
    if len(participants) < 2:
        raise ValueError("leave-one-participant-out needs two participants or more")
    [cohort_hybrid] = hybrid_ids(cohort_choice(macros, participants, pairing_order).to_frame().T)
    rows = []
    for participant in participants:
        mine = macros[macros["participant"] == participant]
        chosen = cohort_choice(macros, [p for p in participants if p != participant], pairing_order)
        [lopo] = hybrid_ids(chosen.to_frame().T)
        held_out = mine[_same_configuration(mine, chosen)].iloc[0]
        own_row = mine[[str(h) == own[participant] for h in hybrid_ids(mine)]].iloc[0]
        rows.append({"participant": participant, "own_hybrid": own[participant],
                     **{f"own_{m}": own_row[m] for m in METRICS}, "lopo_hybrid": str(lopo),
                     **{f"lopo_{m}": held_out[m] for m in METRICS}, "cohort_hybrid": str(cohort_hybrid),
                     "n_questions": sweeps.loc[sweeps["participant"] == participant, "question_id"].nunique(),
                     "n_participants": len(participants) - 1})
    return pd.DataFrame(rows)


def _same_configuration(table: pd.DataFrame, row: pd.Series) -> pd.Series:
    return ((table["fusion"] == row["fusion"]) & (table["bm25"] == row["bm25"]) & (table["vector"] == row["vector"])
            & (table["beta"] == row["beta"]))
