"""The BM25 tokenizers beside the paper's regex: sudachi, char2/char3, word; their cache, the
count-matrix path into the BM25 kernel, and the retriever ids they make valid."""

import random
import re
from collections import Counter

import bm25s
import numpy as np
import pytest
from bm25s.tokenization import Tokenized
from sklearn.feature_extraction.text import CountVectorizer

from pmrag.core.params import DEFAULT_RETRIEVERS, BM25Section, StudyParams
from pmrag.retrieve import bm25 as bm25_module, lexical
from pmrag.retrieve.bm25 import BM25Index, query_matrix
from pmrag.retrieve.lexical import (Char2Tokenizer, Char3Tokenizer, SudachiTokenizer, TokenCache, WordTokenizer,
                                    char_ngram_counts, char_ngrams, index_texts, sudachi_lines)
from pmrag.retrieve.registry import RETRIEVERS, TOKENIZERS
from pmrag.retrieve.retrievers import BM25Retriever, Corpus, Queries
from pmrag.retrieve.tokenizer import tokenize
from pmrag.study.params import component_context

DOCS = [
    "2024-05-03 14:05 ゆい: 毎年の恒例行事、今年は京都で花火大会！\n2024-05-03 14:06 母: 附属病院の予約も忘れずに",
    "京都のホテルは駅の近くがいいな。京都駅から歩ける所",
    "ＵＳＢメモリどこ置いた？USB-Cのケーブルも",
    "テニスの練習、明日は朝9時から\n\n雨なら中止",
    "Running in the park\tand   RUNNING home",
    "",
    "a",
]


def sudachi(**kwargs) -> SudachiTokenizer:
    return SudachiTokenizer(**{"workers": 1, **kwargs})


# --- sudachi ---------------------------------------------------------------------------------------------


def test_sudachi_splits_a_kanji_compound_so_its_part_matches_where_the_regex_cannot():
    text = "毎年の恒例行事"
    assert "恒例" in sudachi().tokenize(text) and "行事" in sudachi().tokenize(text)
    assert "恒例" not in tokenize(text) and "恒例" in tokenize("恒例")   # the regex keeps the Kanji run whole
    index = BM25Index.fit(sudachi().tokenize_many(DOCS))
    scores = index.scores(sudachi().tokenize("恒例"))
    assert scores[0] > 0 and (scores[1:] == 0).all()


def test_sudachi_content_filter_drops_particles_auxiliaries_symbols_and_blanks():
    text = "京都に行きました。 楽しかった！"
    content = sudachi().tokenize(text)
    every = sudachi(pos="all").tokenize(text)
    assert content == ["京都", "行く", "楽しい"]
    assert {"に", "ます", "た", "。", "!"} <= set(every) and " " not in every
    assert set(content) < set(every)


def test_sudachi_forms_normalized_dictionary_surface_all_lower_cased():
    text = "附属病院に行きました ＵＳＢ iPhone"
    assert sudachi(form="normalized").tokenize(text) == ["付属", "病院", "行く", "usb", "iphone"]
    assert sudachi(form="dictionary").tokenize(text) == ["附属", "病院", "行く", "usb", "iphone"]
    assert sudachi(form="surface").tokenize(text) == ["附属", "病院", "行き", "ｕｓｂ", "iphone"]


def test_sudachi_split_mode_a_cuts_shorter_units_than_c():
    assert sudachi(split_mode="C").tokenize("東京都庁") == ["東京都庁"]
    assert sudachi(split_mode="A").tokenize("東京都庁") == ["東京", "都庁"]


def test_sudachi_tokenizes_line_by_line_and_cuts_lines_sudachipy_would_refuse(monkeypatch):
    text = "京都駅\n\n東京駅"
    assert sudachi().tokenize(text) == sudachi().tokenize("京都駅") + sudachi().tokenize("東京駅")
    long_line = "京都" * 30_000   # 60,000 characters, 180,000 UTF-8 bytes: one SudachiPy call would fail
    assert [len(p) for p in sudachi_lines(long_line)] == [12_000] * 5
    assert sudachi().tokenize(long_line).count("京都") >= 29_000


