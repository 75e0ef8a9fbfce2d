"""Rhythm, filler, noise and writing of the synthetic LINE history.

Each source is built on its own: the planted scenes (padded with a little filler), a few pasted
long notes, some very long rapid-fire sessions and then ordinary filler sessions until the source's
message budget is spent exactly.  Sessions are given dates, then placed inside each day with gaps
longer than 180 minutes between them when the day has room (shorter gaps merge them, as happens on
busy days).  Files are written one message per line, in a fixed key order, so that the same
arguments give byte-identical output.
"""

from __future__ import annotations

import json
import math
import random
import re
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from pmrag.demo.cast import END, SOURCES, START, USER, SourceSpec
from pmrag.demo.episodes import QUESTION_TYPES, Episode, Scene, build_episodes
from pmrag.demo.vocab import (
    ALBUMS, BACKCHANNELS, CALL_TEXTS, GROUP_CALL_TEXTS, LONG_NOTES, MEDIA, NOTE_KINDS_BY_SOURCE, POLITE_OPENERS,
    POLITE_SUFFIXES, PREFIXES, SEASON_OF_MONTH, SEASONAL_WEATHER, SLOTS, SUFFIXES, SYSTEM_EVENTS, TOPICS,
)

MISSING_FIELD_RATE = 0.003
SPLIT_GAP_S = 181 * 60
DAY_END_S = 86399
LONG_SESSION_EVERY = 2500
MIN_FILLER_PER_SOURCE = 100
OVER_5000_NOTES = 2
NIGHT_OWL_RATE = 0.06

# (probability, low seconds, high seconds) mixtures of the gap between consecutive messages
TEMPOS: dict[str, tuple[tuple[float, int, int], ...]] = {
    "rally": ((0.75, 3, 30), (0.22, 30, 120), (0.03, 120, 360)),
    "lively": ((0.6, 3, 40), (0.3, 40, 180), (0.08, 180, 900), (0.02, 900, 3600)),
    "normal": ((0.45, 5, 60), (0.30, 60, 480), (0.19, 480, 2400), (0.06, 2400, 9000)),
}

_SLOT_RE = re.compile(r"\{(\w+)\}")
_URL_CHARS = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789_-"
_TYPO_SWAPS = {"が": "か", "ざ": "さ", "だ": "た", "ば": "は", "っ": "つ", "ゃ": "や", "ょ": "よ", "ゅ": "ゆ", "ー": "〜",
               "ど": "と", "ぐ": "く", "じ": "し"}
_TIMES: list[str] = []

# A message before writing: (sender or None, type, text, uid of the planted line or -1)
Proto = tuple


@dataclass
class Session:
    """Messages meant to be sent in one sitting on one day."""

    day: date
    protos: list[Proto]
    tempo: str
    opening: bool = False


def compile_template(template: str) -> tuple[str, ...]:
    """Split ``"{day}ひま？"`` into alternating literals and slot names (odd positions)."""
    parts = tuple(_SLOT_RE.split(template))
    unknown = [p for p in parts[1::2] if p not in SLOTS]
    if unknown:
        raise KeyError(f"template {template!r} uses unknown slots {unknown}")
    return parts


def fill(rng: random.Random, compiled: tuple[str, ...], slots: dict[str, tuple[str, ...]] = SLOTS) -> str:
    """Fill a compiled template with random words from ``slots``."""
    return "".join(p if i % 2 == 0 else rng.choice(slots[p]) for i, p in enumerate(compiled))


def typo(rng: random.Random, text: str) -> str:
    """Introduce one small typing error: a dropped, doubled, swapped or mis-voiced character."""
    if len(text) < 3:
        return text
    i = rng.randrange(len(text) - 1)
    op = rng.random()
    if op < 0.3:
        return text[:i] + text[i + 1:]
    if op < 0.55:
        return text[:i] + text[i] + text[i:]
    if op < 0.8:
        return text[:i] + text[i + 1] + text[i] + text[i + 2:]
    for j, ch in enumerate(text):
        if ch in _TYPO_SWAPS:
            return text[:j] + _TYPO_SWAPS[ch] + text[j + 1:]
    return text + text[-1]


