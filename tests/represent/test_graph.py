"""TOBUGraph's memory graph (pmrag.represent.graph, pmrag.represent.extract): a small hand-built set of Japanese
and English memories whose right interests are known, the graph's rules, its networkx form, its statistics, the
store round trip, the params' refusals and what SudachiPy's split mode changes."""

import sqlite3
from datetime import datetime, timedelta

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError
from sklearn.metrics.pairwise import cosine_distances

from pmrag.core import store
from pmrag.core.params import GraphSection, StudyParams
from pmrag.represent.extract import (
    EXTRACTORS, GraphError, JapaneseTerms, Memory, OfflineExtractor, char_ngram_vectors, cluster_phrases,
    english_terms, make_extractor, message_texts,
)
from pmrag.represent.graph import (
    Edge, MemoryGraph, Node, build_graph, chunk_memories, read_graph, stored_graphs, write_graph,
)

from conftest import older_store, params_error, write_file

START = datetime(2024, 4, 10, 9, 0)


def memory(memory_id: str, lines: list[tuple[str, str]], day: int = 0, summary: str | None = None) -> Memory:
    """A memory from ``(speaker, text)`` lines, one minute apart, rendered as the store's raw_text."""
    start = START + timedelta(days=day)
    times = [start + timedelta(minutes=i) for i in range(len(lines))]
    text = "\n".join(f"{t:%Y-%m-%d %H:%M} {speaker}: {body}" for t, (speaker, body) in zip(times, lines))
    speakers = tuple(dict.fromkeys(speaker for speaker, _ in lines))
    return Memory(memory_id, text, times[0], times[-1], speakers, summary)


# Japanese: 鎌倉 in exactly c1, c2, c4; カフェ written カフェ or かふぇ in c1, c3, c5; 渋谷 twice only.
JAPANESE = [
    memory("c1", [("ゆき", "週末は鎌倉に行こうよ"), ("けん", "いいね、駅前のカフェで待ち合わせ")], 0, "鎌倉行きの相談"),
    memory("c2", [("ゆき", "鎌倉の海がきれいだった"), ("けん", "渋谷より落ち着くね")], 1),
    memory("c3", [("けん", "新しいかふぇができたって"), ("ゆき", "渋谷の？")], 2),
    memory("c4", [("ゆき", "来月も鎌倉でハイキングしたい")], 3),
    memory("c5", [("けん", "カフェのケーキが美味しかった")], 4),
]

# English: "Café" (a name, mid-sentence) in e1–e3, "cafe" in e4–e6, hiking in e1, e4, e6.
ENGLISH = [
    memory("e1", [("Mel", "We met at the Café after hiking"), ("Jo", "Nice")], 0),
    memory("e2", [("Mel", "Back at the Café again"), ("Jo", "Of course")], 1),
    memory("e3", [("Jo", "The Café was closed today")], 2),
    memory("e4", [("Mel", "Found a cafe near the trail, great hiking")], 3),
    memory("e5", [("Jo", "That cafe has good cake")], 4),
    memory("e6", [("Mel", "Went hiking, then the cafe")], 5),
]


def extractor(**graph) -> OfflineExtractor:
    """The offline extractor; with ``min_memories`` given, under the rule that key belongs to (recurring)."""
    rule = {"interest_rule": "recurring"} if "min_memories" in graph else {}
    return make_extractor(GraphSection(**rule, **graph), embedder=char_ngram_vectors)


def interests_by_label(graph: MemoryGraph) -> dict[str, list[str]]:
    return {node.label: graph.memories_of(node.node_id) for node in graph.of_kind("interest")}


# ------------------------------------------------------------------------------------------ interests

def test_a_place_in_three_memories_is_one_interest_linked_to_exactly_those_three():
    graph = build_graph(JAPANESE, extractor(min_memories=3, merge_distance=0))
    interests = interests_by_label(graph)
    assert interests["鎌倉"] == ["c1", "c2", "c4"]
    assert graph.node("i:鎌倉").subkind == "place"
    assert "渋谷" not in interests            # in two memories only
    assert set(interests) == {"鎌倉", "カフェ"}


def test_sudachi_normalises_hiragana_spelling_into_one_interest():
    graph = build_graph(JAPANESE, extractor(min_memories=3, merge_distance=0))
    assert interests_by_label(graph)["カフェ"] == ["c1", "c3", "c5"]   # c3 writes かふぇ