def test_sudachi_tokens_are_cached_by_config_and_exact_text(tmp_path, monkeypatch):
    calls = []
    real = lexical.sudachi_tokens

    def counted(pieces, *args):
        calls.append(list(pieces))
        return real(pieces, *args)

    monkeypatch.setattr(lexical, "sudachi_tokens", counted)
    first = sudachi(cache_dir=tmp_path)
    tokens = first.tokenize_many(DOCS)
    assert calls and first.tokenized_pieces > 0 and (tmp_path / "tokens.sqlite").is_file()
    calls.clear()
    again = sudachi(cache_dir=tmp_path)
    assert again.tokenize_many(DOCS) == tokens            # a second tokenizer reads every text from the file
    assert calls == [] and again.tokenized_pieces == 0
    with TokenCache(tmp_path / "tokens.sqlite") as cache:   # one entry per distinct text and per distinct line
        assert len(cache) == len(set(DOCS)) + len({line for text in DOCS for line in text.split("\n") if line})
    calls.clear()
    assembled = sudachi(cache_dir=tmp_path)              # embedding_text's case: known lines in a new text
    assert assembled.tokenize(DOCS[1] + "\n" + DOCS[0]) == tokens[1] + tokens[0]
    assert calls == [] and assembled.tokenized_pieces == 0
    other = sudachi(cache_dir=tmp_path, form="surface")  # another config: other keys, analysed again
    assert other.config != first.config
    other.tokenize_many(DOCS[:2])
    assert calls and other.tokenized_pieces > 0
    calls.clear()
    edited = sudachi(cache_dir=tmp_path)                 # one changed character: one new text analysed
    edited.tokenize_many(DOCS + [DOCS[1] + "。"])
    assert calls == [["京都のホテルは駅の近くがいいな。京都駅から歩ける所。"]]


def test_sudachi_survives_a_lone_surrogate_and_odd_whitespace():
    assert sudachi().tokenize("京都\udc80駅") == sudachi().tokenize("京都?駅")
    assert sudachi().tokenize("京都\r\n駅\t東京") == ["京都", "駅", "東京"]


def test_sudachi_config_names_every_setting_and_the_versions():
    config = sudachi(split_mode="A", form="dictionary", pos="all").config
    for part in ("split=A", "form=dictionary", "pos=all", "sudachipy=", "sudachidict_core=", lexical.SUDACHI_RULE):
        assert part in config


def test_sudachi_in_worker_processes_gives_the_same_tokens(monkeypatch):
    monkeypatch.setattr(lexical, "PARALLEL_MIN_CHARS", 1)
    texts = DOCS * 3 + [f"第{i}回の練習試合は{i}時から" for i in range(40)]
    assert SudachiTokenizer(workers=2).tokenize_many(texts) == sudachi().tokenize_many(texts)


def test_sudachi_settings_are_validated_with_the_key_named():
    with pytest.raises(ValueError, match="bm25.sudachi_split_mode"):
        SudachiTokenizer(split_mode="D")
    with pytest.raises(ValueError, match="bm25.sudachi_form"):
        SudachiTokenizer(form="reading")


# --- character n-grams -------------------------------------------------------------------------------------


def brute_force_ngrams(text: str, n: int) -> list[str]:
    """Our stated rule, spelled out character by character."""
    chars, last_space = [], False
    for ch in text.lower():
        if ch.isspace():
            if not last_space:
                chars.append(" ")
            last_space = True
        else:
            chars.append(ch)
            last_space = False
    return ["".join(chars[i:i + n]) for i in range(len(chars) - n + 1)]


