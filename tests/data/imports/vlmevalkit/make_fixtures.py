"""Writes this folder's ``outputs/`` as VLMEvalKit lays a work dir out (see README.md).

Each file is a pandas frame written with the calls of VLMEvalKit's ``vlmeval.smp.file.dump``: ``.xlsx`` through
``pd.ExcelWriter(engine="xlsxwriter", engine_kwargs={"options": {"strings_to_formulas": False}})`` and
``to_excel(index=False)``, ``.tsv``/``.csv`` through ``to_csv(index=False, encoding="utf-8", quoting=QUOTE_ALL)``.
The frames hold the columns VLMEvalKit's inference and ``evaluate_heuristic`` leave in them; the verdicts are
chosen here, by hand, and the ``hit`` of a circular question is 1 only where all four rotations name the answer.

Needs pandas and xlsxwriter: ``python make_fixtures.py`` from this folder (it rewrites ``outputs/``).
"""

import csv
import shutil
from pathlib import Path

import pandas as pd

HERE = Path(__file__).parent
STRIDE = 1_000_000
LETTERS = "ABCD"

# MMBench_DEV_EN (circular): per question, its options and answer in rotation 0, and each model's reply to each of
# its 4 rotations (rotation k moves every option k places: the answer letter moves with it).
MMBENCH = [
    (0, "What is shown in the frame?", ["a cat", "a dog", "a bird", "a fish"], "B"),
    (1, "Which sound source is visible?", ["a drum", "a piano", "a violin", "a horn"], "A"),
    (2, "Where is the speaker?", ["indoors", "a beach", "a forest", "a road"], "D"),
]
MMBENCH_WRONG = {  # (model, question) -> the rotations it answers wrongly
    ("Qwen2.5-Omni-7B", 1): {2},
    ("llava_onevision_qwen2_7b_ov", 0): {1, 3},
    ("llava_onevision_qwen2_7b_ov", 2): {0},
}
# MMStar (plain): index, question, answer; each model's predicted letters.
MMSTAR = [(10, "How many people?", "A"), (11, "What colour is the sky?", "C"), (12, "Which is larger?", "B"),
          (13, "What is written?", "D"), (14, "Which animal?", "A")]
MMSTAR_REPLIES = {"Qwen2.5-Omni-7B": "ACBDB", "llava_onevision_qwen2_7b_ov": "BCBAA"}
# A model's run in its eval folder; the older run of one model is left unlinked, as a rerun leaves it.
RUNS = [("Qwen2.5-Omni-7B", "T20260301-101500", True), ("llava_onevision_qwen2_7b_ov", "T20260302-090000", True),
        ("llava_onevision_qwen2_7b_ov", "T20260220-170000", False)]


def dump(frame: pd.DataFrame, path: Path) -> None:
    if path.suffix == ".xlsx":
        with pd.ExcelWriter(path, engine="xlsxwriter",
                            engine_kwargs={"options": {"strings_to_formulas": False}}) as writer:
            frame.to_excel(writer, index=False)
    else:
        frame.to_csv(path, sep="\t" if path.suffix == ".tsv" else ",", index=False, encoding="utf-8",
                     quoting=csv.QUOTE_ALL)


def rotated(options: list[str], answer: str, k: int) -> tuple[list[str], str]:
    moved = options[-k:] + options[:-k] if k else list(options)
    return moved, LETTERS[(LETTERS.index(answer) + k) % 4]


def mmbench(model: str, older: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = []
    for g, question, options, answer in MMBENCH:
        for k in range(4):
            opts, gold = rotated(options, answer, k)
            wrong = k in MMBENCH_WRONG.get((model, g), set()) or (older and k == 0)
            reply = LETTERS[(LETTERS.index(gold) + 1) % 4] if wrong else gold
            rows.append({"index": g + k * STRIDE, "question": question, "hint": None,
                         **dict(zip(LETTERS, opts)), "answer": gold, "category": "object_localization",
                         "source": "MMBench", "l2-category": "FP-S", "comment": None, "split": "dev",
                         "prediction": reply})
    prediction = pd.DataFrame(rows)
    result = prediction.copy()
    result["g_index"] = [int(x % STRIDE) for x in result["index"]]
    hits = result.assign(ok=result["prediction"] == result["answer"]).groupby("g_index")["ok"].all()
    main = result[result["index"] == result["g_index"]].copy()
    main["hit"] = [int(hits[g]) for g in main["g_index"]]
    main["log"] = ["Succeed During Pre-fetching" if h else "Failed in Prefetching" for h in main["hit"]]
    return prediction, main


def mmstar(model: str, older: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    replies = "AAAAA" if older else MMSTAR_REPLIES[model]
    prediction = pd.DataFrame([{"index": i, "question": q, "A": "1", "B": "2", "C": "3", "D": "4", "answer": a,
                                "category": "coarse perception", "l2_category": "image scene",
                                "prediction": r} for (i, q, a), r in zip(MMSTAR, replies)])
    result = prediction.copy()
    result["hit"] = [int(r == a) for r, a in zip(result["prediction"], result["answer"])]
    result["log"] = ["Match Log: exact. "] * len(result)
    return prediction, result


def accuracy(result: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"split": ["none"], "Overall": [result["hit"].mean()]})


def main() -> None:
    out = HERE / "outputs"
    shutil.rmtree(out, ignore_errors=True)
    for model, eval_id, linked in RUNS:
        run = out / model / eval_id
        run.mkdir(parents=True)
        for dataset, build, ext in (("MMBench_DEV_EN", mmbench, "xlsx"), ("MMStar", mmstar, "tsv")):
            prediction, result = build(model, older=not linked)
            dump(prediction, run / f"{model}_{dataset}.{ext}")
            dump(result, run / f"{model}_{dataset}_exact_matching_result.{ext}")
            dump(accuracy(result), run / f"{model}_{dataset}_acc.csv")
        if linked:
            for file in sorted(run.iterdir()):
                (out / model / file.name).symlink_to(file.relative_to(out / model))


if __name__ == "__main__":
    main()
