"""The synthetic LINE corpus generator (``pmrag.demo``): format, determinism, noise and planted evidence."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import date, datetime, timedelta
from pathlib import Path

import pytest

from pmrag.demo import generate_corpus, max_questions, min_messages, planted_episodes, type_counts
from pmrag.demo.vocab import BACKCHANNELS, EVIDENCE_POOLS

SEED = 20240410
N_SMALL = 12000
ALLOWED_KEYS = {"time", "sender", "type", "text"}
ALLOWED_TYPES = {"text", "sticker", "photo", "video", "file", "call", "system"}
TIME_RE = re.compile(r"^([01]\d|2[0-3]):[0-5]\d:[0-5]\d$")
SOURCES = ("family", "partner", "friends_highschool", "club_tennis", "parttime_cafe", "study_group",
           "work_project", "dm_mai", "dm_saki", "dm_souta")


class Corpus:
    """A generated corpus loaded back: raw bytes, parsed files and flat per-source message lists."""

    def __init__(self, path: Path, manifest: dict):
        self.path = path
        self.manifest = manifest
        self.raw = {p.name: p.read_bytes() for p in sorted(path.iterdir())}
        self.files = {s: json.loads(self.raw[f"{s}.json"]) for s in SOURCES}
        self.flat = {s: [(d, i, m) for d, msgs in data.items() for i, m in enumerate(msgs)] for s, data in self.files.items()}
        self.questions = json.loads(self.raw["questions.json"])["questions"]

    def message(self, source: str, order: int) -> dict:
        return self.flat[source][order][2]

    def day_of(self, source: str, order: int) -> str:
        return self.flat[source][order][0]

    def primary(self, q: dict) -> list[dict]:
        return [e for e in q["evidence"] if e["relevance"] == 2]

    def all_messages(self):
        for s in SOURCES:
            for d, i, m in self.flat[s]:
                yield s, d, m


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Corpus:
    out = tmp_path_factory.mktemp("demo")
    return Corpus(out, generate_corpus(out))


def _timestamps(corpus: Corpus, source: str) -> list[datetime]:
    """Times of the timed messages of a source, in file order."""
    out = []
    for d, _, m in corpus.flat[source]:
        if "time" in m:
            h, mi, s = map(int, m["time"].split(":"))
            out.append(datetime.fromisoformat(d) + timedelta(hours=h, minutes=mi, seconds=s))
    return out


# ----------------------------------------------------------------------------- determinism

def test_same_arguments_give_identical_bytes(tmp_path, corpus):
    manifest = generate_corpus(tmp_path / "again")
    again = {p.name: p.read_bytes() for p in sorted((tmp_path / "again").iterdir())}
    assert again == corpus.raw
    assert manifest == corpus.manifest


def test_other_seed_gives_other_bytes(tmp_path, corpus):
    generate_corpus(tmp_path / "other", seed=SEED + 1)
    for name in ("partner.json", "questions.json"):
        assert (tmp_path / "other" / name).read_bytes() != corpus.raw[name]


# ----------------------------------------------------------------------------- the paper's JSON shape

def test_one_file_per_source_plus_questions_and_manifest(corpus):
    assert set(corpus.raw) == {f"{s}.json" for s in SOURCES} | {"questions.json", "manifest.json"}
    assert json.loads(corpus.raw["manifest.json"]) == corpus.manifest
    assert corpus.manifest["files"] == [f"{s}.json" for s in SOURCES]
    assert corpus.manifest["questions_file"] == "questions.json"
    assert corpus.manifest["seed"] == SEED and corpus.manifest["n_questions"] == 100
    for name, data in corpus.raw.items():
        assert data.decode("utf-8").endswith("\n"), name


def test_date_keys_parse_and_are_sorted_within_the_period(corpus):
    for s, data in corpus.files.items():
        keys = list(data)
        assert keys == sorted(keys), s
        days = [date.fromisoformat(k) for k in keys]
        assert days[0] >= date(2023, 4, 1) and days[-1] <= date(2025, 3, 31), s
        assert all(isinstance(v, list) and v for v in data.values()), s


def test_messages_have_only_allowed_keys_and_types(corpus):
    for s, d, m in corpus.all_messages():
        assert set(m) <= ALLOWED_KEYS, (s, d, m)
        assert isinstance(m["text"], str)
        if "type" in m:
            assert m["type"] in ALLOWED_TYPES, m
        if "time" in m:
            assert TIME_RE.match(m["time"]), m
        if "sender" in m:
            assert isinstance(m["sender"], str) and m["sender"]


def test_times_never_go_backwards_within_a_date(corpus):
    for s, data in corpus.files.items():
        for d, msgs in data.items():
            times = [m["time"] for m in msgs if "time" in m]
            assert times == sorted(times), (s, d)


def test_every_source_has_several_senders_and_the_user_everywhere(corpus):
    for s in SOURCES:
        senders = Counter(m["sender"] for _, _, m in corpus.flat[s] if "sender" in m)
        assert senders["ゆい"] > 0.1 * sum(senders.values()), s
        assert len(senders) >= 2, s
    assert len({m.get("sender") for _, _, m in corpus.flat["club_tennis"]}) >= 5


# ----------------------------------------------------------------------------- size

@pytest.mark.parametrize("n", [N_SMALL, 30000])
def test_message_count_is_exactly_n_messages(tmp_path, corpus, n):
    if n == N_SMALL:
        files, manifest = corpus.files, corpus.manifest
    else:
        manifest = generate_corpus(tmp_path, n_messages=n)
        files = {s: json.loads((tmp_path / f"{s}.json").read_text(encoding="utf-8")) for s in SOURCES}
    counts = {s: sum(len(v) for v in data.values()) for s, data in files.items()}
    assert sum(counts.values()) == n
    assert manifest["n_messages"] == n
    assert manifest["messages_per_source"] == counts


def test_larger_corpus_keeps_the_same_questions_and_evidence_text(tmp_path, corpus):
    generate_corpus(tmp_path, n_messages=30000)
    bigger = Corpus(tmp_path, json.loads((tmp_path / "manifest.json").read_text(encoding="utf-8")))
    assert [(q["question"], q["answer"], q["type"]) for q in bigger.questions] == \
        [(q["question"], q["answer"], q["type"]) for q in corpus.questions]
    for small_q, big_q in zip(corpus.questions, bigger.questions):
        small_text = [corpus.message(e["source"], e["source_order"])["text"] for e in small_q["evidence"]]
        big_text = [bigger.message(e["source"], e["source_order"])["text"] for e in big_q["evidence"]]
        assert small_text == big_text


def test_too_few_messages_or_too_many_questions_are_refused(tmp_path):
    with pytest.raises(ValueError):
        generate_corpus(tmp_path, n_messages=500)
    with pytest.raises(ValueError):
        generate_corpus(tmp_path, n_questions=max_questions() + 1)


@pytest.mark.parametrize("n_questions", [1, 30])
def test_min_messages_is_the_fewest_the_generator_accepts(tmp_path, n_questions):
    minimum = min_messages(n_questions, SEED)
    assert generate_corpus(tmp_path / "ok", n_messages=minimum, n_questions=n_questions)["n_messages"] == minimum
    with pytest.raises(ValueError, match=f"need at least {minimum}$"):
        generate_corpus(tmp_path / "short", n_messages=minimum - 1, n_questions=n_questions)
    assert min_messages(n_questions, SEED + 1) == minimum   # the catalogue, not the seed, sets it


# ----------------------------------------------------------------------------- questions

def test_default_mix_is_the_papers(corpus):
    assert Counter(q["type"] for q in corpus.questions) == {"named_entity": 34, "contextual": 49, "aggregate": 17}
    assert [q["question_id"] for q in corpus.questions] == [f"q{i:03d}" for i in range(1, 101)]
    assert corpus.manifest["questions_per_type"] == {"named_entity": 34, "contextual": 49, "aggregate": 17}
    assert len({q["question"] for q in corpus.questions}) == 100


@pytest.mark.parametrize("n", [1, 7, 10, 20, 33, 50, 99, 101])
def test_other_question_counts_keep_the_proportions(n):
    counts = type_counts(n)
    assert sum(counts.values()) == n
    for t, share in (("named_entity", 0.34), ("contextual", 0.49), ("aggregate", 0.17)):
        assert abs(counts[t] - n * share) < 1


def test_twenty_questions_are_generated_in_proportion(tmp_path):
    manifest = generate_corpus(tmp_path, n_questions=20)
    questions = json.loads((tmp_path / "questions.json").read_text(encoding="utf-8"))["questions"]
    assert Counter(q["type"] for q in questions) == {"named_entity": 7, "contextual": 10, "aggregate": 3}
    assert manifest["n_questions"] == 20


def test_evidence_points_to_existing_complete_messages(corpus):
    for q in corpus.questions:
        assert q["evidence"], q["question_id"]
        assert any(e["relevance"] == 2 for e in q["evidence"]), q["question_id"]
        for e in q["evidence"]:
            assert set(e) == {"source", "source_order", "relevance"}
            assert e["relevance"] in (1, 2)
            assert 0 <= e["source_order"] < len(corpus.flat[e["source"]])
            m = corpus.message(e["source"], e["source_order"])
            assert set(m) == ALLOWED_KEYS, (q["question_id"], m)
            assert m["type"] == "text" and m["text"], (q["question_id"], m)


def test_named_entity_answer_is_in_a_primary_message_and_nowhere_else(corpus):
    for q in corpus.questions:
        if q["type"] != "named_entity":
            continue
        primary = [corpus.message(e["source"], e["source_order"])["text"] for e in corpus.primary(q)]
        assert any(q["answer"] in text for text in primary), q
        evidence = {(e["source"], e["source_order"]) for e in q["evidence"]}
        found = {(s, o) for s in SOURCES for o, (_, _, m) in enumerate(corpus.flat[s]) if q["answer"] in m["text"]}
        assert found <= evidence, q["question_id"]


def test_every_key_term_of_an_answer_is_in_a_primary_message(corpus):
    episodes = planted_episodes(SEED, 100)
    assert [ep.question for ep in episodes] == [q["question"] for q in corpus.questions]
    for ep, q in zip(episodes, corpus.questions):
        primary = [corpus.message(e["source"], e["source_order"])["text"] for e in corpus.primary(q)]
        assert ep.key_terms
        for term in ep.key_terms:
            assert any(term in text for text in primary), (q["question_id"], term)


def test_aggregate_primary_evidence_spans_dates_and_often_sources(corpus):
    aggregate = [q for q in corpus.questions if q["type"] == "aggregate"]
    multi_source = 0
    for q in aggregate:
        primary = corpus.primary(q)
        assert len(primary) >= 2, q["question_id"]
        assert len({corpus.day_of(e["source"], e["source_order"]) for e in primary}) >= 2, q["question_id"]
        multi_source += len({e["source"] for e in q["evidence"]}) >= 2
    assert multi_source >= len(aggregate) / 2


def test_some_questions_have_supporting_evidence(corpus):
    with_support = [q for q in corpus.questions if any(e["relevance"] == 1 for e in q["evidence"])]
    assert 10 <= len(with_support) < len(corpus.questions)


def _longest_common_substring(a: str, b: str) -> int:
    best = 0
    for i in range(len(a)):
        j = i + best + 1
        while j <= len(a) and a[i:j] in b:
            best = j - i
            j += 1
    return best


def test_questions_paraphrase_rather_than_copy_the_evidence(corpus):
    episodes = planted_episodes(SEED, 100)
    for ep, q in zip(episodes, corpus.questions, strict=True):
        question = q["question"].replace(q["answer"], "")
        if ep.key_token:
            question = question.replace(ep.key_token, "\0")
        for e in q["evidence"]:
            text = corpus.message(e["source"], e["source_order"])["text"]
            assert _longest_common_substring(question, text) <= 7, (q["question_id"], text)


def test_hard_distractors_share_the_evidence_vocabulary(corpus):
    evidence = {(e["source"], e["source_order"]) for q in corpus.questions for e in q["evidence"]}
    decoy_names = EVIDENCE_POOLS["decoy_cafe"] + EVIDENCE_POOLS["decoy_inn"]
    decoys = [(s, o) for s in SOURCES for o, (_, _, m) in enumerate(corpus.flat[s])
              if any(name in m["text"] for name in decoy_names)]
    assert decoys and not set(decoys) & evidence
    swap_requests = [m for _, _, m in corpus.flat["parttime_cafe"] if "代わってもらえる人" in m["text"]]
    assert len(swap_requests) >= 3


# ----------------------------------------------------------------------------- rhythm and noise

def test_long_sessions_need_several_windows(corpus):
    best = 0
    for s in SOURCES:
        times = _timestamps(corpus, s)
        lo = 0
        for hi, t in enumerate(times):
            while t - times[lo] > timedelta(hours=3):
                lo += 1
            best = max(best, hi - lo + 1)
    assert best >= 100


def test_gaps_longer_than_180_minutes_split_sessions_within_days(corpus):
    long_gaps_same_day = 0
    quick_replies = 0
    for s in SOURCES:
        times = _timestamps(corpus, s)
        for a, b in zip(times, times[1:]):
            if b - a > timedelta(minutes=180) and a.date() == b.date():
                long_gaps_same_day += 1
            if b - a <= timedelta(seconds=60):
                quick_replies += 1
    assert long_gaps_same_day >= 50
    assert quick_replies >= N_SMALL * 0.2


def test_a_few_records_miss_time_sender_or_type(corpus):
    missing = Counter()
    for _, _, m in corpus.all_messages():
        for key in ("time", "type"):
            missing[key] += key not in m
        # one field is dropped a record: no sender and no type is a system message (senderless) without its type
        missing["sender"] += "sender" not in m and m.get("type", "system") != "system"
    total = sum(missing.values())
    assert 0.001 * N_SMALL <= total <= 0.006 * N_SMALL
    assert all(missing[k] > 0 for k in ("time", "sender", "type"))
    assert corpus.manifest["n_missing_field_records"] == total


def test_some_pasted_notes_are_very_long(corpus):
    lengths = sorted(len(m["text"]) for _, _, m in corpus.all_messages())
    assert lengths[-1] > 5000
    assert 1 <= sum(n > 5000 for n in lengths) <= 2
    assert sum(n >= 1000 for n in lengths) <= 0.001 * N_SMALL


def test_chat_noise_is_present(corpus):
    messages = [m for _, _, m in corpus.all_messages()]
    texts = Counter(m["text"] for m in messages)
    types = Counter(m.get("type") for m in messages)
    for backchannel in ("うん", "りょ", "おけ", "まじか", "w", "草", "ありがと"):
        assert texts[backchannel] > 0, backchannel
    assert types["sticker"] > 0.03 * N_SMALL and types["photo"] > 0 and types["video"] > 0 and types["file"] > 0
    stickers = [m for m in messages if m["text"] == "[スタンプ]"]
    assert all(m.get("type", "sticker") == "sticker" for m in stickers)  # a dropped type is the only exception
    assert types["sticker"] <= len(stickers) <= types["sticker"] + types[None]
    assert any(t.startswith("☎ 通話時間") for t in texts) and types["call"] > 0
    assert any("グループに参加しました。" in t for t in texts) and types["system"] > 0
    assert all("sender" not in m for m in messages if m.get("type") == "system")
    assert sum(n for t, n in texts.items() if "https://" in t) > 0.005 * N_SMALL
    assert 0 < texts[""] < 0.005 * N_SMALL


def test_filler_lines_are_varied(corpus):
    backchannels = {b for bank in BACKCHANNELS.values() for b in bank}
    for s in SOURCES:
        lines = [m["text"] for _, _, m in corpus.flat[s]
                 if m.get("type", "text") == "text" and len(m["text"]) >= 8 and m["text"] not in backchannels]
        top_count = Counter(lines).most_common(1)[0][1]
        assert top_count <= 0.03 * len(corpus.flat[s]), s
        assert len(set(lines)) >= 0.5 * len(lines), s


def test_weather_talk_follows_the_season(corpus):
    snow_months, pollen_months = Counter(), Counter()
    for _, d, m in corpus.all_messages():
        month = int(d[5:7])
        snow_months[month] += "雪降ってる" in m["text"]
        pollen_months[month] += "花粉やばい" in m["text"]
    assert sum(snow_months.values()) > 0 and sum(pollen_months.values()) > 0
    assert all(snow_months[m] == 0 for m in range(3, 12))
    assert all(pollen_months[m] == 0 for m in (1, 2, 6, 7, 8, 9, 10, 11, 12))


def test_supporting_evidence_is_sometimes_on_its_own_date(corpus):
    apart = 0
    for q in corpus.questions:
        primary_days = {corpus.day_of(e["source"], e["source_order"]) for e in corpus.primary(q)}
        support_days = {corpus.day_of(e["source"], e["source_order"]) for e in q["evidence"] if e["relevance"] == 1}
        apart += bool(support_days - primary_days)
    assert apart >= 10


# ----------------------------------------------------------------------------- lexical regime

def _evidence_tokens(corpus: Corpus, q: dict) -> set[str]:
    """BM25 tokens of a question's evidence lines (primary and supporting)."""
    from pmrag.retrieve.tokenizer import tokenize

    return {t for e in q["evidence"] for t in tokenize(corpus.message(e["source"], e["source_order"])["text"])}


