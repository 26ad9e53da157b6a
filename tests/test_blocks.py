"""How a plan's instances are cut into blocks: the size follows the models' batch size (hand arithmetic), shrinks for
small plans, and never changes the instances, their order or the plan's digest."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest


@pytest.mark.parametrize(("batch_sizes", "expected"), [
    ([16], 16 * 16),      # the default batch: 256 rows, as before blocks followed the batch
    ([32], 512),          # 16 x 32 = 512, the bound
    ([64], 512),          # 1,024 is over the bound
    ([200], 512),
    ([2], 32),
    ([1], 16),            # never under 16
    ([64, 8, 32], 128),   # the smallest batch of the run's models: 16 x 8
    ([], 256),            # no answering model (nothing to size by): the default
])
def test_block_instances_is_sixteen_batches_of_the_smallest(batch_sizes, expected):
    from omnieval.run.expansion import block_instances

    assert block_instances(batch_sizes) == expected


@pytest.mark.parametrize(("n_items", "max_block", "expected"), [
    (2016, 1024, 1008),   # 2016 x 8 / 16: about 16 blocks
    (4000, 512, 512),     # the model's bound
    (4000, 256, 256),
    (128, 1024, 64),      # a small run: 16 blocks of 64
    (8, 1024, 16),        # never under 16
])
def test_block_size_of_a_plan(n_items, max_block, expected):
    from omnieval.run.expansion import ExpansionSource

    source = ExpansionSource(protocol="dissonance", bench=SimpleNamespace(items=[None] * n_items), seed=0,
                             options=None, max_block=max_block)
    assert source.block_size == expected


def test_make_plan_sizes_blocks_by_the_models_batch(bench, tmp_path):
    from omnieval.config import parse_run_config
    from omnieval.run.plan import make_plan

    def plan(batch_size: int):
        return make_plan(parse_run_config({
            "benchmark": str(bench), "output": str(tmp_path / f"b{batch_size}"),
            "models": [{"name": "sim", "engine": "simulated", "batch_size": batch_size}]}), expand=False)

    assert plan(64).source.max_block == 512
    assert plan(4).source.max_block == 64


def test_block_size_changes_neither_the_instances_nor_the_digest(bench, tmp_path):
    from omnieval.config import parse_run_config
    from omnieval.run.expansion import ChunkSummary, _expand_items
    from omnieval.run.plan import make_plan

    source = make_plan(parse_run_config({"benchmark": str(bench), "output": str(tmp_path / "r"),
                                         "models": [{"name": "sim", "engine": "simulated"}]}), expand=False).source
    n = 8 * len(source.bench.items)  # the 8 corruption conditions of every item
    cuts = {}
    for size in (16, 24, 64):
        out = list(_expand_items(replace(source, max_block=size), source.bench.items, size))
        summary, blocks = out[-1], out[:-1]
        assert isinstance(summary, ChunkSummary) and summary.count == n
        assert [b.num_rows for b in blocks] == [size] * (n // size) + ([n % size] if n % size else [])
        ids = [i for b in blocks for i in b.column("instance_id").to_pylist()]
        cuts[size] = (ids, summary.digest)
    assert cuts[16] == cuts[24] == cuts[64]
    assert len(set(cuts[16][0])) == n