def clock(seconds: int) -> str:
    """``HH:MM:SS`` for a second of the day (a table built once)."""
    if not _TIMES:
        _TIMES.extend(f"{h:02d}:{m:02d}:{s:02d}" for h in range(24) for m in range(60) for s in range(60))
    return _TIMES[seconds]


class Filler:
    """Everyday chat for one source: senders, topics, media, calls, system events, typos."""

    def __init__(self, spec: SourceSpec, rng: random.Random):
        self.spec = spec
        self.rng = rng
        self.senders = list(spec.senders)
        weights = [spec.user_share] + [w * (1 - spec.user_share) / sum(w for _, w in spec.members) for _, w in spec.members]
        self.sender_cum = _cumulative(weights)
        self.topics = [name for name, _ in spec.topics]
        self.topic_cum = _cumulative([w for _, w in spec.topics])
        self.templates = {name: [compile_template(t) for t in TOPICS[name]] for name in self.topics}
        self.back = BACKCHANNELS[spec.register]
        self.polite = spec.register == "polite"
        self.casual = spec.register == "casual"
        self.p_file = 0.02 if spec.name in ("study_group", "work_project") else 0.002
        self.p_call = 0.01 if not spec.is_group else 0.003
        self.p_system = 0.003 if spec.is_group else 0.0
        self.p_sticker = 0.02 if self.polite else 0.065
        self.slots = dict(SLOTS)

    def session(self, n: int, day: date) -> list[Proto]:
        """``n`` filler messages of one conversation on ``day``, with runs by the same sender.

        The weather talk follows the season.  A text already sent in the last few messages is drawn
        again once, so a session rarely repeats itself word for word.
        """
        rng = self.rng
        self.slots["weather"] = SEASONAL_WEATHER[SEASON_OF_MONTH[day.month]]
        topic = self._topic()
        prev = None
        out: list[Proto] = []
        for _ in range(n):
            if rng.random() < 0.08:
                topic = self._topic()
            if prev is None or rng.random() >= 0.42:
                sender = rng.choices(self.senders, cum_weights=self.sender_cum)[0]
                if sender == prev:
                    sender = rng.choices(self.senders, cum_weights=self.sender_cum)[0]
            else:
                sender = prev
            prev = sender
            msg = self.message(sender, topic)
            if msg[1] == "text" and any(msg[2] == m[2] for m in out[-8:]):
                msg = self.message(sender, topic)
            out.append(msg)
        return out

    def message(self, sender: str, topic: str) -> Proto:
        """One filler message from ``sender`` about ``topic`` (or media, a call, a system event...)."""
        rng = self.rng
        r = rng.random()
        if r < self.p_sticker:
            return (sender, "sticker", MEDIA["sticker"], -1)
        r -= self.p_sticker
        if r < 0.03:
            return (sender, "photo", MEDIA["photo"], -1)
        r -= 0.03
        if r < 0.004:
            return (sender, "video", MEDIA["video"], -1)
        r -= 0.004
        if r < self.p_file:
            return (sender, "file", MEDIA["file"], -1)
        r -= self.p_file
        if r < self.p_call:
            return (sender, "call", self._call_text(), -1)
        r -= self.p_call
        if r < self.p_system:
            return (None, "system", self._system_text(), -1)
        r -= self.p_system
        if r < 0.012:
            return (sender, "text", self._url_text(), -1)
        r -= 0.012
        if r < 0.0008:
            return (sender, "text", "", -1)
        r -= 0.0008
        if r < 0.002:
            return (sender, "text", self._rant(topic), -1)
        r -= 0.002
        if r < 0.27:
            text = rng.choice(self.back)
        else:
            text = self._decorate(fill(rng, rng.choice(self.templates[topic]), self.slots))
        if not self.polite and rng.random() < 0.02:
            text = typo(rng, text)
        return (sender, "text", text, -1)

    def _topic(self) -> str:
        """A topic drawn with the source's topic weights."""
        return self.rng.choices(self.topics, cum_weights=self.topic_cum)[0]

    def _decorate(self, text: str) -> str:
        """Polite openers and closers, or casual fillers (てか, そういえば) and endings (w, 笑, 〜, emoji)."""
        rng = self.rng
        if self.polite:
            return rng.choice(POLITE_OPENERS) + text + rng.choice(POLITE_SUFFIXES)
        if self.casual and rng.random() < 0.12:
            text = rng.choice(PREFIXES) + text
        if rng.random() < 0.4:
            text += rng.choice(SUFFIXES)
        return text

    def _call_text(self) -> str:
        """A call record: duration, missed or cancelled; group calls start and end."""
        rng = self.rng
        if self.spec.is_group:
            return rng.choice(GROUP_CALL_TEXTS)
        if rng.random() < 0.25:
            return rng.choice(CALL_TEXTS)
        minutes = int(rng.expovariate(1 / 18))
        if minutes >= 60:
            return f"☎ 通話時間 {minutes // 60}:{minutes % 60:02d}:{rng.randint(0, 59):02d}"
        return f"☎ 通話時間 {minutes}:{rng.randint(0, 59):02d}"

    def _system_text(self) -> str:
        """A system event naming a member (unsent message, note, album, announcement)."""
        rng = self.rng
        template = rng.choice(SYSTEM_EVENTS)
        return template.format(member=rng.choice(self.senders), album=rng.choice(ALBUMS))

    def _url_text(self) -> str:
        """A shared link, sometimes with a few words before it."""
        rng = self.rng
        url = rng.choice(SLOTS["url"]) + "".join(rng.choice(_URL_CHARS) for _ in range(11))
        lead = rng.choice(("", "", "これ見て ", "ここどう？\n", "", "参考に→ ", "これ "))
        return lead + url

    def _rant(self, topic: str) -> str:
        """A multi-line message of 4-12 lines on one topic."""
        rng = self.rng
        lines = [self._decorate(fill(rng, rng.choice(self.templates[topic]), self.slots)) for _ in range(rng.randint(4, 12))]
        return "\n".join(lines)

    def long_note(self, target: int) -> str:
        """A pasted note (minutes, itinerary, recipe, report draft, letter) of about ``target`` characters."""
        rng = self.rng
        kind = rng.choice(NOTE_KINDS_BY_SOURCE[self.spec.name])
        bank = [compile_template(t) for t in LONG_NOTES[kind]]
        topic_bank = [t for name in self.topics for t in self.templates[name]]
        lines = [fill(rng, bank[0])]
        size = len(lines[0])
        item = 0
        while size < target:
            if rng.random() < 0.55:
                line = fill(rng, rng.choice(bank[1:]))
            else:
                item += 1
                line = f"{item}. " + fill(rng, rng.choice(topic_bank), self.slots)
            lines.append(line)
            size += len(line) + 1
        text = "\n".join(lines)
        return text[:target] if len(text) > target else text