def test_normalise_chars_is_the_whitespace_rule():
    """Lower-cased and every run of ``\\s`` one space, at the ends too; on strings of whitespace of every kind."""
    rng = random.Random(5)
    alphabet = ["a", "B", "ア", "漢", "😂", "İ", " ", "\t", "\n", "\r", "\u3000", "\xa0", "\x1c", "\x85", "\u2028",
                "\u200b"]
    texts = ["", " ", "\n\t", " a ", "A  B\n", "\u3000x"] + [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(5000)]
    for text in texts:
        assert lexical.normalise_chars(text) == re.sub(r"\s+", " ", text.lower()), repr(text)
    assert lexical.normalise_chars(" A\u3000\u3000b\n") == " a b " and lexical.normalise_chars("x\u200by") == "x\u200by"


@pytest.mark.parametrize("n", [2, 3])
def test_char_ngrams_follow_the_stated_rule(n):
    for text in DOCS + ["Ab  c\nd\t\tE😂x", "ＡＢＣ\u3000de", "x"]:
        assert char_ngrams(text, n) == brute_force_ngrams(text, n)
    assert char_ngrams("a\nb", 2) == char_ngrams("a  b", 2) == ["a ", " b"]


@pytest.mark.agreement
@pytest.mark.parametrize("n", [2, 3])
def test_char_ngram_counts_equal_count_vectorizer_and_a_brute_force_count(n):
    texts = DOCS + ["Ab  c\nd\t\tE😂x", "ＡＢＣ\u3000de😂😂", "\U0001F600\U0010FFFF!"]
    counts, vocabulary = char_ngram_counts(texts, n)
    reference = CountVectorizer(analyzer="char", ngram_range=(n, n), preprocessor=lexical.normalise_chars)
    expected = reference.fit_transform(texts)
    assert vocabulary == reference.vocabulary_
    assert (counts != expected).nnz == 0
    expected.sort_indices()   # canonical, as ours is built: each row's columns increasing, each cell once
    assert np.array_equal(counts.indptr, expected.indptr) and np.array_equal(counts.indices, expected.indices)
    assert np.array_equal(counts.data, expected.data) and counts.has_canonical_format
    for row, text in enumerate(texts):
        brute = Counter(brute_force_ngrams(text, n))
        assert {t: counts[row, vocabulary[t]] for t in brute} == brute and counts[row].sum() == sum(brute.values())
    queries = ["京都駅の近く", "zz", "", "😂😂x"]
    query_counts, same = char_ngram_counts(queries, n, vocabulary)
    assert same == vocabulary and (query_counts != reference.transform(queries)).nnz == 0
    mixed, _ = char_ngram_counts(queries, n, {**vocabulary, "x" * (n + 1): len(vocabulary)})   # a term of another n
    assert mixed.shape[1] == len(vocabulary) + 1 and (mixed[:, :-1] != query_counts).nnz == 0 and mixed[:, -1].nnz == 0


@pytest.mark.parametrize("n", [2, 3])
def test_char_ngram_counts_in_small_blocks_equal_one_block(n, monkeypatch):
    texts = DOCS + ["Ab  c\nd\t\tE😂x", "ＡＢＣ\u3000de😂😂" * 3, "", "x", "\U0001F600\U0010FFFF!"]
    queries = ["京都駅の近く", "zz", "", "😂😂x"]
    whole, vocabulary = char_ngram_counts(texts, n)
    whole_queries, _ = char_ngram_counts(queries, n, vocabulary)
    monkeypatch.setattr(lexical, "BLOCK_CHARS", 7)   # several texts a block, and texts longer than a block
    assert len(lexical._text_blocks(texts, 7)) > len(texts) // 2
    blocked, same = char_ngram_counts(texts, n)
    blocked_queries, _ = char_ngram_counts(queries, n, vocabulary)
    assert list(same) == list(vocabulary) and same == vocabulary
    for ours, theirs in ((blocked, whole), (blocked_queries, whole_queries)):
        assert ours.shape == theirs.shape and ours.has_canonical_format
        assert np.array_equal(ours.indptr, theirs.indptr) and np.array_equal(ours.indices, theirs.indices)
        assert np.array_equal(ours.data, theirs.data)