def test_min_memories_is_the_recurrence_threshold():
    interests = interests_by_label(build_graph(JAPANESE, extractor(min_memories=2, merge_distance=0)))
    assert interests["渋谷"] == ["c2", "c3"]
    assert "鎌倉" in interests and "ハイキング" not in interests   # ハイキング: one memory


@pytest.mark.agreement
def test_near_duplicate_spellings_merge_under_the_threshold_and_not_above():
    candidates = ["Café", "cafe", "hiking"]   # the offline extractor's candidates, most shared first
    distances = cosine_distances(char_ngram_vectors(candidates))
    assert 0.3 < distances[0, 1] < 0.6          # Café–cafe: near, so the thresholds below straddle it
    assert distances[0, 2] > 0.6 and distances[1, 2] > 0.6

    merged = build_graph(ENGLISH, extractor(min_memories=3, merge_distance=0.6))
    assert interests_by_label(merged) == {"Café": ["e1", "e2", "e3", "e4", "e5", "e6"],
                                          "hiking": ["e1", "e4", "e6"]}
    assert merged.node("i:Café").aliases == ("Café", "cafe")
    assert merged.node("i:hiking").subkind == "activity"

    apart = build_graph(ENGLISH, extractor(min_memories=3, merge_distance=0.3))
    assert interests_by_label(apart) == {"Café": ["e1", "e2", "e3"], "cafe": ["e4", "e5", "e6"],
                                         "hiking": ["e1", "e4", "e6"]}


def test_cluster_phrases_groups_rows_closer_than_the_distance():
    vectors = np.array([[1, 0], [0.99, 0.1], [0, 1], [0, 0]], dtype=np.float32)
    assert cluster_phrases(vectors, 0.05) == [[0, 1], [2], [3]]    # the zero row has no direction: alone
    assert cluster_phrases(vectors, 0.001) == [[0], [1], [2], [3]]
    assert cluster_phrases(vectors, 0) == [[0], [1], [2], [3]]
    assert cluster_phrases(np.zeros((0, 2)), 0.5) == []


def test_max_interests_keeps_the_most_shared_candidates():
    graph = build_graph(JAPANESE, extractor(min_memories=2, merge_distance=0, max_interests=2))
    assert set(interests_by_label(graph)) == {"鎌倉", "カフェ"}   # three memories each; 渋谷 has two


def test_a_participant_is_no_interest_but_a_name_typed_by_others_is():
    memories = [memory(f"p{i}", [("Mel", "Talked to Jo about Paris"), ("Jo", "Paris again")], i) for i in range(3)]
    assert interests_by_label(build_graph(memories, extractor(min_memories=3))) == {"Paris": ["p0", "p1", "p2"]}
    only_mel = [memory(f"q{i}", [("Mel", "Talked to Jo about Paris")], i) for i in range(3)]
    assert set(interests_by_label(build_graph(only_mel, extractor(min_memories=3)))) == {"Paris", "Jo"}


def test_an_embedder_of_the_wrong_shape_is_an_error():
    bad = make_extractor(GraphSection(), embedder=lambda texts: np.zeros((len(texts) + 1, 4), dtype=np.float32))
    with pytest.raises(GraphError, match="shape"):
        build_graph(JAPANESE, bad)


def test_a_memory_given_twice_is_an_error():
    with pytest.raises(GraphError, match="'c1' is given twice"):
        build_graph([JAPANESE[0], JAPANESE[0]], extractor())


# ------------------------------------------------------------------------------------------ semantic nodes

def test_semantic_nodes_of_a_memory_are_its_own_in_a_fixed_order():
    graph = build_graph(JAPANESE, extractor(min_memories=3, merge_distance=0))
    details = [(n.subkind, n.label) for n in graph.neighbours("m:c1", "memory-semantic")]
    assert details[:4] == [("summary", "鎌倉行きの相談"), ("participant", "ゆき"), ("participant", "けん"),
                           ("time", "2024-04-10 09:00 – 2024-04-10 09:01")]
    assert ("place", "鎌倉") in details and ("thing", "カフェ") in details
    assert [n.node_id for n in graph.neighbours("m:c2", "memory-semantic")][0] == "s:c2:0"   # no summary: participants
    assert graph.node("s:c2:0").subkind == "participant"
    # c1 and c2 both mention 鎌倉, each through its own semantic node
    kamakura = [n.node_id for n in graph.of_kind("semantic") if n.label == "鎌倉"]
    assert len(kamakura) == 3 and all(len(graph.neighbours(k)) == 1 for k in kamakura)