def _cumulative(weights) -> list[float]:
    """Running sums of ``weights`` for ``Random.choices(cum_weights=...)``."""
    total, out = 0.0, []
    for w in weights:
        total += w
        out.append(total)
    return out


def _gaps(rng: random.Random, n: int, tempo: str) -> list[int]:
    """Seconds between consecutive messages of a session of ``n`` messages (``n - 1`` gaps)."""
    mix = TEMPOS[tempo]
    out = []
    for _ in range(n - 1):
        r = rng.random()
        for p, lo, hi in mix:
            if r < p:
                out.append(rng.randint(lo, hi))
                break
            r -= p
        else:
            out.append(rng.randint(mix[-1][1], mix[-1][2]))
    return out


def _tempo_for(size: int) -> str:
    """Long sessions are rapid-fire, medium ones lively, short ones leisurely."""
    if size >= 100:
        return "rally"
    if size >= 20:
        return "lively"
    return "normal"


def _active_days(spec: SourceSpec, rng: random.Random) -> tuple[list[date], list[float]]:
    """The source's days with cumulative weights: weekday pattern, a random monthly mood, seasons."""
    months: dict[tuple[int, int], float] = {}
    days, weights = [], []
    d = spec.start
    while d <= spec.end:
        key = (d.year, d.month)
        if key not in months:
            months[key] = rng.lognormvariate(0.0, 0.35)
        w = spec.weekday_weights[d.weekday()] * months[key]
        for month_set, factor in spec.month_factors:
            if d.month in month_set:
                w *= factor
        days.append(d)
        weights.append(w)
        d += timedelta(days=1)
    return days, _cumulative(weights)


