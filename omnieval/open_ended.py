"""Open-ended mode: the model answers without options, judges grade the answers (``omnieval/judges.py``).

In a run with ``modes: [..., open]`` every instance x prompt style is also asked open-ended: the prompt is the
context and the question only (``prompts.render_open_prompt``), the engine generates freely (``Engine.generate``),
and the prediction row has ``mode='open'``, ``choice`` null, the full text in ``raw_text``, the part a judge grades
in ``answer_text`` (``prompts.final_answer``) and the ground truth in words in ``reference``.

After every model has answered, each judge grades every open answer that has no verdict of its own yet, in a Ray
Data actor pool like the engines' (``JudgeStage``; a ``vllm`` judge with ``processor: true`` runs in vLLM's own
``ray.data.llm`` engine pool instead, ``engines/vllm_generate.py``), and its verdicts are written as parts under
``judgements/<judge>/`` (the resume log: a resumed run grades only what is missing). ``predictions.parquet`` then
carries, per open row, the list of verdicts of every judge (``verdicts``).
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from omnieval.config import ModelConfig, RunConfig
from omnieval.schema import Instance

JUDGEMENT_SCHEMA = pa.schema([("model", pa.string()), ("prompt", pa.string()), ("instance_id", pa.string()),
                              ("judge", pa.string()), ("verdict", pa.string()), ("raw_text", pa.string()),
                              ("attempts", pa.int32()), ("template", pa.string())])


def reference_text(inst: Instance) -> str:
    """The ground truth in words: the target option's text."""
    return inst.option_texts[inst.option_labels.index(inst.target)]


def open_request(inst: Instance, media: dict, style: str):
    """The generation request of one open-ended answer (same argument order as ``EngineRequest``)."""
    from omnieval.engines.base import GenerationRequest
    from omnieval.prompts import render_open_prompt

    return GenerationRequest(parts=render_open_prompt(inst, style), media=media, key=f"{inst.instance_id}|{style}",
                             meta={"task": "answer", "instance": inst.model_dump(), "style": style})


def open_prediction_row(inst: Instance, style: str, res, model: ModelConfig, latency: float | None) -> dict:
    """The predictions row of one open-ended answer (``res``: a ``GenerationResult``)."""
    from omnieval.engines.base import EngineResult
    from omnieval.pipeline import prediction_row
    from omnieval.prompts import final_answer

    row = prediction_row(inst, style, EngineResult(choice=None, raw_text=res.text, error=res.error), model, latency)
    row |= {"mode": "open", "reference": reference_text(inst),
            "answer_text": final_answer(res.text) if res.error is None else None}
    if res.error is None and not row["answer_text"]:
        row["error"] = "open answer: the model returned no text"
    return row


def judge_case(inst: Instance, row: dict):
    from omnieval.judges import JudgeCase

    return JudgeCase(key=f"{row['model']}|{row['prompt']}|{inst.instance_id}", question=inst.question,
                     reference=reference_text(inst), answer=row["answer_text"] or "",
                     abstention=inst.abstain_label is not None,
                     reference_is_abstention=inst.abstain_label is not None and inst.target == inst.abstain_label)


class JudgeStage:
    """One judge replica: an engine that generates text; grades a batch of open answers."""

    def __init__(self, judge: dict, template: str):
        from omnieval.engines.base import create_engine

        self.judge = ModelConfig.model_validate(judge)
        self.engine = create_engine(self.judge.engine, model=self.judge.name, **self.judge.options)
        self.template = template

    def __call__(self, batch: dict[str, np.ndarray]) -> pa.Table:
        from omnieval.judges import judge_cases

        instances = [Instance.model_validate_json(s) for s in batch["instance_json"]]
        rows = [{"model": str(m), "prompt": str(p), "answer_text": str(a)}
                for m, p, a in zip(batch["model"], batch["prompt"], batch["answer_text"], strict=True)]
        cases = [judge_case(inst, row) for inst, row in zip(instances, rows, strict=True)]
        records = judge_cases(self.engine, cases, self.template, judge_name=self.judge.name)
        out = [{"model": row["model"], "prompt": row["prompt"], "instance_id": inst.instance_id} | rec
               for inst, row, rec in zip(instances, rows, records, strict=True)]
        return pa.Table.from_pylist(out, schema=JUDGEMENT_SCHEMA)