def test_text_blocks_cover_every_text_once_in_order():
    texts = ["aaaa", "bb", "c", "dddddddddd", "", "ee"]
    blocks = lexical._text_blocks(texts, 5)
    assert blocks == [(0, 1), (1, 3), (3, 4), (4, 6)]
    assert lexical._text_blocks([], 5) == []


def test_the_vectorizer_the_tokenizer_declares_is_the_reference():
    vectorizer = Char3Tokenizer().vectorizer()
    assert vectorizer.analyzer == "char" and vectorizer.ngram_range == (3, 3)
    assert vectorizer.build_analyzer()("Ab\n c") == char_ngrams("Ab\n c", 3)


WORKER_TEXTS = DOCS * 3 + ["Ab  c\nd\t\tE😂x", "ＡＢＣ\u3000de😂😂" * 3, "", "x", "\U0001F600\U0010FFFF!", "京都" * 9]


def assert_same_matrix(ours, theirs):
    assert ours.shape == theirs.shape and ours.has_canonical_format
    assert np.array_equal(ours.indptr, theirs.indptr) and np.array_equal(ours.indices, theirs.indices)
    assert np.array_equal(ours.data, theirs.data) and ours.data.dtype == theirs.data.dtype


@pytest.mark.parametrize("n", [2, 3])
def test_char_ngram_counts_in_worker_processes_equal_one_process(n, monkeypatch):
    """Blocks counted in two workers over their own n-grams, then renumbered: the same vocabulary in the same
    order and the same canonical matrix as the count in this process (blocks of a few texts, some longer)."""
    whole, vocabulary = char_ngram_counts(WORKER_TEXTS, n)
    monkeypatch.setattr(lexical, "BLOCK_CHARS", 9)
    assert len(lexical._text_blocks(WORKER_TEXTS, 9)) > 10
    in_workers, same = char_ngram_counts(WORKER_TEXTS, n, workers=2)
    assert list(same.items()) == list(vocabulary.items())
    assert_same_matrix(in_workers, whole)
    assert char_ngram_counts([], n, workers=2)[0].shape == (0, 0)


@pytest.mark.parametrize("tokenizer", [lexical.make_tokenizer(TOKENIZERS.get("regex"), BM25Section()),
                                       WordTokenizer(stemmer="english", stopwords="english"), Char2Tokenizer()],
                         ids=["regex", "word", "char2"])
def test_an_index_tokenized_in_worker_processes_equals_one_made_here(tokenizer, monkeypatch):
    """Two workers tokenize and encode blocks of 4 documents: the vocabulary in the same order (ids by first
    occurrence over all documents), the same weights and the same query counts, bit for bit."""
    monkeypatch.setattr(bm25_module, "ENCODE_DOCS", 4)
    monkeypatch.setattr(lexical, "BLOCK_CHARS", 40)
    queries = ["京都のホテル", "USBケーブル", "running home", "存在しない"]
    here, here_queries = index_texts(tokenizer, WORKER_TEXTS, queries, BM25Section(), workers=0)
    there, there_queries = index_texts(tokenizer, WORKER_TEXTS, queries, BM25Section(), workers=2)
    assert list(there.vocabulary.items()) == list(here.vocabulary.items())
    assert_same_matrix(there.weights, here.weights)
    assert np.array_equal(there.doc_lengths, here.doc_lengths) and there.avgdl == here.avgdl
    assert (there_queries != here_queries).nnz == 0 and there_queries.shape == here_queries.shape
    assert here.weights.nnz > 0 and here_queries.nnz > 0