def test_max_phrases_caps_key_phrases_but_keeps_every_named_thing():
    text = [("A", "We saw Lisbon and Porto: surfing, painting, cooking, museums, trams, pastries, wine")]
    graph = build_graph([memory("x", text)], extractor(max_phrases=2))
    subkinds = [n.subkind for n in graph.neighbours("m:x", "memory-semantic")]
    assert subkinds.count("activity") + subkinds.count("thing") == 2
    assert len(build_graph([memory("x", text)], extractor(max_phrases=10)).neighbours("m:x", "memory-semantic")) \
        - len(subkinds) == 5
    assert {n.label for n in graph.neighbours("m:x") if n.subkind == "named"} == {"Lisbon", "Porto"}


def test_message_texts_drop_headers_urls_and_placeholders():
    raw = ("2024-04-10 09:00 A: B: see https://example.org [写真]\n"
           "a continued line\n"
           "2024-04-10 09:01 Jo: hi: there")
    assert message_texts(raw, ["A: B", "Jo"]) == ["see", "a continued line", "hi: there"]


def test_english_names_are_capitalised_runs_not_sentence_openers():
    assert english_terms("Congratulations! We went to Café Luna with Caroline, hiking.") == [
        ("named", "Café Luna"), ("named", "Caroline"), ("activity", "hiking")]
    assert english_terms("Caroline's dog loves the beach") == [("thing", "caroline"), ("thing", "dog"), ("thing", "beach")]


def test_a_sentence_opening_name_counts_as_the_name_the_memory_writes_elsewhere():
    graph = build_graph([memory("x", [("A", "Caroline's dog is cute"), ("B", "I saw Caroline there")])],
                        extractor())
    labels = [(n.subkind, n.label) for n in graph.neighbours("m:x", "memory-semantic")]
    assert ("named", "Caroline") in labels and ("thing", "caroline") not in labels


def test_split_mode_changes_the_tokens_of_a_compound():
    a, c = JapaneseTerms("A"), JapaneseTerms("C")
    assert a.morphemes("東京都庁") == ["東京", "都庁"]
    assert c.morphemes("東京都庁") == ["東京都庁"]
    assert a("東京都庁に行った") == [("place", "東京"), ("thing", "都庁")]
    assert c("東京都庁に行った") == [("named", "東京都庁")]


def test_consecutive_proper_nouns_are_one_name():
    assert JapaneseTerms("C")("佐藤花子と会った") == [("person", "佐藤花子")]


# ------------------------------------------------------------------------------------------ the graph's rules

def test_edges_are_only_memory_semantic_or_memory_interest():
    graph = build_graph(JAPANESE + ENGLISH, extractor(min_memories=3, merge_distance=0.6))
    kinds = {(graph.node(e.source).kind, graph.node(e.target).kind, e.kind) for e in graph.edges}
    assert kinds == {("memory", "semantic", "memory-semantic"), ("memory", "interest", "memory-interest")}


@pytest.mark.parametrize("edge, message", [
    (Edge("s:1", "i:x", "memory-interest"), "semantic–interest is not an edge"),
    (Edge("m:1", "m:2", "memory-semantic"), "memory–memory is not an edge"),
    (Edge("m:1", "s:1", "memory-interest"), "expected 'memory-semantic'"),
    (Edge("m:1", "s:9", "memory-semantic"), "no node 's:9'"),
])
def test_a_graph_refuses_other_edges(edge, message):
    nodes = (Node("m:1", "memory", "chunk", "1"), Node("m:2", "memory", "chunk", "2"),
             Node("s:1", "semantic", "place", "鎌倉"), Node("i:x", "interest", "place", "x"))
    MemoryGraph(nodes, (Edge("m:1", "s:1", "memory-semantic"), Edge("m:2", "i:x", "memory-interest")))
    with pytest.raises(GraphError, match=message):
        MemoryGraph(nodes, (edge,))


def test_a_graph_refuses_duplicate_nodes_and_unknown_kinds():
    with pytest.raises(GraphError, match="given twice"):
        MemoryGraph((Node("m:1", "memory", "chunk", "1"), Node("m:1", "memory", "chunk", "1")), ())
    with pytest.raises(GraphError, match="kind 'topic'"):
        MemoryGraph((Node("t:1", "topic", "x", "1"),), ())


