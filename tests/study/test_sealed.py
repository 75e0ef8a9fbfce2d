"""Sealed stage results: written by streaming the pickle through the HMAC, in the format :func:`seal` defines."""

import io
import pickle

import numpy as np
import pandas as pd
import pytest

from pmrag.study import sealed


@pytest.fixture(autouse=True)
def own_key(tmp_path, monkeypatch):
    monkeypatch.setenv(sealed.KEY_ENV, str(tmp_path / "stage.key"))


def _value():
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"chunk_id": [f"c{i}" for i in range(50_000)], "score": rng.random(50_000),
                          "text": ["本文 " * (i % 7) for i in range(50_000)]})
    return ("key", {"frame": frame, "matrix": rng.random((300, 64)).astype(np.float32)})


def test_a_streamed_seal_is_the_seal_of_the_pickle_and_unseals_to_the_value():
    value = _value()
    handle = io.BytesIO(b"")
    sealed.dump_sealed(value, handle)
    written = handle.getvalue()
    assert written == sealed.seal(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    payload = sealed.unseal(written)
    assert isinstance(payload, memoryview) and len(payload) == len(written) - len(sealed.MAGIC) - sealed.TAG_BYTES
    key, loaded = pickle.loads(payload)
    assert key == "key"
    pd.testing.assert_frame_equal(loaded["frame"], value[1]["frame"])
    assert np.array_equal(loaded["matrix"], value[1]["matrix"])


def test_an_altered_byte_or_another_key_is_refused(tmp_path, monkeypatch):
    handle = io.BytesIO()
    sealed.dump_sealed(_value(), handle)
    written = bytearray(handle.getvalue())
    assert sealed.unseal(bytes(written)) is not None
    written[-100] ^= 1
    assert sealed.unseal(bytes(written)) is None
    written[-100] ^= 1
    sealed._secret.cache_clear()
    monkeypatch.setenv(sealed.KEY_ENV, str(tmp_path / "someone_else.key"))
    assert sealed.unseal(bytes(written)) is None
    sealed._secret.cache_clear()