def test_documents_are_tokenized_in_workers_from_a_size_on_and_never_inside_in_this_process(monkeypatch):
    from pmrag.core.parallel import in_this_process

    monkeypatch.setattr(lexical, "PARALLEL_INDEX_CHARS", 10)
    assert lexical.index_workers(["12345", "6789"]) == 0
    assert lexical.index_workers(["12345", "67890"]) == lexical.INDEX_WORKERS == 2
    with in_this_process():
        assert lexical.index_workers(["12345", "67890"]) == 0


@pytest.mark.agreement
@pytest.mark.parametrize("tokenizer", [Char2Tokenizer(), Char3Tokenizer()])
def test_bm25_over_counted_ngrams_equals_fit_on_token_lists_and_bm25s(tokenizer):
    queries = ["京都のホテル", "USBケーブル", "running", "存在しない", "恒例行事の花火"]
    index, query_counts = index_texts(tokenizer, DOCS, queries, BM25Section())
    by_lists = BM25Index.fit(tokenizer.tokenize_many(DOCS))
    expected = by_lists.scores_many(tokenizer.tokenize_many(queries))
    np.testing.assert_allclose(index.scores_matrix(query_counts), expected, rtol=1e-12, atol=1e-12)
    assert (expected[:3].max(axis=1) > 0).all()
    vocab = {}
    ids = [[vocab.setdefault(t, len(vocab)) for t in d] for d in tokenizer.tokenize_many(DOCS)]
    retriever = bm25s.BM25(method="lucene", k1=1.2, b=0.75, dtype="float64")
    retriever.index(Tokenized(ids=ids, vocab=dict(vocab)), show_progress=False)
    for query, row in zip(queries, index.scores_many([list(dict.fromkeys(tokenizer.tokenize_many([q])[0]))
                                                      for q in queries])):
        known = [t for t in dict.fromkeys(tokenizer.tokenize_many([query])[0]) if t in retriever.vocab_dict]
        theirs = (1.2 + 1) * retriever.get_scores(known) if known else np.zeros(len(DOCS))
        np.testing.assert_allclose(row, theirs, rtol=1e-12, atol=1e-12)


def test_fit_counts_checks_its_input():
    counts, vocabulary = char_ngram_counts(["abc"], 2)
    with pytest.raises(ValueError, match="term columns"):
        BM25Index.fit_counts(counts[:, :1], vocabulary)
    with pytest.raises(ValueError, match="empty corpus"):
        BM25Index.fit_counts(counts[:0], vocabulary)
    with pytest.raises(ValueError, match="non-negative"):
        BM25Index.fit_counts(-counts, vocabulary)
    with pytest.raises(ValueError, match="2 term rows, the vocabulary 3"):   # documents × terms where terms × documents
        BM25Index.fit_term_counts(char_ngram_counts(["abcd", "ab"], 2)[0], char_ngram_counts(["abcd"], 2)[1])


# --- word ------------------------------------------------------------------------------------------------


def test_word_tokens_are_lower_case_words_of_two_characters_or_more():
    text = "The Café's owner, Ann, runs 2 shops; I ran_fast!"
    assert WordTokenizer().tokenize(text) == ["the", "café", "owner", "ann", "runs", "shops", "ran_fast"]


def test_word_tokens_with_the_english_stemmer_match_across_inflections():
    stemmed = WordTokenizer("english")
    assert stemmed.tokenize("Running runs RUNNER connected connection") == ["run", "run", "runner", "connect",
                                                                              "connect"]
    index = BM25Index.fit(stemmed.tokenize_many(DOCS))
    assert index.scores(stemmed.tokenize("runs"))[4] > 0
    assert BM25Index.fit(WordTokenizer().tokenize_many(DOCS)).scores(WordTokenizer().tokenize("runs"))[4] == 0


def test_word_stemmer_setting_is_validated():
    with pytest.raises(ValueError, match="bm25.stemmer"):
        WordTokenizer("porter")