def test_networkx_graph_has_every_node_and_edge_and_joins_memories_only_through_interests():
    graph = build_graph(JAPANESE, extractor(min_memories=3, merge_distance=0))
    g = graph.to_networkx()
    assert isinstance(g, nx.Graph)
    assert (g.number_of_nodes(), g.number_of_edges()) == (len(graph.nodes), len(graph.edges))
    n_semantic = len(graph.of_kind("semantic"))
    assert g.number_of_edges() == n_semantic + 3 + 3        # each semantic node once; 鎌倉 and カフェ three each
    assert g.nodes["i:鎌倉"] == {"kind": "interest", "subkind": "place", "label": "鎌倉", "aliases": ["鎌倉"]}
    assert g.edges["m:c1", "i:鎌倉"]["kind"] == "memory-interest"
    assert nx.shortest_path(g, "m:c2", "m:c4") == ["m:c2", "i:鎌倉", "m:c4"]
    without_interests = g.subgraph(n for n, kind in g.nodes(data="kind") if kind != "interest")
    for component in nx.connected_components(without_interests):   # a memory and its own semantic nodes
        assert sum(node.startswith("m:") for node in component) == 1


# ------------------------------------------------------------------------------------------ statistics

def test_statistics_count_nodes_edges_and_interest_degrees():
    graph = build_graph(JAPANESE, extractor(min_memories=2, merge_distance=0))
    stats = graph.statistics()
    by_kind = stats.nodes.groupby("kind")["nodes"].sum().to_dict()
    assert by_kind == {"memory": 5, "semantic": len(graph.of_kind("semantic")), "interest": 3}
    assert stats.nodes.query("kind == 'semantic' and subkind == 'summary'")["nodes"].tolist() == [1]
    assert stats.nodes.query("kind == 'semantic' and subkind == 'participant'")["nodes"].tolist() == [8]
    assert dict(zip(stats.edges["kind"], stats.edges["edges"])) == {
        "memory-semantic": len(graph.of_kind("semantic")), "memory-interest": 3 + 3 + 2}
    assert stats.interest_degrees.to_dict("list") == {"memories": [2, 3], "interests": [1, 2]}
    assert stats.memories_per_interest[["label", "memories"]].values.tolist() == [["カフェ", 3], ["鎌倉", 3], ["渋谷", 2]]
    # c1: 鎌倉, カフェ; c2: 鎌倉, 渋谷; c3: カフェ, 渋谷; c4: 鎌倉; c5: カフェ
    assert stats.interests_per_memory.to_dict("list") == {"interests": [1, 2], "memories": [2, 3]}
    assert "5 memories" in stats.line() and "3 interests" in stats.line()


# ------------------------------------------------------------------------------------------ the store

def test_store_round_trip_keeps_every_node_edge_and_alias(tmp_path):
    engine = store.open_store(tmp_path / "s.sqlite")
    merged = build_graph(ENGLISH, extractor(min_memories=3, merge_distance=0.6))
    write_graph(engine, merged, "chunk-offline")
    back = read_graph(engine, "chunk-offline")
    assert back == merged
    assert back.node("i:Café").aliases == ("Café", "cafe")

    other = build_graph(JAPANESE, extractor(min_memories=3, merge_distance=0))
    write_graph(engine, other, "ja")
    write_graph(engine, other, "chunk-offline")        # replaces the graph of that name, and only it
    assert stored_graphs(engine) == ["chunk-offline", "ja"]
    assert read_graph(engine, "chunk-offline") == other
    with pytest.raises(GraphError, match="no graph named 'nope'"):
        read_graph(engine, "nope")


def test_a_version_3_store_is_upgraded_in_place_and_keeps_its_data(tmp_path):
    path = older_store(tmp_path / "old.sqlite", 3,        # a version-3 store: no graph tables
                       "INSERT INTO questions (question_id, text, type) VALUES ('q1', 'where?', 'factoid')",
                       "DROP TABLE graph_edges", "DROP TABLE graph_nodes")
    engine = store.open_store(path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION >= 5
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"graph_nodes", "graph_edges"} <= tables
        assert conn.execute("SELECT text FROM questions").fetchall() == [("where?",)]
    write_graph(engine, build_graph(JAPANESE[:1], extractor()), "g")
    assert len(read_graph(engine, "g").of_kind("memory")) == 1


