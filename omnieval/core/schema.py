"""The tables that flow between stages (docs/reference.md, Tables).

Three distinct types, each with its own job (nothing mutates one into the next):

* ``Item``: one base question of a benchmark, as read from ``items.jsonl``. Per protocol.
* ``Instance``: what one model call sees: ordered prompt ``segments`` (text, or a reference to a media file), the
  option labels and texts, the target label. Produced by ``protocol.expand``.
* a prediction: one row per (instance, model, prompt style, mode): the hand-off to the statistics. Rows are built
  as ``predictions.Prediction`` (one builder for every engine and mode) and cast to ``PREDICTION_SCHEMA``
  when written (``store.predictions_table``: a value of the wrong type fails there); other tools can write the
  same columns and ``omnieval metrics`` reads them (``conform`` fills what they lack).

Media paths inside items are relative to the benchmark directory; ``resolve_media_path`` rejects paths that leave it.
A media segment names a file and the modality taken from it; ``media_ref`` is the key of that decoded stream
everywhere a run looks media up (a video file's own soundtrack is a second stream of the same file).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

import pyarrow as pa
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

Modality = Literal["video", "audio", "image", "text", "pointcloud"]
MEDIA_MODALITIES: tuple[str, ...] = ("video", "audio", "image", "pointcloud")
LABELS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

#: Suffixes of video containers. The audio of such a file (its soundtrack) is a stream of it, keyed apart from its
#: picture (``media_ref``); audio files and any other name keep their path as the key.
VIDEO_SUFFIXES = frozenset({".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi", ".flv", ".mpg", ".mpeg", ".ts", ".mts",
                            ".m2ts", ".wmv", ".3gp", ".ogv", ".vob", ".mxf", ".asf"})
AUDIO_STREAM = "#audio"


def media_ref(path: str, modality: str | None) -> str:
    """The key of one decoded stream of a benchmark file: the path itself, or ``<path>#audio`` for the audio of a
    video container (``VIDEO_SUFFIXES``: a video's soundtrack), so the picture and the sound of one ``.mp4`` are two
    media, each decoded once, that never collide in the decode cache, the prefetch map or an engine's lookup."""
    if modality == "audio" and os.path.splitext(path)[1].lower() in VIDEO_SUFFIXES:  # a str op: called per segment
        return f"{path}{AUDIO_STREAM}"
    return path


def media_file(ref: str) -> str:
    """The file a ``media_ref`` names (relative to the benchmark)."""
    return ref[:-len(AUDIO_STREAM)] if ref.endswith(AUDIO_STREAM) else ref


class InputError(ValueError):
    """Bad user input: a config, a benchmark file, an item. The message names file, item and field."""

    def __init__(self, message: str, *, file: str | Path | None = None, item: str | None = None,
                 field: str | None = None):
        self.file, self.item, self.field = (str(file) if file else None), item, field
        where = ", ".join(f"{k} {v!r}" for k, v in (("file", self.file), ("item", item), ("field", field)) if v)
        super().__init__(f"{where}: {message}" if where else message)


MEDIA_ERROR, ENGINE_ERROR, DESCRIBE_ERROR, OTHER_ERROR = "media", "engine", "describe", "other"
ERROR_KINDS: tuple[str, ...] = (MEDIA_ERROR, ENGINE_ERROR, DESCRIBE_ERROR, OTHER_ERROR)
"""The values of a row's ``error_kind`` (null where ``error`` is null), written by the run layer where the error
happens (docs/reference.md, Predictions): ``media``: a media file of the row failed to decode, the model was not
called; ``engine``: the engine raised on the batch, every row of its sub-batch is marked; ``describe``: a describer
failed on a media file of the row (also where that file failed to decode: the first stage that failed names it),
the model was not called; ``other``: any other error (an engine's own error for one request, an open answer
without text)."""

RESULT_COLUMN = "_result"
"""The batch column, inside a model stage's actor only, holding each request row's result record
(``engines.base.EngineResult``) for the row builder (``run/stages.py``); never written out."""

LEGACY_ERROR_PREFIXES: tuple[tuple[str, str], ...] = (
    ("media decode failed", MEDIA_ERROR), ("engine error", ENGINE_ERROR), ("describe failed", DESCRIBE_ERROR))


def legacy_error_kind(message: str | None) -> str | None:
    """The kind of an ``error`` message by the prose rule of predictions written without an ``error_kind`` column
    (by an older omnieval, or by another tool): the message's prefix (``LEGACY_ERROR_PREFIXES``), else ``other``;
    None for no error (null or blank). Applied by ``with_error_kind`` alone, and only to such files."""
    if message is None or not message.strip():
        return None
    return next((kind for prefix, kind in LEGACY_ERROR_PREFIXES if message.startswith(prefix)), OTHER_ERROR)


def with_error_kind(table: pa.Table) -> pa.Table:
    """``table`` with its ``error_kind`` column: the column it has, or, for a table written without one (an older
    omnieval's parts and predictions, another tool's file), one derived from its ``error`` messages by
    ``legacy_error_kind``. The one place the old prose rule is applied (docs/reference.md, Predictions)."""
    if "error_kind" in table.column_names:
        return table
    errors = table["error"].to_pylist() if "error" in table.column_names else [None] * table.num_rows
    return table.append_column("error_kind", pa.array([legacy_error_kind(e) for e in errors], pa.string()))


def option_key(text: str) -> str:
    """What an answer given as text is matched on (``prompts.parse_answer``): the option with case, runs of spaces
    and punctuation (``.!"'``) ignored. Two options of one item with the same key cannot be told apart."""
    return re.sub(r"[\s\.\!\"']+", " ", text).strip().lower()


def repeated_option(keys: Sequence[str]) -> tuple[int, int] | None:
    """The positions of the first option whose key an earlier option has, and of that earlier one; None if the
    keys are distinct."""
    seen: dict[str, int] = {}
    for i, key in enumerate(keys):
        if key in seen:
            return seen[key], i
        seen[key] = i
    return None


def repeated_options_message(texts: Sequence[str], field: str = "options", labels: bool = True) -> str | None:
    """Why ``texts`` (an item's option texts) cannot be scored, or None: two of them say the same, so a model that
    picks the one that is not the answer is scored wrong for the right answer."""
    pair = repeated_option([option_key(t) for t in texts])
    if pair is None:
        return None
    i, j = pair
    name = (lambda k: f"{field}[{k}] ({LABELS[k]})") if labels else (lambda k: f"{field}[{k}]")
    how = "are the same text" if texts[i] == texts[j] else "read the same (case, spaces and punctuation aside)"
    return (f"{name(i)} {texts[i]!r} and {name(j)} {texts[j]!r} {how}: a model choosing either would be scored "
            "wrong for one of them; make the options distinct")


def pydantic_message(err: dict) -> str:
    """One error of a pydantic ``ValidationError`` in the user's terms: without pydantic's ``Value error, ``
    prefix, and with the value given where it is short (``Input should be a valid list, got 'normal'``)."""
    msg = err["msg"].removeprefix("Value error, ")
    value = err.get("input")
    shown = repr(value)
    if err["type"] not in ("value_error", "missing", "extra_forbidden") and len(shown) <= 80 \
            and isinstance(value, str | int | float | bool | list | type(None)):
        msg += f", got {shown}"
    return msg


def _nonempty_item_id(v: str) -> str:
    if not v.strip():
        raise ValueError("item_id must be a non-empty string")
    return v


ItemId = Annotated[str, AfterValidator(_nonempty_item_id)]  # every protocol's item id: a non-blank string


class Strict(BaseModel):
    """Base for every table model: unknown fields are errors (typos surface), values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# ---------------------------------------------------------------------------------------------------------------
# Items
# ---------------------------------------------------------------------------------------------------------------

class DissonanceMedia(Strict):
    """The three renderings of one anchor: ``video``/``audio`` are file paths, ``text`` is an inline passage."""

    video: str
    audio: str
    text: str


class Anchor(Strict):
    """One entry of a split's anchor library (``anchors.jsonl``): the assets used when a modality is replaced."""

    anchor: str
    split: str
    media: DissonanceMedia


class DissonanceItem(Strict):
    """A base question of the dissonance protocol (docs/reference.md, Protocol `dissonance`)."""

    item_id: ItemId
    benchmark: str = "benchmark"
    split: str = "all"
    question: str
    anchor: str
    media: DissonanceMedia
    answer_key: dict[str, str] = Field(description="anchor -> answer text for this question")
    options: list[str] = Field(description="the four non-abstention answer texts")
    abstain_text: str = "I cannot answer"
    target_override: dict[str, str] | None = Field(
        default=None, description="condition (C000..C111) -> target answer text (or the abstention text)")
    task: str | None = None
    category: str | None = None

    @field_validator("options")
    @classmethod
    def _options_distinct(cls, v: list[str]) -> list[str]:
        if len(v) < 2:
            raise ValueError("needs at least two options")
        repeated = repeated_options_message(v, labels=False)  # labels are drawn per instance
        if repeated:
            raise ValueError(repeated)
        return v


# ---------------------------------------------------------------------------------------------------------------
# Instances
# ---------------------------------------------------------------------------------------------------------------

class Segment(Strict):
    """One piece of a prompt, in order. ``kind='text'`` carries ``text``; ``kind='media'`` carries a ``modality``
    and a ``path`` relative to the benchmark root (decoded once per run and shared by every instance using it)."""

    kind: Literal["text", "media"]
    text: str | None = None
    modality: Modality | None = None
    path: str | None = None

    @property
    def ref(self) -> str:
        """The decoded stream this segment shows (``media_ref``)."""
        return media_ref(self.path or "", self.modality)


ProtocolValue = str | int | bool | dict[str, str] | None
"""A value of ``Instance.protocol_fields``: a label, a count, a flag, or a name -> value map (breakdowns)."""

PROTOCOL_COLUMNS: tuple[str, ...] = ("k", "anchor", "subtask", "n_inputs", "selection_type", "answer_modality",
                                     "group", "evidence_modality", "breakdowns")
"""The prediction columns (docs/reference.md, Predictions) that hold a protocol's own instance fields: the row
builder writes ``Instance.protocol_fields`` flat into them (null where the protocol sets none)."""


class Instance(Strict):
    """What one model call sees. ``instance_id`` is stable: same item, condition and seed -> same id and content.

    ``option_segments``: where options are media (crossmodal candidates, contrastive inputs), one segment per option
    label, shown right after its label (``A. <audio>``, ``B. <audio>``, ...); ``option_texts`` then hold short
    descriptions for logs and text matching. None when every option is plain text.

    ``task`` / ``category``: the item's own labels (docs/reference.md, Items: common to every protocol).

    ``protocol_fields``: what only the instance's protocol knows of it, name -> value, checked against the pydantic
    model its spec declares (``ProtocolSpec.instance_fields``) when the protocol expands: dissonance's ``k`` and
    ``anchor``, crossmodal's ``subtask``, contrastive's ``n_inputs``, ``selection_type`` and ``answer_modality``,
    spectrum's ``group`` (the question an item is a copy of: the bootstrap draws a group's items together),
    ``evidence_modality`` and ``breakdowns`` (the release's own score breakdowns, name -> value). A field named as
    a prediction column (``PROTOCOL_COLUMNS``) is written flat into that column; read one with ``field``.

    ``donors``: for a shuffled condition, the ``item_id`` each replaced modality was taken from (``{"audio":
    "q07"}``), so anyone can check that no item was handed its own media; None where nothing was replaced.

    ``media_unit``: the media file the item's questions share (a video several questions ask about, the clip an
    entity is), named by its benchmark-relative path, the same in every instance of the item; set by the protocol
    from the item, never from what an instance shows (a shuffled condition shows another item's media). The default
    resampling unit of the protocols whose items share media (``stats.clusters``); None: the item shares nothing
    the protocol can name.

    ``layout``: how the prompt is laid out (``prompts.LAYOUTS``): ``options`` (context, question, labelled options)
    or ``scenes`` (the options are the inputs, each shown after ``Scene X.``); set by the protocol
    (``ProtocolSpec.prompt_layout``), so an engine lays out any instance without knowing its protocol.

    ``simulation_hints`` maps a percept to the option label its content supports (or None): the protocol knows it
    because it built the instance; only the simulated engine (a test double) reads it, as its ground truth; no real
    engine and no statistic ever does. A percept
    is a modality (``video``) or a joint percept of several, sorted and joined by ``+`` (``audio+text``: matching an
    audio context to text candidates needs both).

    An **open instance** (``open_only``: no option labels, ``target`` empty; ``spectrum.Item``'s open items) is only
    asked open-ended. ``reference`` is its ground truth in words (None: the release gives none, its benchmark's rule
    scores the answer alone, or, where ``rated``, the judges rate it 1-5), ``judge_question`` the question as a judge
    reads it (a spoken question's transcript).
    """

    instance_id: str
    item_id: str
    protocol: str
    benchmark: str
    split: str
    condition: str
    segments: list[Segment]
    question: str
    option_labels: list[str]
    option_texts: list[str]
    target: str
    abstain_label: str | None = None
    task: str | None = None
    category: str | None = None
    option_segments: list[Segment] | None = None
    protocol_fields: dict[str, ProtocolValue] = Field(default_factory=dict)
    simulation_hints: dict[str, str | None] = Field(default_factory=dict)
    donors: dict[str, str] | None = None
    media_unit: str | None = None
    layout: Literal["options", "scenes"] = "options"
    reference: str | None = None
    judge_question: str | None = None
    rated: bool = False

    def field(self, name: str) -> ProtocolValue:
        """The protocol's field ``name`` of this instance (``protocol_fields``); None where its protocol sets none."""
        return self.protocol_fields.get(name)

    @property
    def open_only(self) -> bool:
        """An open instance (class doc): no options, asked open-ended only."""
        return not self.option_labels

    def media_segments(self) -> list[Segment]:
        """Every media segment the model is shown: the context's, then the options' (in label order)."""
        return [s for s in [*self.segments, *(self.option_segments or [])] if s.kind == "media"]


# ---------------------------------------------------------------------------------------------------------------
# Predictions
# ---------------------------------------------------------------------------------------------------------------

BREAKDOWN_FIELDS = ("name", "value")
BREAKDOWNS_TYPE = pa.list_(pa.struct([(f, pa.string()) for f in BREAKDOWN_FIELDS]))
"""The ``breakdowns`` column: a list of ``{name, value}`` pairs, sorted by name (a list of structs rather than an
Arrow map: polars reads it as it is, and a file without breakdowns needs no JSON parsing)."""


def breakdown_pairs(breakdowns: dict[str, str] | None) -> list[dict[str, str]] | None:
    """An instance's ``breakdowns`` as the column holds them: ``{name, value}`` pairs sorted by name; None for none."""
    return [{"name": k, "value": v} for k, v in sorted(breakdowns.items())] if breakdowns else None


VERDICT_FIELDS: tuple[tuple[str, pa.DataType], ...] = (
    ("robust_choice", pa.string()), ("robust_source", pa.string()),
    ("official_choice", pa.string()), ("official_correct", pa.bool_()), ("official_source", pa.string()),
    ("official_how", pa.string()),
)
"""The verdict columns of ``PREDICTION_SCHEMA`` (``scoring.verdicts``), in order, with their Arrow types."""
VERDICT_COLUMNS: tuple[str, ...] = tuple(name for name, _ in VERDICT_FIELDS)
MEDIA_TOKENS_TYPE = pa.struct([(m, pa.int32()) for m in ("video", "audio", "image")])
"""The ``media_tokens`` column: the media placeholder tokens of each modality in the model's input ids (null for a
modality whose placeholder the engine does not know)."""
SHOWN_COLUMNS = ("video_frames", "video_size", "audio_seconds", "media_tokens", "prompt_tokens")
"""What the model was shown (``engines.shown.Shown``): one column each, null where the engine cannot say."""


def shown_columns(shown: dict | None) -> dict:
    """A result's ``shown`` (``Shown.to_dict``) as the prediction row's ``SHOWN_COLUMNS``: nulls without one."""
    shown = shown or {}
    return {name: shown.get(name) for name in SHOWN_COLUMNS}


PREDICTION_SCHEMA = pa.schema([
    ("model", pa.string()),
    ("prompt", pa.string()),
    ("protocol", pa.string()),
    ("split", pa.string()),
    ("item_id", pa.string()),
    ("instance_id", pa.string()),
    ("condition", pa.string()),
    ("target", pa.string()),
    ("choice", pa.string()),
    ("abstain_label", pa.string()),
    ("confidence", pa.float64()),
    ("confidence_method", pa.string()),
    ("n_options", pa.int32()),
    ("k", pa.int32()),
    ("anchor", pa.string()),
    ("task", pa.string()),
    ("subtask", pa.string()),
    ("category", pa.string()),
    ("n_inputs", pa.int32()),
    ("selection_type", pa.string()),
    ("answer_modality", pa.string()),
    ("group", pa.string()),
    ("donors", pa.string()),
    ("evidence_modality", pa.string()),
    ("media_unit", pa.string()),
    ("breakdowns", BREAKDOWNS_TYPE),
    ("option_logprobs", pa.list_(pa.float64())),
    ("raw_text", pa.string()),
    ("error", pa.string()),
    ("error_kind", pa.string()),
    ("latency_s", pa.float64()),
    ("engine", pa.string()),
    # Open-ended mode (``mode='open'``; null or ``mcq`` = multiple choice) and its judges.
    ("mode", pa.string()),
    ("answer_text", pa.string()),
    ("reference", pa.string()),
    ("verdicts", pa.list_(pa.struct([("judge", pa.string()), ("verdict", pa.string()), ("raw_text", pa.string()),
                                     ("attempts", pa.int32()), ("template", pa.string())]))),
    # Cascades (a describer turned some media into text first): which, the texts it wrote, every stage's engine.
    ("cascade", pa.string()),
    ("intermediate_text", pa.string()),
    ("stage_engines", pa.string()),
    # A media part of a modality the model cannot take (``ModelConfig.unsupported_media``): the row was not asked
    # (``skipped``), or a text note stood in for the part (``media_noted``); both name the modalities (``audio+video``).
    ("skipped", pa.string()),
    ("media_noted", pa.string()),
    # How a chain-of-thought choice was made: ``parsed`` from the text, or ``forced`` from the label logits read
    # after a reasoning that named no answer (``engines.base.cot_result``); null for zero-shot.
    ("answer_source", pa.string()),
    # Both verdicts of an answer read from generated text (``scoring.verdicts``): omnieval's own rule's option and
    # how it was found (``parsed`` / ``unparsed``), and the benchmark's released rule's option, verdict (null:
    # dropped from its denominator), how it was found (``parsed`` / ``forced`` / ``unparsed``) and the branch that
    # decided; null on rows scored from logits, and the official ones where the run has no official scorer.
    *VERDICT_FIELDS,
    # What the model was shown (``engines.shown``): frames given to its processor, their size as it resized them
    # (``HxW``), seconds of audio heard (a video's soundtrack included, after any cap), placeholder tokens per
    # modality and the input length in tokens; null where the engine cannot say (tokens: simulated, endpoint).
    ("video_frames", pa.int32()),
    ("video_size", pa.string()),
    ("audio_seconds", pa.float64()),
    ("media_tokens", MEDIA_TOKENS_TYPE),
    ("prompt_tokens", pa.int32()),
    # The thinking style (``engines/thinking.py``): the reasoning block, split off ``raw_text`` (which keeps only
    # the text after it, the answer a scorer reads), and its length in tokens (the thinking budget where the block
    # was closed by force); null for every other style.
    ("reasoning", pa.string()),
    ("reasoning_tokens", pa.int32()),
    # Repeated samples (a model's ``samples: k``): which of the instance's k answers the row is (0 for the first or
    # only one; null in files written before the column, read as 0), and how it was drawn: a JSON object with the
    # sample's ``seed`` (derived from the run seed and the sample), ``temperature`` and ``top_p`` (null for one
    # sample at the model's own decoding).
    ("sample", pa.int32()),
    ("sampling", pa.string()),
])
"""Arrow schema of ``predictions.parquet`` (docs/reference.md, Predictions). Required columns are listed in
REQUIRED_COLUMNS.

Beyond those columns: ``error_kind`` the kind of the row's ``error`` (``ERROR_KINDS``; null without one); ``mode``
(``open`` for open-ended answers: ``choice`` is null there, ``answer_text`` holds the final answer, ``reference``
the ground truth in words, ``verdicts`` one entry per judge: ``correct`` / ``incorrect`` / ``abstained`` or null
when unparseable after a retry); ``cascade`` names the describer and the modalities it
described (null for a direct model call), ``intermediate_text`` is a JSON object media path -> description,
``stage_engines`` names each stage's engine (``describe=hf:name;answer=vllm:name``); ``group`` the question an item
is a copy of (spectrum's ``group``, one of ``Instance.protocol_fields``): where set, the bootstrap's resampling unit
instead of ``item_id``; ``donors`` (shuffled conditions) a JSON object modality -> the ``item_id`` that modality
was taken from (``Instance.donors``);
``evidence_modality`` the modality an item's answer evidence comes from, as its benchmark labels it; ``media_unit``
the media file the item's questions share (``Instance.media_unit``), the default resampling unit where it is set;
``breakdowns`` the release's own score breakdowns of the item (spectrum's ``breakdowns``, one of
``Instance.protocol_fields``) as ``{name, value}`` pairs (``BREAKDOWNS_TYPE``), metrics being also given per value
of each;
``skipped`` the modalities of a row that was not asked because its model cannot take them (no choice, no error; left
out of every metric), ``media_noted`` those a one-line text note replaced (``media_policy``); ``SHOWN_COLUMNS`` what
the model was shown (``engines.shown``)."""

VERDICTS: tuple[str, ...] = ("correct", "incorrect", "abstained")
DEFAULT_MODE, OPEN_MODE = "mcq", "open"
MODES: tuple[str, ...] = (DEFAULT_MODE, OPEN_MODE)
"""A row's ``mode``: multiple choice (``mcq``) or open-ended (``open``). A null or absent ``mode`` (files written
before the column existed, other tools) is ``DEFAULT_MODE``, everywhere rows are read (``mode_or_default``)."""


def mode_or_default(mode: str | None) -> str:
    """A row's mode, ``DEFAULT_MODE`` where it has none."""
    return mode or DEFAULT_MODE


REQUIRED_COLUMNS: tuple[str, ...] = (
    "model", "prompt", "protocol", "split", "item_id", "instance_id", "condition", "target", "choice",
    "abstain_label", "confidence", "confidence_method",
)


def conform(table: pa.Table, schema: pa.Schema = PREDICTION_SCHEMA) -> pa.Table:
    """A table with exactly ``schema`` (by default ``PREDICTION_SCHEMA``): columns it lacks (files written before a
    column existed, or by another tool) are added as nulls, but for a missing ``error_kind``, derived from ``error``
    (``with_error_kind``); extra ones dropped, types cast."""
    if "error_kind" in schema.names:
        table = with_error_kind(table)
    columns = [table[f.name].cast(f.type) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
               for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def resolve_media_path(root: str | Path, rel: str, *, file: str | Path | None = None, item: str | None = None,
                       field: str | None = None) -> Path:
    """Resolve a benchmark-relative media path; reject absolute paths and paths that leave the benchmark folder."""
    root_path = Path(root).resolve()
    if not isinstance(rel, str) or not rel:
        raise InputError("media path must be a non-empty string", file=file, item=item, field=field)
    if Path(rel).is_absolute():
        raise InputError(f"media path {rel!r} is absolute; paths are relative to the benchmark folder",
                         file=file, item=item, field=field)
    full = (root_path / rel).resolve()
    if full != root_path and root_path not in full.parents:
        raise InputError(f"media path {rel!r} resolves outside the benchmark folder {root_path}",
                         file=file, item=item, field=field)
    return full
