"""The §5.1 regex tokenizer: every clause of the paper and every edge choice of bm25_tokenizer_spec.txt."""

import pytest

from pmrag.retrieve.tokenizer import (
    DEFAULT_SPEC_PATH,
    TokenizerSpec,
    default_spec,
    parse_spec,
    tokenize,
    tokenize_many,
    with_latin_letters,
)


# --- lowercasing, no Unicode normalization -------------------------------------------------------


def test_lowercases_ascii():
    assert tokenize("Hello WORLD iPhone15") == ["hello", "world", "iphone15"]


def test_no_nfkc_full_width_ascii_is_not_alphanumeric():
    assert tokenize("ＵＳＢ") == []
    assert tokenize("２０２４年 ＰＶ") == []
    assert tokenize("USB") == ["usb"]


def test_no_nfkc_half_width_katakana_is_not_katakana():
    assert tokenize("ﾃｽﾄ ｷﾀ━(ﾟ∀ﾟ)━") == []
    assert tokenize("テスト") == ["テスト"]


def test_no_nfkc_compatibility_kanji_kept_as_is():
    assert tokenize("山﨑さん") == ["山﨑"]
    assert tokenize("山﨑") != tokenize("山崎")


def test_lowercasing_without_normalization_quirk_kelvin_sign():
    assert tokenize("\u212aelvin") == ["kelvin"]


# --- alphanumeric strings --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("version 3.5 is out", ["version", "3.5", "is", "out"]),
        ("file_v2.txt", ["file_v2.txt"]),
        ("e-mail snake_case a--b", ["e-mail", "snake_case", "a--b"]),
        ("2024-03-01 12:30", ["2024-03-01", "12", "30"]),
        ("ok. fine...", ["ok", "fine"]),
        ("-5 +7 .net __init__", ["net", "init"]),
        ("12", ["12"]),
        ("c++ a/b x@y.com", ["a", "b", "y.com"]),
    ],
)
def test_alphanumeric_strings_with_inner_period_underscore_hyphen(text, expected):
    assert tokenize(text) == expected


def test_alphanumeric_is_ascii_only():
    assert tokenize("café naïve") == ["caf", "na", "ve"]


def test_alnum_glued_to_japanese_is_split_by_script():
    assert tokenize("iPhone15を買った") == ["iphone15"]
    assert tokenize("第3回") == []
    assert tokenize("LINEスタンプ") == ["スタンプ"]


# --- short terms usb and pv ----------------------------------------------------------------------


def test_short_terms_glued_to_katakana_or_kanji():
    assert tokenize("USBメモリ") == ["usb", "メモリ"]
    assert tokenize("PV数が増えた") == ["pv"]
    assert tokenize("新しいUSBケーブル、PVも見た") == ["usb", "ケーブル", "pv"]


def test_short_terms_are_whole_tokens_only():
    assert tokenize("usb-c usb3.0 pvc mpv") == ["usb-c", "usb3.0", "pvc", "mpv"]


def test_short_terms_survive_a_stopword_entry():
    spec = parse_spec("[alnum]\nstart U+0061..U+007A\n[short_terms]\nusb\n[stopwords]\nusb\nfoo\n")
    assert spec.tokenize("usb foo bar") == ["usb", "bar"]


# --- Katakana runs -------------------------------------------------------------------------------


def test_katakana_runs_of_two_or_more():
    assert tokenize("カメラとスマホ") == ["カメラ", "スマホ"]
    assert tokenize("ペン") == ["ペン"]


def test_single_katakana_dropped():
    assert tokenize("ア と イ") == []
    assert tokenize("ネ") == []


def test_long_vowel_mark_continues_but_never_starts_a_katakana_run():
    assert tokenize("コーヒーとケーキ") == ["コーヒー", "ケーキ"]
    assert tokenize("コー") == ["コー"]
    assert tokenize("ーーー") == []
    assert tokenize("すごーい") == []


def test_middle_dot_splits_katakana_runs():
    assert tokenize("ジョン・スミス") == ["ジョン", "スミス"]


def test_katakana_iteration_marks_and_phonetic_extensions():
    assert tokenize("アヽ") == ["アヽ"]
    assert tokenize("ヽヽ") == []
    assert tokenize("アイヌ語のカㇺイ") == ["アイヌ", "カㇺイ"]


# --- Kanji runs ----------------------------------------------------------------------------------


def test_kanji_runs_of_two_or_more():
    assert tokenize("明日は渋谷駅で待ち合わせ") == ["明日", "渋谷駅"]