def _session_sizes(rng: random.Random, budget: int, n_days: int) -> list[int]:
    """Heavy-tailed session sizes summing exactly to ``budget``; denser corpora get longer sessions."""
    mean = max(10.0, budget / (n_days * 3.2))
    sigma = 1.0
    mu = math.log(mean) - sigma * sigma / 2
    sizes = []
    left = budget
    while left > 0:
        size = min(left, max(1, min(400, int(rng.lognormvariate(mu, sigma)))))
        sizes.append(size)
        left -= size
    return sizes


class SourceBuilder:
    """Builds the dated, timed message list of one source from its budget and planted scenes."""

    def __init__(self, spec: SourceSpec, rng: random.Random, filler_budget: int):
        self.spec = spec
        self.rng = rng
        self.left = filler_budget
        self.filler = Filler(spec, rng)
        self.sessions: list[Session] = []

    def take(self, n: int) -> int:
        """Reserve up to ``n`` filler messages from the budget; returns how many were granted."""
        n = max(0, min(n, self.left))
        self.left -= n
        return n

    def add_group_creation(self) -> None:
        """The group's creation and its members joining, on the source's first day."""
        if not self.spec.is_group:
            return
        creator, *others = self.spec.senders[1:] + (USER,)
        events = [f"{creator}がグループを作成しました。"] + [f"{m}がグループに参加しました。" for m in others]
        events = events[: self.take(len(events))]
        protos = [(None, "system", text, -1) for text in events]
        protos += self.filler.session(self.take(3), self.spec.start)
        self.sessions.append(Session(self.spec.start, protos, "normal", opening=True))

    def add_scene(self, scene: Scene) -> None:
        """A planted scene with a little filler before and after, in one session."""
        pre = self.filler.session(self.take(self.rng.randint(0, 4)), scene.day)
        post = self.filler.session(self.take(self.rng.randint(0, 6)), scene.day)
        planted = [(line.speaker, line.type, line.text, line.uid) for line in scene.lines]
        self.sessions.append(Session(scene.day, pre + planted + post, "lively"))

    def add_long_note(self, length: int, days: list[date], avoid: set[date]) -> None:
        """A pasted long note in a short session on a day without planted scenes.

        A note over 5,000 characters opens its session, so the chunker keeps it as a single-message
        chunk over the summary-input limit (the paper's raw_text maximum of 10,031 characters).
        """
        if self.take(1) == 0:
            return
        day = self.rng.choice([d for d in days if d not in avoid] or days)
        sender = self.rng.choice(self.spec.senders)
        n_before = self.rng.randint(0, 3)
        protos = self.filler.session(self.take(0 if length > 5000 else n_before), day)
        protos.append((sender, "text", self.filler.long_note(length), -1))
        protos += self.filler.session(self.take(self.rng.randint(1, 4)), day)
        self.sessions.append(Session(day, protos, "normal"))

    def add_filler_sessions(self, days: list[date], cum: list[float], n_long: int) -> None:
        """``n_long`` rapid sessions of 100-240 messages, then ordinary sessions until the budget is spent."""
        sizes = [self.take(self.rng.randint(100, 240)) for _ in range(n_long)]
        sizes = [s for s in sizes if s > 0]
        sizes += _session_sizes(self.rng, self.take(self.left), len(days))
        chosen = self.rng.choices(days, cum_weights=cum, k=len(sizes))
        for size, day in zip(sizes, chosen):
            self.sessions.append(Session(day, self.filler.session(size, day), _tempo_for(size)))

    def timeline(self) -> list[tuple[date, list[tuple[int, Proto]]]]:
        """Place every session inside its day; returns ``(date, [(second of day, proto)])`` sorted by date."""
        by_day: dict[date, list[Session]] = {}
        for s in self.sessions:
            if s.protos:
                by_day.setdefault(s.day, []).append(s)
        return [(day, self._place_day(by_day[day])) for day in sorted(by_day)]

    def _place_day(self, sessions: list[Session]) -> list[tuple[int, Proto]]:
        """Times for the sessions of one day, in random order (the group's creation first).

        The day usually starts after the source's first hour; a few days start just after midnight
        (a late-night chat).  Sessions are kept apart by more than 180 minutes as long as the day has
        room; the rest are joined by short gaps.  A day too full even for that starts before the
        source's usual hour, and as a last resort its message gaps are compressed to fit before midnight.
        """
        rng = self.rng
        first = [s for s in sessions if s.opening]
        rest = [s for s in sessions if not s.opening]
        rng.shuffle(rest)
        sessions = first + rest
        gaps = [_gaps(rng, len(s.protos), s.tempo) for s in sessions]
        busy = sum(sum(g) for g in gaps)
        n_joins = len(sessions) - 1
        window_start = min(self.spec.hours * 3600, max(0, DAY_END_S - busy - 60 * n_joins))
        if busy + 60 * n_joins > DAY_END_S:
            factor = (DAY_END_S - 60 * n_joins) / busy
            gaps = [[int(x * factor) for x in g] for g in gaps]
            busy = sum(sum(g) for g in gaps)
        if rng.random() < NIGHT_OWL_RATE:
            window_start = 0
        inter = self._joins(n_joins, DAY_END_S - window_start - busy - 60 * n_joins)
        slack = DAY_END_S - window_start - busy - sum(inter)
        if window_start == 0:
            t = rng.randint(0, min(slack, 5400))
        else:
            t = window_start + int(slack * rng.betavariate(2.2, 1.6))
        placed = []
        for i, (s, g) in enumerate(zip(sessions, gaps)):
            if i:
                t += inter[i - 1]
            placed.append((t, s.protos[0]))
            for gap, proto in zip(g, s.protos[1:]):
                t += gap
                placed.append((t, proto))
        return placed

    def _joins(self, n: int, spare: int) -> list[int]:
        """``n`` gaps between sessions, each at least 60 s, using at most ``spare`` extra seconds.

        Most are longer than 180 minutes (a new session for the chunker) while the spare time lasts.
        """
        rng = self.rng
        out = [60] * n
        order = list(range(n))
        rng.shuffle(order)
        for i in order:
            if rng.random() < 0.85 and spare >= SPLIT_GAP_S:
                extra = rng.randint(SPLIT_GAP_S, min(300 * 60, spare)) - 60
            else:
                extra = rng.randint(0, max(0, min(1200, spare)))
            out[i] += extra
            spare -= extra
        return out


