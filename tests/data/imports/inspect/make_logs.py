"""Writes the inspect logs of this folder with inspect-ai itself (see README.md): the ``video_mcq`` task run with
inspect's mock model for 2 epochs, each run written as a ``.eval`` log, then converted to ``.json`` by
``inspect log convert``.

Run with inspect-ai's own Python, from this folder: ``python make_logs.py OUT_DIR``. The mock model counts tokens
with tiktoken's ``o200k_base``, which it downloads on first use; without a network the count is replaced by a
length estimate (token counts are not read by the importer). Its replies are fixed (``ANSWER: X``) so that some
samples are right and some wrong.
"""

import subprocess
import sys
from pathlib import Path

import inspect_ai.model._model as model_module
from inspect_ai import eval as inspect_eval
from inspect_ai.model import ModelOutput, get_model
from video_mcq import video_mcq

model_module.count_text_tokens = lambda text: len(text) // 4 + 1

# Per model, its replies to the 4 samples x 2 epochs, in the order the mock model is called.
REPLIES = {"mockllm/model": ["A", "B", "C", "A", "B", "D", "A", "C"],
           "mockllm/other": ["A", "B", "A", "C", "A", "B", "A", "B"]}


def run(name: str, out: Path) -> str:
    outputs = [ModelOutput.from_content(model=name, content=f"ANSWER: {letter}") for letter in REPLIES[name]]
    model = get_model(name, custom_outputs=outputs)
    [log] = inspect_eval(video_mcq(), model=model, epochs=2, log_format="eval", log_dir=str(out / "eval"),
                         max_samples=1, display="none")
    return log.location


def main(out: Path) -> None:
    for name in REPLIES:
        log = run(name, out)
        subprocess.run(["inspect", "log", "convert", log, "--to", "json", "--output-dir", str(out / "json")],
                       check=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