def test_every_question_but_a_paraphrase_shares_whole_tokens_with_its_evidence(corpus):
    from pmrag.retrieve.tokenizer import tokenize

    for ep, q in zip(planted_episodes(SEED, 100), corpus.questions, strict=True):
        shared = set(tokenize(q["question"])) & _evidence_tokens(corpus, q)
        assert bool(shared) == (ep.cue != "paraphrase"), (q["question_id"], shared)


def test_the_words_a_question_shares_with_its_evidence_recur_in_unrelated_chats(corpus):
    from pmrag.retrieve.tokenizer import tokenize

    outside: Counter[str] = Counter()
    evidence_keys = {(e["source"], e["source_order"]) for q in corpus.questions for e in q["evidence"]}
    for s in SOURCES:
        for o, (_, _, m) in enumerate(corpus.flat[s]):
            if (s, o) not in evidence_keys:
                outside.update(set(tokenize(m["text"])))
    all_recur = mixed = 0
    for ep, q in zip(planted_episodes(SEED, 100), corpus.questions, strict=True):
        if ep.cue == "paraphrase":      # shares nothing (test above)
            continue
        tokens = set(tokenize(q["question"]))
        # at least 4 unrelated messages hold one of its words (the fewest: q016's 入院/退院/診察, 4 since the
        # exact-token decoys took ~200 messages of the filler's budget; most questions have dozens)
        assert max(outside[t] for t in tokens) >= 4, q["question_id"]
        if ep.cue == "mixed":           # an exact question's key is rare by design (test below)
            shared = tokens & _evidence_tokens(corpus, q)
            all_recur += all(outside[t] > 0 for t in shared)
            mixed += 1
    assert all_recur >= 0.9 * mixed


