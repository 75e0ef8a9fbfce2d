"""The people and conversation sources of the synthetic history.

The user is ゆい, a university student (3rd year in April 2023, graduating in March 2025) who lives
with her family, works part-time in a café, plays in a tennis circle, attends a seminar, does an
internship project in her last year and has a partner, けんと.  Every source is one LINE talk room.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

USER = "ゆい"
START = date(2023, 4, 1)
END = date(2025, 3, 31)


@dataclass(frozen=True)
class SourceSpec:
    """One talk room: who speaks, how much, when it is active and what it talks about.

    ``members`` are the other senders with their relative talk weights; ``user_share`` is the share
    of filler messages sent by the user.  ``weight`` is the share of the whole corpus.  ``hours`` is
    the earliest hour a session starts.  ``weekday_weights`` (Monday first) shape the day choice.
    ``topics`` name filler topic banks in :mod:`pmrag.demo.vocab` with weights.  ``register`` picks
    the backchannel style: ``casual``, ``family`` or ``polite``.  ``month_factors`` scale the
    activity of some months (semester breaks, summer camp, New Year).
    """

    name: str
    title: str
    members: tuple[tuple[str, float], ...]
    user_share: float
    weight: float
    start: date
    end: date
    hours: int
    weekday_weights: tuple[float, float, float, float, float, float, float]
    topics: tuple[tuple[str, float], ...]
    register: str
    is_group: bool
    month_factors: tuple[tuple[tuple[int, ...], float], ...] = ()

    @property
    def senders(self) -> tuple[str, ...]:
        """All senders of the room, the user first."""
        return (USER,) + tuple(name for name, _ in self.members)


_EVERY_DAY = (1.0, 1.0, 1.0, 1.0, 1.1, 1.3, 1.3)
_WEEKDAYS = (1.0, 1.0, 1.0, 1.0, 1.0, 0.08, 0.05)

SOURCES: tuple[SourceSpec, ...] = (
    SourceSpec(
        name="family", title="家族", members=(("母", 0.45), ("父", 0.22), ("そうた", 0.33)),
        user_share=0.32, weight=0.10, start=START, end=END, hours=7, weekday_weights=_EVERY_DAY,
        topics=(("family", 3.0), ("food", 2.0), ("plans", 1.5), ("weather", 1.0), ("health", 1.0),
                ("shopping", 0.6), ("feelings", 0.6)),
        register="family", is_group=True, month_factors=(((12, 1), 1.3),),
    ),
    SourceSpec(
        name="partner", title="けんと", members=(("けんと", 1.0),),
        user_share=0.5, weight=0.22, start=START, end=END, hours=8, weekday_weights=_EVERY_DAY,
        topics=(("plans", 3.0), ("food", 2.0), ("feelings", 2.0), ("games", 1.2), ("school", 0.8),
                ("work", 0.8), ("travel", 1.0), ("shopping", 0.6), ("weather", 0.5), ("health", 0.5),
                ("media", 1.0)),
        register="casual", is_group=False,
    ),
    SourceSpec(
        name="friends_highschool", title="いつメン🌸", members=(("まい", 0.36), ("あかり", 0.34), ("りな", 0.30)),
        user_share=0.28, weight=0.12, start=START, end=END, hours=9, weekday_weights=_EVERY_DAY,
        topics=(("plans", 3.0), ("food", 1.5), ("feelings", 1.5), ("shopping", 1.2), ("travel", 1.2),
                ("media", 1.5), ("school", 0.8), ("weather", 0.4)),
        register="casual", is_group=True,
    ),
    SourceSpec(
        name="club_tennis", title="テニスサークルSmash!!",
        members=(("はると", 0.25), ("さき", 0.2), ("こうへい", 0.2), ("みゆ", 0.18), ("たくみ", 0.17)),
        user_share=0.22, weight=0.12, start=START, end=date(2024, 12, 20), hours=8,
        weekday_weights=(1.0, 0.9, 1.0, 0.9, 1.1, 1.4, 1.2),
        topics=(("club", 4.0), ("plans", 1.5), ("food", 0.8), ("weather", 1.0), ("feelings", 0.6)),
        register="casual", is_group=True, month_factors=(((8, 9), 1.3),),
    ),
    SourceSpec(
        name="parttime_cafe", title="カフェ スタッフ連絡", members=(("店長", 0.3), ("ゆうた", 0.25), ("ちひろ", 0.25), ("はるか", 0.2)),
        user_share=0.25, weight=0.10, start=START, end=date(2025, 2, 28), hours=7, weekday_weights=_EVERY_DAY,
        topics=(("shift", 4.0), ("weather", 0.6), ("food", 0.6), ("health", 0.5)),
        register="casual", is_group=True,
    ),
    SourceSpec(
        name="study_group", title="ゼミ3期生", members=(("みなみ", 0.36), ("しょう", 0.34), ("だいき", 0.30)),
        user_share=0.3, weight=0.08, start=date(2023, 4, 7), end=date(2025, 2, 20), hours=8,
        weekday_weights=(1.2, 1.2, 1.3, 1.2, 1.0, 0.5, 0.6),
        topics=(("seminar", 4.0), ("school", 2.0), ("plans", 0.8), ("feelings", 0.6), ("food", 0.4)),
        register="casual", is_group=True, month_factors=(((2, 3, 8, 9), 0.25),),
    ),
    SourceSpec(
        name="work_project", title="【地域連携PJ】インターン", members=(("高橋", 0.4), ("森本", 0.35), ("井上", 0.25)),
        user_share=0.3, weight=0.07, start=date(2024, 6, 3), end=END, hours=8, weekday_weights=_WEEKDAYS,
        topics=(("office", 5.0),),
        register="polite", is_group=True,
    ),
    SourceSpec(
        name="dm_mai", title="まい", members=(("まい", 1.0),),
        user_share=0.5, weight=0.08, start=START, end=END, hours=9, weekday_weights=_EVERY_DAY,
        topics=(("plans", 2.0), ("feelings", 2.0), ("food", 1.2), ("shopping", 1.2), ("media", 1.2),
                ("school", 0.8), ("travel", 0.8), ("health", 0.5)),
        register="casual", is_group=False,
    ),
    SourceSpec(
        name="dm_saki", title="さき", members=(("さき", 1.0),),
        user_share=0.5, weight=0.06, start=START, end=END, hours=9, weekday_weights=_EVERY_DAY,
        topics=(("plans", 1.5), ("club", 1.0), ("work", 1.5), ("feelings", 1.5), ("food", 1.0), ("school", 0.6)),
        register="casual", is_group=False,
    ),
    SourceSpec(
        name="dm_souta", title="そうた", members=(("そうた", 1.0),),
        user_share=0.5, weight=0.05, start=START, end=END, hours=9, weekday_weights=_EVERY_DAY,
        topics=(("family", 2.0), ("games", 2.0), ("school", 1.0), ("food", 1.0), ("plans", 0.8)),
        register="casual", is_group=False,
    ),
)

SOURCE_BY_NAME = {spec.name: spec for spec in SOURCES}
