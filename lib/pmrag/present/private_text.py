"""Finding a study's private strings (§9.2: sources, senders, question and message texts) inside a public cell,
whatever form they take there.

Both sides are **folded** the same way before they are compared:

* width and compatibility forms by Unicode NFKC (``ＴＡＲＯ`` → ``TARO``, half-width ``ﾕｲ`` → ``ユイ``);
* Latin accents dropped (``José`` → ``Jose``; Japanese voicing marks are kept: ``が`` is not ``か``);
* case by ``str.casefold`` (``Taro`` = ``taro`` = ``TARO``);
* script, where the correspondence is one to one: katakana as hiragana (``ユイ`` = ``ゆい``).  Nothing else is
  transliterated: romaji (``yui``) has several spellings of one kana name (Hepburn, Kunrei, long vowels), so
  matching it would be guesswork; it is not done.

**Names** (sources, senders) are matched as whole words of the cell.  In a cell, words end at ``_``, ``-``,
``.``, ``・``, apostrophes and spaces (all dropped, so ``taro_yamada``, ``TaroYamada`` and ``Taro Yamada`` are
one form, and so are ``O'Brien`` and ``obrien``), at camelCase boundaries (``TaroTrip``, ``HTMLParser``,
``TAROtrip``) and, for senders, where letters meet digits (``taro2``).  Source names are identifiers that
chats number (``group1``, ``group12``), so a digit continues a source name (``dm_saki2`` is another chat than
``dm_saki``).  Only Latin, Greek and Cyrillic letters and digits form words; scripts written without spaces
(Japanese, Chinese, Korean, Thai …) have no word boundaries, so a name written in them counts wherever it
occurs (``ゆいの誕生日``).  A name of one or two Latin letters (``A``, ``Ed``) also keeps its case: in lower
case such names are the letters of ordinary identifiers (``method_a``, ``ci_low``) and would refuse the
export's own columns.

**Texts** (question and message texts) are folded the same way but keep their separators, and match as whole
words in the Latin sense: not inside a longer run of letters and digits (``text`` is not in ``contextual``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from functools import lru_cache

NAME_KINDS = ("source name", "sender")
SEPARATORS = frozenset("_-.・·'’ \t\n\r\f\v\u3000")
SHORT_NAME = 2   # Latin names up to this many characters keep their case
_KANA = {code: code - 0x60 for code in range(0x30A1, 0x30F7)} | {0x30FD: 0x309D, 0x30FE: 0x309E}
_KATAKANA = re.compile("[" + "".join(map(chr, sorted(_KANA))) + "]")   # what _KANA maps
_ACCENTS = re.compile("[\u0300-\u036f]")   # combining diacritical marks: Latin accents after NFKD


def is_word_char(ch: str) -> bool:
    """A letter or digit of a script that separates words with spaces (Latin, Greek, Cyrillic)."""
    return ch.isalnum() and ord(ch) < 0x0590


def prepared(value: str) -> str:
    """NFKC with Latin accents dropped; case kept (camelCase is read from it).

    A text with no character whose compatibility decomposition holds one of those accents (most chat text) is its
    NFKC form alone: NFKD of a text is its characters' decompositions reordered, so it holds no accent to drop, and
    NFKC of the NFKD form is the NFKC form."""
    if _accented().search(value) is None:
        return unicodedata.normalize("NFKC", value)
    return unicodedata.normalize("NFKC", _ACCENTS.sub("", unicodedata.normalize("NFKD", value)))


@lru_cache(maxsize=1)
def _accented() -> re.Pattern:
    """The characters whose NFKD holds a combining mark of ``_ACCENTS`` (é, ǘ, Å, ≠, the marks themselves …), as
    one character class.  Every such character of this Python's Unicode data is in the Basic Multilingual Plane (a
    test checks all of Unicode)."""
    return re.compile("[" + "".join(re.escape(chr(code)) for code in accented_code_points(0x10000)) + "]")


def accented_code_points(stop: int) -> list[int]:
    """The code points below ``stop`` whose NFKD holds a combining mark of ``_ACCENTS``."""
    found = []
    for code in range(stop):
        ch = chr(code)
        if (unicodedata.decomposition(ch) or _ACCENTS.match(ch)) and _ACCENTS.search(unicodedata.normalize("NFKD", ch)):
            found.append(code)
    return found


def fold_char(ch: str) -> str:
    """One prepared character case-folded, katakana as hiragana (``ß`` → ``ss``: may grow)."""
    return ch.casefold().translate(_KANA)


def fold(value: str) -> str:
    """``value`` folded (module docstring): the form texts are compared in.  The same as :func:`fold_char` of each
    character joined (``str.casefold`` maps each character on its own, with no context rule)."""
    folded = prepared(value).casefold()
    return folded.translate(_KANA) if _KATAKANA.search(folded) else folded


class Words:
    """A cell (or a name) in the form names are compared in: folded, separators dropped, word boundaries kept.

    ``text``: the folded characters without separators; ``upper``: whether each came from an upper-case
    character; ``breaks``: positions where a word ends (a separator, a camelCase boundary); ``digit_breaks``:
    positions where letters meet digits.
    """

    __slots__ = ("text", "upper", "breaks", "digit_breaks")

    def __init__(self, value: str):
        chars = prepared(value)
        text: list[str] = []
        upper: list[bool] = []
        breaks, digit_breaks = set(), set()
        previous = ""
        for k, ch in enumerate(chars):
            if ch in SEPARATORS:
                breaks.add(len(text))
                previous = ""
                continue
            if previous and is_word_char(previous) and is_word_char(ch):
                after = chars[k + 1] if k + 1 < len(chars) else ""
                before = chars[k - 2] if k >= 2 else ""
                if (previous.islower() and ch.isupper()
                        or previous.isupper() and ch.isupper() and after.islower()):   # taroTrip, HTMLParser
                    breaks.add(len(text))
                if previous.isupper() and ch.islower() and before.isupper():           # TAROtrip
                    breaks.add(len(text))
                if previous.isdigit() != ch.isdigit():
                    digit_breaks.add(len(text))
            folded = fold_char(ch)
            text.extend(folded)
            upper.extend([ch.isupper()] * len(folded))
            previous = ch
        self.text = "".join(text)
        self.upper = tuple(upper)
        self.breaks = frozenset(breaks)
        self.digit_breaks = frozenset(digit_breaks)

    def cuts(self, digits_break: bool) -> list[bool]:
        """``cuts[p]``: a word may start or end at position ``p`` (``len(text) + 1`` entries)."""
        text, n = self.text, len(self.text)
        return [p == 0 or p == n or p in self.breaks or (digits_break and p in self.digit_breaks)
                or not (is_word_char(text[p - 1]) and is_word_char(text[p])) for p in range(n + 1)]


def _is_short_latin(folded: str) -> bool:
    return len(folded) <= SHORT_NAME and all(is_word_char(c) for c in folded)


class PrivateIndex:
    """Finds any private string inside a (short) public cell, in any of the forms the module docstring lists.

    Names and texts are looked up by every substring of the cell that starts and ends where a word may (a
    cell of length L costs at most L × (longest private string) lookups, whatever the corpus size).

    ``common_words``: one-word message texts that are also words of the export's own wording (``only``,
    ``Both``) identify nobody and would make every export refuse; they are left out.  Any longer text, any
    name and any question text is always checked.
    """

    def __init__(self, private: Mapping[str, set[str]], common_words: Iterable[str] = ()):
        common = {fold(word) for word in common_words}
        self.names: list[tuple[str, dict[str, tuple[bool, ...] | None]]] = []   # kind, folded name → case or None
        self.texts: dict[str, str] = {}                                        # folded text → kind
        for kind, strings in private.items():
            if kind in NAME_KINDS:
                names: dict[str, tuple[bool, ...] | None] = {}
                for name in sorted(s for s in strings if s):
                    words = Words(name)
                    if words.text:
                        names[words.text] = words.upper if _is_short_latin(words.text) else None
                if names:
                    self.names.append((kind, names))
                continue
            for text in sorted(s for s in strings if s):
                folded = fold(text)
                if not folded.strip():
                    continue
                if kind == "message text" and common and \
                        (folded if text == text.strip() else fold(text.strip())) in common:
                    continue
                self.texts.setdefault(folded, kind)
        self.shortest = min(map(len, self.texts), default=0)
        self.longest = max(map(len, self.texts), default=0)

    def find(self, value: str) -> str | None:
        """The kind of the first private string found in ``value`` (``"sender"``, ``"message text"`` …), else
        ``None``."""
        if self.names:
            words = Words(value)
            for kind, names in self.names:
                if _find_name(words, names, digits_break=kind == "sender"):
                    return kind
        if self.texts:
            return self._find_text(fold(value))
        return None

    def _find_text(self, folded: str) -> str | None:
        n = len(folded)
        for start in range(n):
            for end in range(start + self.shortest, min(n, start + self.longest) + 1):
                kind = self.texts.get(folded[start:end])
                if kind and _whole_word(folded, start, end):
                    return kind
        return None


def _find_name(words: Words, names: Mapping[str, tuple[bool, ...] | None], digits_break: bool) -> bool:
    text, upper = words.text, words.upper
    cuts = words.cuts(digits_break)
    lengths = sorted({len(name) for name in names})
    for start in range(len(text)):
        if not cuts[start]:
            continue
        for length in lengths:
            end = start + length
            if end > len(text):
                break
            if cuts[end] and text[start:end] in names:
                case = names[text[start:end]]
                if case is None or case == upper[start:end]:
                    return True
    return False


def _whole_word(value: str, start: int, end: int) -> bool:
    """``value[start:end]`` is not cut out of a longer run of Latin letters and digits."""
    before = start > 0 and is_word_char(value[start]) and is_word_char(value[start - 1])
    after = end < len(value) and is_word_char(value[end - 1]) and is_word_char(value[end])
    return not (before or after)