# ----------------------------------------------------------------------------- exact-token and paraphrase questions

def _cued(corpus: Corpus, cue: str):
    return [(ep, q) for ep, q in zip(planted_episodes(SEED, 100), corpus.questions, strict=True) if ep.cue == cue]


def _script(token: str) -> str:
    """The token class of the paper's tokenizer a token is from (every key is ASCII or Katakana)."""
    if re.fullmatch(r"[0-9a-z-]+", token):
        return "ascii"
    return "katakana" if re.fullmatch(r"[\u30a0-\u30ff]+", token) else "other"


def test_each_question_is_tagged_with_its_cue(corpus):
    cues = [ep.cue for ep in planted_episodes(SEED, 100)]
    assert [q["tags"] for q in corpus.questions] == [{"cue": cue} for cue in cues]
    assert set(cues) == {"mixed", "exact", "paraphrase"}


def test_both_kinds_of_question_are_planted_outside_aggregate(corpus):
    exact, paraphrase = _cued(corpus, "exact"), _cued(corpus, "paraphrase")
    assert len(exact) >= 12 and len(paraphrase) >= 9
    assert {q["type"] for _, q in exact + paraphrase} == {"named_entity", "contextual"}


def test_an_exact_question_hinges_on_a_key_token_found_only_in_its_evidence(corpus):
    """The key is one token, in a primary evidence line and in no other message, so no chunk without evidence
    holds it (stricter than "in at most 3 other chunks"); every other word of the question is in the evidence."""
    from pmrag.retrieve.tokenizer import tokenize

    evidence_keys = {(e["source"], e["source_order"]) for q in corpus.questions for e in q["evidence"]}
    for ep, q in _cued(corpus, "exact"):
        [key] = tokenize(ep.key_token)
        question = set(tokenize(q["question"]))
        assert key in question, q["question_id"]
        assert any(key in tokenize(corpus.message(e["source"], e["source_order"])["text"]) for e in corpus.primary(q))
        assert question <= _evidence_tokens(corpus, q), (q["question_id"], question - _evidence_tokens(corpus, q))
        own = {(e["source"], e["source_order"]) for e in q["evidence"]}
        elsewhere = [(s, o) for s in SOURCES for o, (_, _, m) in enumerate(corpus.flat[s])
                     if (s, o) not in own and key in tokenize(m["text"])]
        assert elsewhere == [], (q["question_id"], key, elsewhere)
        assert not own - evidence_keys


