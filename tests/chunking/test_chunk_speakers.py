"""Each chunk's distinct senders in order of first appearance (the failure inspector's speakers)."""

import numpy as np
import pandas as pd
import pytest

from pmrag.chunking.stats import chunk_speakers


def test_senders_in_order_of_first_appearance_chunks_in_id_order():
    members = pd.DataFrame({"chunk_id": ["c2", "c1", "c1", "c1", "c2", "c2"], "position": [1, 2, 0, 1, 0, 2],
                            "message_id": ["m4", "m3", "m1", "m2", "m5", "m6"]})
    messages = pd.DataFrame({"message_id": ["m1", "m2", "m3", "m4", "m5", "m6"],
                             "sender": ["B", "A", "B", "A", "C", "C"]})
    speakers = chunk_speakers(members, messages)
    assert speakers.to_dict() == {"c1": "B, A", "c2": "C, A"}
    assert speakers.index.name == "chunk_id" and speakers.name == "speakers"
    assert chunk_speakers(members.iloc[:0], messages).empty


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_equals_a_group_by_join(seed):
    rng = np.random.default_rng(seed)
    n = 500
    members = pd.DataFrame({"chunk_id": rng.choice([f"c{i:03d}" for i in range(60)], size=n),
                            "position": rng.permutation(n), "message_id": [f"m{i}" for i in rng.integers(0, 300, n)]})
    messages = pd.DataFrame({"message_id": [f"m{i}" for i in range(300)],
                             "sender": rng.choice(["ゆい", "Mai", "Sota", "x"], size=300)})
    rows = members.sort_values(["chunk_id", "position"]).merge(messages, on="message_id", how="left", sort=False)
    expected = rows.drop_duplicates(["chunk_id", "sender"]).groupby("chunk_id", sort=True)["sender"].agg(", ".join)
    pd.testing.assert_series_equal(chunk_speakers(members, messages), expected.rename("speakers"))