def test_stopword_lists_are_bm25s_own():
    import bm25s.stopwords

    assert lexical.stopword_set("english") == set(bm25s.stopwords.STOPWORDS_EN)
    assert len(lexical.stopword_set("english")) == 33
    assert lexical.stopword_set("english_plus") == set(bm25s.stopwords.STOPWORDS_EN_PLUS)
    assert len(lexical.stopword_set("english_plus")) == 179 and lexical.stopword_set("none") == frozenset()
    assert "bm25s" in WordTokenizer.packages   # a bm25s upgrade that changes a list changes the rankings' key


def test_word_tokens_drop_stop_words_before_stemming():
    text = "The kitten was being fed; they are in THE garden with their kittens"
    assert WordTokenizer(stopwords="english").tokenize(text) == ["kitten", "being", "fed", "garden", "kittens"]
    assert WordTokenizer(stopwords="english_plus").tokenize(text) == ["kitten", "fed", "garden", "kittens"]
    # "being" is no Lucene stop word but stems to "be", which is: matched before stemming, it stays
    assert WordTokenizer("english", "english").tokenize("being be") == ["be"]
    assert WordTokenizer().tokenize(text)[:3] == ["the", "kitten", "was"]   # the default drops nothing


def test_word_stopwords_setting_is_validated_by_the_params_and_the_tokenizer():
    with pytest.raises(ValueError, match="bm25.stopwords"):
        WordTokenizer(stopwords="french")
    with pytest.raises(ValueError, match="stopwords"):
        BM25Section(stopwords="french")
    section = BM25Section(stemmer="english", stopwords="english_plus")
    tokenizer = lexical.make_tokenizer(WordTokenizer, section)
    assert (tokenizer.stemmer, tokenizer.stopwords) == ("english", "english_plus")
    assert BM25Section().stopwords == "none"   # the default keeps every word: today's numbers


def test_the_stopwords_key_enters_the_word_rankings_key():
    from pmrag.core.names import RetrieverId
    from pmrag.study import stages
    from pmrag.study.declare import resolve_stage
    from pmrag.study.pipeline import relocatable_params

    def declared(stopwords):
        params = StudyParams(run="t", dataset={"synthetic": {"enabled": True}}, bm25={"stopwords": stopwords})
        families = {"chunk_table": ("",), "qrels": ("",), "representations": ("",)}
        return resolve_stage(stages.runs, params, families, item=RetrieverId.parse("raw_text_bm25_word"),
                             param_json=relocatable_params(params))

    plain, dropped = declared("none"), declared("english")
    assert plain.params["bm25"]["stopwords"] == "none" and dropped.params["bm25"]["stopwords"] == "english"
    assert plain.params != dropped.params and "bm25s" in plain.packages


# --- word tokens with stop words and stemming against a plain bm25s index (Lucene BM25) --------------------------

WORDS = ["hike", "hiked", "hiking", "hikes", "kitten", "kittens", "lake", "lakes", "visit", "visited", "visiting",
         "paint", "painted", "painting", "paintings", "move", "moved", "moving", "camp", "camping", "garden",
         "gardens", "gardening", "Mina", "Theo", "Pebble", "July", "2023", "blue", "sunset", "sunsets", "friend",
         "friends", "adopted", "adopting", "café", "résumé", "running", "runner", "runs"]
STOP = ["the", "a", "is", "was", "being", "have", "their", "about", "with", "and", "to", "of", "did", "what", "when"]


def english_fixture():
    """The mini LoCoMo fixture's turns and questions, plus generated English chunks and questions mixing
    inflected words with stop words (deterministic)."""
    import json
    from pathlib import Path

    samples = json.loads((Path(__file__).parents[1] / "fixtures" / "locomo" / "mini_locomo.json").read_text())
    turns = [turn["text"] for sample in samples for name, session in sample["conversation"].items()
             if name.startswith("session_") and isinstance(session, list) for turn in session]
    questions = [qa["question"] for sample in samples for qa in sample["qa"]]
    rng = np.random.default_rng(29)
    pick = lambda n: " ".join(rng.choice(WORDS + STOP, size=n)) + "."   # noqa: E731
    chunks = turns + [" ".join(pick(int(rng.integers(4, 12))) for _ in range(int(rng.integers(1, 4))))
                      for _ in range(51)]
    questions += [pick(int(rng.integers(2, 6))).capitalize() + " " + str(rng.choice(WORDS)) + "?" for _ in range(24)]
    return chunks, questions