def judge_folder(judge: str) -> str:
    from omnieval.names import folder_name

    return f"judgements/{folder_name(judge)}"


def read_judgements(store, judge: str) -> pa.Table:
    return store.read_folder(judge_folder(judge), JUDGEMENT_SCHEMA)


def run_judges(config: RunConfig, store, predictions: pa.Table, instances: dict[str, Instance],
               progress: bool = True) -> int:
    """Grade every open answer (no error) that a judge has not graded yet; returns the verdicts written."""
    import sys

    import pyarrow.compute as pc
    import ray
    from ray.data import ActorPoolStrategy
    from tqdm import tqdm

    from omnieval.preflight import uses_vllm_processor

    if "open" not in config.modes or predictions.num_rows == 0:
        return 0
    opened = predictions.filter(pc.and_(pc.equal(predictions["mode"], "open"), pc.is_null(predictions["error"])))
    written = 0
    for judge in config.judges:
        done_table = read_judgements(store, judge.name)
        done = set(zip(done_table["model"].to_pylist(), done_table["prompt"].to_pylist(),
                       done_table["instance_id"].to_pylist(), strict=True))
        rows = [{"instance_json": instances[r["instance_id"]].model_dump_json(), "model": r["model"],
                 "prompt": r["prompt"], "instance_id": r["instance_id"], "answer_text": r["answer_text"] or ""}
                for r in opened.select(["model", "prompt", "instance_id", "answer_text"]).to_pylist()
                if (r["model"], r["prompt"], r["instance_id"]) not in done]
        if not rows:
            continue
        ds = ray.data.from_items(rows, override_num_blocks=max(1, min(len(rows) // 32, 64)))
        if uses_vllm_processor(judge):  # vLLM's own engine pool (ray.data.llm), two chained attempts
            from omnieval.engines.vllm_generate import judge_processor_stage

            ds = judge_processor_stage(ds, judge, config.judge_template)
        else:
            kwargs = {"num_cpus": judge.num_cpus} | ({"num_gpus": judge.num_gpus} if judge.num_gpus else {})
            ds = ds.map_batches(JudgeStage, fn_constructor_kwargs={"judge": judge.model_dump(),
                                                                   "template": config.judge_template},
                                compute=ActorPoolStrategy(size=judge.replicas), batch_size=judge.batch_size,
                                **kwargs)
        bar = tqdm(total=len(rows), desc=f"judge {judge.name}", unit="ans", disable=not progress, file=sys.stderr)
        buffer, last = [], time.monotonic()
        for block in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
            buffer.append(block)
            bar.update(block.num_rows)
            if sum(b.num_rows for b in buffer) >= 256 or time.monotonic() - last > 5.0:
                store.write_table(store.next_part(judge_folder(judge.name)), pa.concat_tables(buffer))
                written, buffer, last = written + sum(b.num_rows for b in buffer), [], time.monotonic()
        if buffer:
            store.write_table(store.next_part(judge_folder(judge.name)), pa.concat_tables(buffer))
            written += sum(b.num_rows for b in buffer)
        bar.close()
    return written


def attach_verdicts(config: RunConfig, store, predictions: pa.Table) -> pa.Table:
    """``predictions`` with the ``verdicts`` list of every open row filled from the judges' parts (in the order
    of ``config.judges``; a later verdict of the same judge for the same answer wins)."""
    if "open" not in config.modes or predictions.num_rows == 0:
        return predictions
    by_key: dict[tuple[str, str, str], dict[str, dict]] = {}
    for judge in config.judges:
        for r in read_judgements(store, judge.name).to_pylist():
            by_key.setdefault((r["model"], r["prompt"], r["instance_id"]), {})[judge.name] = {
                k: r[k] for k in ("judge", "verdict", "raw_text", "attempts", "template")}
    order = [j.name for j in config.judges]
    verdicts = []
    for model, prompt, iid, mode in zip(predictions["model"].to_pylist(), predictions["prompt"].to_pylist(),
                                        predictions["instance_id"].to_pylist(), predictions["mode"].to_pylist(),
                                        strict=True):
        got = by_key.get((model, prompt, iid)) if mode == "open" else None
        verdicts.append([got[j] for j in order if j in got] if got else None)
    column = pa.array(verdicts, type=predictions.schema.field("verdicts").type)
    return predictions.set_column(predictions.schema.get_field_index("verdicts"), "verdicts", column)
