"""Planted evidence and the evaluation questions that ask about it.

An *episode* is one question with the scenes that answer it: short exchanges placed in one source
on one date, whose lines carry a relevance (2 = primary evidence, 1 = supporting, 0 = context).
Episodes come from *kinds* (a story pattern such as "a friend suggests a café"); each kind has a few
*variants* (another person, source or year), so instances of one kind are hard distractors for each
other and the question names what tells them apart (the person, the occasion, the period).

Names (cafés, inns, teachers, objects...) are drawn per seed from :data:`~pmrag.demo.vocab.EVIDENCE_POOLS`
without replacement; the filler never uses these pools.  Decoy scenes reuse the vocabulary of an
episode with another name or person and carry no relevance.

How questions are written (the rules every kind follows; the paper's questions are users asking about
their own chats, §4.1):

* **Same surface forms.**  A question names the people, places, shops, events and things of its
  episode the way the chat wrote them, so that the content words it shares with its evidence are the
  same tokens under the paper's BM25 tokenizer (lowercased ASCII words, Katakana runs, Kanji runs of
  two or more; Hiragana never counts).  A run is a token only as a whole: 「ライブハウス」 is not
  「ライブ」, 「恒例行事」 is not 「恒例」, 「陶芸教室」 is not 「陶芸」, so both sides use the same run (the
  chat writes 「陶芸の教室」 when the question asks about 「陶芸」).  Hiragana names (けんと, まい) never
  match; Kanji names (高橋, 店長) and sender names in the chunk text do.
* **Where the words are.**  The words a question shares with its episode sit in a primary line or in
  a line of the same scene (a context line that carries them is marked supporting, relevance 1).
* **By type.**  named_entity: the context of the name (occasion, place, product, person) in the
  chat's words, never the answer.  contextual: one or two words of the situation in the chat's words
  and the rest paraphrased (「代わりに頼んだこと」 for 「その代わり…お願い」).  aggregate: the topic of the
  story, which only some of its dated, spread-out scenes repeat.
* **Never copied.**  No question shares more than 7 consecutive characters with any evidence line
  (the answer aside), and no question text is placed in a chat; gold is only the planted lines.
* **Never sufficient.**  Every shared word also occurs in unrelated chats: the filler talks about the
  same occasions and things (:data:`~pmrag.demo.vocab.TOPICS`), decoy scenes repeat a name with
  another answer (a destination with another inn, a café's pudding at another café), and the generic
  words of questions (カフェ, 予約, 友達, 先輩, ゼミ, バイト, サークル...) occur in dozens of chunks, so a
  question has many positive-score candidates and the planted chunk must win on the combination.

Two kinds of question follow a rule of their own instead (``Episode.cue``), the two a real history
holds, whose different winners the paper counts in Table 9 (§7.4):

* **Exact token** (``cue="exact"``, 12 per 100): the question hinges on one rare exact string of its
  episode (``key_token``: a booking, order or parcel-slip number, a friend code, an online meeting's id,
  a ticket number, a station exit, a price, or a Katakana name of a wallet brand, a taxi company or an
  office building), which is one token under the paper's tokenizer and is written in a primary
  evidence line and in no other message.  Every other word of the question is in the evidence too.
  :data:`EXACT_DECOYS` decoy scenes in other chats or on other dates tell the same situation in the
  question's own words with another string of the key's shape (digits or capitals one or two off, a
  Katakana name one or two sounds off) and another outcome.  BM25's evidence chunk scores the key on
  top of every word a decoy shares; an embedding model blurs many such strings (multilingual-e5-small
  loses most long numbers among their decoys, yet still finds most short codes and Katakana names).
* **Paraphrase** (``cue="paraphrase"``, 9 per 100): the question is asked in words the chat never
  used (a category for an instance, 「ワンちゃん」 for 「子犬」, 「郵便受け」 for 「ポスト」, 「用立てた」 for
  「貸して」) and shares no token with its evidence lines; a decoy scene elsewhere uses the question's
  own words about something else, so BM25 finds the decoy and only meaning leads to the evidence.

Which questions follow which rule is fixed in the kinds below, not chosen by their scores; exact and
paraphrase questions draw their codes and decoy dates from :meth:`Ctx.local`, so the other
episodes' names and dates do not depend on them.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta

from pmrag.demo.cast import SOURCE_BY_NAME, USER
from pmrag.demo.vocab import EVIDENCE_POOLS

QUESTION_TYPES = ("named_entity", "contextual", "aggregate")
CUES = ("mixed", "exact", "paraphrase")
EXACT_DECOYS = 8
PAPER_MIX = {"named_entity": 34, "contextual": 49, "aggregate": 17}
_WEEKDAY_JA = "月火水木金土日"
U = USER


@dataclass
class Line:
    """One planted message. ``uid`` is set when the episode is registered and follows it to the file."""

    speaker: str
    text: str
    rel: int = 0
    type: str = "text"
    uid: int = -1


@dataclass
class Scene:
    """Consecutive planted lines in one source on one date."""

    source: str
    day: date
    lines: list[Line]


@dataclass
class Episode:
    """A question, its answer and the scenes holding its evidence.

    ``key_terms`` are strings that each appear in at least one primary evidence line: the part of
    the answer a reader must find there (tests check them against the written files).  ``cue`` says
    which words the question is asked in (:data:`CUES`, see the module's rules); ``key_token`` is the
    rare exact string an ``exact`` question hinges on.
    """

    kind: str
    qtype: str
    question: str
    answer: str
    key_terms: tuple[str, ...]
    scenes: list[Scene]
    decoys: list[Scene] = field(default_factory=list)
    cue: str = "mixed"
    key_token: str | None = None


def L(speaker: str, text: str, rel: int = 0, type: str = "text") -> Line:  # noqa: N802 - reads like a script line
    """A planted line."""
    return Line(speaker, text, rel, type)


def photo(speaker: str) -> Line:
    """A photo placeholder line."""
    return Line(speaker, "[写真]", 0, "photo")


def iso(text: str) -> date:
    """Parse ``YYYY-MM-DD``."""
    return date.fromisoformat(text)


def mdw(d: date) -> str:
    """Chat-style date: ``7/15(土)``."""
    return f"{d.month}/{d.day}({_WEEKDAY_JA[d.weekday()]})"


def md(d: date) -> str:
    """Question-style date: ``7月15日``."""
    return f"{d.month}月{d.day}日"


def season(d: date) -> str:
    """A period the way a person remembers it: ``2023年の夏``; winter months by month."""
    if d.month in (3, 4, 5):
        return f"{d.year}年の春"
    if d.month in (6, 7, 8):
        return f"{d.year}年の夏"
    if d.month in (9, 10, 11):
        return f"{d.year}年の秋"
    return f"{d.year}年{d.month}月ごろ"


def next_weekday(d: date, weekday: int, min_days: int = 1) -> date:
    """The first date at least ``min_days`` after ``d`` that falls on ``weekday`` (Monday = 0)."""
    d = d + timedelta(days=min_days)
    return d + timedelta(days=(weekday - d.weekday()) % 7)


def next_day_of_month(d: date, day: int) -> date:
    """The first date after ``d`` that is the ``day``-th of a month (``day`` <= 28)."""
    if d.day < day:
        return d.replace(day=day)
    return (d.replace(day=1) + timedelta(days=32)).replace(day=day)


class Ctx:
    """Randomness and name pools shared by the kinds while one set of episodes is built."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self._pools = {name: rng.sample(values, len(values)) for name, values in EVIDENCE_POOLS.items()}

    def take(self, pool: str) -> str:
        """Draw a name from an evidence pool, never the same one twice."""
        values = self._pools[pool]
        if not values:
            raise ValueError(f"evidence pool {pool!r} exhausted")
        return values.pop()

    def local(self, label: str) -> random.Random:
        """A generator for one episode's own extra draws (codes, decoy dates), seeded from this context's
        state and ``label`` without advancing it, so that the other episodes' draws stay as they were."""
        digest = hashlib.sha256(repr((self.rng.getstate(), label)).encode()).digest()
        return random.Random(int.from_bytes(digest[:8], "big"))

    def day(self, source: str, lo: str, hi: str, weekday: int | None = None, rng: random.Random | None = None) -> date:
        """A random date in ``[lo, hi]`` within the source's active range, optionally on a weekday
        (drawn from ``rng`` when given, else from the context's generator)."""
        spec = SOURCE_BY_NAME[source]
        first, last = max(iso(lo), spec.start), min(iso(hi), spec.end)
        if first > last:
            raise ValueError(f"empty date range {lo}..{hi} for source {source}")
        d = first + timedelta(days=(rng or self.rng).randint(0, (last - first).days))
        if weekday is not None:
            d += timedelta(days=(weekday - d.weekday()) % 7)
            if d > last:
                d -= timedelta(days=7)
            if d < first:
                raise ValueError(f"no weekday {weekday} in {lo}..{hi} for source {source}")
        return d

    def pick(self, options):
        """One of ``options``."""
        return self.rng.choice(options)


@dataclass(frozen=True)
class Kind:
    """A story pattern: its question type, its variants and the function that builds an episode."""

    name: str
    qtype: str
    variants: tuple[dict, ...]
    build: Callable[[Ctx, dict], Episode]


KINDS: list[Kind] = []


def kind(qtype: str, *variants: dict):
    """Register a builder ``build(ctx, variant) -> Episode`` as a kind with these variants."""

    def register(build):
        KINDS.append(Kind(build.__name__, qtype, tuple(variants), build))
        return build

    return register


def episode(qtype: str, question: str, answer: str, keys, scenes, decoys=(), cue: str = "mixed",
            key_token: str | None = None) -> Episode:
    """Assemble an episode (the kind name is filled in by :func:`build_episodes`)."""
    if cue not in CUES:
        raise ValueError(f"cue must be one of {CUES}, got {cue!r}")
    if (cue == "exact") != (key_token is not None):
        raise ValueError("an exact-cue episode names its key token, and only it")
    return Episode("", qtype, question, answer, tuple(keys), list(scenes), list(decoys), cue, key_token)


def near_misses(rng: random.Random, token: str, n: int) -> list[str]:
    """``n`` distinct strings of ``token``'s shape that differ from it in one or two characters:
    digits become other digits, ASCII capitals other capitals; separators and everything else stay."""
    slots = [i for i, c in enumerate(token) if c.isdigit() or "A" <= c <= "Z"]
    if not slots:
        raise ValueError(f"no digit or capital letter to vary in {token!r}")
    seen, out = {token}, []
    while len(out) < n:
        chars = list(token)
        for i in rng.sample(slots, min(len(slots), rng.choice((1, 2)))):
            pool = "0123456789" if chars[i].isdigit() else "ABCDEFGHJKLMNPRSTUVWXY"   # no I O Q Z: read as digits
            chars[i] = rng.choice([c for c in pool if c != chars[i] and not (i == 0 and c == "0")])
        candidate = "".join(chars)
        if candidate not in seen:
            seen.add(candidate)
            out.append(candidate)
    return out


# Who says an exact-token decoy, and where: a member of each talk room.
DECOY_VOICES = (("family", "母"), ("family", "そうた"), ("partner", "けんと"), ("friends_highschool", "りな"),
                ("friends_highschool", "あかり"), ("club_tennis", "はると"), ("club_tennis", "みゆ"),
                ("parttime_cafe", "ちひろ"), ("study_group", "しょう"), ("dm_mai", "まい"), ("dm_saki", "さき"),
                ("dm_souta", "そうた"))


def exact_decoys(ctx: Ctx, rng: random.Random, tokens, write, replies, outcomes) -> list[Scene]:
    """One decoy scene per token, the episode's situation told again with another key and another outcome:
    ``write(token)`` said by one of :data:`DECOY_VOICES` (drawn from ``rng``, each voice once), the user's reply
    (``replies`` in turn) and the outcome (``outcomes`` in turn) said by the same voice, on a date drawn from
    ``rng``: every decoy in another chat or on another date."""
    tokens = list(tokens)
    voices = rng.sample(DECOY_VOICES, len(tokens))
    scenes, seen = [], set()
    for i, ((src, who), token) in enumerate(zip(voices, tokens)):
        day = ctx.day(src, "2023-04-15", "2025-02-15", rng=rng)
        while (src, day) in seen:
            day = ctx.day(src, "2023-04-15", "2025-02-15", rng=rng)
        seen.add((src, day))
        scenes.append(Scene(src, day, [L(who, write(token)), L(U, replies[i % len(replies)]),
                                       L(who, outcomes[i % len(outcomes)])]))
    return scenes


# ----------------------------------------------------------------------------- named_entity

@kind("named_entity", {"source": "dm_mai", "who": "まい"}, {"source": "friends_highschool", "who": "あかり"},
      {"source": "dm_saki", "who": "さき"})
def cafe_suggestion(ctx: Ctx, v: dict) -> Episode:
    """A friend proposes a new café for a meet-up; the visit follows on Saturday."""
    src, a = v["source"], v["who"]
    cafe, decoy = ctx.take("cafe"), ctx.take("decoy_cafe")
    d = ctx.day(src, "2023-05-01", "2024-12-10")
    meet = next_weekday(d, 5, 2)
    s1 = Scene(src, d, [
        L(a, f"{mdw(meet)}ってひま？久々にお茶しよ"), L(U, "ひま！いこいこ"),
        L(a, f"{cafe}ってカフェが気になってて", 2),
        L(a, "駅の裏に先月オープンしたらしい、固めのプリンが看板なんだって", 1),
        L(U, "え、最高じゃん"), L(a, "13時に改札でどう？", 1), L(U, "おけ！"),
    ])
    s2 = Scene(src, meet, [L(U, "改札ついた〜"), L(a, "いま階段のぼってる！"), photo(U), L(a, "プリンほんとに固くて感動", 1)])
    dsrc, dwho = ctx.pick([s for s in (("partner", "けんと"), ("family", "母"), ("dm_souta", "そうた")) if s[0] != src])
    dd = ctx.day(dsrc, "2023-04-15", "2025-03-15")
    decoy_scene = Scene(dsrc, dd, [L(dwho, f"{decoy}ってカフェのプリン食べた？やわらかめで好き"), L(U, "まだ！今度行ってみる")])
    q = f"{season(meet)}に{a}と行った、プリンが看板メニューのカフェの名前は？"
    return episode("named_entity", q, cafe, [cafe], [s1, s2], [decoy_scene])


@kind("named_entity", {"variant": "thesis"}, {"variant": "cram"})
def helpful_teacher(ctx: Ctx, v: dict) -> Episode:
    """A teacher who helped: the seminar's thesis consultation, or the brother's cram-school teacher."""
    teacher = ctx.take("teacher")
    if v["variant"] == "thesis":
        d = ctx.day("study_group", "2024-04-15", "2024-06-30")
        s = Scene("study_group", d, [
            L("みなみ", "卒論のテーマ決まった？", 1), L(U, "まだ…方向性すら怪しい"),
            L(U, f"でも今日、{teacher}の研究室に行って、30分くらい話聞いてもらった", 2),
            L(U, "地域のお店が人の居場所になってる話、面白いから深めてみたらって", 1),
            L("しょう", "いいじゃん、方向見えてきたね"), L("だいき", "あの先生やさしいよな"),
        ])
        q = "卒論のテーマの相談で研究室まで話を聞きに行った先生って誰だっけ？"
    else:
        d = ctx.day("family", "2023-06-01", "2023-12-20")
        s = Scene("family", d, [
            L("母", f"そうたの塾の{teacher}、面談で数学がすごく伸びてるって褒めてくれたよ", 2),
            L("母", "冬期講習も毎日見てくれるって", 1), L(U, "よかったじゃん"), L("そうた", "まあね"),
        ])
        q = "弟の成績について三者で話したとき、理系の科目が伸びたってほめてくれた講師は？"
        decoy = Scene("dm_saki", ctx.day("dm_saki", "2023-04-15", "2025-02-15", rng=ctx.local("helpful_teacher:decoy")),
                      [L("さき", "理系の学部の友達、レポートで徹夜らしい"), L(U, "大変そう")])
        return episode("named_entity", q, teacher, [teacher], [s], [decoy], cue="paraphrase")
    return episode("named_entity", q, teacher, [teacher], [s])


@kind("named_entity", {"variant": "internship"}, {"variant": "seminar"})
def project_name(ctx: Ctx, v: dict) -> Episode:
    """The name given to a project: the internship's shopping-street event or the seminar's joint study."""
    project = ctx.take("project")
    if v["variant"] == "internship":
        d = ctx.day("work_project", "2024-06-05", "2024-06-28", weekday=ctx.rng.randint(0, 4))
        s = Scene("work_project", d, [
            L("高橋", "今回の商店街イベントの件ですが、社内での呼び名を決めました", 1),
            L("高橋", f"今後は{project}で統一します。フォルダ名も変更済みです", 2),
            L(U, "承知しました！"), L("森本", "了解です。チャットのタイトルも直しておきます"),
        ])
        q = "インターンでやった商店街イベント、社内では何て呼び名で統一してた？"
    else:
        d = ctx.day("study_group", "2023-10-01", "2024-01-31")
        s = Scene("study_group", d, [
            L("だいき", "共同研究、名前あったほうが申請書書きやすいよね", 1),
            L("みなみ", f"{project}はどう？なんか明るいし", 2), L(U, "いいと思う！"), L("しょう", "賛成、それで出そ", 1),
        ])
        q = "ゼミの共同研究の申請書に書いた名前は？"
    return episode("named_entity", q, project, [project], [s])


@kind("named_entity", {"variant": "partner"}, {"variant": "family"}, {"variant": "club"})
def forgotten_object(ctx: Ctx, v: dict) -> Episode:
    """Something of the user's left behind and found by someone else."""
    obj = ctx.take("object")
    if v["variant"] == "partner":
        d = ctx.day("partner", "2023-05-01", "2025-02-28")
        s = Scene("partner", d, [
            L("けんと", f"昨日のデートのあと、うちの玄関に{obj}置いてったでしょ", 2), L(U, "え、うそ、探してた！"),
            L("けんと", "次会うとき持ってくね"), L(U, "ありがと〜助かる"),
        ])
        q = "けんとの部屋から帰るとき、置きっぱなしにしちゃったものって何だっけ？"
        decoy = Scene("dm_mai", ctx.day("dm_mai", "2023-04-15", "2025-02-15", rng=ctx.local("forgotten_object:decoy")),
                      [L("まい", "部屋の掃除、やっと終わった"), L(U, "えらい")])
        return episode("named_entity", q, obj, [obj], [s], [decoy], cue="paraphrase")
    elif v["variant"] == "family":
        d = ctx.day("family", "2023-05-01", "2025-02-28")
        s = Scene("family", d, [
            L("母", f"大掃除で押し入れ片付けてたら、ゆいの{obj}出てきたよ", 2), L(U, "それずっと探してたやつ！"),
            L("母", "部屋の机に置いとくね"),
        ])
        q = "大掃除のとき母が押し入れを片付けてて見つけた私の物って？"
    else:
        d = ctx.day("club_tennis", "2023-08-25", "2024-09-10")
        s = Scene("club_tennis", d, [
            L("こうへい", f"合宿所に{obj}残ってたんだけど誰のかわかる？", 2), L(U, "私のだ…！"),
            L("こうへい", "次の練習で渡すわ"), L(U, "ありがとう🙏"),
        ])
        q = "サークルの合宿所に置きっぱなしだった私の物は何？"
    return episode("named_entity", q, obj, [obj], [s])


@kind("named_entity", {"variant": "partner"}, {"variant": "friends"})
def trip_inn(ctx: Ctx, v: dict) -> Episode:
    """Where the user stayed on a trip; a decoy inn is mentioned by someone else."""
    inn, dest, decoy = ctx.take("inn"), ctx.take("destination"), ctx.take("decoy_inn")
    if v["variant"] == "partner":
        d = ctx.day("partner", "2023-06-01", "2024-10-31")
        trip = next_weekday(d, 5, 14)
        s1 = Scene("partner", d, [
            L(U, f"{dest}の宿、{inn}にしたよ！", 2), L(U, "部屋に小さい露天風呂ついてるとこ", 1),
            L("けんと", "最高すぎる"), L("けんと", "電車は俺が調べとく"),
        ])
        s2 = Scene("partner", trip, [photo(U), L(U, "部屋ひろい！露天風呂ほんとにあった", 1), L("けんと", "先に温泉行ってくる")])
        q = f"けんとと{dest}に旅行したとき、部屋に露天風呂がついてた宿の名前は？"
        dsrc, dwho = "dm_mai", "まい"
    else:
        d = ctx.day("friends_highschool", "2024-12-01", "2025-01-31")
        trip = next_weekday(d, 5, 21)
        s1 = Scene("friends_highschool", d, [
            L("まい", f"{dest}の宿、{inn}で4人1部屋とれた！", 2), L("あかり", "神"),
            L("りな", "朝ごはんビュッフェなの嬉しい"), L(U, "卒業旅行っぽくなってきた〜", 1),
        ])
        s2 = Scene("friends_highschool", trip, [photo("りな"), L("まい", f"{dest}着いたー！", 1), L(U, "部屋からの眺めやばい")])
        q = f"高校の友達との卒業旅行で{dest}に行ったとき、4人1部屋で泊まった宿は？"
        dsrc, dwho = "partner", "けんと"
    dd = ctx.day(dsrc, "2023-04-15", "2025-03-15")
    decoy_scene = Scene(dsrc, dd, [L(dwho, f"前に{dest}に行ったとき、{decoy}に泊まったけど、部屋も広くてごはんおいしかったよ"), L(U, "宿選び迷うね")])
    return episode("named_entity", q, inn, [inn], [s1, s2], [decoy_scene])


@kind("named_entity", {"year": 2023}, {"year": 2024})
def camp_site(ctx: Ctx, v: dict) -> Episode:
    """Where the tennis circle's summer camp takes place that year."""
    camp, y = ctx.take("camp"), v["year"]
    d = ctx.day("club_tennis", f"{y}-05-15", f"{y}-06-30")
    start = ctx.rng.randint(18, 24)
    s = Scene("club_tennis", d, [
        L("はると", f"今年の夏合宿は{camp}に決まりました！", 2), L("はると", f"日程は8/{start}〜8/{start + 3}です", 1),
        L("みゆ", "やったー"), L(U, "楽しみ！"),
    ])
    camp_day = Scene("club_tennis", date(y, 8, start), [
        photo("こうへい"), L("はると", "合宿1日目おつかれさまでした！明日は8時半コート集合です", 1), L(U, "湖きれいすぎた"),
    ])
    q = f"{y}年の夏合宿、サークルで行った場所はどこだっけ？"
    return episode("named_entity", q, camp, [camp], [s, camp_day])


@kind("named_entity", {"variant": "family"}, {"variant": "mai"})
def pet_name(ctx: Ctx, v: dict) -> Episode:
    """The name of a newly adopted pet."""
    pet = ctx.take("pet")
    if v["variant"] == "family":
        d = ctx.day("family", "2023-05-01", "2024-12-31")
        s = Scene("family", d, [
            photo("母"), L("母", f"今日から家族です。子犬の名前は{pet}になりました🐶", 2), L("そうた", "かわいすぎる"),
            L(U, "はやく帰りたい"),
        ])
        q = "うちに来たワンちゃん、何て呼ぶことにした？"
        decoy = Scene("partner", ctx.day("partner", "2023-04-15", "2025-02-15", rng=ctx.local("pet_name:decoy")),
                      [L("けんと", "近所のワンちゃんに吠えられた"), L(U, "かわいいじゃん")])
        return episode("named_entity", q, pet, [pet], [s], [decoy], cue="paraphrase")
    else:
        d = ctx.day("dm_mai", "2023-05-01", "2024-12-31")
        s = Scene("dm_mai", d, [
            L("まい", "保護猫の譲渡会で運命の出会いした", 1), L("まい", f"名前は{pet}にした🐱", 2), photo("まい"),
            L(U, "天使じゃん"),
        ])
        q = "まいが譲渡会で出会った保護猫、名前は何にしたんだっけ？"
    return episode("named_entity", q, pet, [pet], [s])


@kind("named_entity", {"window": ("2023-08-20", "2023-09-20")}, {"window": ("2024-02-15", "2024-03-15"), "key": "price"})
def cafe_menu(ctx: Ctx, v: dict) -> Episode:
    """A limited-time menu item announced at the café job."""
    menu = ctx.take("menu")
    d = ctx.day("parttime_cafe", *v["window"])
    if v.get("key") == "price":
        r = ctx.local("cafe_menu:price")
        price = f"{r.randint(52, 89)}0"
        s = Scene("parttime_cafe", d, [
            L("店長", f"来月から期間限定で{menu}を出します。新作は税込{price}円です", 2),
            L("店長", "レシピはノートに載せたので各自確認お願いします"), L("ちひろ", "おいしそう！"), L(U, "試食楽しみです"),
        ])
        q = f"税込{price}円で出た期間限定の新作、何だっけ？"
        decoys = exact_decoys(ctx, r, near_misses(r, price, EXACT_DECOYS), lambda p: f"税込{p}円で出た期間限定の新作、飲んでみた",
                              ("飲んでみたい", "高っ", "気になる", "今度行こ", "あら"),
                              ("ほうじ茶のラテだった", "桃のタルトだった", "チーズケーキだった"))
        return episode("named_entity", q, menu, [menu], [s], decoys, cue="exact", key_token=price)
    s = Scene("parttime_cafe", d, [
        L("店長", f"来月から期間限定で{menu}を出します", 2), L("店長", "レシピはノートに載せたので各自確認お願いします"),
        L("ちひろ", "おいしそう！"), L(U, "試食楽しみです"),
    ])
    q = f"{season(d + timedelta(days=30))}、バイト先のカフェで期間限定メニューとして出た新作は？"
    return episode("named_entity", q, menu, [menu], [s])


@kind("named_entity", {"variant": "dentist"}, {"variant": "bodycare"})
def clinic(ctx: Ctx, v: dict) -> Episode:
    """A clinic booked or visited for a health problem."""
    if v["variant"] == "dentist":
        name = ctx.take("dentist")
        d = ctx.day("family", "2023-06-01", "2024-12-31")
        r = ctx.local("clinic:booking")
        booking = f"R-{r.randint(1000, 9999)}"
        s = Scene("family", d, [
            L(U, "親知らず痛くて夜寝れない", 1), L("母", f"歯医者、{name}で木曜の17時に予約とっといたよ。予約番号{booking}", 2),
            L(U, "ありがとう…"), L("父", "抜くなら早いほうがいいぞ"),
        ])
        q = f"予約番号{booking}の歯医者、どこだった？"
        decoys = exact_decoys(ctx, r, near_misses(r, booking, EXACT_DECOYS), lambda b: f"予約番号{b}の歯医者、来週行ってくる",
                              ("えらい", "がんば", "ふーん", "こわい", "お大事に"),
                              ("駅前のさくら歯科ってとこ", "木曜の夕方にした", "親知らず抜くかも"))
        return episode("named_entity", q, name, [name], [s], decoys, cue="exact", key_token=booking)
    else:
        name = ctx.take("bodycare")
        d = ctx.day("partner", "2023-06-01", "2024-12-31")
        s = Scene("partner", d, [
            L("けんと", "友達の引っ越し手伝ったら腰やった", 1), L("けんと", f"{name}ってとこ通うことにした", 2),
            L(U, "無理しないでね"),
        ])
        q = "けんとが友達の引っ越しを手伝って腰を痛めたとき、通い始めた治療院は？"
    return episode("named_entity", q, name, [name], [s])


@kind("named_entity", {"variant": "anniversary"}, {"variant": "father"})
def celebration_restaurant(ctx: Ctx, v: dict) -> Episode:
    """The restaurant booked for a celebration."""
    rest = ctx.take("restaurant")
    if v["variant"] == "anniversary":
        d = ctx.day("partner", "2024-04-20", "2024-05-10")
        s = Scene("partner", d, [
            L("けんと", "もうすぐ2年だね", 1), L(U, f"記念日、{rest}の19時で予約できたよ", 2),
            L("けんと", "え、あそこ高いとこじゃん、ありがとう"), L(U, "たまにはね"),
        ])
        q = "けんととの記念日に予約したレストランはどこ？"
    else:
        d = ctx.day("family", "2023-09-01", "2023-11-30")
        s = Scene("family", d, [
            L("母", f"お父さんの誕生日、家族で{rest}でどう？", 2), L("そうた", "いいじゃん"), L(U, "賛成！予約する？"),
            L("母", "お母さんがしとくね"),
        ])
        q = "親父の生まれた日のお祝い、みんなで外食したのはどこだった？"
        decoy = Scene("dm_souta", ctx.day("dm_souta", "2023-04-15", "2025-02-15", rng=ctx.local("celebration_restaurant:decoy")),
                      [L("そうた", "駅前の外食チェーン、新メニュー出てた"), L(U, "へー")])
        return episode("named_entity", q, rest, [rest], [s], [decoy], cue="paraphrase")
    return episode("named_entity", q, rest, [rest], [s])


@kind("named_entity", {"variant": "job"}, {"variant": "research"})
def recommended_book(ctx: Ctx, v: dict) -> Episode:
    """A book someone recommends."""
    if v["variant"] == "job":
        book = ctx.take("book_job")
        d = ctx.day("dm_saki", "2023-11-01", "2024-02-28")
        s = Scene("dm_saki", d, [
            L(U, "ESが全然書けない…", 1), L("さき", f"{book}って本読んでみて。私それで書き方変わった", 2),
            L(U, "買ってみます！"), L("さき", "図書館にもあるよ"),
        ])
        q = "ESが書けなくて悩んでたとき、さき先輩に勧められた本は？"
    else:
        book = ctx.take("book_research")
        d = ctx.day("study_group", "2024-05-01", "2024-07-20")
        s = Scene("study_group", d, [
            L("みなみ", f"卒論のインタビューのやり方なら{book}がわかりやすかったよ", 2), L(U, "ありがと、借りてみる"),
            L("だいき", "研究室にあったよな"),
        ])
        q = "卒論でインタビューするとき、ゼミの友達が参考にしてって言ってた本は？"
    return episode("named_entity", q, book, [book], [s])


@kind("named_entity", {"variant": "mai"}, {"variant": "kento"})
def employer(ctx: Ctx, v: dict) -> Episode:
    """The company a friend or the partner will work for."""
    company = ctx.take("company")
    if v["variant"] == "mai":
        d = ctx.day("dm_mai", "2024-04-01", "2024-07-31")
        s = Scene("dm_mai", d, [
            L("まい", f"{company}から内定きた！！！", 2), L(U, "おめでとう！！！"), L("まい", "第一志望だったから泣いた", 1),
            L(U, "今度お祝いしよ"),
        ])
        q = "まいが第一志望の会社から内定をもらった、その会社はどこ？"
    else:
        d = ctx.day("partner", "2024-04-20", "2024-05-31")
        r = ctx.local("employer:office")
        office, *others = r.sample(("グランベル", "グランデル", "グランヴェル", "グラベル", "グランメル", "グランセル", "グランテル",
                                    "グランネル", "グランペル"), 1 + EXACT_DECOYS)
        s = Scene("partner", d, [
            L("けんと", "研修おわった〜"), L("けんと", f"正式に{company}の営業企画部に配属になった、オフィスは{office}ってビル", 2),
            L(U, "おめでとう！スーツ姿見たい"),
        ])
        q = f"けんとが配属された、{office}ってビルにオフィスがあるところはどこ？"
        decoys = exact_decoys(ctx, r, others, lambda o: f"配属されたの、{o}ってビルにオフィスがあるところだった",
                              ("おめでとうございます！", "すごい", "おつかれ", "頑張れよ", "かっこいい"),
                              ("営業部に決まった", "研修は来月から", "駅から近くてよかった"))
        return episode("named_entity", q, company, [company], [s], decoys, cue="exact", key_token=office)
    return episode("named_entity", q, company, [company], [s])


@kind("named_entity", {"variant": "friends"}, {"variant": "partner"})
def live_band(ctx: Ctx, v: dict) -> Episode:
    """The band whose concert tickets were won."""
    band = ctx.take("band")
    if v["variant"] == "friends":
        d = ctx.day("friends_highschool", "2023-05-01", "2025-01-31")
        s = Scene("friends_highschool", d, [
            L("りな", f"{band}のツアー、4人分当たった！！ライブ久々", 2), L("まい", "天才"), L("あかり", "休講祈る"),
            L(U, "グッズ何買う？"),
        ])
        q = "高校の友達と4人で当たったライブのツアー、どのバンドの？"
    else:
        d = ctx.day("partner", "2023-05-01", "2025-01-31")
        r = ctx.local("live_band:ticket")
        ticket = f"{r.choice('ABC')}{r.randint(101, 199)}"
        s = Scene("partner", d, [
            L("けんと", f"{band}ってバンドの対バンのライブ、チケット2枚とれた！整理番号{ticket}", 2), L(U, "え！行く！！"),
            L("けんと", "金曜の夜だけど大丈夫？"), L(U, "バイト休みもらう"),
        ])
        q = f"整理番号{ticket}のチケットで行ったライブ、どのバンドだった？"
        decoys = exact_decoys(ctx, r, near_misses(r, ticket, EXACT_DECOYS), lambda t: f"整理番号{t}のチケットで行くライブ、好きなバンド出るの",
                              ("いいな〜", "楽しんで！", "うらやま", "いいですね！", "へー"),
                              ("整理番号いいほうかも", "グッズ列もすごそう", "前のほう行けるかな"))
        return episode("named_entity", q, band, [band], [s], decoys, cue="exact", key_token=ticket)
    return episode("named_entity", q, band, [band], [s])


@kind("named_entity", {"variant": "partner"}, {"variant": "brother"})
def video_game(ctx: Ctx, v: dict) -> Episode:
    """A game someone is absorbed in or invites the user to."""
    game = ctx.take("game_title")
    if v["variant"] == "partner":
        d = ctx.day("partner", "2023-05-01", "2025-02-28")
        s = Scene("partner", d, [
            L("けんと", f"最近{game}ってゲームばっかやってて寝るの3時", 2), L(U, "ちゃんと寝て"), L("けんと", "あと1ステージだけ…"),
        ])
        q = "けんとが夜ふかしするくらいハマってたゲームのタイトルは？"
    else:
        d = ctx.day("dm_souta", "2023-05-01", "2025-02-28")
        r = ctx.local("video_game:friend_code")
        code = f"SW-{r.randint(1000, 9999)}-{r.randint(1000, 9999)}-{r.randint(1000, 9999)}"
        s = Scene("dm_souta", d, [
            L("そうた", f"姉ちゃん{game}始めない？協力プレイのゲーム、フレンドコード{code}", 2), L(U, "どんなゲーム？"),
            L("そうた", "ゆるいやつだよ"), L(U, "ちょっとやってみる"),
        ])
        q = f"{code}のフレンドコードで誘われたゲーム、何だっけ？"
        decoys = exact_decoys(ctx, r, near_misses(r, code, EXACT_DECOYS), lambda c: f"{c}のフレンドコードでこのゲーム誘っていい？",
                              ("あとでやる", "申請した！", "おっけー", "送った〜", "了解"),
                              ("協力プレイのやつ", "ゆるく遊べるよ", "夜やろ"))
        return episode("named_entity", q, game, [game], [s], decoys, cue="exact", key_token=code)
    return episode("named_entity", q, game, [game], [s])


@kind("named_entity", {"variant": "cafe"}, {"variant": "internship"})
def newcomer(ctx: Ctx, v: dict) -> Episode:
    """A new member introduced to a team."""
    person = ctx.take("person")
    if v["variant"] == "cafe":
        d = ctx.day("parttime_cafe", "2023-05-01", "2024-10-31")
        s = Scene("parttime_cafe", d, [
            L("店長", f"来週から新しく{person}さんが入ります。ホール中心でお願いします", 2), L(U, "了解です！"),
            L("ゆうた", "教えるの誰がやります？"), L("店長", "最初はゆいさんにお願いしたい"), L(U, "わかりました"),
        ])
        first = Scene("parttime_cafe", next_weekday(d, 0, 5), [
            L("店長", "今日から新人さん来ます。ゆいさん、レジの説明からお願いします", 1), L(U, "了解です！"),
        ])
        q = "バイト先のカフェに新しく入ったホール担当の新人さんの名前は？"
        scenes = [s, first]
    else:
        d = ctx.day("work_project", "2024-08-01", "2024-10-31", weekday=ctx.rng.randint(0, 4))
        s = Scene("work_project", d, [
            L("高橋", f"来月から{person}さんがチームに加わります。デザインを担当してもらいます", 2),
            L(U, "よろしくお願いします！"), L("森本", "心強いです"),
        ])
        q = "インターン先で途中から仲間になった、絵や見た目づくりの係の人は？"
        decoy = Scene("dm_mai", ctx.day("dm_mai", "2023-04-15", "2025-02-15", rng=ctx.local("newcomer:decoy")),
                      [L("まい", "サークルの仲間とカラオケ行ってきた"), L(U, "いいね")])
        return episode("named_entity", q, person, [person], [s], [decoy], cue="paraphrase")
    return episode("named_entity", q, person, [person], scenes)


@kind("named_entity", {"year": 2023}, {"year": 2024})
def festival_stall(ctx: Ctx, v: dict) -> Episode:
    """What the tennis circle sells at the university festival that year."""
    stall, y = ctx.take("stall"), v["year"]
    d = ctx.day("club_tennis", f"{y}-09-20", f"{y}-10-20")
    s = Scene("club_tennis", d, [
        L("はると", f"学祭の模擬店、投票の結果{stall}に決定しました！", 2), L("こうへい", "よっしゃ"),
        L("みゆ", "機材どこで借りる？"), L(U, "予算まとめておきます"),
    ])
    fest = Scene("club_tennis", next_weekday(d, 5, 21), [
        L("はると", "学祭1日目、15時で完売しました！みんなありがとう", 1), photo("みゆ"), L(U, "売上あとで報告します"),
    ])
    q = f"{y}年の学祭の模擬店で、サークルは何を売った？"
    return episode("named_entity", q, stall, [stall], [s, fest])


@kind("named_entity", {"variant": "mother"}, {"variant": "partner"})
def birthday_gift(ctx: Ctx, v: dict) -> Episode:
    """A birthday present given or received."""
    gift = ctx.take("gift")
    if v["variant"] == "mother":
        d = ctx.day("dm_souta", "2023-06-01", "2024-12-31")
        s = Scene("dm_souta", d, [
            L("そうた", "母さんの誕生日なにする？", 1), L(U, f"{gift}とかどう？最近欲しいって言ってた", 2),
            L("そうた", "いいね、半分ずつ出そ", 1), L(U, "じゃあ私が買っとく"),
        ])
        q = "母の誕生日に弟とお金を半分ずつ出して贈ったプレゼントは？"
    else:
        d = ctx.day("partner", "2023-06-01", "2024-12-31")
        s = Scene("partner", d, [
            L("けんと", "誕生日おめでとう！", 1), L("けんと", f"プレゼント、{gift}にしてみた。気に入るといいけど", 2),
            L(U, "うれしい！！ずっと大事にする"),
        ])
        q = "誕生日にけんとからもらったプレゼントは何だった？"
    return episode("named_entity", q, gift, [gift], [s])


@kind("named_entity", {"variant": "mai"}, {"variant": "saki"})
def hair_stylist(ctx: Ctx, v: dict) -> Episode:
    """A hairdresser someone recommends."""
    stylist = ctx.take("stylist")
    if v["variant"] == "mai":
        d = ctx.day("dm_mai", "2023-05-01", "2025-02-28")
        s = Scene("dm_mai", d, [
            L(U, "髪切りたいけどいい美容院知らない？", 1), L("まい", f"{stylist}おすすめ！カットうまいし話しやすい", 2),
            L(U, "予約してみる"),
        ])
        q = "まいにおすすめされた美容院、カットしてくれる人の名前は？"
    else:
        d = ctx.day("dm_saki", "2023-12-01", "2024-02-28")
        s = Scene("dm_saki", d, [
            L("さき", f"就活の髪なら{stylist}に頼むといいよ、印象すごく良くなった", 2),
            L(U, "教えてくれてありがとうございます！"),
        ])
        q = "就活の面接前に、さき先輩が印象が良くなるって勧めてくれた美容師は？"
    return episode("named_entity", q, stylist, [stylist], [s])


@kind("named_entity", {"window": ("2023-04-01", "2023-04-06"), "key": "exit"}, {"window": ("2024-03-25", "2024-04-06")})
def hanami_park(ctx: Ctx, v: dict) -> Episode:
    """Where the high-school friends hold their cherry-blossom picnic that spring."""
    park = ctx.take("park")
    d = ctx.day("friends_highschool", *v["window"])
    if v.get("key") == "exit":
        r = ctx.local("hanami_park:exit")
        exit_code = f"{r.choice('ABCD')}{r.randint(2, 9)}"
        s = Scene("friends_highschool", d, [
            L("あかり", f"お花見の場所、{park}にしない？駅の{exit_code}出口に集合で", 2), L("まい", "いいね"),
            L("りな", "レジャーシート持ってく"), L(U, "お弁当係やる！"),
        ])
        q = f"駅の{exit_code}出口に集合したお花見、場所はどこだった？"
        decoys = exact_decoys(ctx, r, near_misses(r, exit_code, EXACT_DECOYS), lambda e: f"駅の{e}出口に集合のお花見、場所とっといた",
                              ("了解です", "わかった", "おけ", "りょ", "行きます！"),
                              ("屋台もあるって", "レジャーシート持ってく", "お弁当つくる"))
        return episode("named_entity", q, park, [park], [s], decoys, cue="exact", key_token=exit_code)
    s = Scene("friends_highschool", d, [
        L("あかり", f"お花見、{park}にしない？屋台も出るらしい", 2), L("まい", "いいね"),
        L("りな", "レジャーシート持ってく"), L(U, "お弁当係やる！"),
    ])
    q = f"{d.year}年の春、高校の友達とお花見した公園はどこ？"
    return episode("named_entity", q, park, [park], [s])


# ----------------------------------------------------------------------------- contextual

@kind("contextual", {"source": "partner", "who": "けんと", "reason": "バイト入っちゃった", "why": "アルバイトが入った"},
      {"source": "dm_mai", "who": "まい", "reason": "親戚の集まりが入っちゃった", "why": "親戚の集まりが入った"},
      {"source": "friends_highschool", "who": "りな", "reason": "ゼミの課題の締め切りがきつくて", "why": "ゼミの課題の締め切りに追われていた"})
def movie_reschedule(ctx: Ctx, v: dict) -> Episode:
    """A plan for Saturday moves to Sunday 11:00 because the other person cannot make it."""
    src, a = v["source"], v["who"]
    d0 = ctx.day(src, "2023-05-01", "2025-02-20")
    sat = next_weekday(d0, 5, 5)
    s0 = Scene(src, d0, [
        L(a, f"{mdw(sat)}この映画見に行かない？", 1), L(a, f"https://eiga.com/movie/{ctx.rng.randint(90000, 99999)}/"),
        L(U, "行く！"),
    ])
    s1 = Scene(src, sat - timedelta(days=2), [
        L(a, f"ごめん、土曜{v['reason']}…", 2), L(a, "次の日とかどう？"),
        L(U, "日曜いけるよ！11時に駅でいい？", 2), L(a, "ありがと！！それで！"),
    ])
    q = f"{a}と映画の約束、土曜がだめになって結局、日曜の何時にしたんだっけ？"
    ans = f"土曜は{a}に{v['why']}ため行けなくなり、翌日の日曜11時に駅で待ち合わせることにした。"
    return episode("contextual", q, ans, ["日曜", "11時"], [s0, s1])


@kind("contextual", {"who": "ちひろ", "reason": "法事"}, {"who": "ゆうた", "reason": "大学の追試"},
      {"who": "はるか", "reason": "家族の用事"})
def shift_swap(ctx: Ctx, v: dict) -> Episode:
    """A coworker asks to swap a closing shift; the user agrees on condition of a morning shift back."""
    a = v["who"]
    d = ctx.day("parttime_cafe", "2023-05-01", "2025-01-31")
    target = next_weekday(d, 5, 3)
    back = target + timedelta(days=ctx.rng.randint(5, 9))
    s = Scene("parttime_cafe", d, [
        L(a, f"{mdw(target)}のラストのシフト、どなたか代わってもらえませんか…{v['reason']}が入ってしまって", 1),
        L(U, f"私でよければ代わります！そのかわり{mdw(back)}の朝、入ってもらえると助かります", 2),
        L(a, "もちろんです！ありがとうございます🙏", 2), L("店長", "了解、シフト表直しておきます"),
    ])
    later = Scene("parttime_cafe", back, [L(a, "今日の朝、約束どおり入ります！", 1), L(U, "ありがとう〜助かる")])
    q = f"{a}が{v['reason']}でラストのシフトに入れなかったとき、交代する代わりに私が出した条件は？"
    ans = f"{md(target)}の閉店までの枠を代わるかわりに、{md(back)}の朝の枠に{a}に入ってもらうことにした。"
    return episode("contextual", q, ans, [mdw(back)], [s, later])


@kind("contextual", {"variant": "laptop"}, {"variant": "yukata"}, {"variant": "racket"})
def borrow_request(ctx: Ctx, v: dict) -> Episode:
    """Someone asks to borrow something, with a reason."""
    if v["variant"] == "laptop":
        d = ctx.day("dm_souta", "2024-05-01", "2025-01-31")
        s = Scene("dm_souta", d, [
            L("そうた", "姉ちゃんのノートパソコン貸してくれない？", 1),
            L("そうた", "俺のやつ画面つかなくなった、レポート明日締め切りなのに", 2),
            L(U, "いいよ、充電器も持ってって"), L("そうた", "神"),
        ])
        q = "弟がノートパソコンを借りたいって言ってきた事情は？"
        ans = "自分のパソコンの画面がつかなくなったのに、翌日がレポートの締め切りだったから。"
        keys = ["画面つかなくなった"]
    elif v["variant"] == "yukata":
        d = ctx.day("friends_highschool", "2023-07-01", "2023-08-10")
        s = Scene("friends_highschool", d, [
            L("あかり", "誰か浴衣持ってない？", 1),
            L("あかり", "花火大会で着たいんだけど、自分のはおばあちゃんちに置いてきちゃって", 2),
            L(U, "私の貸せるよ！帯もある", 1), L("あかり", "ゆい神すぎる"),
        ])
        q = "花火大会の前に、あかりが着る物を借りたがってた理由は？"
        ans = "花火大会で浴衣を着たかったが、自分のものを祖母の家に置いてきてしまったから（ゆいが帯ごと貸した）。"
        keys = ["おばあちゃんち"]
    else:
        d = ctx.day("club_tennis", "2023-05-01", "2024-10-31")
        s = Scene("club_tennis", d, [
            L("たくみ", "明日の試合なのにガット切れた…", 1),
            L("たくみ", "張り替え間に合わないから、予備のラケットある人貸してほしい", 2),
            L(U, "予備あるよ！明日持ってく", 1), L("たくみ", "まじ助かる"),
        ])
        q = "試合の前日に、たくみがラケットを借りたがってたのはなぜ？"
        ans = "ラケットの糸が切れて張り替えが間に合わなかったため、予備のラケットが必要だった（ゆいが貸した）。"
        keys = ["張り替え間に合わない"]
    return episode("contextual", q, ans, keys, [s])


@kind("contextual", {"variant": "saki"}, {"variant": "mother"})
def interview_advice(ctx: Ctx, v: dict) -> Episode:
    """Advice received for job interviews."""
    if v["variant"] == "saki":
        d = ctx.day("dm_saki", "2024-03-01", "2024-06-15")
        s = Scene("dm_saki", d, [
            L(U, "最終面接の逆質問、何聞けばいいかわからなくなってきた", 1),
            L("さき", "その会社で活躍してる若手の共通点を聞くといいよ", 2),
            L("さき", "入社したあとのこと考えてる感じが伝わるから", 2), L(U, "なるほど…それ使わせてもらいます！"),
        ])
        follow = Scene("dm_saki", d + timedelta(days=ctx.rng.randint(4, 10)), [
            L(U, "教えてもらった逆質問、最終面接で使ったら面接官にいい質問ですねって言われました！", 1), L("さき", "よかった〜！"),
        ])
        q = "最終面接での逆質問、さき先輩には何を聞くといいって言われた？"
        ans = "その会社で活躍している若手社員の共通点を聞くとよい、入社後を考えていることが伝わるから、と助言された。"
        keys = ["若手の共通点"]
        scenes = [s, follow]
    else:
        d = ctx.day("family", "2024-02-01", "2024-05-31")
        s = Scene("family", d, [
            L(U, "今日の選考のグループディスカッション、全然しゃべれなかった…", 1),
            L("母", "最初に時間配分を決める役を引き受けてみたら？", 2),
            L("母", "お母さんも昔それで話に入りやすくなったよ", 1), L(U, "次やってみる"),
        ])
        q = "選考の討論でうまく話せなかった時、母にどんな役を勧められた？"
        ans = "最初に時間配分を決める役を引き受ければ話に入りやすくなる、と勧められた。"
        keys = ["時間配分"]
        scenes = [s]
    return episode("contextual", q, ans, keys, scenes)


@kind("contextual", {"variant": "friends"}, {"variant": "club"})
def cost_split(ctx: Ctx, v: dict) -> Episode:
    """How the costs of a trip or camp are shared."""
    if v["variant"] == "friends":
        d = ctx.day("friends_highschool", "2023-07-01", "2024-09-30")
        s = Scene("friends_highschool", d, [
            L("まい", "ドライブ旅行のお金のことなんだけど", 1),
            L("まい", "宿代は4人で割って、レンタカー代とガソリン代は運転しない3人で割るのはどう？", 2),
            L("あかり", "賛成！運転するりなの分はなしで", 2), L("りな", "え、ありがたい"), L(U, "それでいこ！"),
        ])
        q = "ドライブ旅行のとき、お金の分け方はどう決めた？"
        ans = "宿代は4人で等分し、レンタカー代とガソリン代は運転するりな以外の3人で割ることになった。"
        keys = ["運転しない3人"]
    else:
        d = ctx.day("club_tennis", "2023-06-01", "2023-07-20")
        s = Scene("club_tennis", d, [
            L("はると", "合宿費は一人2万3千円です", 2), L("はると", "1年生は3千円引きにします", 2),
            L("こうへい", "1年やさしい"), L(U, "集金は私が担当します！", 1),
        ])
        q = "2023年のサークルの合宿費、1年生だけいくら安くなってた？"
        ans = "基本は一人2万3千円で、1年生だけ3千円安く（2万円に）なっていた。"
        keys = ["3千円引き", "2万3千円"]
    return episode("contextual", q, ans, keys, [s])


@kind("contextual", {"variant": "wallet"}, {"variant": "phone"})
def lost_and_found(ctx: Ctx, v: dict) -> Episode:
    """Something lost, what was done, and where it turned up two days later."""
    if v["variant"] == "wallet":
        d0 = ctx.day("partner", "2023-05-01", "2025-02-28")
        s0 = Scene("partner", d0, [
            L(U, "やばい財布ない…"), L("けんと", "最後どこで出した？"), L(U, "たぶん駅のコンビニ"),
            L(U, "とりあえず交番に届け出してきた", 1),
        ])
        r = ctx.local("lost_and_found:brand")
        brand, *others = r.sample(("ルミナーレ", "ルミナリエ", "ルミナール", "ルミエーレ", "ルミナレ", "ルミナーラ", "ルミネーレ", "ルミナーロ",
                                   "ルミアーレ"), 1 + EXACT_DECOYS)
        s1 = Scene("partner", d0 + timedelta(days=2), [
            L(U, "財布見つかった！！", 1), L(U, f"{brand}の財布、電車の忘れ物センターに届いてたって", 2), L("けんと", "よかった〜〜"),
            L(U, "中身も全部あった"),
        ])
        q = f"{brand}の財布をなくしたとき、どこに届いてたんだっけ？"
        ans = "交番に届けを出した2日後、電車の忘れ物センターに届いていたとわかった（中身も無事だった）。"
        keys = ["忘れ物センター"]
        decoys = exact_decoys(ctx, r, others, lambda b: f"{b}の財布なくした…どこに届いてるんだろ",
                              ("え、大丈夫？", "交番行った？", "まじか", "やば", "見つかるといいですね"),
                              ("駅の交番に届いてたって", "カフェで預かってもらってた", "まだ見つからない…"))
        key = brand
    else:
        d0 = ctx.day("family", "2023-05-01", "2025-02-28")
        s0 = Scene("family", d0, [
            L("父", "携帯をタクシーに置いてきたかもしれない", 1), L("母", "え、どこのタクシー？"),
            L("父", "駅から乗った緑のやつ", 1),
        ])
        r = ctx.local("lost_and_found:taxi")
        taxi, *other_taxis = r.sample(("サクラギ", "サクラダ", "サクラバ", "サカキギ", "サクラノ", "サクライ", "サクラガ",
                                           "サクラマ", "サクラベ"), 1 + EXACT_DECOYS)
        s1 = Scene("family", d0 + timedelta(days=1), [
            L("母", f"{taxi}交通のタクシー会社に電話したら携帯が見つかったって。明日家まで届けてくれるそうです", 2),
            L(U, "よかった！"), L("父", "ご迷惑おかけしました"),
        ])
        q = f"父が{taxi}交通のタクシーに携帯を置いてきたとき、どうやって戻ってきた？"
        ans = "駅から乗ったタクシーに置き忘れており、母がタクシー会社に電話して見つかり、家まで届けてもらえることになった。"
        decoys = exact_decoys(ctx, r, other_taxis, lambda t: f"{t}交通のタクシーに携帯を置いてきちゃった",
                              ("電話した？", "あるある", "大変！", "まじか", "戻ってくるといいね"),
                              ("営業所に電話したら見つかった", "運転手さんが届けてくれるって", "まだ連絡ない"))
        keys, key = ["タクシー会社"], taxi
    return episode("contextual", q, ans, keys, [s0, s1], decoys, cue="exact", key_token=key)


@kind("contextual", {"variant": "father"}, {"variant": "partner"})
def missed_last_train(ctx: Ctx, v: dict) -> Episode:
    """The user misses the last train; someone helps."""
    if v["variant"] == "father":
        d = ctx.day("family", "2023-05-01", "2025-03-20")
        s = Scene("family", d, [
            L(U, "終電のがした…", 1), L("父", "今どこ？車で迎えに行くよ", 2), L(U, "隣の駅のロータリーにいる", 1),
            L("父", "20分で着く"), L(U, "ありがとう🙏"),
        ])
        q = "終電を逃した夜、お父さんはどこまで迎えに来てくれた？"
        ans = "父が車で隣の駅のロータリーまで迎えに来てくれた。"
        keys = ["迎えに行く"]
    else:
        d = ctx.day("partner", "2023-05-01", "2025-03-20")
        s = Scene("partner", d, [
            L(U, "やばい、終電ない", 1), L("けんと", "うち泊まってきなよ", 2), L("けんと", "明日の朝、駅まで送る", 2),
            L(U, "ありがと、そうする"),
        ])
        q = "けんとと会ってて終電がなくなった日、結局どうしたんだっけ？"
        ans = "けんとの家に泊まらせてもらい、翌朝駅まで送ってもらうことになった。"
        keys = ["泊まって"]
    return episode("contextual", q, ans, keys, [s])


@kind("contextual", {"variant": "partner"}, {"variant": "mai"})
def sick_visit(ctx: Ctx, v: dict) -> Episode:
    """What the user brings to someone who is ill; a decoy illness elsewhere shares the words."""
    if v["variant"] == "partner":
        d = ctx.day("partner", "2023-05-01", "2025-03-20")
        s = Scene("partner", d, [
            L("けんと", "熱38度5分ある…寝込んでる", 1), L(U, "え、大丈夫？"),
            L(U, "ポカリとゼリーとレトルトのおかゆ、ドアノブにかけとくね", 2), L("けんと", "ありがとう、まじで助かる"),
        ])
        after = Scene("partner", d + timedelta(days=1), [L("けんと", "熱下がった！昨日のゼリーまじで救われた", 1), L(U, "よかった")])
        q = "けんとが熱で寝込んでたとき、私が差し入れたものは？"
        ans = "ポカリとゼリーとレトルトのおかゆを、家のドアノブにかけて届けた。"
        keys = ["ポカリ", "おかゆ"]
        scenes = [s, after]
        dsrc, dline = "family", L("母", "そうた熱あるみたいだから、帰りにポカリ買ってきてくれる？")
    else:
        d = ctx.day("dm_mai", "2023-05-01", "2025-03-20")
        s = Scene("dm_mai", d, [
            L("まい", "インフルかかった…", 1), L(U, "のど飴と冷えピタ、ポストに入れといた！", 2), L("まい", "天使？ありがとう"),
        ])
        q = "まいが高熱で倒れてたとき、郵便受けに届けてあげたものは？"
        ans = "のど飴と冷えピタをまいの家のポストに入れて届けた。"
        keys = ["のど飴", "冷えピタ"]
        scenes = [s]
        dsrc, dline = "friends_highschool", L("りな", "郵便受けにピザのチラシ入ってた")
    dd = ctx.day(dsrc, "2023-04-15", "2025-03-15")
    return episode("contextual", q, ans, keys, scenes, [Scene(dsrc, dd, [dline, L(U, "お大事に！")])],
                   cue="paraphrase" if v["variant"] == "mai" else "mixed")


@kind("contextual", {"variant": "kouhei"}, {"variant": "father"})
def surprise_roles(ctx: Ctx, v: dict) -> Episode:
    """Two people divide the tasks for a surprise celebration."""
    if v["variant"] == "kouhei":
        d = ctx.day("dm_saki", "2023-05-01", "2024-01-31")
        s = Scene("dm_saki", d, [
            L("さき", "こうへいの誕生日、練習のあとサプライズしない？"), L(U, "したいです！"),
            L("さき", "ケーキは私が予約するから、ゆいは寄せ書きの色紙をみんなに回してくれる？", 2),
            L(U, "任せてください！練習の前までに集めます", 2),
        ])
        party = Scene("club_tennis", next_weekday(d, 5, 6), [
            L("さき", "こうへい誕生日おめでとう！！", 1), photo("みゆ"), L("こうへい", "まじでびっくりした、ありがとう"),
        ])
        q = "こうへいの誕生日サプライズで、さき先輩と私はそれぞれ何の係だった？"
        ans = "さきがケーキを予約し、ゆいが寄せ書きの色紙をメンバーに回して練習前までに集めることになった。"
        keys = ["色紙", "ケーキは私が予約"]
        scenes = [s, party]
    else:
        d = ctx.day("dm_souta", "2024-03-01", "2024-10-31")
        s = Scene("dm_souta", d, [
            L(U, "お父さんの還暦、どうする？", 1), L("そうた", "俺は昔の写真集めてアルバム作る", 2),
            L(U, "じゃあ私はお店の予約と花束やる", 2), L("そうた", "ナイス"),
        ])
        q = "父の還暦のお祝い、弟と私はどう分担した？"
        ans = "そうたが昔の写真を集めてアルバムを作り、ゆいがお店の予約と花束を担当することにした。"
        keys = ["アルバム", "花束"]
        scenes = [s]
    return episode("contextual", q, ans, keys, scenes)


@kind("contextual", {"variant": "mai"}, {"variant": "partner"})
def meeting_mixup(ctx: Ctx, v: dict) -> Episode:
    """A meeting point mix-up and where they finally meet."""
    if v["variant"] == "mai":
        d = ctx.day("dm_mai", "2023-05-01", "2025-03-20")
        s = Scene("dm_mai", d, [
            L("まい", "東口ついたよ〜", 1), L(U, "え、西口って言ってなかった？", 1), L("まい", "ごめん勘違いしてた！"),
            L("まい", "真ん中の本屋の前で会お！", 2), L(U, "おけ、本屋向かう", 1),
        ])
        q = "まいと東口で待ち合わせて行き違いになった日、どこで合流した？"
        ans = "まいは東口、ゆいは西口にいたため、間にある本屋の前で会うことにした。"
        keys = ["本屋の前"]
    else:
        d = ctx.day("partner", "2023-05-01", "2025-03-20")
        s = Scene("partner", d, [
            L("けんと", "改札の中にいる", 1), L(U, "私、外にいる笑"), L("けんと", "じゃあ出口のパン屋の前で", 2), L(U, "はーい"),
        ])
        q = "けんとと駅で会えなかった日、最終的にどこで落ち合った？"
        ans = "けんとは改札の中、ゆいは外にいたので、出口のパン屋の前で会うことにした。"
        keys = ["パン屋の前"]
        decoy = Scene("friends_highschool",
                      ctx.day("friends_highschool", "2023-04-15", "2025-02-15", rng=ctx.local("meeting_mixup:decoy")),
                      [L("あかり", "レポート、最終的に手書きで出すことにした"), L(U, "えらい")])
        return episode("contextual", q, ans, keys, [s], [decoy], cue="paraphrase")
    return episode("contextual", q, ans, keys, [s])


@kind("contextual", {"variant": "daiki"}, {"variant": "shou"})
def presentation_swap(ctx: Ctx, v: dict) -> Episode:
    """The user swaps seminar presentation slots with a classmate in exchange for a favour."""
    if v["variant"] == "daiki":
        d = ctx.day("study_group", "2023-05-01", "2023-12-20")
        r = ctx.local("presentation_swap:room")
        room = f"{r.randint(810, 899)}-{r.randint(1000, 9999)}-{r.randint(1000, 9999)}"
        s = Scene("study_group", d, [
            L("だいき", "来週のゼミ発表、インフル明けで準備間に合わない…誰か順番を代わってくれない？", 1),
            L(U, f"じゃあ私が先にやるよ、ミーティングのIDは {room} の回", 2), L(U, "その代わりレジュメの印刷お願いしていい？", 2),
            L("だいき", "もちろん！ほんとありがとう"),
        ])
        q = f"ID {room} のミーティングでのゼミ発表、だいきと順番を代わったとき何を頼んだ？"
        ans = "病み上がりで準備が間に合わないだいきと順番を代わり、そのかわりレジュメの印刷を頼んだ。"
        decoys = exact_decoys(ctx, r, near_misses(r, room, EXACT_DECOYS), lambda x: f"ID {x} のミーティングでのゼミ発表、順番を代わったかわりに資料を頼んだ",
                              ("ありがと！", "助かる", "がんばって！", "えらい", "大変そう"),
                              ("発表資料のコピーをお願いした", "次の回は私が先にやる", "スライドの確認を手伝ってもらう"))
        return episode("contextual", q, ans, ["レジュメの印刷"], [s], decoys, cue="exact", key_token=room)
    else:
        d = ctx.day("study_group", "2024-03-01", "2024-06-30")
        s = Scene("study_group", d, [
            L("しょう", "再来週の発表、最終面接とかぶった…", 1), L(U, "私の回と交換しよっか", 2),
            L(U, "そのかわり次の打ち上げの幹事よろしく", 2), L("しょう", "喜んで！"),
        ])
        q = "しょうの最終面接がゼミの発表の日と重なったとき、どう解決した？"
        ans = "ゆいが自分の回と交換してあげ、そのかわりしょうが次の打ち上げの幹事をすることになった。"
        keys = ["幹事"]
    return episode("contextual", q, ans, keys, [s])


@kind("contextual", {"variant": "survey"}, {"variant": "event_day"})
def internship_assignment(ctx: Ctx, v: dict) -> Episode:
    """What the user is assigned in the internship project."""
    if v["variant"] == "survey":
        d = ctx.day("work_project", "2024-07-01", "2024-09-15", weekday=ctx.rng.randint(0, 2))
        deadline = next_weekday(d, 4, 7)
        s = Scene("work_project", d, [
            L("高橋", "ゆいさんには、アンケートの自由記述の分類をお願いできますか", 2),
            L("高橋", f"{mdw(deadline)}までにいただけると助かります", 2),
            L(U, "承知しました。カテゴリ案ができたら一度共有します"), L("高橋", "ありがとうございます！"),
        ])
        done = Scene("work_project", deadline, [
            L(U, "分類結果を共有フォルダに格納しました。カテゴリは8つにまとめています", 1), L("高橋", "ありがとうございます、確認します"),
        ])
        q = "インターンで頼まれたアンケートの作業、内容と締め切りは？"
        ans = f"アンケートの自由記述回答の分類を、{md(deadline)}までに仕上げること。"
        keys = ["自由記述", mdw(deadline)]
        scenes = [s, done]
    else:
        d = ctx.day("work_project", "2024-10-20", "2024-11-08", weekday=ctx.rng.randint(0, 4))
        s = Scene("work_project", d, [
            L("高橋", "商店街イベント当日の配置をお送りします", 1),
            L("高橋", "ゆいさんは受付と整理券の配布をお願いします。9時に本部テント集合です", 2),
            L(U, "承知しました！"), L("井上", "私は物販ブースにいます"),
        ])
        q = "商店街イベントの当日、私の担当と集合の時間はどうなってた？"
        ans = "受付と整理券の配布を担当し、9時に本部テントへ集合することになっていた。"
        keys = ["受付", "9時"]
        scenes = [s]
    return episode("contextual", q, ans, keys, scenes)


@kind("contextual", {"variant": "poster"}, {"variant": "thesis"})
def revision_feedback(ctx: Ctx, v: dict) -> Episode:
    """Requested changes after a review."""
    if v["variant"] == "poster":
        d = ctx.day("work_project", "2024-08-01", "2024-10-10", weekday=ctx.rng.randint(0, 4))
        s = Scene("work_project", d, [
            L("森本", "先方からポスター案へのコメントが来ました", 1),
            L("森本", "①店名の文字をもっと大きく ②写真はお店の人が写っているものに差し替え、とのことです", 2),
            L(U, "承知しました、写真の候補を探します"), L("高橋", "よろしくお願いします"),
        ])
        q = "ポスター案について、先方からどんな修正を頼まれた？"
        ans = "店名の文字を大きくすることと、写真をお店の人が写っているものに差し替えること。"
        keys = ["差し替え", "文字をもっと大きく"]
    else:
        d = ctx.day("study_group", "2024-07-10", "2024-08-05")
        s = Scene("study_group", d, [
            L(U, "中間発表おわった…", 1), L(U, "先生から、対象を1店舗に絞ったほうがいいって言われた", 2),
            L(U, "あと先行研究の整理が甘いって", 2), L("みなみ", "おつかれ！でも方向性は褒められてたじゃん"),
        ])
        q = "卒論の中間発表のあと、先生にどんなことを言われた？"
        ans = "調査の対象を1店舗に絞ること、先行研究の整理が不十分であることを指摘された。"
        keys = ["1店舗", "先行研究"]
    return episode("contextual", q, ans, keys, [s])


@kind("contextual", {"variant": "mai"}, {"variant": "saki"})
def moving_help(ctx: Ctx, v: dict) -> Episode:
    """Helping a friend move."""
    if v["variant"] == "mai":
        d = ctx.day("dm_mai", "2023-09-01", "2024-12-31")
        s = Scene("dm_mai", d, [
            L("まい", "来月の引っ越し、ほんとに手伝ってくれる？", 1), L(U, "うん！日曜の午前なら行ける", 1),
            L(U, "食器を包むのやるよ", 2), L("まい", "神！お昼おごる", 1),
        ])
        q = "まいの引っ越しの手伝いで、私は何を担当する約束だった？"
        ans = "日曜の午前に行って、食器を包む作業をすること（お昼はまいのおごり）。"
        keys = ["食器"]
    else:
        d = ctx.day("dm_saki", "2024-02-15", "2024-03-15")
        s = Scene("dm_saki", d, [
            L("さき", "4月から社会人で引っ越すんだけど、荷物運ぶのに車出せる人探してて", 1),
            L(U, "お父さんに聞いてみます！", 1), L(U, "父の車借りられました！土曜に私が運転して行きます", 2),
            L("さき", "ほんとにありがとう"),
        ])
        q = "さき先輩が社会人になって引っ越すとき、荷物はどうやって運んだ？"
        ans = "ゆいが父の車を借り、土曜に自分で運転して荷物を運ぶことになった。"
        keys = ["父の車"]
    return episode("contextual", q, ans, keys, [s])


@kind("contextual", {"variant": "family"}, {"variant": "mai"})
def house_sitting(ctx: Ctx, v: dict) -> Episode:
    """Chores the user is asked to do while someone is away."""
    if v["variant"] == "family":
        d = ctx.day("family", "2023-05-01", "2025-03-20")
        r = ctx.local("house_sitting:slip")
        slip = f"{r.randint(3000, 3999)}-{r.randint(1000, 9999)}-{r.randint(1000, 9999)}"
        s = Scene("family", d, [
            L("母", f"金土で法事に行くから、メダカのエサと植木の水やりお願いね。荷物も届くから受け取って、伝票番号{slip}", 2),
            L(U, "了解、毎朝やっとく"), L("そうた", "俺も部活ないときやる"),
        ])
        q = f"伝票番号{slip}の荷物が届く日、ほかに何を頼まれてた？"
        ans = "メダカにエサをやることと、植木に水をやること。"
        keys = ["メダカ", "水やり"]
        decoys = exact_decoys(ctx, r, near_misses(r, slip, EXACT_DECOYS), lambda x: f"伝票番号{x}の荷物が届く日、ほかにも頼みたいことあるんだけど",
                              ("おっけー", "了解！", "へい", "わかりました", "はーい"),
                              ("郵便物も見といて", "洗濯物とりこんどいて", "犬の散歩もお願い"))
        return episode("contextual", q, ans, keys, [s], decoys, cue="exact", key_token=slip)
    else:
        d = ctx.day("dm_mai", "2023-05-01", "2025-03-20")
        s = Scene("dm_mai", d, [
            L("まい", "週末、実家に帰るんだけど、猫のごはんとトイレ掃除お願いできないかな", 2),
            L(U, "いいよ！合鍵ポストね", 1), L("まい", "ありがとう、お礼するね"),
        ])
        q = "まいが週末に実家へ帰ったとき、私が頼まれたお世話は？"
        ans = "まいの猫のごはんとトイレ掃除（合鍵はポストで受け渡し）。"
        keys = ["トイレ掃除"]
    return episode("contextual", q, ans, keys, [s])


@kind("contextual", {"variant": "mother"}, {"variant": "father"})
def cooking_tip(ctx: Ctx, v: dict) -> Episode:
    """A parent's cooking secret."""
    if v["variant"] == "mother":
        d = ctx.day("family", "2023-05-01", "2025-03-20")
        s = Scene("family", d, [
            L(U, "お母さんの肉じゃがの作り方教えて"), L("母", "お肉を先に炒めて、砂糖を入れてからお醤油ね", 2),
            L("母", "コツは最後に火を止めてしばらく置くこと、味がしみるよ", 2), L(U, "メモった！"),
        ])
        q = "母に習った肉じゃがの味つけ、コツは何だった？"
        ans = "肉を先に炒め、砂糖を入れてから醤油を入れること、最後に火を止めてしばらく置いて味をしみこませること。"
        keys = ["火を止めて", "砂糖を入れてから"]
    else:
        d = ctx.day("family", "2023-05-01", "2025-03-20")
        s = Scene("family", d, [
            L(U, "お父さんのカレー、なんであんなにおいしいの", 1), L("父", "隠し味にインスタントコーヒーを少し入れてる", 2),
            L("父", "あとは一晩寝かせる", 2), L(U, "まねしてみる"),
        ])
        q = "父のカレーがおいしい秘密、何を入れてるって言ってた？"
        ans = "隠し味にインスタントコーヒーを少し入れ、一晩寝かせること。"
        keys = ["インスタントコーヒー", "一晩"]
    return episode("contextual", q, ans, keys, [s])


@kind("contextual", {"variant": "partner"}, {"variant": "friends"})
def agreed_rule(ctx: Ctx, v: dict) -> Episode:
    """A rule agreed after a problem."""
    if v["variant"] == "partner":
        d0 = ctx.day("partner", "2023-05-01", "2025-03-20")
        s0 = Scene("partner", d0, [
            L(U, "30分待ってたんだけど"), L("けんと", "ごめん、スマホの充電切れてた", 1),
        ])
        s1 = Scene("partner", d0 + timedelta(days=1), [
            L("けんと", "昨日は充電切れでほんとにごめん"), L("けんと", "これからのルール、遅れそうなときは、わかった時点ですぐ連絡する", 2),
            L(U, "うん、私も言いすぎた"), L(U, "出る前にモバイルバッテリー持ったか確認ね", 2), L("けんと", "約束する"),
        ])
        q = "けんとのスマホの充電が切れて30分待たされたあと、二人で決めたルールは？"
        ans = "遅れそうなときはわかった時点ですぐ連絡すること、出かける前にモバイルバッテリーを持ったか確認すること。"
        return episode("contextual", q, ans, ["すぐ連絡", "モバイルバッテリー"], [s0, s1])
    d = ctx.day("friends_highschool", "2023-05-01", "2025-03-20")
    s = Scene("friends_highschool", d, [
        L("りな", "アルバムに載せる写真、写りが微妙なのは先に本人に聞いてからにしない？", 2), L("まい", "賛成"),
        L(U, "それ大事"), L("あかり", "じゃあ載せる前に一言ね", 2),
    ])
    q = "高校の友達グループで、アルバムに写真を載せるときのルールは？"
    ans = "写りが微妙な写真は、アルバムに載せる前に写っている本人に一言確認すること。"
    return episode("contextual", q, ans, ["本人に聞いて"], [s])


@kind("contextual", {"variant": "friends"}, {"variant": "partner"})
def day_plan(ctx: Ctx, v: dict) -> Episode:
    """The order of the day's activities for an outing."""
    if v["variant"] == "friends":
        d = ctx.day("friends_highschool", "2023-05-01", "2025-03-20")
        s = Scene("friends_highschool", d, [
            L("まい", "遊園地の当日の流れまとめた！", 1),
            L("まい", "8時入園→まずジェットコースター→11時半レストラン予約→午後はショー→夜パレード", 2),
            L("あかり", "完璧"), L(U, "カチューシャ持ってく！"),
        ])
        q = "高校の友達と遊園地に行った日、当日の流れはどういう順番だった？"
        ans = "8時に入園してまずジェットコースター、11時半に予約したレストランで昼食、午後はショー、夜はパレードを見る。"
        keys = ["ジェットコースター", "パレード"]
    else:
        d = ctx.day("partner", "2023-05-01", "2025-03-20")
        s = Scene("partner", d, [
            L("けんと", "水族館、10時に着いたらまずイルカショー見よ", 2),
            L("けんと", "お昼は館内のカフェで、そのあとペンギンのエサやり体験", 2), L(U, "ペンギン！！"),
            L(U, "帰りに観覧車も乗りたい", 2),
        ])
        q = "けんとと水族館に行った日、どんな順番で回る予定だった？"
        ans = "10時に着いてまずイルカショー、昼は館内のカフェ、そのあとペンギンのエサやり体験、帰りに観覧車。"
        keys = ["イルカショー", "観覧車"]
    return episode("contextual", q, ans, keys, [s])


@kind("contextual", {"variant": "cafe"}, {"variant": "club"})
def quitting_reason(ctx: Ctx, v: dict) -> Episode:
    """Why a member leaves the café job or the circle."""
    person = ctx.take("person")
    if v["variant"] == "cafe":
        d = ctx.day("parttime_cafe", "2024-01-10", "2024-02-28")
        s = Scene("parttime_cafe", d, [
            L(person, "急なお知らせですみません"),
            L(person, "3月末でバイトを辞めることになりました。4月からカナダに1年留学します", 2),
            L(U, "えー寂しい！でも応援してる"), L("店長", "送別会しましょう"),
        ])
        q = f"バイト先の{person}さんが辞めた理由は？"
        ans = "4月から1年間カナダに留学するため、3月末で辞めることになった。"
        keys = ["カナダ", "留学"]
    else:
        d = ctx.day("club_tennis", "2024-04-10", "2024-06-30")
        s = Scene("club_tennis", d, [
            L(person, "急ですが、今月でサークルを抜けます", 1),
            L(person, "教育実習と教員採用試験の勉強で、練習に来られなくなりそうで", 2),
            L("はると", "さみしいけど応援してる"), L(U, "がんばってね！"),
        ])
        q = f"{person}さんがサークルをやめた理由は？"
        ans = "教育実習と教員採用試験の勉強で練習に参加できなくなるため。"
        keys = ["教育実習"]
    return episode("contextual", q, ans, keys, [s])


@kind("contextual", {"variant": "club"}, {"variant": "friends"})
def rain_plan(ctx: Ctx, v: dict) -> Episode:
    """An outdoor plan cancelled by the weather and what replaced it."""
    if v["variant"] == "club":
        d = ctx.day("club_tennis", "2023-05-01", "2024-11-30")
        s = Scene("club_tennis", d, [
            L("はると", "本日は雨のため練習中止です", 1),
            L("はると", "代わりに18時から体育館2階でトレーニングします。来れる人だけで大丈夫です", 2),
            L("さき", "行きます"), L(U, "行きます！"),
        ])
        q = "雨で練習中止になった日、代わりに何をすることになった？"
        ans = "18時から体育館2階でトレーニングをすることになった（参加は自由）。"
        keys = ["体育館"]
    else:
        d = ctx.day("friends_highschool", "2023-07-01", "2024-09-30")
        s = Scene("friends_highschool", d, [
            L("りな", "明日のBBQ、台風で無理そう…", 1), L("あかり", "じゃあうちでたこパにしよ！", 2),
            L("まい", "賛成、材料買ってく"), L(U, "たこ焼き器持ってく", 1),
        ])
        q = "台風で外の予定が流れたとき、高校の友達と代わりに何をした？"
        ans = "台風でBBQができなくなり、あかりの家でたこ焼きパーティーをした（ゆいがたこ焼き器を持参）。"
        keys = ["たこパ"]
    return episode("contextual", q, ans, keys, [s])


@kind("contextual", {"variant": "grandma"}, {"variant": "mothers_day"})
def family_present(ctx: Ctx, v: dict) -> Episode:
    """Choosing a seasonal present in the family and who gets it."""
    if v["variant"] == "grandma":
        d = ctx.day("family", "2023-09-01", "2023-09-12")
        s = Scene("family", d, [
            L("母", "敬老の日、おばあちゃんに何あげる？", 1), L(U, "ひざ掛けどう？最近寒いって言ってたし", 2),
            L("母", "いいね、ゆい土曜に買ってきてくれる？", 2), L(U, "りょ"),
        ])
        q = "祖母に贈るお祝いの品、何に決まって誰が用意した？"
        ans = "最近寒いと言っていた祖母にひざ掛けを贈ることにし、ゆいが土曜に買いに行くことになった。"
        keys = ["ひざ掛け"]
        decoy = Scene("dm_mai", ctx.day("dm_mai", "2023-04-15", "2025-02-15", rng=ctx.local("family_present:decoy")),
                      [L("まい", "祖母の家の庭、梅が咲いたって"), L(U, "見たい！")])
        return episode("contextual", q, ans, keys, [s], [decoy], cue="paraphrase")
    else:
        d = ctx.day("dm_souta", "2024-05-01", "2024-05-09")
        r = ctx.local("family_present:order")
        order = f"{r.randint(2400, 2499)}-{r.randint(1000, 9999)}-{r.randint(10, 99)}"
        s = Scene("dm_souta", d, [
            L("そうた", "母の日のプレゼントどうする？", 1), L(U, "カーネーションと、駅前のケーキ屋のロールケーキにしよ", 2),
            L("そうた", "ケーキ俺が取りに行く", 2), L(U, f"じゃあ花は私ね。ネットで注文した、注文番号{order}", 2),
        ])
        q = f"注文番号{order}のプレゼント、弟とどう分けたっけ？"
        ans = "カーネーションとロールケーキを贈ることにし、ケーキはそうたが受け取りに行き、花はゆいが用意した。"
        keys = ["カーネーション", "ロールケーキ"]
        decoys = exact_decoys(ctx, r, near_misses(r, order, EXACT_DECOYS), lambda o: f"注文番号{o}のプレゼント、弟と半分ずつにしよ",
                              ("ありがと", "届くの楽しみ", "あら", "センスいい", "素敵！"),
                              ("カードも書こ", "ラッピングは私やる", "送料は割り勘ね"))
        return episode("contextual", q, ans, keys, [s], decoys, cue="exact", key_token=order)
    return episode("contextual", q, ans, keys, [s])


@kind("contextual", {"variant": "brother"}, {"variant": "partner"})
def money_loan(ctx: Ctx, v: dict) -> Episode:
    """Money lent or advanced, and how it will be paid back."""
    if v["variant"] == "brother":
        d = ctx.day("dm_souta", "2023-05-01", "2025-03-10")
        s = Scene("dm_souta", d, [
            L("そうた", "5000円貸してくれない？", 2), L("そうた", "友達の誕生日プレゼント買いたくて", 1),
            L(U, "いいけど、いつ返すの？"), L("そうた", "25日にバイト代入ったら返す！", 2),
        ])
        repaid = Scene("dm_souta", next_day_of_month(d, 25), [
            L("そうた", "バイト代入ったから返した！", 1), L(U, "確認した、ありがと"),
        ])
        q = "弟にお金を用立てたとき、額と返済の期日はどう決めた？"
        ans = "5000円を貸し、25日にアルバイト代が入ったら返してもらう約束だった。"
        keys = ["5000円", "25日"]
        decoy = Scene("family", ctx.day("family", "2023-04-15", "2025-02-15", rng=ctx.local("money_loan:decoy")),
                      [L("父", "町内会の回覧板、期日までに回してな"), L(U, "わかってる")])
        return episode("contextual", q, ans, keys, [s, repaid], [decoy], cue="paraphrase")
    else:
        d = ctx.day("partner", "2023-05-01", "2025-03-10")
        s = Scene("partner", d, [
            L("けんと", "ライブのチケット代、立て替えといたよ", 1), L("けんと", "一人8,800円ね", 2),
            L(U, "ありがと！次会うとき現金で渡すね", 2),
        ])
        q = "けんとに立て替えてもらったライブのお金、いくらをどう返すことにした？"
        ans = "ライブのチケット代8,800円で、次に会うときに現金で渡すことにした。"
        keys = ["8,800円", "現金"]
        scenes = [s]
    return episode("contextual", q, ans, keys, scenes)


@kind("contextual", {"variant": "train"}, {"variant": "bus"})
def transport_booking(ctx: Ctx, v: dict) -> Episode:
    """Who booked the transport for a trip and its departure time."""
    if v["variant"] == "train":
        d = ctx.day("partner", "2023-05-01", "2025-02-28")
        r = ctx.local("transport_booking:seat")
        seat = f"{r.randint(1000, 9999)}-{r.randint(1000, 9999)}"
        s = Scene("partner", d, [
            L("けんと", "新幹線とれた！", 1), L("けんと", f"行きは9:12発のこだま、帰りは日曜の17:40発。予約番号{seat}", 2),
            L(U, "ありがとう！！"), L(U, "駅弁買お"),
        ])
        ride = Scene("partner", next_weekday(d, 5, 10), [L(U, "こだま乗れた！駅弁あけるね", 1), photo(U)])
        q = f"予約番号{seat}の新幹線、行きはなんじ発だった？"
        ans = "けんとが新幹線を予約し、行きは9時12分発のこだま（帰りは日曜17時40分発）だった。"
        decoys = exact_decoys(ctx, r, near_misses(r, seat, EXACT_DECOYS), lambda x: f"予約番号{x}の新幹線、行きは朝の便にした",
                              ("気をつけて", "いいな", "了解", "ありがとう！", "窓側？"),
                              ("帰りは夕方の便", "指定席とれた", "駅弁買お"))
        return episode("contextual", q, ans, ["9:12"], [s, ride], decoys, cue="exact", key_token=seat)
    else:
        d = ctx.day("friends_highschool", "2023-05-01", "2025-02-28")
        s = Scene("friends_highschool", d, [
            L("りな", "夜行バス予約したよ！", 1), L("りな", "22:30バスタ新宿発、朝6時着", 2),
            L(U, "ありがと！寝れるかな"), L("まい", "アイマスク必須"),
        ])
        q = "友達と夜行バスで行った旅行、何時にどこから出発した？"
        ans = "りなが予約した夜行バスで、22時30分にバスタ新宿を出て朝6時に着く予定だった。"
        keys = ["22:30", "バスタ新宿"]
        scenes = [s]
    return episode("contextual", q, ans, keys, scenes)


@kind("contextual", {"variant": "headache"}, {"variant": "sleep"})
def health_advice(ctx: Ctx, v: dict) -> Episode:
    """Advice received about a health complaint."""
    if v["variant"] == "headache":
        d = ctx.day("family", "2023-05-01", "2025-03-20")
        s = Scene("family", d, [
            L(U, "最近ずっと頭痛が続いてる…", 1), L("母", "スマホ見すぎじゃない？", 1),
            L("母", "一回眼科で視力測ってもらったら？メガネ合ってないのかも", 2), L(U, "たしかに最近見えづらい"),
        ])
        q = "頭痛が続いてるって相談したとき、母に何を勧められた？"
        ans = "眼鏡が合っていないのかもしれないので、眼科で視力を測ってもらうよう勧められた。"
        keys = ["眼科"]
    else:
        d = ctx.day("dm_saki", "2023-05-01", "2025-03-20")
        s = Scene("dm_saki", d, [
            L(U, "最近寝つき悪くて…寝不足", 1), L("さき", "寝る1時間前にスマホ置くのおすすめ", 2),
            L("さき", "あと朝に散歩すると夜眠くなるよ", 2), L(U, "やってみます！"),
        ])
        q = "寝不足で寝つきが悪かったころ、さき先輩からもらったアドバイスは？"
        ans = "寝る1時間前にはスマホを置くこと、朝に散歩をすること。"
        keys = ["スマホ置く", "散歩"]
    return episode("contextual", q, ans, keys, [s])


@kind("contextual", {"variant": "club"}, {"variant": "seminar"})
def gift_collection(ctx: Ctx, v: dict) -> Episode:
    """The user organises a collection for a farewell gift."""
    if v["variant"] == "club":
        d = ctx.day("club_tennis", "2024-02-10", "2024-03-05")
        pay = next_weekday(d, 5, 3)
        s = Scene("club_tennis", d, [
            L(U, "さき先輩たちの卒業祝い、一人500円集めます！", 2), L(U, f"{mdw(pay)}の練習のときに私に渡してください", 2),
            L("みゆ", "了解！"), L("こうへい", "花束にする？"),
        ])
        collected = Scene("club_tennis", pay, [L(U, "集金ありがとうございました！全員分そろいました", 1), L("こうへい", "おつかれ！")])
        q = "先輩の卒業祝い、いくらをいつまでに集めることにした？"
        ans = f"一人500円を、{md(pay)}の練習のときにゆいに渡してもらうことにした。"
        keys = ["500円", mdw(pay)]
        scenes = [s, collected]
    else:
        d = ctx.day("study_group", "2025-01-10", "2025-02-05")
        s = Scene("study_group", d, [
            L("みなみ", "先生に卒業のお礼で何か贈らない？", 1), L(U, "一人1000円でお花とお菓子にしよ", 2),
            L(U, "2月のゼミ最終回までに私に渡して", 2), L("しょう", "了解"),
        ])
        q = "ゼミの先生への卒業のお礼、いくら集めて何を贈った？"
        ans = "一人1000円を集めて花とお菓子を贈ることにし、2月のゼミ最終回までにゆいが集めることになった。"
        keys = ["1000円", "最終回"]
        scenes = [s]
    return episode("contextual", q, ans, keys, scenes)


@kind("contextual", {"variant": "internship"}, {"variant": "seminar"})
def missed_meeting(ctx: Ctx, v: dict) -> Episode:
    """How a member who cannot attend a meeting is kept informed."""
    if v["variant"] == "internship":
        d = ctx.day("work_project", "2024-07-01", "2025-01-31", weekday=ctx.rng.randint(0, 3))
        s = Scene("work_project", d, [
            L(U, "すみません、明日の定例、大学の試験と重なってしまいました…", 1),
            L("高橋", "了解です。議事録を後で共有するので、意見はチャットでお願いします", 2),
            L(U, "ありがとうございます、確認して返信します"),
        ])
        shared = Scene("work_project", d + timedelta(days=1), [
            L("高橋", "本日の定例の議事録を共有しました。ゆいさん、3点目にコメントいただけると助かります", 1),
            L(U, "拝見しました、コメント入れます！"),
        ])
        q = "大学の試験でインターンの定例に出られなかったとき、どう対応することになった？"
        ans = "後で共有される議事録を読み、意見はチャットで伝えることになった。"
        keys = ["議事録"]
        scenes = [s, shared]
    else:
        d = ctx.day("study_group", "2024-03-01", "2024-07-15")
        s = Scene("study_group", d, [
            L("しょう", "来週のゼミ、面接で休む…", 1), L("みなみ", "録音しとくから後で聞いて", 2),
            L("だいき", "レジュメは共有フォルダに入れとくね", 2),
        ])
        q = "しょうが面接でゼミを休んだとき、みんなはどうフォローした？"
        ans = "みなみがゼミを録音して後で聞けるようにし、だいきがレジュメを共有フォルダに入れておくことにした。"
        keys = ["録音"]
        scenes = [s]
    return episode("contextual", q, ans, keys, scenes)


@kind("contextual", {"variant": "club"}, {"variant": "internship"})
def ride_arrangement(ctx: Ctx, v: dict) -> Episode:
    """How people travel to a venue."""
    if v["variant"] == "club":
        d = ctx.day("club_tennis", "2023-05-01", "2024-11-15")
        s = Scene("club_tennis", d, [
            L("こうへい", "大会の日、車出すよ", 1), L("こうへい", "7時に大学の正門前で拾うね。乗れるのは4人まで", 2),
            L(U, "乗りたい！"), L("みゆ", "私も！"),
        ])
        q = "サークルの大会の日、会場までこうへいの車で行くときの集合は？"
        ans = "こうへいが車を出し、7時に大学の正門前で（4人まで）乗せてもらうことになった。"
        keys = ["正門"]
    else:
        d = ctx.day("work_project", "2024-06-10", "2024-09-30", weekday=ctx.rng.randint(0, 3))
        s = Scene("work_project", d, [
            L("森本", "来週の現地確認は社用車で行きます", 2), L("森本", "10時に事務所の前に集合、運転は私がします", 2),
            L(U, "承知しました！"),
        ])
        q = "インターンの現地確認の日は、何で移動してどこに集合した？"
        ans = "森本さんが運転する社用車で行き、10時に事務所の前に集合した。"
        keys = ["社用車", "事務所の前"]
    return episode("contextual", q, ans, keys, [s])


@kind("contextual", {"variant": "laptop"})
def repair_sequence(ctx: Ctx, v: dict) -> Episode:
    """The user's laptop breaks, goes to repair and comes back two weeks later."""
    d0 = ctx.day("partner", "2023-05-01", "2025-02-20")
    s0 = Scene("partner", d0, [
        L(U, "パソコン急に電源つかなくなった…"), L("けんと", "メーカーの修理に出したら？保証まだあるでしょ", 1),
    ])
    s1 = Scene("partner", d0 + timedelta(days=2), [L(U, "修理に出してきた、戻るまで2週間だって", 2), L("けんと", "長いな")])
    s2 = Scene("partner", d0 + timedelta(days=16), [L(U, "パソコン戻ってきた！データも無事", 2), L("けんと", "よかったね")])
    q = "パソコンが修理から戻ってくるまで、どんな経過だった？"
    ans = "電源が入らなくなり、けんとの勧めでメーカー保証の修理に出して、約2週間後にデータも無事な状態で戻ってきた。"
    return episode("contextual", q, ans, ["2週間", "戻ってきた"], [s0, s1, s2])


# ----------------------------------------------------------------------------- aggregate

@kind("aggregate", {"variant": "treasurer"})
def circle_role(ctx: Ctx, v: dict) -> Episode:
    """The user is the tennis circle's treasurer: appointed, collects dues, settles the camp, buys balls."""
    s = [
        Scene("club_tennis", ctx.day("club_tennis", "2023-04-20", "2023-05-10"), [
            L("はると", "今年度の会計はゆいにお願いします！", 2), L(U, "がんばります！"), L("みゆ", "よろしく〜"),
        ]),
        Scene("club_tennis", ctx.day("club_tennis", "2023-06-01", "2023-06-20"), [
            L(U, "今月の部費1000円、まだの人は今週中に私まで！", 2), L("たくみ", "明日払う！"),
        ]),
        Scene("partner", ctx.day("partner", "2023-09-01", "2023-09-20"), [
            L(U, "合宿の精算やっと終わった…レシート80枚", 2), L("けんと", "おつかれ、えらすぎ"),
        ]),
        Scene("family", ctx.day("family", "2023-11-01", "2023-11-30"), [
            L(U, "サークルの帳簿つけてたらこんな時間", 1), L("母", "早く寝なさいよ"),
        ]),
        Scene("club_tennis", ctx.day("club_tennis", "2024-02-01", "2024-02-28"), [
            L(U, "新しいボール3ダース買いました、領収書は共有ノートに貼ってます", 2), L("はると", "ありがとう！"),
        ]),
    ]
    q = "サークルの会計として、私がやってたことを全部教えて"
    ans = "会計係として、部費の集金、夏合宿の費用の精算、ボールなど備品の購入と領収書の管理をしていた。"
    return episode("aggregate", q, ans, ["会計", "部費", "精算"], s)


@kind("aggregate", {"variant": "job_hunting"})
def job_hunting_mood(ctx: Ctx, v: dict) -> Episode:
    """The user's feelings over the job-hunting season, from discouraged to relieved."""
    s = [
        Scene("dm_saki", ctx.day("dm_saki", "2024-03-01", "2024-03-25"), [
            L(U, "ES全然書けない、自分に何もない気がしてくる", 2), L("さき", "みんな最初はそうだよ"),
        ]),
        Scene("partner", ctx.day("partner", "2024-04-05", "2024-04-28"), [
            L(U, "また落ちた…今月3社目", 2), L("けんと", "ゆいのせいじゃないよ、相性"),
        ]),
        Scene("dm_mai", ctx.day("dm_mai", "2024-05-05", "2024-05-28"), [
            L(U, "二次面接通ったの初めてかも、ちょっと自信ついた", 2), L("まい", "その調子！"),
        ]),
        Scene("family", ctx.day("family", "2024-06-05", "2024-06-20"), [
            L(U, "第一志望から内定もらえた！！！", 2), L("母", "おめでとう！！今日はお祝いね"), L("父", "よくがんばった"),
        ]),
        Scene("partner", ctx.day("partner", "2024-06-21", "2024-06-30"), [
            L(U, "肩の荷がおりた、やっとぐっすり眠れる", 1), L("けんと", "ほんとにおつかれさま"),
        ]),
    ]
    q = "就活のころ、ESから内定まで私の気持ちはどう移り変わった？"
    ans = ("3月ごろはESが書けず自信をなくし、4月は不採用が続いて落ち込んだが、5月に二次面接を通って少し自信がつき、"
           "6月に第一志望から内定が出て安心した。")
    return episode("aggregate", q, ans, ["ES", "落ちた", "自信ついた", "内定"], s)


@kind("aggregate", {"variant": "running"})
def running_habit(ctx: Ctx, v: dict) -> Episode:
    """The user's jogging grows from 3 km to a finished half marathon; けんと's gym is a decoy."""
    s = [
        Scene("partner", ctx.day("partner", "2023-10-01", "2023-10-20"), [
            L(U, "健康のために朝ジョギング始めてみた、3kmで死にそう", 2), L("けんと", "えらい！"),
        ]),
        Scene("dm_mai", ctx.day("dm_mai", "2024-01-10", "2024-01-31"), [
            L(U, "走るの続いてる！最近は5km普通にいける", 2), L("まい", "すごすぎ"),
        ]),
        Scene("family", ctx.day("family", "2024-05-01", "2024-05-31"), [
            L(U, "10月のハーフマラソン申し込んだ", 2), L("父", "無理するなよ"),
        ]),
        Scene("friends_highschool", ctx.day("friends_highschool", "2024-10-21", "2024-10-31"), [
            L(U, "ハーフ完走した！2時間14分", 2), L("あかり", "え、すごい！"), L("りな", "おめでとう！"),
        ]),
    ]
    decoy = Scene("partner", ctx.day("partner", "2023-11-01", "2024-08-31"), [
        L("けんと", "会社の近くのジム入会した"), L(U, "続くといいね笑"),
    ])
    q = "ジョギングを始めてからハーフマラソンまで、私の記録はどう伸びた？"
    ans = "2023年秋に朝のジョギングを3kmから始め、冬には5kmを走れるようになり、2024年春にハーフマラソンに申し込んで、10月に2時間14分で完走した。"
    return episode("aggregate", q, ans, ["ジョギング", "5km", "ハーフ"], s, [decoy])


@kind("aggregate", {"variant": "cafe"})
def cafe_role(ctx: Ctx, v: dict) -> Episode:
    """The user's responsibilities at the café grow: closing, shift leader, training manual, shift table."""
    s = [
        Scene("parttime_cafe", ctx.day("parttime_cafe", "2023-06-01", "2023-06-30"), [
            L("店長", "ゆいさん、来月からレジ締めもお願いできる？", 1), L(U, "はい、がんばります"),
        ]),
        Scene("parttime_cafe", ctx.day("parttime_cafe", "2023-12-01", "2023-12-20"), [
            L("店長", "1月からゆいさんにバイトリーダーをお願いしたいです", 2), L(U, "私でよければ！"), L("ちひろ", "おめでとうございます！"),
        ]),
        Scene("parttime_cafe", ctx.day("parttime_cafe", "2024-04-01", "2024-04-25"), [
            L(U, "新人さん向けの研修マニュアル作りました、ノートに載せてます", 2), L("店長", "助かります"),
        ]),
        Scene("partner", ctx.day("partner", "2024-07-01", "2024-07-31"), [
            L(U, "来月のシフト表作るの私の担当になったんだけど、みんなの希望合わなすぎる", 2), L("けんと", "大変そう"),
        ]),
    ]
    q = "カフェのバイトで、レジ締めから始まって私の担当はどう増えていった？"
    ans = "2023年夏からレジ締めを任され、2024年1月にバイトリーダーになり、新人向けの研修マニュアルを作り、夏からはシフト表の作成も担当した。"
    return episode("aggregate", q, ans, ["バイトリーダー", "マニュアル", "シフト表"], s)


@kind("aggregate", {"variant": "tutoring"})
def brother_exam(ctx: Ctx, v: dict) -> Episode:
    """The user tutors her brother in maths over a year until he passes the entrance exam."""
    s = [
        Scene("family", ctx.day("family", "2023-05-01", "2023-06-15"), [
            L("母", "そうた数学やばいらしいから、たまに見てあげて", 1), L(U, "いいよ"),
        ]),
        Scene("dm_souta", ctx.day("dm_souta", "2023-07-01", "2023-08-31"), [
            L("そうた", "姉ちゃん、この微分の問題わからん", 2), L(U, "写真送って、通話で説明する", 2), photo("そうた"),
        ]),
        Scene("dm_souta", ctx.day("dm_souta", "2023-11-01", "2023-12-15"), [
            L(U, "今日の過去問、前よりだいぶ解けてたじゃん", 2), L("そうた", "姉ちゃんのおかげ"),
        ]),
        Scene("family", ctx.day("family", "2024-02-20", "2024-03-10"), [
            L("そうた", "合格した！！！", 2), L(U, "数学がんばったもんね", 2), L("母", "みんなのおかげだね"),
        ]),
    ]
    q = "弟の大学受験、数学をどう教えて合格までどうなった？"
    ans = "母に頼まれて、そうたの苦手な数学を通話などで教え、過去問の出来を見て励まし続け、2024年春に合格した。"
    return episode("aggregate", q, ans, ["微分", "過去問", "合格"], s)


@kind("aggregate", {"variant": "project"})
def project_progress(ctx: Ctx, v: dict) -> Episode:
    """The internship's shopping-street project from kick-off to final report."""
    event_day = ctx.day("partner", "2024-11-09", "2024-11-24", weekday=6)
    s = [
        Scene("work_project", ctx.day("work_project", "2024-06-05", "2024-06-28", weekday=1), [
            L("高橋", "キックオフありがとうございました。商店街の来街者を増やすイベントを11月に行う方針です", 2),
            L(U, "よろしくお願いします！"),
        ]),
        Scene("work_project", ctx.day("work_project", "2024-08-19", "2024-08-30", weekday=3), [
            L("森本", "アンケートの回収数は312件でした", 2), L(U, "思ったより集まりましたね"),
        ]),
        Scene("partner", event_day, [
            L(U, "イベント終わった〜！人多すぎて足棒", 1), L("けんと", "おつかれ！"),
        ]),
        Scene("work_project", event_day + timedelta(days=1), [
            L("高橋", "昨日の来場は約1,200人、想定の1.5倍でした", 2), L("井上", "みなさんお疲れさまでした！"),
        ]),
        Scene("work_project", ctx.day("work_project", "2025-02-10", "2025-02-28", weekday=2), [
            L("高橋", "最終報告会で、商店街の方から来年も続けたいとの声をいただきました", 2), L(U, "うれしいです！"),
        ]),
    ]
    q = "インターンの商店街のイベント、キックオフから最終報告会までの流れは？"
    ans = ("6月のキックオフで11月に来街者を増やすイベントを開く方針が決まり、夏のアンケートで312件を回収、"
           "11月のイベントには想定の1.5倍の約1,200人が来場し、2月の最終報告会では来年も続けたいという声が出た。")
    return episode("aggregate", q, ans, ["312件", "1,200人", "来年も続けたい"], s)


@kind("aggregate", {"variant": "friends"}, {"variant": "club"})
def yearly_tradition(ctx: Ctx, v: dict) -> Episode:
    """A yearly event of a group, seen in two years."""
    if v["variant"] == "friends":
        s = [
            Scene("friends_highschool", ctx.day("friends_highschool", "2023-12-01", "2023-12-15"), [
                L("まい", "今年もクリスマス会やろ！プレゼント交換は1000円以内ね", 2), L(U, "やるー！"),
            ]),
            Scene("dm_mai", ctx.day("dm_mai", "2024-01-10", "2024-02-28"), [
                L(U, "この前の交換で当たったマグ、毎日使ってる", 1), L("まい", "それ選んだの私！"),
            ]),
            Scene("friends_highschool", ctx.day("friends_highschool", "2024-12-01", "2024-12-15"), [
                L("あかり", "恒例のやつ、今年は誰んち？"), L("りな", "うちでいいよ、プレゼントは1000円縛り継続で", 2),
            ]),
        ]
        q = "高校の友達と毎年やってる恒例のクリスマス会、何をするのが決まり？"
        ans = "毎年12月にクリスマス会を開き、1000円以内のプレゼント交換をしている。"
        keys = ["プレゼント交換", "1000円"]
    else:
        s = [
            Scene("club_tennis", ctx.day("club_tennis", "2023-04-03", "2023-04-14"), [
                L("はると", "新歓BBQは4月の最後の土曜、河川敷でやります！", 2), L(U, "買い出し手伝います"),
            ]),
            Scene("club_tennis", ctx.day("club_tennis", "2024-04-01", "2024-04-12"), [
                L("こうへい", "毎年恒例の新歓BBQ、今年も河川敷でいいよね？", 2), L(U, "炭は去年の残りがある！"),
            ]),
        ]
        q = "サークルで毎年やってる春の新歓イベントは何で、どこでやってる？"
        ans = "毎年4月に河川敷で新入生歓迎のバーベキュー（新歓BBQ）をしている。"
        keys = ["新歓BBQ", "河川敷"]
    return episode("aggregate", q, ans, keys, s)


@kind("aggregate", {"variant": "taiwan"})
def saving_goal(ctx: Ctx, v: dict) -> Episode:
    """The user saves monthly for a Taiwan trip and goes."""
    s = [
        Scene("partner", ctx.day("partner", "2023-07-01", "2023-07-31"), [
            L(U, "来年の春休みに台湾行きたいから、毎月2万ずつ貯金する", 2), L("けんと", "いいね"),
        ]),
        Scene("family", ctx.day("family", "2023-12-01", "2023-12-25"), [
            L(U, "貯金15万いった", 2), L("母", "えらいじゃん"),
        ]),
        Scene("dm_mai", ctx.day("dm_mai", "2024-01-15", "2024-02-10"), [
            L(U, "台湾のチケット取った！3月に行く", 2), L("まい", "お土産よろしく〜"),
        ]),
        Scene("partner", ctx.day("partner", "2024-03-05", "2024-03-25"), [
            L(U, "九份めっちゃきれい", 1), photo(U),
        ]),
    ]
    q = "台湾に行くために貯金してた件、どういう流れだった？"
    ans = "春休みに台湾へ行くために毎月2万円ずつ貯金し、12月に15万円に達して、年明けに航空券を取り、2024年3月に台湾を訪れた。"
    return episode("aggregate", q, ans, ["台湾", "2万", "15万"], s)


@kind("aggregate", {"variant": "thesis"})
def thesis_progress(ctx: Ctx, v: dict) -> Episode:
    """The user's thesis from topic to submission, with a low point."""
    s = [
        Scene("study_group", ctx.day("study_group", "2024-05-10", "2024-05-31"), [
            L(U, "テーマ、地域カフェの常連さんのつながりに決めた", 2), L("みなみ", "ゆいっぽい！"),
        ]),
        Scene("partner", ctx.day("partner", "2024-09-01", "2024-09-30"), [
            L(U, "インタビュー3件断られた、卒論終わる気しない", 2), L("けんと", "まだ時間あるよ"),
        ]),
        Scene("study_group", ctx.day("study_group", "2024-11-05", "2024-11-30"), [
            L(U, "インタビュー8人分の文字起こし終わった", 2), L("だいき", "おつかれ！"),
        ]),
        Scene("study_group", ctx.day("study_group", "2025-01-10", "2025-01-20"), [
            L(U, "卒論提出完了！！", 2), L("しょう", "おめでとう〜"), L("みなみ", "打ち上げしよ"),
        ]),
    ]
    q = "卒論のテーマ決めから提出まで、どんな経過だった？"
    ans = ("地域のカフェの常連客のつながりをテーマにし、秋にインタビューを断られて行き詰まったが、"
           "11月に8人分の文字起こしを終え、2025年1月に提出した。")
    return episode("aggregate", q, ans, ["常連", "文字起こし", "提出完了"], s)


@kind("aggregate", {"variant": "bento"})
def bento_habit(ctx: Ctx, v: dict) -> Episode:
    """The user starts making lunch boxes to save money and keeps it up."""
    s = [
        Scene("family", ctx.day("family", "2023-09-01", "2023-09-20"), [
            L(U, "明日から自分でお弁当作る！節約する", 2), L("母", "冷凍のおかず使っていいよ"),
        ]),
        Scene("partner", ctx.day("partner", "2023-10-01", "2023-10-31"), [
            photo(U), L(U, "今日の弁当、卵焼きうまくできた", 2), L("けんと", "うまそう"),
        ]),
        Scene("dm_mai", ctx.day("dm_mai", "2024-01-05", "2024-01-31"), [
            L(U, "お弁当生活4ヶ月続いてる、月1万くらい浮いた", 2), L("まい", "見習いたい"),
        ]),
    ]
    q = "節約のためにお弁当を作り始めて、どのくらい続いてどれだけ浮いた？"
    ans = "2023年9月から自分でお弁当を作り始め、4か月続けて月に1万円ほど浮くようになった。"
    return episode("aggregate", q, ans, ["お弁当", "1万"], s)


@kind("aggregate", {"variant": "results"})
def tennis_results(ctx: Ctx, v: dict) -> Episode:
    """The user's tennis tournament results improve after serve practice."""
    s = [
        Scene("club_tennis", ctx.day("club_tennis", "2023-06-05", "2023-06-30"), [
            L(U, "初戦敗退…サーブ入らなさすぎた", 2), L("さき", "次があるよ！"),
        ]),
        Scene("partner", ctx.day("partner", "2023-09-01", "2023-09-30"), [
            L(U, "最近毎朝サーブの壁打ちしてる", 2), L("けんと", "努力家"),
        ]),
        Scene("club_tennis", ctx.day("club_tennis", "2024-05-10", "2024-05-31"), [
            L(U, "ダブルスでベスト8いけた！", 2), L("はると", "すごい！！"), L("みゆ", "ペアおめでとう"),
        ]),
    ]
    q = "テニスの試合、サーブの練習を始めてから成績はどう変わった？"
    ans = "2023年6月はサーブが入らず初戦で負けたが、毎朝サーブの壁打ちを続け、2024年5月にはダブルスでベスト8に入った。"
    return episode("aggregate", q, ans, ["初戦敗退", "壁打ち", "ベスト8"], s)


@kind("aggregate", {"variant": "friends"}, {"variant": "family"})
def organizer_role(ctx: Ctx, v: dict) -> Episode:
    """The user is the one who organises gatherings or family trips."""
    if v["variant"] == "friends":
        s = [
            Scene("friends_highschool", ctx.day("friends_highschool", "2023-08-01", "2023-08-20"), [
                L(U, "日程調整の表つくったから、行ける日に丸つけといて", 2), L("りな", "ありがと〜"),
            ]),
            Scene("friends_highschool", ctx.day("friends_highschool", "2024-01-05", "2024-01-20"), [
                L(U, "新年会のお店、土曜18時で予約しといた", 2), L("あかり", "さすが"),
            ]),
            Scene("dm_mai", ctx.day("dm_mai", "2024-08-01", "2024-08-31"), [
                L("まい", "いつも集まりの段取りありがとね", 2), L(U, "好きでやってるから笑"),
            ]),
        ]
        q = "高校の友達と集まるとき、日程調整とかお店の予約とか、私はどんな役回りだった？"
        ans = "日程調整表を作ったり新年会の店を予約したりと、集まりの段取りを担う幹事役をしていた。"
        keys = ["日程調整", "予約しといた"]
    else:
        s = [
            Scene("family", ctx.day("family", "2023-07-01", "2023-07-20"), [
                L(U, "夏の家族旅行、箱根の宿いくつか候補送るね", 2), L("母", "ありがとう、任せた"),
            ]),
            Scene("family", ctx.day("family", "2023-08-01", "2023-08-10"), [
                L(U, "レンタカーも予約した、土曜9時に家出発ね", 2), L("父", "運転は任せろ"),
            ]),
            Scene("family", ctx.day("family", "2024-11-15", "2024-12-10"), [
                L(U, "年末の温泉、今年も私が宿と電車まとめて手配するね", 2), L("そうた", "助かる"),
            ]),
        ]
        q = "家族旅行のとき、宿やレンタカーの手配は私がどうしてた？"
        ans = "宿の候補探しやレンタカー・電車の予約など、家族旅行の計画と手配を毎回担当していた。"
        keys = ["宿", "予約", "手配"]
    return episode("aggregate", q, ans, keys, s)


@kind("aggregate", {"variant": "mother"})
def mother_health(ctx: Ctx, v: dict) -> Episode:
    """The mother's short hospital stay and recovery."""
    d0 = ctx.day("family", "2024-01-10", "2024-01-20")
    s = [
        Scene("family", d0, [L("父", "お母さん、明日から3日間検査入院することになった", 2), L(U, "え、大丈夫なの？")]),
        Scene("dm_souta", d0 + timedelta(days=1), [L("そうた", "母さんの病院、土曜一緒に行ける？", 1), L(U, "行く")]),
        Scene("family", d0 + timedelta(days=4), [L("母", "無事退院しました、心配かけてごめんね", 2), L(U, "よかった〜")]),
        Scene("family", ctx.day("family", "2024-03-01", "2024-03-20"), [L("母", "今日の診察、経過良好だって", 2), L("父", "一安心だな")]),
    ]
    q = "母の入院のこと、退院したあとの診察まで含めてどうなった？"
    ans = "2024年1月に3日間の検査入院をし、無事に退院して、3月の診察では経過良好と言われた。"
    return episode("aggregate", q, ans, ["検査入院", "退院", "経過良好"], s)


@kind("aggregate", {"variant": "kento"}, {"variant": "mai"})
def hobby_progress(ctx: Ctx, v: dict) -> Episode:
    """Someone's hobby from the start to a result."""
    if v["variant"] == "kento":
        s = [
            Scene("partner", ctx.day("partner", "2023-08-01", "2023-08-31"), [
                L("けんと", "中古のミラーレス買った", 2), photo("けんと"), L(U, "写真うまくなりそう"),
            ]),
            Scene("partner", ctx.day("partner", "2024-02-01", "2024-02-28"), [
                L("けんと", "撮りためた夜景、フォトコンテストに応募してみる", 2), L(U, "応援してる！"),
            ]),
            Scene("partner", ctx.day("partner", "2024-09-01", "2024-09-30"), [
                L("けんと", "コンテスト、佳作に入った！", 2), L(U, "すごすぎる、おめでとう！"),
            ]),
        ]
        q = "けんとのカメラの趣味、ミラーレスを買ってからコンテストまでどうなった？"
        ans = "2023年夏に中古のミラーレスカメラを買って写真を始め、夜景をフォトコンテストに応募して、2024年9月に佳作に入った。"
        keys = ["ミラーレス", "佳作"]
    else:
        s = [
            Scene("dm_mai", ctx.day("dm_mai", "2023-06-01", "2023-06-30"), [
                L("まい", "陶芸の教室に通い始めた！", 2), L(U, "おしゃれ"),
            ]),
            Scene("dm_mai", ctx.day("dm_mai", "2023-12-01", "2023-12-31"), [
                L("まい", "初めてちゃんとしたお皿が焼けた", 2), photo("まい"), L(U, "売れるレベル"),
            ]),
            Scene("friends_highschool", ctx.day("friends_highschool", "2024-10-01", "2024-10-31"), [
                L("まい", "教室の作品展にマグカップ出すことになった！見に来て", 2), L("あかり", "行く！"),
            ]),
        ]
        q = "まいが習ってた陶芸、どこまで上達したんだっけ？"
        ans = "2023年6月に陶芸教室に通い始め、年末に初めてきちんとしたお皿を焼き、2024年10月には教室の作品展にマグカップを出展した。"
        keys = ["陶芸", "お皿", "作品展"]
    return episode("aggregate", q, ans, keys, s)


@kind("aggregate", {"variant": "toeic"}, {"variant": "license"})
def score_progress(ctx: Ctx, v: dict) -> Episode:
    """A measurable progression over months: the user's TOEIC scores or the brother's driving licence."""
    if v["variant"] == "toeic":
        s = [
            Scene("partner", ctx.day("partner", "2023-06-01", "2023-06-30"), [
                L(U, "TOEIC 520点だった…", 2), L("けんと", "伸びしろしかない"),
            ]),
            Scene("study_group", ctx.day("study_group", "2023-12-01", "2023-12-20"), [
                L(U, "TOEIC 650いった！", 2), L("みなみ", "すご！"),
            ]),
            Scene("family", ctx.day("family", "2024-05-01", "2024-05-31"), [
                L(U, "TOEIC 780点とれた！！", 2), L("母", "すごいじゃない"),
            ]),
        ]
        q = "私のTOEICの点数、どう伸びていった？"
        ans = "2023年6月に520点、12月に650点、2024年5月に780点と上がっていった。"
        keys = ["520", "650", "780"]
    else:
        s = [
            Scene("dm_souta", ctx.day("dm_souta", "2024-08-01", "2024-08-20"), [
                L("そうた", "教習所入校した", 2), L(U, "がんばれ〜"),
            ]),
            Scene("family", ctx.day("family", "2024-09-15", "2024-09-30"), [
                L("そうた", "仮免受かった", 2), L("父", "次は路上だな"),
            ]),
            Scene("family", ctx.day("family", "2024-11-10", "2024-11-30"), [
                L("そうた", "卒検合格！免許センター行ってくる", 2), L(U, "今度乗せて"), L("母", "安全運転でね"),
            ]),
        ]
        q = "弟が教習所に通い始めてから免許を取るまでの流れは？"
        ans = "2024年8月に教習所に入り、9月に仮免許に合格し、11月に卒業検定に受かって免許を取りに行った。"
        keys = ["教習所", "仮免", "卒検"]
    return episode("aggregate", q, ans, keys, s)


# ----------------------------------------------------------------------------- selection

def type_counts(n_questions: int) -> dict[str, int]:
    """Split ``n_questions`` in the paper's 34/49/17 proportions by largest-remainder rounding.

    Ties in the remainders go to the type listed first in :data:`QUESTION_TYPES`.
    """
    if n_questions < 0:
        raise ValueError(f"n_questions must be >= 0, got {n_questions}")
    total = sum(PAPER_MIX.values())
    exact = {t: n_questions * PAPER_MIX[t] / total for t in QUESTION_TYPES}
    counts = {t: int(exact[t]) for t in QUESTION_TYPES}
    left = n_questions - sum(counts.values())
    by_remainder = sorted(QUESTION_TYPES, key=lambda t: (-(exact[t] - counts[t]), QUESTION_TYPES.index(t)))
    for t in by_remainder[:left]:
        counts[t] += 1
    return counts


def capacity() -> dict[str, int]:
    """How many distinct questions each type can supply (the number of its kinds' variants)."""
    return {t: sum(len(k.variants) for k in KINDS if k.qtype == t) for t in QUESTION_TYPES}


def _round_robin(kinds: list[Kind], n: int) -> list[tuple[Kind, dict]]:
    """The first ``n`` (kind, variant) pairs taking variant 0 of every kind, then variant 1, ..."""
    picked: list[tuple[Kind, dict]] = []
    depth = 0
    while len(picked) < n:
        for k in kinds:
            if depth < len(k.variants) and len(picked) < n:
                picked.append((k, k.variants[depth]))
        depth += 1
    return picked


def build_episodes(rng: random.Random, n_questions: int) -> list[Episode]:
    """Build ``n_questions`` episodes in the paper's type mix, shuffled into question order.

    Every line gets a unique ``uid``.  Raises ``ValueError`` when a type needs more questions than its
    kinds can supply.
    """
    counts, cap = type_counts(n_questions), capacity()
    for t in QUESTION_TYPES:
        if counts[t] > cap[t]:
            raise ValueError(
                f"n_questions={n_questions} needs {counts[t]} {t} questions but only {cap[t]} are defined; "
                f"the largest supported n_questions keeps every type within its capacity")
    ctx = Ctx(rng)
    episodes: list[Episode] = []
    for t in QUESTION_TYPES:
        for k, variant in _round_robin([k for k in KINDS if k.qtype == t], counts[t]):
            ep = k.build(ctx, variant)
            ep.kind = f"{k.name}#{k.variants.index(variant)}"
            episodes.append(ep)
    rng.shuffle(episodes)
    uid = 0
    for ep in episodes:
        for scene in ep.scenes + ep.decoys:
            for line in scene.lines:
                line.uid = uid
                uid += 1
    return episodes


def max_questions() -> int:
    """The largest ``n_questions`` whose type counts all fit the defined capacity."""
    cap = capacity()
    n = 0
    while all(c <= cap[t] for t, c in type_counts(n + 1).items()):
        n += 1
    return n