@pytest.fixture(scope="module")
def bm25s_peer():
    """A plain bm25s index (Lucene BM25, the paper's k1 and b, float64) with bm25s's tokenizer, its 179-word
    English list and PyStemmer's English stemmer, over the English fixture."""
    import Stemmer

    chunks, questions = english_fixture()
    stemmer = Stemmer.Stemmer("english")
    tokens = bm25s.tokenize(chunks, stopwords="english_plus", stemmer=stemmer, show_progress=False)
    retriever = bm25s.BM25(method="lucene", k1=1.2, b=0.75, dtype="float64")
    retriever.index(tokens, show_progress=False)
    query_tokens = bm25s.tokenize(questions, stopwords="english_plus", stemmer=stemmer, return_ids=False,
                                  show_progress=False)
    return chunks, questions, retriever, query_tokens, stemmer


@pytest.mark.agreement
def test_word_bm25_with_stop_words_and_stemming_scores_as_bm25s(bm25s_peer):
    """The same tokens, and every score ours / (k1 + 1): bm25s's Lucene BM25 leaves out equation 8's constant
    (k1 + 1) factor, which changes no order (module docstring of pmrag.retrieve.bm25)."""
    chunks, questions, retriever, query_tokens, stemmer = bm25s_peer
    ours = WordTokenizer("english", "english_plus")
    assert [ours.tokenize(q) for q in questions] == query_tokens
    theirs = bm25s.tokenize(chunks, stopwords="english_plus", stemmer=stemmer, return_ids=False,
                            show_progress=False)
    assert ours.tokenize_many(chunks) == theirs
    index, query_counts = index_texts(ours, chunks, questions, BM25Section(stemmer="english", stopwords="english_plus"))
    scores = index.scores_matrix(query_counts)
    for row, tokens in zip(scores, query_tokens):
        np.testing.assert_allclose(row / 2.2, retriever.get_scores(tokens), rtol=1e-12, atol=1e-12)
    assert (scores > 0).sum(axis=1).min() >= 1


@pytest.mark.agreement
def test_word_bm25_top5_through_the_params_is_bm25s_top5(bm25s_peer):
    """The retriever built from ``bm25.stemmer: english``, ``bm25.stopwords: english_plus`` ranks each question's
    top 5 as bm25s.retrieve does, wherever the six best scores are apart (a tie is ours to break by time)."""
    from pmrag.core.names import RetrieverId

    chunks, questions, retriever, query_tokens, _ = bm25s_peer
    params = StudyParams(run="t", dataset={"synthetic": {"enabled": True}},
                         bm25={"stemmer": "english", "stopwords": "english_plus"})
    corpus = Corpus(chunk_ids=np.array([f"c{i}" for i in range(len(chunks))]),
                    start_times=np.datetime64("2024-01-01T00:00", "ns") + np.arange(len(chunks)) * np.timedelta64(1, "h"),
                    texts=lambda rep: list(chunks), vectors=lambda rep: None)
    queries = Queries([f"q{i}" for i in range(len(questions))], list(questions), lambda: None)
    ranked = BM25Retriever(RetrieverId("raw_text", "bm25", "word"), params).rank(corpus, queries, depth=5)
    documents, _ = retriever.retrieve(query_tokens, k=6, show_progress=False, n_threads=1)
    compared = 0
    for qid, tokens, theirs in zip(queries.question_ids, query_tokens, documents):
        best = np.sort(retriever.get_scores(tokens))[::-1][:6]
        if best[5] == 0 or np.diff(best).max() > -1e-9 * best[0]:
            continue   # a near-tie among the six best, or fewer than six matching chunks
        ours = ranked.rankings[ranked.rankings["question_id"] == qid].sort_values("rank")["chunk_id"].tolist()
        assert ours == [f"c{i}" for i in theirs[:5]], qid
        compared += 1
    assert compared >= 2 * len(questions) // 3   # 26 of the 30 questions


