"""The forms names and texts are compared in: folding, word boundaries, kinds."""

import random
import re
import sys
import unicodedata

from pmrag.present.private_text import (PrivateIndex, Words, accented_code_points, fold, fold_char, is_word_char,
                                        prepared)


def test_fold_joins_case_width_accents_and_kana_and_keeps_voicing():
    assert fold("ＴＡＲＯ") == fold("Taro") == "taro"
    assert fold("ﾕｲ") == fold("ユイ") == "ゆい"
    assert fold("José") == "jose" and fold("ガ") == "が" != fold("カ")
    assert fold("Straße") == "strasse"


def test_fold_of_a_text_is_the_fold_of_each_of_its_characters():
    # every character of the Basic Multilingual Plane, then texts where context could matter (final sigma, ß, kana
    # with voicing marks, stacked accents): folding a whole text must equal folding it character by character
    every = [chr(code) for code in range(0x10000) if not 0xD800 <= code <= 0xDFFF]
    texts = every + ["ΣΑΣ ΌΣΟΣ", "Straße", "José O'Brien", "ﾕｲ ＴＡＲＯ", "ｶﾞｯｺｳ", "A\u0301\u0327b", "ﬁ ǅ ẞ"]
    for text in texts:
        assert fold(text) == "".join(fold_char(c) for c in prepared(text)), ascii(text)


def _prepared_by_definition(value: str) -> str:
    return unicodedata.normalize("NFKC", re.sub("[\u0300-\u036f]", "", unicodedata.normalize("NFKD", value)))


def test_prepared_is_nfkc_with_latin_accents_dropped_with_or_without_the_shortcut():
    """``prepared`` takes NFKC alone for a text with no character that decomposes to an accent; that list, made from
    the Basic Multilingual Plane, holds every such character of all of Unicode, and texts that mix every kind of
    character (accented, voiced and half-width kana, ≠, Hangul, stacked marks, astral) are prepared as defined."""
    every = range(sys.maxunicode + 1)
    assert accented_code_points(0x10000) == accented_code_points(sys.maxunicode + 1)
    assert {0xE9, 0x1EE9, 0x212B, 0x2260, 0x301} <= set(accented_code_points(0x10000))
    pool = [chr(c) for c in every if not 0xD800 <= c <= 0xDFFF and unicodedata.category(chr(c)) != "Cn"]
    rng = random.Random(7)
    mixed = ["é", "Å", "≠", "ガ", "ｶﾞ", "한", "\u0301", "ǅ", "ﬁ", "𝐀", "ア", "a", " "]
    texts = ["".join(rng.choice(pool) for _ in range(rng.randint(1, 12))) for _ in range(20_000)]
    texts += ["".join(rng.choice(mixed) for _ in range(rng.randint(1, 12))) for _ in range(5_000)]
    for text in texts:
        assert prepared(text) == _prepared_by_definition(text), ascii(text)


def test_only_spaced_scripts_form_words():
    assert all(is_word_char(c) for c in "aZ9éЖλ") and not any(is_word_char(c) for c in "ゆ漢한ก_-")


def test_words_drop_separators_and_keep_every_boundary():
    words = Words("TaroTrip_2024 x")
    assert words.text == "tarotrip2024x"
    assert words.breaks == {4, 8, 12} and words.digit_breaks == set()     # 8: the separator, not letters/digits
    assert Words("taro2").digit_breaks == {4} and Words("HTMLParser").breaks == {4, 5}
    assert Words("ＡB").upper == (True, True) and Words("ß").text == "ss"
    cuts = Words("dm_saki2").cuts(digits_break=False)
    assert [p for p, cut in enumerate(cuts) if cut] == [0, 2, 7]


def test_senders_break_at_digits_and_source_names_do_not():
    index = PrivateIndex({"source name": {"saki"}, "sender": {"Ken"}})
    assert index.find("saki2") is None and index.find("saki_2") == "source name"
    assert index.find("ken2") == "sender" and index.find("kent") is None