def _largest_remainder(total: int, weights: list[float]) -> list[int]:
    """Integer shares of ``total`` proportional to ``weights`` that sum to ``total`` exactly."""
    s = sum(weights)
    exact = [total * w / s for w in weights]
    shares = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - shares[i]), i))
    for i in order[: total - sum(shares)]:
        shares[i] += 1
    return shares


def _note_lengths(rng: random.Random, n_messages: int) -> list[int]:
    """Lengths of the pasted long notes: two over 5,000 characters, the rest 1,000-3,800."""
    n = max(3, round(n_messages / 5000))
    lengths = [rng.randint(5100, 5900) for _ in range(OVER_5000_NOTES)]
    lengths += [1000 + int(2800 * rng.random() ** 1.5) for _ in range(n - OVER_5000_NOTES)]
    return lengths


def _write_source(path: Path, name: str, timeline, noise_rng: random.Random, positions: dict) -> tuple[int, int]:
    """Write one source file; record planted positions; return (messages written, records missing a key)."""
    enc = json.JSONEncoder(ensure_ascii=False)
    out = ["{"]
    order = 0
    missing = 0
    for di, (day, items) in enumerate(timeline):
        out.append(f' "{day.isoformat()}": [')
        body = []
        for sec, (sender, type_, text, uid) in items:
            drop = None
            if uid >= 0:
                positions[uid] = (name, order)
            elif noise_rng.random() < MISSING_FIELD_RATE:
                drop = noise_rng.choice(("time", "type") if sender is None else ("time", "sender", "type"))
                missing += 1
            rec = {}
            if drop != "time":
                rec["time"] = clock(sec)
            if sender is not None and drop != "sender":
                rec["sender"] = sender
            if drop != "type":
                rec["type"] = type_
            rec["text"] = text
            body.append("  " + enc.encode(rec))
            order += 1
        out.append(",\n".join(body))
        out.append(" ]," if di < len(timeline) - 1 else " ]")
    out.append("}")
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write("\n".join(out) + "\n")
    return order, missing


