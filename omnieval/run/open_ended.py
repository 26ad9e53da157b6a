"""Open-ended mode: the model answers without options, judges grade the answers (``omnieval/core/judges.py``).

In a run with ``modes: [..., open]`` every instance x prompt style is also asked open-ended: the prompt is the
context and the question only (``prompts.render_open_prompt``), the engine generates freely (``Engine.generate``),
and the prediction row has ``mode='open'``, ``choice`` null, the full text in ``raw_text``, the part a judge grades
in ``answer_text`` (``prompts.final_answer``) and the ground truth in words in ``reference``.

After every model has answered, each judge grades every open answer that has no verdict of its own yet, through
the same stages as the answers (``stages.through_model``: its engine pool; the strict-verdict retry runs in the
same actor), and its verdicts are written as parts under
``judgements/<judge>/`` (the resume log: a resumed run grades only what is missing). ``predictions.parquet`` then
carries, per open row, the list of verdicts of every judge (``verdicts``).
"""

from __future__ import annotations

import pyarrow as pa

from omnieval.config import RunConfig
from omnieval.core.judges import JUDGEMENT_SCHEMA
from omnieval.core.schema import Instance
from omnieval.run.predictions import reference_text


def judge_case(inst: Instance, model: str, prompt: str, answer: str):
    """What a judge grades of one open answer: an open instance's judge question where it has one."""
    from omnieval.core.judges import JudgeCase

    return JudgeCase(key=f"{model}|{prompt}|{inst.instance_id}", question=inst.judge_question or inst.question,
                     reference=reference_text(inst), answer=answer or "",
                     abstention=inst.abstain_label is not None,
                     reference_is_abstention=inst.abstain_label is not None and inst.target == inst.abstain_label,
                     rated=inst.rated)


def judge_folder(judge: str) -> str:
    from omnieval.core.names import folder_name

    return f"judgements/{folder_name(judge)}"


def read_judgements(store, judge: str) -> pa.Table:
    return store.read_folder(judge_folder(judge), JUDGEMENT_SCHEMA)


def run_judges(config: RunConfig, store, predictions: pa.Table, instances: dict[str, Instance],
               progress: bool = True) -> int:
    """Grade every open answer (no error) that a judge has not graded yet, each judge through its own engine pool
    (``stages.through_model``); returns the verdicts written. An answer with no ground truth in words (an open item
    whose release gives no reference) is rated 1-5 where its item is ``rated`` (``core.judges``, Ratings), else not
    graded (its benchmark's own rule scores it)."""
    import pyarrow.compute as pc

    from omnieval.core.judges import JudgementRows, judge_request
    from omnieval.run.stages import RowBuilder, drain, from_rows, through_model

    if "open" not in config.modes or predictions.num_rows == 0:
        return 0
    # errored or skipped (media the model cannot take): never answered, nothing to grade
    asked = pc.and_(pc.is_null(predictions["error"]), pc.is_null(predictions["skipped"]))
    opened = predictions.filter(pc.and_(pc.equal(predictions["mode"], "open"), asked))
    written = 0
    for judge in config.judges:
        done_table = read_judgements(store, judge.name)
        done = set(zip(done_table["model"].to_pylist(), done_table["prompt"].to_pylist(),
                       done_table["instance_id"].to_pylist(), strict=True))
        rows = [judge_request(judge.name, config.judge_template,
                              judge_case(instances[r["instance_id"]], r["model"], r["prompt"], r["answer_text"]),
                              model=r["model"], prompt=r["prompt"], instance_id=r["instance_id"])
                for r in opened.select(["model", "prompt", "instance_id", "answer_text"]).to_pylist()
                if (r["model"], r["prompt"], r["instance_id"]) not in done
                and (reference_text(instances[r["instance_id"]]) is not None or instances[r["instance_id"]].rated)]
        if not rows:
            continue
        ds = through_model(from_rows(rows, {"model": pa.string()}), judge, None,
                           rows=RowBuilder(JudgementRows, {"judge": judge.name, "template": config.judge_template}))
        folder = judge_folder(judge.name)
        written += drain(ds, len(rows), f"judge {judge.name}",
                         lambda table, folder=folder: store.write_table(store.next_part(folder), table), progress)
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
