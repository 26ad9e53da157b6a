"""The request rows the ``ray.data.llm`` preprocess builds (``engines/vllm_processor.RequestBuilder``) survive Ray
Data's block handling with their types intact. Runs without vLLM (the preprocess is ours; only Ray and a tokenizer).

Why it matters: Ray Data concatenates the blocks of a batch before the engine stage reads it. If some rows lack
``sampling_params`` (a row whose media failed to decode), the concatenation backfills the missing struct and its int
fields come back as floats in every row (``max_tokens=1.0``). vLLM's engine core then fails to decode the request in
its input thread, the thread dies, and the replica hangs forever. The first test shows that hazard in the installed
Ray; the second that the builder never produces it."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from omnieval.dev.tiny_models import build_tiny_model
from omnieval.engines.vllm_processor import ERROR, RequestBuilder
from omnieval.schema import Instance, Segment

concat = pytest.importorskip("ray.data._internal.arrow_ops.transform_pyarrow").concat
BlockAccessor = pytest.importorskip("ray.data.block").BlockAccessor


@pytest.fixture(scope="module")
def qwen2(tmp_path_factory):
    out = tmp_path_factory.getbasetemp() / "tiny-models" / "qwen2-seed0"
    if not (out / "config.json").exists():
        build_tiny_model("qwen2", out, seed=0)
    return str(out)


def _row(n: int, labels=("A", "B", "C"), decode_error: str = "", style: str = "zs") -> dict:
    inst = Instance(instance_id=f"i{n}", item_id=f"i{n}", protocol="dissonance", benchmark="b", split="s",
                    condition="C000", segments=[Segment(kind="media", modality="video", path="v.mp4"),
                                                Segment(kind="text", text=f"passage {n}")],
                    question=f"Which one, case {n}?", option_labels=list(labels),
                    option_texts=["red", "blue", "green"], target="A")
    return {"instance_json": inst.model_dump_json(), "prompt": style, "instance_id": inst.instance_id,
            "media_paths": json.dumps(["v.mp4"]), "decode_error": decode_error}


def _engine_view(rows: list[dict]) -> list[dict]:
    """What the engine stage reads: each row wrapped in ``__data`` as its own block (as ``ds.map`` may emit them),
    the blocks concatenated by Ray, then converted to the stage's numpy batch."""
    blocks = [pa.Table.from_pylist([{"__data": r}]) for r in rows]
    return BlockAccessor.for_block(concat(blocks)).to_batch_format("numpy")["__data"].tolist()


def test_a_row_without_sampling_params_turns_the_ints_of_the_others_into_floats():
    good = {"prompt": "p", ERROR: "", "sampling_params": {"max_tokens": 1, "temperature": 0.0}}
    bare = {"prompt": "zs", ERROR: "media decode failed"}
    seen = _engine_view([good, bare])
    assert isinstance(seen[0]["sampling_params"]["max_tokens"], float)  # the hazard the builder must avoid


@pytest.mark.parametrize("mode", ["score", "generate"])
def test_every_request_row_carries_int_sampling_params_of_one_shape(qwen2, mode):
    builder = RequestBuilder(qwen2, mode, media=None, max_new_tokens=7)
    inputs = [_row(0), _row(1, decode_error="media decode failed: v.mp4: broken"), _row(2, labels=("A", "Bee", "C")),
              _row(3)]
    built = [r | builder(r) for r in inputs]
    already_failed = dict(built[1])  # a row that failed upstream (a CoT row errored in its generate pass)
    built.append(already_failed | builder(already_failed))

    assert [bool(r[ERROR]) for r in built] == [False, True, True, False, True]
    assert "Bee" in built[2][ERROR]
    shapes = {tuple(sorted(r["sampling_params"])) for r in built}
    assert len(shapes) == 1
    for row in _engine_view(built):
        params = row["sampling_params"]
        assert type(params["max_tokens"]) is int
        assert params["max_tokens"] == (1 if mode == "score" else 7)
    if mode == "score":  # Ray's concat groups blocks by schema, so rows may come back in another order
        good = [r for r in _engine_view(built) if not r[ERROR]]
        assert len(good) == 2
        for row in good:
            assert list(row["sampling_params"]["logprob_token_ids"]) == list(row["label_ids"])
            assert len(row["label_ids"]) == 3