def test_an_exact_question_has_decoys_in_its_own_words_with_another_key(corpus):
    from pmrag.demo.episodes import EXACT_DECOYS
    from pmrag.retrieve.tokenizer import tokenize

    written = {m["text"] for _, _, m in corpus.all_messages()}
    for ep, q in _cued(corpus, "exact"):
        [key] = tokenize(ep.key_token)
        rest = set(tokenize(q["question"])) - {key}
        assert len(ep.decoys) == EXACT_DECOYS, q["question_id"]
        assert len({(d.source, d.day) for d in ep.decoys}) == EXACT_DECOYS      # other chats or other dates
        others = set()
        for decoy in ep.decoys:
            line = decoy.lines[0].text
            assert line in written and decoy.lines[0].rel == 0
            tokens = set(tokenize(line))
            assert rest <= tokens and key not in tokens, (q["question_id"], line)
            [other] = [t for t in tokens - rest if _script(t) == _script(key)]
            others.add(other)
        assert len(others) == EXACT_DECOYS, q["question_id"]


def test_a_paraphrase_question_shares_no_token_with_its_evidence_and_some_with_a_decoy(corpus):
    from pmrag.retrieve.tokenizer import tokenize

    written = {m["text"] for _, _, m in corpus.all_messages()}
    for ep, q in _cued(corpus, "paraphrase"):
        question = set(tokenize(q["question"]))
        assert question and not question & _evidence_tokens(corpus, q), q["question_id"]
        decoy_lines = [line.text for decoy in ep.decoys for line in decoy.lines]
        assert all(text in written for text in decoy_lines)
        assert any(question & set(tokenize(text)) for text in decoy_lines), q["question_id"]
