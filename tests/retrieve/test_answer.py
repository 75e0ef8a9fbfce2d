"""The answer step's context and its offline stand-in (pmrag.retrieve.answer)."""

from __future__ import annotations

from datetime import datetime

from pmrag.represent.extract import Interest, MemorySemantics, Term
from pmrag.represent.graph import assemble_graph
from pmrag.retrieve.answer import NO_ANSWER, ContextItem, extractive_answer, graph_context, sentences

T0 = datetime(2024, 4, 10, 9, 0)


def test_sentences_cut_after_japanese_and_english_stops_and_line_breaks():
    assert sentences("鎌倉に行った。楽しかった！\nWe swam. OK?") == ["鎌倉に行った。", "楽しかった！", "We swam.", "OK?"]


def test_the_stand_in_answers_with_the_sentence_holding_most_question_terms_and_cites_it():
    context = [ContextItem("c1", "We went hiking. The weather was bad."),
               ContextItem("c2", "Hiking in Kyoto was great. We ate tofu.")]
    assert extractive_answer("When did we go hiking in Kyoto?", context) == "Hiking in Kyoto was great. [c2]"
    japanese = [ContextItem("m1", "渋谷に行った。\n鎌倉は混んでた。")]
    assert extractive_answer("鎌倉のカフェはどうだった？", japanese) == "鎌倉は混んでた。 [m1]"


def test_the_stand_in_declines_when_no_sentence_holds_a_question_term():
    assert extractive_answer("What about the violin?", [ContextItem("c1", "We went hiking.")]) == NO_ANSWER
    assert extractive_answer("What about the violin?", []) == NO_ANSWER


def test_graph_context_hands_each_memory_with_its_semantic_nodes():
    memory = MemorySemantics("m1", "鎌倉の相談", ("ゆき",), T0, T0, (Term("place", "鎌倉", 1),), ())
    graph = assemble_graph([memory], [Interest("鎌倉", "place", ("m1",), ("鎌倉",))])
    [item] = graph_context(graph, ["m1"])
    assert item.item_id == "m1"
    assert item.text.split("\n") == ["summary: 鎌倉の相談", "participant: ゆき", "time: 2024-04-10 09:00 – 2024-04-10 09:00",
                                     "place: 鎌倉"]