def test_single_kanji_dropped():
    assert tokenize("猫が好き") == []
    assert tokenize("雨") == []


def test_iteration_mark_and_small_ke_continue_but_never_start_kanji_runs():
    assert tokenize("人々 佐々木 我が家") == ["人々", "佐々木"]
    assert tokenize("一ヶ月 関ヶ原 3ヶ月 ヶ月") == ["一ヶ月", "関ヶ原"]
    assert tokenize("々々") == []


def test_kanji_extensions_and_shime():
    assert tokenize("𠮷野家") == ["𠮷野家"]
    assert tokenize("\u3400\u3401") == ["\u3400\u3401"]
    assert tokenize("〆切は明日") == ["〆切", "明日"]
    assert tokenize("〇〇さん") == []


def test_katakana_and_kanji_runs_are_separate_tokens():
    assert tokenize("スマホ充電器") == ["スマホ", "充電器"]
    assert tokenize("新宿ルミネ") == ["新宿", "ルミネ"]


# --- not extracted -------------------------------------------------------------------------------


def test_hiragana_never_extracted():
    assert tokenize("ありがとう、またね") == []
    assert tokenize("ゝゞ") == []


def test_emoji_and_symbols_never_extracted():
    assert tokenize("🍣🍣 😂 👨‍👩‍👧 ★♪！？（笑）") == []
    assert tokenize("寿司🍣最高") == ["寿司", "最高"]


# --- single characters, stopwords ------------------------------------------------------------------


def test_single_characters_dropped_except_a_and_b():
    assert tokenize("a b c x 1 z") == ["a", "b"]
    assert tokenize("A B") == ["a", "b"]
    assert tokenize("プランBとA型") == ["プラン", "b", "a"]


def test_stopwords_removed_whole_tokens_only():
    assert tokenize("この内容について要約して") == []
    assert tokenize("LINEで相談した話題を教えて") == []
    assert tokenize("ライン トーク 自分 我々 アレ") == []
    assert tokenize("アレルギー 内容物 line-up lines") == ["アレルギー", "内容物", "line-up", "lines"]


def test_reachable_stopwords_are_the_ones_the_regex_can_emit():
    spec = default_spec()
    reachable = spec.reachable_stopwords()
    assert {"line", "ライン", "トーク", "要約", "相談", "会話", "話題", "自分", "内容", "関連", "何故", "コレ"} <= reachable
    inert = spec.stopwords - reachable
    assert {"これ", "それ", "何", "なに", "について", "まとめ", "私", "僕", "話", "教えて"} <= inert
    for word in inert:
        assert spec.tokenize(word) == []
    for word in reachable:
        assert spec.pattern.fullmatch(word)
        assert spec.tokenize(word) == []


# --- order, repeats ------------------------------------------------------------------------------


def test_order_and_repeats_preserved():
    text = "京都 kyoto ホテル 京都 ホテル 京都"
    assert tokenize(text) == ["京都", "kyoto", "ホテル", "京都", "ホテル", "京都"]


def test_realistic_line_transcript():
    text = "2024-05-03 14:05 ゆい: 来週の京都旅行、新幹線のチケット取った？\n2024-05-03 14:06 母: まだ。USB充電器も忘れずに😊"
    assert tokenize(text) == [
        "2024-05-03", "14", "05", "来週", "京都旅行", "新幹線", "チケット",
        "2024-05-03", "14", "06", "usb", "充電器",
    ]


def test_tokenize_many():
    assert tokenize_many(["USBメモリ", "", "猫"]) == [["usb", "メモリ"], [], []]
    assert tokenize_many(iter(["a b"])) == [["a", "b"]]


# --- the spec file and its parser ----------------------------------------------------------------


def test_default_spec_is_read_from_the_packaged_file():
    assert DEFAULT_SPEC_PATH.name == "bm25_tokenizer_spec.txt"
    spec = TokenizerSpec.load()
    assert spec == default_spec()
    assert [c.name for c in spec.classes] == ["alnum", "katakana", "kanji"]
    assert spec.short_terms == {"usb", "pv"}
    assert spec.keep_single == {"a", "b"}
    assert len(spec.stopwords) == 96