def test_chunk_memories_take_speakers_in_order_and_only_ok_summaries():
    chunks = pd.DataFrame({"chunk_id": ["b", "a"], "raw_text": ["t-b", "t-a"],
                           "start_at": pd.to_datetime(["2024-01-02 10:00", "2024-01-01 09:00"]),
                           "end_at": pd.to_datetime(["2024-01-02 11:00", "2024-01-01 09:30"])})
    chunk_messages = pd.DataFrame({"chunk_id": ["a", "a", "a", "b"], "position": [2, 0, 1, 0],
                                   "message_id": ["m3", "m1", "m2", "m4"]})
    messages = pd.DataFrame({"message_id": ["m1", "m2", "m3", "m4"], "sender": ["Jo", "Mel", "Jo", "Ann"]})
    summaries = pd.DataFrame({"chunk_id": ["a", "b"], "summary": ["sa", None], "status": ["ok", "error"]})
    a, b = chunk_memories(chunks, chunk_messages, messages, summaries)
    assert (a.memory_id, a.text, a.speakers, a.summary) == ("a", "t-a", ("Jo", "Mel"), "sa")
    assert (b.memory_id, b.speakers, b.summary) == ("b", ("Ann",), None)
    assert (a.start_at, a.end_at) == (datetime(2024, 1, 1, 9), datetime(2024, 1, 1, 9, 30))


# ------------------------------------------------------------------------------------------ reachability

def test_every_memory_is_reachable_per_memory_and_the_recurring_rule_leaves_some_unreachable():
    greeting = memory("c6", [("ゆき", "おはよう")], 5)                  # no named thing, no key phrase
    memories = JAPANESE + [greeting]
    per_memory = build_graph(memories, extractor(merge_distance=0))
    assert per_memory.statistics().unreachable == 0
    interests = interests_by_label(per_memory)
    assert interests["ケーキ"] == ["c5"]                                # an interest may hold one memory
    assert interests["渋谷"] == ["c2", "c3"]                            # linked to every memory that holds it
    assert interests["ゆき"] == ["c6"]                                  # a bare memory's participant, itself only
    recurring = build_graph(memories, extractor(min_memories=3, merge_distance=0))
    assert recurring.statistics().unreachable == 1                      # 鎌倉 and カフェ cover c1–c5, not c6
    linked = {e.source for e in recurring.edges if e.kind == "memory-interest"}
    assert {m.node_id for m in recurring.of_kind("memory")} - linked == {"m:c6"}
    assert "reachable by no interest" in recurring.statistics().line()


# ------------------------------------------------------------------------------------------ params

def test_graph_params_default_to_the_offline_stand_in_and_say_so():
    params = StudyParams(run="x", dataset={"synthetic": {"enabled": True}})
    assert params.graph.memory_unit == "chunk" and params.graph.extractor == "offline"
    assert params.graph.label() == "offline stand-in (SudachiPy + per-memory interests), not an LLM"
    assert params.graph.interest_rule == "per_memory"
    recurring = StudyParams(run="x", dataset={"synthetic": {"enabled": True}}, graph={"interest_rule": "recurring"})
    assert recurring.graph.label() == "offline stand-in (SudachiPy + recurrence), not an LLM"
    assert GraphSection(extractor="openai", interest_rule="recurring").label().endswith(
        "(LLM extraction, the paper's method, recurring interests only; model: summarizer.model)")
    assert GraphSection(extractor="openai").label() == "openai (LLM extraction, the paper's method; model: summarizer.model)"
    assert EXTRACTORS.names() == ("offline", "openai")
    assert extractor().label() == params.graph.label()
    assert extractor().provenance()["split_mode"] == "C"


@pytest.mark.parametrize("key, value, message", [
    ("memory_unit", "session", "memory_unit 'session' is not implemented yet"),
    ("split_mode", "D", "'A', 'B' or 'C'"),
    ("min_memories", 1, "greater than or equal to 2"),
    ("merge_distance", -0.1, "greater than or equal to 0"),
    ("max_interests", True, "valid integer"),
])
def test_graph_params_refuse(key, value, message):
    with pytest.raises(ValidationError, match=message):
        GraphSection(**{key: value})


def test_a_params_file_asking_for_session_memories_is_a_one_line_error(tmp_path):
    path = write_file(tmp_path, "run: x\ndataset: {synthetic: {enabled: true}}\ngraph: {memory_unit: session}\n")
    message = params_error(path)
    assert "graph.memory_unit" in message and "not implemented yet" in message


def test_the_offline_extraction_shows_its_progress_over_the_memories_only_when_asked(capsys):
    memories = [memory(f"m{i}", [("Aki", "京都のカフェに行った"), ("Ben", "Kyoto was great")], day=i) for i in range(3)]
    make_extractor(GraphSection(), embedder=char_ngram_vectors).extract(memories)
    assert "graph semantic" not in capsys.readouterr().err
    make_extractor(GraphSection(), embedder=char_ngram_vectors, progress=True).extract(memories)
    bar = capsys.readouterr().err
    assert "graph semantic (offline)" in bar and "3/3" in bar