# --- as BM25 variants ---------------------------------------------------------------------------------------


def test_every_tokenizer_is_a_bm25_variant_and_ids_validate_through_params():
    assert {"sudachi", "char2", "char3", "word", "regex"} <= set(TOKENIZERS.names())
    ids = ["raw_text_bm25_sudachi", "summary_bm25_char2", "embedding_text_bm25_char3", "embedding_text_bm25_word"]
    assert set(ids) <= set(validated(ids).retrieval.retrievers)
    with pytest.raises(ValueError, match="unknown bm25 variant 'mecab'"):
        validated(["raw_text_bm25_mecab"])


def validated(ids):
    """Params listing ``ids`` beside the default retrievers (which the default hybrids and analysis name)."""
    return StudyParams.model_validate({"run": "t", "dataset": {"synthetic": {"enabled": True}},
                                       "retrieval": {"retrievers": [*DEFAULT_RETRIEVERS, *ids]}},
                                      context=component_context())


def corpus_and_queries(texts, questions):
    n = len(texts)
    corpus = Corpus(chunk_ids=np.array([f"c{i}" for i in range(n)]),
                    start_times=np.array([f"2024-01-{i + 1:02d}" for i in range(n)], dtype="datetime64[ns]"),
                    texts=lambda rep: list(texts), vectors=lambda rep: None)
    return corpus, Queries([f"q{i}" for i in range(len(questions))], list(questions), lambda: None)


@pytest.mark.parametrize("variant", ["sudachi", "char2", "char3", "word", ""])
def test_bm25_retriever_ranks_with_each_tokenizer(variant, tmp_path):
    from pmrag.core.names import RetrieverId

    params = StudyParams(run="t", dataset={"synthetic": {"enabled": True}}, cache_dir=str(tmp_path))
    rid = RetrieverId("raw_text", "bm25", variant or None)
    corpus, queries = corpus_and_queries(DOCS, ["京都のホテル", "running home"])
    ranked = RETRIEVERS.get("bm25")(rid, params).rank(corpus, queries, depth=3)
    top = ranked.rankings.groupby("question_id")["chunk_id"].first()
    if variant == "word":   # Japanese runs are one \w+ word each: 京都のホテル is a word no chunk holds
        assert ranked.matches["q0"] == 0 and top["q0"] == "c6"
    else:
        assert top["q0"] == "c1" and ranked.matches["q0"] > 0
    if variant in ("char2", "char3", "word"):
        assert top["q1"] == "c4"
    assert (tmp_path / "tokens.sqlite").is_file() == (variant == "sudachi")
    assert BM25Retriever.uses(rid) == (TOKENIZERS.get(variant or "regex"),)


def test_regex_bm25_through_the_count_path_is_unchanged():
    params = StudyParams(run="t", dataset={"synthetic": {"enabled": True}})
    from pmrag.core.names import RetrieverId

    corpus, queries = corpus_and_queries(DOCS, ["京都 ホテル 京都", "USB"])
    ranked = BM25Retriever(RetrieverId("raw_text", "bm25"), params).rank(corpus, queries, depth=len(DOCS))
    index = BM25Index.fit([tokenize(t) for t in DOCS])
    expected = index.scores_many([tokenize(q) for q in queries.texts])
    got = ranked.rankings.pivot(index="question_id", columns="chunk_id", values="score")
    np.testing.assert_array_equal(got.loc[["q0", "q1"], corpus.chunk_ids].to_numpy(), expected)
    assert query_matrix([tokenize("京都")], index.vocabulary).sum() == 1