def _question_records(episodes: list[Episode], positions: dict) -> list[dict]:
    """The ``questions.json`` entries, evidence in the order the episode's lines were planted."""
    width = max(3, len(str(len(episodes))))
    records = []
    for i, ep in enumerate(episodes, 1):
        evidence = [
            {"source": positions[line.uid][0], "source_order": positions[line.uid][1], "relevance": line.rel}
            for scene in ep.scenes for line in scene.lines if line.rel > 0
        ]
        records.append({"question_id": f"q{i:0{width}d}", "question": ep.question, "type": ep.qtype,
                        "answer": ep.answer, "tags": {"cue": ep.cue}, "evidence": evidence})
    return records


def _dump_json(path: Path, obj) -> None:
    """Pretty, deterministic UTF-8 JSON with a final newline."""
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        json.dump(obj, fh, ensure_ascii=False, indent=1)
        fh.write("\n")


def _sub_seeds(seed: int) -> dict:
    """Independent seeds for each part, drawn in a fixed order from ``random.Random(seed)``."""
    master = random.Random(seed)
    return {
        "episodes": master.getrandbits(64),
        "notes": master.getrandbits(64),
        "noise": master.getrandbits(64),
        "sources": [master.getrandbits(64) for _ in SOURCES],
    }


def planted_episodes(seed: int, n_questions: int) -> list[Episode]:
    """The episodes (questions, answers, key terms, scenes) that :func:`generate` plants for these arguments.

    They depend on ``seed`` and ``n_questions`` only, never on ``n_messages``.
    """
    return build_episodes(random.Random(_sub_seeds(seed)["episodes"]), n_questions)


def min_messages(n_questions: int, seed: int = 20240410) -> int:
    """The fewest messages a corpus of ``n_questions`` questions can have (smaller is a ``ValueError`` in
    :func:`generate`): the messages its questions plant (evidence and decoys) plus
    :data:`MIN_FILLER_PER_SOURCE` for each source.  ``n_questions`` may be at most
    :func:`~pmrag.demo.episodes.max_questions`."""
    return _minimum_messages(_planted_per_source(_scenes_by_source(planted_episodes(seed, n_questions))))


def _planted_per_source(scenes: dict[str, list[Scene]]) -> dict[str, int]:
    return {name: sum(len(s.lines) for s in lst) for name, lst in scenes.items()}


