"""BM25 and dense retrieval at the paper's scale: index three representations, score 100 queries with each retriever.

Texts (``--corpus``): by default the embedded demo corpus generated at the paper's 358,896 messages and taken
through ingest, chunking and the extractive summarizer (~18.7k chunks, its 100 questions); ``synthetic`` uses
word-pool texts instead (``--n-docs`` chunks, Zipf-like Japanese/ASCII words).  Timed, per representation
and in total:

* ours:      ``tokenize_many`` + ``BM25Index.fit``; then ``scores_many`` for the queries + ``rank`` to the
             top 200 (start-time / chunk_id tie-break) for each; dense: cosine over every chunk for 3
             matrices of random 384-d vectors (embedding the corpus would take hours here) + the same ranking;
* rank_bm25: ``BM25Okapi`` built on the same token lists (tokenization not counted) with its IDF replaced
             by equation 9, so both compute the same scores; then ``get_scores`` per query + a plain
             argsort to the top 200.  A naive reference only (``pip install -e ".[bench]"``; without it, or
             with ``--skip-rank-bm25``, only ours is timed).

Printed: seconds per step, the speed-up ratios and the largest score difference between the two.
Targets on the 2-core reference machine: index build of the three representations ≤ 20 s, all queries of all
retrievers ≤ 2 s.

    .venv/bin/python benchmarks/bench_retrieval.py [--corpus demo|synthetic] [--skip-rank-bm25]
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import math
import random
import time

import numpy as np
import pandas as pd
from pathlib import Path

from pmrag.retrieve.bm25 import BM25Index
from pmrag.retrieve.ranking import Ranker
from pmrag.retrieve.tokenizer import default_spec, tokenize_many

REPO = Path(__file__).resolve().parents[1]

KATAKANA = [chr(c) for c in range(0x30A2, 0x30F3)]
KANJI = list("日月火水木金土年時分間人子女男学校会社駅電車旅行京都東大阪家族友達映画音楽料理写真仕事予定練習試合部活"
             "先生授業宿題試験病院買物店服靴本新古高安美味楽天気雨雪海山川公園神社寺祭花火誕生記念母父兄弟姉妹")
HIRAGANA = ["は", "が", "を", "に", "で", "と", "の", "も", "ね", "よ", "かな", "だよ", "でした", "ました", "って",
            "けど", "から", "まで", "ありがとう", "おつかれ", "そうそう", "うん", "えー", "まじで", "りょうかい"]
ASCII = ["ok", "line", "usb", "pv", "iphone15", "zoom", "3.5", "v2.1", "pdf", "wifi", "switch", "ps5", "youtube",
         "2024", "10", "a", "b", "x", "lol", "e-mail", "file_v2.txt", "google"]
EMOJI = ["😂", "🍣", "👍", "✨", "🎉", "🙏"]
SPEAKERS = ["ゆい", "はると", "母", "父", "さくら", "けんた"]
DESCRIPTION = "以下はLINEのトーク履歴の一部です。要約と本文の抜粋を含みます。"


def zipf_pool(words: list[str], exponent: float = 1.05) -> tuple[list[str], list[float]]:
    """Words with cumulative Zipf weights, the r-th word drawn ∝ 1 / r^exponent."""
    return words, list(itertools.accumulate(1.0 / r**exponent for r in range(1, len(words) + 1)))


def unique(make, size: int) -> list[str]:
    """``size`` draws of ``make()``, duplicates removed, first-drawn order kept."""
    return list(dict.fromkeys(make() for _ in range(size)))


def make_pools(rng: random.Random) -> dict[str, tuple[list[str], list[float]]]:
    return {
        "kanji": zipf_pool(unique(lambda: "".join(rng.choices(KANJI, k=rng.choice((2, 2, 3, 4)))), 6000)),
        "katakana": zipf_pool(
            unique(lambda: "".join(rng.choices(KATAKANA, k=rng.randint(2, 6))) + rng.choice(("", "ー")), 4000)
        ),
        "ascii": zipf_pool(ASCII, 1.0),
    }


def sentence(rng: random.Random, pools, n_words: int) -> str:
    parts = []
    for _ in range(n_words):
        kind = rng.choices(("kanji", "katakana", "ascii", "emoji"), weights=(6, 3, 1, 0.3))[0]
        if kind == "emoji":
            parts.append(rng.choice(EMOJI))
        else:
            words, cum_weights = pools[kind]
            parts.append(rng.choices(words, cum_weights=cum_weights)[0])
        parts.append(rng.choice(HIRAGANA))
    return "".join(parts)


def raw_text(rng: random.Random, pools, target_chars: int) -> str:
    lines, length = [], 0
    minute = rng.randrange(500_000)
    while length < target_chars:
        minute += rng.randrange(1, 30)
        day, rest = divmod(minute, 1440)
        line = f"2024-{1 + day // 28 % 12:02d}-{1 + day % 28:02d} {rest // 60:02d}:{rest % 60:02d} " \
               f"{rng.choice(SPEAKERS)}: {sentence(rng, pools, rng.randint(1, 6))}"
        lines.append(line)
        length += len(line) + 1
    return "\n".join(lines)


def synthetic_chunks(n: int, seed: int) -> tuple[dict[str, list[str]], dict]:
    """Three representations of ``n`` chunks from one seeded generator, and its word pools (for the queries)."""
    rng = random.Random(seed)
    pools = make_pools(rng)
    raws, summaries = [], []
    for _ in range(n):
        raws.append(raw_text(rng, pools, round(math.exp(rng.gauss(math.log(520), 0.5)))))
        summaries.append("。".join(sentence(rng, pools, rng.randint(5, 11)) for _ in range(rng.randint(4, 7))))
    embedding = [f"{DESCRIPTION}\n要約: {s}\n本文: {r[:4000]}" for s, r in zip(summaries, raws)]
    return {"raw_text": raws, "summary": summaries, "embedding_text": embedding}, pools


def questions(n: int, pools, seed: int) -> list[str]:
    rng = random.Random(seed + 1)
    return [sentence(rng, pools, rng.randint(3, 7)) + rng.choice(("について教えて", "はいつ？", "はどこ？", "")) for _ in range(n)]


def paper_idf_okapi(corpus: list[list[str]], k1: float, b: float):
    """rank_bm25's BM25Okapi with equation 9's IDF (its own is ln((N − df + 0.5)/(df + 0.5)) with a floor)."""
    from rank_bm25 import BM25Okapi

    class PaperIdfOkapi(BM25Okapi):
        def _calc_idf(self, nd):
            for word, freq in nd.items():
                self.idf[word] = math.log1p((self.corpus_size - freq + 0.5) / (freq + 0.5))

    return PaperIdfOkapi(corpus, k1=k1, b=b)


def timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - start


def ours(texts: list[str], queries: list[list[str]], times, ids, top: int):
    tokens, tokenize_s = timed(tokenize_many, texts)
    index, fit_s = timed(BM25Index.fit, tokens)
    start = time.perf_counter()
    scores = index.scores_many(queries)
    ranker = Ranker(times, ids)
    for query_scores in scores:
        ranker.top(query_scores, top)
    query_s = time.perf_counter() - start
    return tokens, scores, {"tokenize": tokenize_s, "fit": fit_s, "query": query_s}


def reference(tokens: list[list[str]], queries: list[list[str]], top: int):
    okapi, fit_s = timed(paper_idf_okapi, tokens, 1.2, 0.75)
    start = time.perf_counter()
    scores = np.array([okapi.get_scores(q) for q in queries])
    for query_scores in scores:
        np.argsort(-query_scores, kind="stable")[:top]
    query_s = time.perf_counter() - start
    return scores, {"fit": fit_s, "query": query_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-docs", type=int, default=22_329)
    parser.add_argument("--n-queries", type=int, default=100)
    parser.add_argument("--top", type=int, default=200)
    parser.add_argument("--seed", type=int, default=12_345)
    parser.add_argument("--skip-rank-bm25", action="store_true")
    parser.add_argument("--corpus", choices=["demo", "synthetic"], default="demo",
                        help="demo: the embedded corpus generated at --n-messages (default the paper's 358,896), "
                             "through ingest, chunking and the extractive summarizer; synthetic: word-pool texts")
    parser.add_argument("--n-messages", type=int, default=358_896)
    args = parser.parse_args()
    if not args.skip_rank_bm25 and importlib.util.find_spec("rank_bm25") is None:
        print("rank_bm25 is not installed (pip install rank-bm25==0.2.2): timing ours only")
        args.skip_rank_bm25 = True

    if args.corpus == "demo":
        (reps, query_texts, times, ids), gen_s = timed(demo_paper_scale, args.n_messages)
        args.n_docs, args.n_queries = len(ids), len(query_texts)
        origin = f"the demo corpus at {args.n_messages:,} messages (extractive summaries)"
    else:
        (reps, pools), gen_s = timed(synthetic_chunks, args.n_docs, args.seed)
        query_texts = questions(args.n_queries, pools, args.seed)
        rng = np.random.default_rng(args.seed)
        times = np.sort(rng.integers(1_680_000_000, 1_740_000_000, size=args.n_docs)).astype("datetime64[s]")
        ids = np.array([f"chunk_{i:06d}" for i in range(args.n_docs)])
        origin = "synthetic word-pool texts"
    default_spec()
    queries = tokenize_many(query_texts)
    print(f"{args.n_docs} chunks × 3 representations from {origin} ({gen_s:.1f} s to prepare); "
          f"{args.n_queries} queries, mean {np.mean([len(q) for q in queries]):.1f} tokens")

    total = {"tokenize": 0.0, "fit": 0.0, "query": 0.0, "ref_fit": 0.0, "ref_query": 0.0}
    for name, texts in reps.items():
        tokens, scores, t = ours(texts, queries, times, ids, args.top)
        chars = np.mean([len(x) for x in texts])
        toks = np.mean([len(x) for x in tokens])
        line = (f"{name:15s} chars {chars:5.0f} tokens {toks:5.1f}  tokenize {t['tokenize']:5.2f} s  "
                f"fit {t['fit']:5.2f} s  {args.n_queries} queries+rank {t['query']:5.3f} s")
        for key in ("tokenize", "fit", "query"):
            total[key] += t[key]
        if not args.skip_rank_bm25:
            ref_scores, r = reference(tokens, queries, args.top)
            total["ref_fit"] += r["fit"]
            total["ref_query"] += r["query"]
            diff = float(np.max(np.abs(ref_scores - scores)))
            line += (f"  | rank_bm25 fit {r['fit']:5.2f} s  queries {r['query']:5.2f} s  "
                     f"max|Δscore| {diff:.1e}")
        print(line)

    n, top = 3 * args.n_queries, args.top
    dense_s = dense_queries(args.n_docs, args.n_queries, top, args.seed)
    print(row("ours", f"{n} dense queries, 3 × {args.n_docs} × 384-d (cosine + top-{top} rank)", dense_s,
              "with BM25 queries: target ≤ 2 s in all"))
    build = total["tokenize"] + total["fit"]
    print(row("ours", "index build, 3 representations (tokenize + fit)", build, "target ≤ 20 s"))
    print(row("ours", f"{n} queries (scores + top-{top} rank)", total["query"], "target ≤ 2 s"))
    if not args.skip_rank_bm25:
        fit_ratio = f"ours' fit ×{total['ref_fit'] / total['fit']:.1f} faster"
        print(row("rank_bm25", "fit on the same tokens, 3 representations", total["ref_fit"], fit_ratio))
        query_ratio = f"ours ×{total['ref_query'] / total['query']:.0f} faster"
        print(row("rank_bm25", f"{n} queries (scores + top-{top} argsort)", total["ref_query"], query_ratio))


def demo_paper_scale(n_messages: int):
    """raw_text / summary / embedding_text of the demo corpus at ``n_messages``, its questions, start times, IDs."""
    from pmrag.study import Study

    folder = REPO / "outputs" / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    params = folder / f"retrieval_{n_messages}.yaml"
    params.write_text(
        f"run: bench_retrieval_{n_messages}\noutputs_dir: .\ncache_dir: cache\n"
        f"dataset: {{synthetic: {{enabled: true, n_messages: {n_messages}}}}}\n",
        encoding="utf-8",
    )
    study = Study.from_params(params)
    reps = study.representations()
    chunks = study.chunks().set_index("chunk_id").loc[reps["chunk_id"]]
    texts = {name: reps[name].tolist() for name in ("raw_text", "summary", "embedding_text")}
    times = pd.to_datetime(chunks["start_at"]).to_numpy()
    return texts, study.evaluation().questions["text"].tolist(), times, reps["chunk_id"].to_numpy()


def dense_queries(n_docs: int, n_queries: int, top: int, seed: int) -> float:
    """Seconds for 3 dense retrievers × n_queries: cosine over every chunk, then the tie-broken top-k."""
    from pmrag.retrieve.dense import cosine_scores
    from pmrag.retrieve.ranking import rankings_from_scores

    rng = np.random.default_rng(seed)
    ids = np.array([f"{i:016x}" for i in range(n_docs)])
    times = np.arange(n_docs, dtype=np.int64) * 60_000_000_000
    matrices = [rng.normal(size=(n_docs, 384)).astype(np.float32) for _ in range(3)]
    queries = rng.normal(size=(n_queries, 384)).astype(np.float32)
    qids = [f"q{i:03d}" for i in range(n_queries)]
    started = time.perf_counter()
    for matrix in matrices:
        rankings_from_scores(cosine_scores(matrix, queries), qids, ids, times, top)
    return time.perf_counter() - started


def row(who: str, what: str, seconds: float, note: str) -> str:
    return f"{who:10s}{what:50s}{seconds:8.3f} s   ({note})"

if __name__ == "__main__":
    main()
