"""TOBUGraph's memory graph (paper 002 §2.2–2.3): G′ = (M ∪ S ∪ I, E′) with E′ ⊆ (M×S) ∪ (M×I).

* **Memory nodes** M: one per memory (``graph.memory_unit``; a chunk, the unit the gold is graded on).  Id
  ``m:<memory id>``, sub-kind the unit, label the memory id.
* **Semantic nodes** S: dedicated to one memory each (§2.2: "each of semantic details ... stored in a dedicated
  semantic node linked to the memory node"), so two memories never share one; sharing is what interests
  are for.  Id ``s:<memory id>:<n>`` in this order: the summary (when the memory has one), each participant,
  the time span (``YYYY-MM-DD HH:MM – YYYY-MM-DD HH:MM``), the named things (person, place, named), the key
  phrases (activity, thing), the sentiment (when the backend gives one).  Sub-kind says which.
* **Interest nodes** I: themes (§2.3), each memory's interests merged across memories (``graph.interest_rule``),
  each linked to every memory it concerns.  Id
  ``i:<label>``, sub-kind the theme's kind, the merged surface forms kept as ``aliases``.
* **Edges**: ``memory-semantic`` (M×S) and ``memory-interest`` (M×I), always from the memory node; no other
  kind exists (:class:`MemoryGraph` refuses one), so two memories meet only through an interest.

What the extraction does (and which backend) is :mod:`pmrag.represent.extract`'s; this module assembles the
value (:func:`build_graph`), measures it (:meth:`MemoryGraph.statistics`), converts it
(:meth:`MemoryGraph.to_networkx`) and stores it in the study database (tables ``graph_nodes`` and
``graph_edges``, under a graph name, :func:`write_graph` / :func:`read_graph`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import pandas as pd
from sqlalchemy import Engine, delete, literal_column, select

from pmrag.core.store import bulk_insert, graph_edges, graph_nodes
from pmrag.represent.extract import Extractor, GraphError, Interest, Memory, MemorySemantics

NODE_KINDS = ("memory", "semantic", "interest")
EDGE_KINDS = {("memory", "semantic"): "memory-semantic", ("memory", "interest"): "memory-interest"}
"""The only edges of G′: (kind of source, kind of target) → edge kind."""


@dataclass(frozen=True)
class Node:
    node_id: str
    kind: str          # memory | semantic | interest
    subkind: str       # chunk; summary, participant, time, person, place, named, activity, thing, sentiment; ...
    label: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Edge:
    source: str        # a memory node
    target: str        # a semantic or an interest node
    kind: str          # memory-semantic | memory-interest


@dataclass(frozen=True)
class MemoryGraph:
    """G′ as two tuples, checked when made: unique node ids, known kinds, edges between existing nodes and only
    of the two allowed kinds (:data:`EDGE_KINDS`), each pair once.  Raises :class:`GraphError` otherwise."""

    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    _by_id: dict[str, Node] = field(init=False, repr=False, compare=False)
    _adjacent: dict[str, list[tuple[str, str]]] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        by_id: dict[str, Node] = {}
        for node in self.nodes:
            if node.kind not in NODE_KINDS:
                raise GraphError(f"node {node.node_id!r}: kind {node.kind!r} is not one of {', '.join(NODE_KINDS)}")
            if node.node_id in by_id:
                raise GraphError(f"node {node.node_id!r} is given twice")
            by_id[node.node_id] = node
        pairs: set[tuple[str, str]] = set()
        for edge in self.edges:
            ends = [by_id.get(edge.source), by_id.get(edge.target)]
            if None in ends:
                missing = edge.source if ends[0] is None else edge.target
                raise GraphError(f"edge {edge.source!r} → {edge.target!r}: no node {missing!r}")
            allowed = EDGE_KINDS.get((ends[0].kind, ends[1].kind))
            if allowed is None:
                raise GraphError(f"edge {edge.source!r} → {edge.target!r}: {ends[0].kind}–{ends[1].kind} is not an edge "
                                 f"of G′ (only memory–semantic and memory–interest)")
            if edge.kind != allowed:
                raise GraphError(f"edge {edge.source!r} → {edge.target!r}: kind {edge.kind!r}, expected {allowed!r}")
            if (edge.source, edge.target) in pairs:
                raise GraphError(f"edge {edge.source!r} → {edge.target!r} is given twice")
            pairs.add((edge.source, edge.target))
        adjacent: dict[str, list[tuple[str, str]]] = {node_id: [] for node_id in by_id}
        for edge in self.edges:
            adjacent[edge.source].append((edge.target, edge.kind))
            adjacent[edge.target].append((edge.source, edge.kind))
        object.__setattr__(self, "_by_id", by_id)
        object.__setattr__(self, "_adjacent", adjacent)

    # -- lookups
    def node(self, node_id: str) -> Node:
        try:
            return self._by_id[node_id]
        except KeyError:
            raise GraphError(f"no node {node_id!r} in the graph") from None

    def of_kind(self, kind: str) -> list[Node]:
        """Nodes of one kind, in the graph's order."""
        return [n for n in self.nodes if n.kind == kind]

    def neighbours(self, node_id: str, kind: str | None = None) -> list[Node]:
        """Nodes joined to ``node_id`` by an edge (of edge kind ``kind`` when given), in edge order."""
        self.node(node_id)
        return [self._by_id[other] for other, edge_kind in self._adjacent[node_id] if kind is None or edge_kind == kind]

    def memories_of(self, interest_id: str) -> list[str]:
        """The memory ids an interest node links (g(I′, G′) of §2.4 for one interest), sorted."""
        if self.node(interest_id).kind != "interest":
            raise GraphError(f"node {interest_id!r} is not an interest node")
        return sorted(node.label for node in self.neighbours(interest_id, "memory-interest"))

    # -- conversions
    def to_networkx(self):
        """An undirected ``networkx.Graph``: node attributes kind, subkind, label, aliases; edge attribute kind."""
        import networkx as nx

        graph = nx.Graph()
        graph.add_nodes_from((n.node_id, {"kind": n.kind, "subkind": n.subkind, "label": n.label,
                                          "aliases": list(n.aliases)}) for n in self.nodes)
        graph.add_edges_from((e.source, e.target, {"kind": e.kind}) for e in self.edges)
        return graph

    def to_frames(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """``(nodes, edges)`` DataFrames with the fields as columns (aliases as lists)."""
        nodes = pd.DataFrame([(n.node_id, n.kind, n.subkind, n.label, list(n.aliases)) for n in self.nodes],
                             columns=["node_id", "kind", "subkind", "label", "aliases"])
        edges = pd.DataFrame([(e.source, e.target, e.kind) for e in self.edges], columns=["source", "target", "kind"])
        return nodes, edges

    def statistics(self) -> GraphStatistics:
        return graph_statistics(self)


# --------------------------------------------------------------------------------------------- build

def _time_span(start: datetime, end: datetime) -> str:
    return f"{start:%Y-%m-%d %H:%M} – {end:%Y-%m-%d %H:%M}"


def _semantic_details(memory: MemorySemantics) -> list[tuple[str, str]]:
    """``(subkind, label)`` of a memory's semantic nodes, in the module docstring's order."""
    details = []
    if memory.summary:
        details.append(("summary", memory.summary))
    details += [("participant", name) for name in memory.participants]
    details.append(("time", _time_span(memory.start_at, memory.end_at)))
    details += [(t.kind, t.label) for t in memory.entities]
    details += [(t.kind, t.label) for t in memory.phrases]
    if memory.sentiment:
        details.append(("sentiment", memory.sentiment))
    return list(dict.fromkeys(details))   # one node per distinct detail


def build_graph(memories: Sequence[Memory], extractor: Extractor, *, unit: str = "chunk") -> MemoryGraph:
    """G′ of ``memories``: ``extractor.extract`` per memory, then ``extractor.interests`` across them.

    Parameters
    ----------
    memories: the memory nodes' inputs, unique ids (a chunk each for ``unit="chunk"``).
    extractor: a backend of :mod:`pmrag.represent.extract` (``make_extractor(params.graph, embedder=...)``).
    unit: the memory nodes' sub-kind.

    Returns
    -------
    The checked :class:`MemoryGraph`: memory nodes in input order, each followed by its semantic nodes, then the
    interests most shared first.
    """
    semantics = extractor.extract(memories)
    if [s.memory_id for s in semantics] != [m.memory_id for m in memories]:
        raise GraphError(f"extractor {extractor.backend!r} returned semantics for other memories than it was given")
    return assemble_graph(semantics, extractor.interests(semantics), unit=unit)


def assemble_graph(semantics: Sequence[MemorySemantics], interests: Sequence[Interest], *,
                   unit: str = "chunk") -> MemoryGraph:
    """G′ from extraction already done (:func:`build_graph`'s second half): memory nodes in ``semantics``
    order, each followed by its semantic nodes, then the interests in the order given."""
    nodes: list[Node] = []
    edges: list[Edge] = []
    for memory in semantics:
        memory_node = f"m:{memory.memory_id}"
        nodes.append(Node(memory_node, "memory", unit, memory.memory_id))
        for index, (subkind, label) in enumerate(_semantic_details(memory)):
            node_id = f"s:{memory.memory_id}:{index}"
            nodes.append(Node(node_id, "semantic", subkind, label))
            edges.append(Edge(memory_node, node_id, "memory-semantic"))
    for interest in interests:
        node_id = f"i:{interest.label}"
        nodes.append(Node(node_id, "interest", interest.kind, interest.label, tuple(interest.aliases)))
        edges += [Edge(f"m:{memory_id}", node_id, "memory-interest") for memory_id in interest.memory_ids]
    return MemoryGraph(tuple(nodes), tuple(edges))


def chunk_memories(chunks: pd.DataFrame, chunk_messages: pd.DataFrame, messages: pd.DataFrame,
                   summaries: pd.DataFrame | None = None) -> list[Memory]:
    """One :class:`Memory` per chunk (in ``chunk_id`` order) from the store's tables.

    Speakers are the chunk's senders in order of first appearance (``chunk_messages`` by position, joined to
    ``messages``); the summary is the chunk's ``ok`` row of ``summaries`` when one is given, else None.
    """
    rows = chunk_messages.sort_values(["chunk_id", "position"]).merge(
        messages[["message_id", "sender"]], on="message_id", how="left", sort=False)
    speakers: Mapping[str, tuple[str, ...]] = {
        chunk_id: tuple(dict.fromkeys(s for s in senders if isinstance(s, str)))
        for chunk_id, senders in rows.groupby("chunk_id", sort=False)["sender"]
    }
    summary_of: dict[str, str] = {}
    if summaries is not None and len(summaries):
        ok = summaries[summaries["status"] == "ok"]
        summary_of = dict(zip(ok["chunk_id"], ok["summary"]))
    ordered = chunks.sort_values("chunk_id")
    return [
        Memory(memory_id=chunk_id, text=raw_text, start_at=pd.Timestamp(start).to_pydatetime(),
               end_at=pd.Timestamp(end).to_pydatetime(), speakers=speakers.get(chunk_id, ()),
               summary=summary_of.get(chunk_id) or None)
        for chunk_id, raw_text, start, end in zip(ordered["chunk_id"], ordered["raw_text"], ordered["start_at"],
                                                   ordered["end_at"])
    ]


# --------------------------------------------------------------------------------------------- statistics

@dataclass(frozen=True)
class GraphStatistics:
    """Counts of a :class:`MemoryGraph`.

    ``nodes``: kind, subkind, nodes.  ``edges``: kind, edges.  ``interest_degrees``: memories (an interest's
    degree), interests, the distribution.  ``memories_per_interest``: node_id, label, subkind, memories, most
    shared first.  ``interests_per_memory``: interests, memories (how many memories have that many), so
    :attr:`unreachable` (memories linked to no interest, which no question can reach) is its row of 0.
    """

    nodes: pd.DataFrame
    edges: pd.DataFrame
    interest_degrees: pd.DataFrame
    memories_per_interest: pd.DataFrame
    interests_per_memory: pd.DataFrame

    @property
    def unreachable(self) -> int:
        """Memories reachable by no interest: linked to none, so no question can reach them through the graph."""
        rows = self.interests_per_memory
        return int(rows.loc[rows["interests"] == 0, "memories"].sum())

    def line(self) -> str:
        kinds = self.nodes.groupby("kind")["nodes"].sum()
        edges = dict(zip(self.edges["kind"], self.edges["edges"]))
        linked = int(self.interests_per_memory.loc[self.interests_per_memory["interests"] > 0, "memories"].sum())
        return (f"{kinds.get('memory', 0)} memories, {kinds.get('semantic', 0)} semantic nodes, "
                f"{kinds.get('interest', 0)} interests; {edges.get('memory-semantic', 0)} memory–semantic and "
                f"{edges.get('memory-interest', 0)} memory–interest edges; {linked} memories linked to an interest, "
                f"{self.unreachable} reachable by no interest")


def graph_statistics(graph: MemoryGraph) -> GraphStatistics:
    nodes = Counter((n.kind, n.subkind) for n in graph.nodes)
    edges = Counter(e.kind for e in graph.edges)
    degree = Counter(e.target for e in graph.edges if e.kind == "memory-interest")
    per_memory = Counter(e.source for e in graph.edges if e.kind == "memory-interest")
    interests = graph.of_kind("interest")
    per_interest = pd.DataFrame([(n.node_id, n.label, n.subkind, degree[n.node_id]) for n in interests],
                                columns=["node_id", "label", "subkind", "memories"])
    per_interest = per_interest.sort_values(["memories", "label"], ascending=[False, True], kind="stable")
    degrees = Counter(degree[n.node_id] for n in interests)
    memory_counts = Counter(per_memory[n.node_id] for n in graph.of_kind("memory"))
    return GraphStatistics(
        nodes=pd.DataFrame([(k, s, c) for (k, s), c in sorted(nodes.items(), key=lambda i: (NODE_KINDS.index(i[0][0]), i[0][1]))],
                           columns=["kind", "subkind", "nodes"]),
        edges=pd.DataFrame([(k, edges[k]) for k in EDGE_KINDS.values()], columns=["kind", "edges"]),
        interest_degrees=pd.DataFrame(sorted(degrees.items()), columns=["memories", "interests"]),
        memories_per_interest=per_interest.reset_index(drop=True),
        interests_per_memory=pd.DataFrame(sorted(memory_counts.items()), columns=["interests", "memories"]),
    )


@dataclass(frozen=True)
class BuiltGraph:
    """The study's graph stage: the graph, one vector per interest (its label's embedding, in the graph's
    interest order), the extractor's label (a stand-in says so) and provenance."""

    graph: MemoryGraph
    interest_vectors: object     # numpy float32 array, interests × dimension
    label: str
    provenance: dict


def memory_graph(chunks: pd.DataFrame, chunk_messages: pd.DataFrame, messages: pd.DataFrame,
                 summaries: pd.DataFrame, extractor: Extractor, embed, *, unit: str = "chunk") -> BuiltGraph:
    """TOBUGraph's graph of a study (002 §2.2–2.3): one memory per chunk (:func:`chunk_memories`), its semantic
    and interest nodes from ``extractor``, and each interest label embedded by ``embed`` (texts → passage
    vectors, the study's embedder).  An LLM extractor's report lines (calls, failures, invented ids) go to
    stderr."""
    import sys

    import numpy as np

    graph = build_graph(chunk_memories(chunks, chunk_messages, messages, summaries), extractor, unit=unit)
    for report in getattr(extractor, "reports", {}).values():
        print(report.line(), file=sys.stderr)
    labels = [node.label for node in graph.of_kind("interest")]
    vectors = embed(labels) if labels else np.zeros((0, 0), dtype=np.float32)
    return BuiltGraph(graph, vectors, extractor.label(), extractor.provenance())


# --------------------------------------------------------------------------------------------- store

def write_graph(engine: Engine, graph: MemoryGraph, name: str) -> None:
    """Store ``graph`` under ``name`` in ``graph_nodes`` / ``graph_edges``, replacing a graph of that name, in
    one transaction."""
    if not name:
        raise GraphError("a stored graph needs a non-empty name")
    with engine.begin() as conn:
        conn.execute(delete(graph_edges).where(graph_edges.c.graph == name))
        conn.execute(delete(graph_nodes).where(graph_nodes.c.graph == name))
        bulk_insert(conn, graph_nodes, [(name, n.node_id, n.kind, n.subkind, n.label,
                                         json.dumps(list(n.aliases), ensure_ascii=False)) for n in graph.nodes])
        bulk_insert(conn, graph_edges, [(name, e.source, e.target, e.kind) for e in graph.edges])


def read_graph(engine: Engine, name: str) -> MemoryGraph:
    """The graph stored under ``name``, nodes and edges in the order written (checked again as it is made)."""
    with engine.connect() as conn:
        node_rows = conn.execute(select(graph_nodes.c.node_id, graph_nodes.c.kind, graph_nodes.c.subkind,
                                        graph_nodes.c.label, graph_nodes.c.aliases)
                                 .where(graph_nodes.c.graph == name).order_by(literal_column("rowid"))).all()
        edge_rows = conn.execute(select(graph_edges.c.source, graph_edges.c.target, graph_edges.c.kind)
                                 .where(graph_edges.c.graph == name).order_by(literal_column("rowid"))).all()
    if not node_rows:
        raise GraphError(f"no graph named {name!r} in the store")
    nodes = tuple(Node(r.node_id, r.kind, r.subkind, r.label, tuple(json.loads(r.aliases))) for r in node_rows)
    return MemoryGraph(nodes, tuple(Edge(*row) for row in edge_rows))


def stored_graphs(engine: Engine) -> list[str]:
    """Names of the graphs in the store, sorted."""
    with engine.connect() as conn:
        return sorted(conn.execute(select(graph_nodes.c.graph).distinct()).scalars())