def _minimum_messages(planted: dict[str, int]) -> int:
    return sum(planted.values()) + MIN_FILLER_PER_SOURCE * len(SOURCES)


def _scenes_by_source(episodes: list[Episode]) -> dict[str, list[Scene]]:
    """Every planted and decoy scene, grouped by source (sources in :data:`SOURCES` order)."""
    scenes: dict[str, list[Scene]] = {spec.name: [] for spec in SOURCES}
    for ep in episodes:
        for scene in ep.scenes + ep.decoys:
            scenes[scene.source].append(scene)
    return scenes


def _notes_by_source(rng: random.Random, n_messages: int) -> dict[str, list[int]]:
    """Long-note lengths dealt round-robin over the sources in a shuffled order."""
    order = [spec.name for spec in SOURCES]
    rng.shuffle(order)
    notes: dict[str, list[int]] = {spec.name: [] for spec in SOURCES}
    for i, length in enumerate(_note_lengths(rng, n_messages)):
        notes[order[i % len(order)]].append(length)
    return notes


def _build_source(spec: SourceSpec, seed: int, filler_budget: int, scenes: list[Scene], notes: list[int]):
    """The timeline of one source: opening events, planted scenes, long notes, then filler."""
    rng = random.Random(seed)
    builder = SourceBuilder(spec, rng, filler_budget)
    days, cum = _active_days(spec, rng)
    builder.add_group_creation()
    for scene in scenes:
        builder.add_scene(scene)
    planted_days = {s.day for s in scenes}
    for length in notes:
        builder.add_long_note(length, days, planted_days)
    n_long = 0 if spec.register == "polite" else filler_budget // LONG_SESSION_EVERY or int(filler_budget >= 600)
    builder.add_filler_sessions(days, cum, n_long)
    return builder.timeline()


def generate(out_dir: Path, seed: int, n_messages: int, n_questions: int) -> dict:
    """Write the source files, ``questions.json`` and ``manifest.json``; return the manifest."""
    seeds = _sub_seeds(seed)
    episodes = planted_episodes(seed, n_questions)
    scenes = _scenes_by_source(episodes)
    planted = _planted_per_source(scenes)
    minimum = _minimum_messages(planted)
    if n_messages < minimum:
        raise ValueError(f"n_messages={n_messages} is too small for {n_questions} questions; need at least {minimum}")
    fillers = _largest_remainder(n_messages - sum(planted.values()), [spec.weight for spec in SOURCES])
    notes = _notes_by_source(random.Random(seeds["notes"]), n_messages)
    noise_rng = random.Random(seeds["noise"])

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    positions: dict[int, tuple[str, int]] = {}
    counts: dict[str, int] = {}
    missing_total = 0
    for spec, source_seed, filler_budget in zip(SOURCES, seeds["sources"], fillers):
        timeline = _build_source(spec, source_seed, filler_budget, scenes[spec.name], notes[spec.name])
        written, missing = _write_source(out_dir / f"{spec.name}.json", spec.name, timeline, noise_rng, positions)
        counts[spec.name] = written
        missing_total += missing

    questions = _question_records(episodes, positions)
    _dump_json(out_dir / "questions.json", {"questions": questions})
    manifest = {
        "generator": "pmrag.demo",
        "seed": seed,
        "date_range": [START.isoformat(), END.isoformat()],
        "n_messages_requested": n_messages,
        "n_messages": sum(counts.values()),
        "messages_per_source": counts,
        "n_planted_messages": sum(planted.values()),
        "n_long_messages": sum(len(v) for v in notes.values()),
        "n_missing_field_records": missing_total,
        "n_questions": len(questions),
        "questions_per_type": {t: sum(q["type"] == t for q in questions) for t in QUESTION_TYPES},
        "files": [f"{spec.name}.json" for spec in SOURCES],
        "questions_file": "questions.json",
    }
    _dump_json(out_dir / "manifest.json", manifest)
    return manifest
