"""Tiny thinking-template builds for the thinking tests (tests/test_thinking.py, tests/test_vllm_thinking.py).

The ``qwen2`` tiny build with ``<think>`` and ``</think>`` added as plain (not special) tokens, as Qwen3's tokenizer
has them, the embeddings grown to match, a chat template of one of the kinds below written into the tokenizer's
files, and Qwen3's sampling values in ``generation_config.json``.
"""

from __future__ import annotations

import json
import shutil

_MESSAGES = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
             "{% if message['content'] is string %}{{ message['content'] }}"
             "{% else %}{% for content in message['content'] %}{% if content['type'] == 'text' %}"
             "{{ content['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}")
# the generation prompt of Qwen3's released chat template
QWEN3_TEMPLATE = _MESSAGES + ("{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
                              "{%- if enable_thinking is defined and enable_thinking is false %}"
                              "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}")
# a switch whose "on" side opens the block itself: the model's first token is a reasoning token
OPENING_TEMPLATE = _MESSAGES + ("{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
                                "{%- if enable_thinking is defined and enable_thinking is false %}"
                                "{{- '<think>\\n\\n</think>\\n\\n' }}{%- else %}{{- '<think>\\n' }}{%- endif %}"
                                "{%- endif %}")
ALWAYS_TEMPLATE = _MESSAGES + "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}"
QWEN3_SAMPLING = {"do_sample": True, "temperature": 0.6, "top_p": 0.95, "top_k": 20}


def thinking_build(base, out, template: str):
    """The tiny qwen2 folder with the think tokens and ``template`` (module doc)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    shutil.copytree(base, out)
    tok = AutoTokenizer.from_pretrained(out)
    tok.add_tokens(["<think>", "</think>"])
    tok.chat_template = template
    tok.save_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    model.resize_token_embeddings(len(tok))
    model.save_pretrained(out)
    config = json.loads((out / "generation_config.json").read_text())
    (out / "generation_config.json").write_text(json.dumps({**config, **QWEN3_SAMPLING}))
    return out


