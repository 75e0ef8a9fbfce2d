"""Text in messages (pmrag.core.text): values quoted shortened, texts clipped to one line, whitespace runs squashed."""

import pytest

from pmrag.core.text import clip, one_line, shown


def test_shown_is_the_repr_cut_to_about_sixty_characters():
    assert shown("short") == "'short'" and shown(0.35) == "0.35" and shown(None) == "None"
    long = shown("x" * 500)
    assert len(long) <= 60 + 5 and long.startswith("'xxx") and "..." in long
    assert shown(10 ** 59) == repr(10 ** 59) and shown(10 ** 60) == "1" + "0" * 27 + "..." + "0" * 29   # 60 digits
    assert shown(list(range(10))) == "[0, 1, 2, 3, ...]"                              # 4 items
    assert shown([[[[1]]]]) == "[[[...]]]"                                             # 2 levels


def test_shown_names_a_huge_integer_by_its_size_instead_of_converting_it():
    assert shown(1 << 5000) == "<integer of 5001 bits>"
    assert shown(True) == "True"


def test_clip_keeps_one_line_and_cuts_with_an_ellipsis():
    assert clip("key") == "key"
    assert clip("a\nb\u2028c") == "a\\nb\\u2028c"
    assert clip("x" * 81) == "x" * 80 + "…" and clip("x" * 80) == "x" * 80
    assert clip(ValueError("bad thing"), 3) == "bad…"


@pytest.mark.parametrize("text, expected", [("  a \n\t b  ", "a b"), ("", ""), ("a\u3000b", "a b"), ("one", "one")])
def test_one_line_squashes_every_whitespace_run(text, expected):
    assert one_line(text) == expected