def test_spec_is_what_the_tokenizer_uses(tmp_path):
    path = tmp_path / "spec.txt"
    path.write_text(
        "# only ASCII letters, ・ inside Katakana\n[alnum]\nstart U+0061..U+007A\n"
        "[katakana]\nstart U+30A1..U+30FA\ninner U+30FB  # ・\n[stopwords]\nfoo\n",
        encoding="utf-8",
    )
    spec = TokenizerSpec.load(path)
    assert spec.tokenize("Foo bar 12 ジョン・スミス・ 漢字") == ["bar", "ジョン・スミス"]
    assert tokenize("Foo bar", spec=spec) == ["bar"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("start U+0061", "before any"),
        ("[nope]\n", "unknown section"),
        ("[alnum]\nbegin U+0061", "role"),
        ("[alnum]\nstart 0061", "U\\+XXXX"),
        ("[alnum]\nstart U+007A..U+0061", "bad code-point range"),
        ("[alnum]\ninner U+002E", "start"),
        ("[alnum]\nstart U+0061\n[alnum]\nstart U+0062", "twice"),
        ("[alnum]\nstart U+0061..U+007A\n[stopwords]\nLINE", "lowercase"),
        ("[alnum]\nstart U+0061..U+007A\n[keep_single]\nab", "single"),
        ("[alnum]\nstart U+0061..U+007A\n[short_terms]\nu-s", "not one token"),
        ("[stopwords]\nfoo", "character class"),
    ],
)
def test_spec_validation(text, message):
    with pytest.raises(ValueError, match=message):
        parse_spec(text)


# ----------------------------------------------------------------------- the English text path (latin_letters)

@pytest.mark.parametrize("text, expected", [
    ("Café au lait", ["café", "au", "lait"]),
    ("my RÉSUMÉ.pdf", ["my", "résumé.pdf"]),
    ("Straße und Öl", ["straße", "und", "öl"]),
    ("Łódź, Dvořák, naïve", ["łódź", "dvořák", "naïve"]),
    ("cafe\u0301 decomposed", ["cafe\u0301", "decomposed"]),   # e + combining acute stays one word
])
def test_latin_letters_keep_accented_words_whole(text, expected):
    assert with_latin_letters(default_spec()).tokenize(text) == expected


def test_without_latin_letters_the_paper_tokenizer_cuts_accented_words():
    assert tokenize("Café résumé") == ["caf", "sum"]


def test_latin_letters_change_nothing_else():
    latin = with_latin_letters(default_spec())
    for text in ("usbメモリとPV数", "スマホ充電器を買った", "恒例行事 これ 2024-04-10 a b c", "ｕｓｂ ＵＳＢ"):
        assert latin.tokenize(text) == tokenize(text)
    assert "\u0301" not in "".join(latin.tokenize("\u0301only a mark"))   # a combining mark never starts a token


def test_latin_letters_param_reaches_the_bm25_tokenizer():
    from pmrag.core.params import BM25Section
    from pmrag.retrieve.tokenizer import RegexTokenizer

    assert RegexTokenizer.from_params(BM25Section(latin_letters=True)).tokenize_many(["Café"]) == [["café"]]
    assert RegexTokenizer.from_params(BM25Section()).tokenize_many(["Café"]) == [["caf"]]


def test_latin_letters_needs_an_alnum_class():
    spec = parse_spec("[katakana]\nstart U+30A1..U+30FA\n")
    with pytest.raises(ValueError, match=r"no \[alnum\] class"):
        with_latin_letters(spec)


@pytest.mark.parametrize("latin", [False, True])
def test_the_compiled_pattern_finds_what_the_alternation_of_the_classes_finds(latin):
    """The compiled pattern starts with one character set (``prefixed_alternation``, faster); the spec's rule is the
    plain alternation of the classes in file order.  Random texts over every role's boundary characters (and
    characters of no class) must give the same matches, the same places."""
    import random
    import re

    from pmrag.retrieve.tokenizer import alternation, with_latin_letters

    spec = with_latin_letters(default_spec()) if latin else default_spec()
    plain = re.compile(alternation(spec.classes))
    edges = {chr(code) for c in spec.classes for lo, hi in (*c.start, *c.cont, *c.inner)
             for code in (lo, hi, (lo + hi) // 2, max(lo - 1, 0), min(hi + 1, 0x10FFFF))}
    alphabet = sorted(edges | set(" \n.-_:あ、。!😀ＵＳＢ"))
    rng = random.Random(7)
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert [(m.span(), m.group()) for m in spec.pattern.finditer(text)] == \
            [(m.span(), m.group()) for m in plain.finditer(text)], text
    assert spec.pattern.pattern != plain.pattern
