"""A protocol's own per-instance fields live in ``Instance.protocol_fields`` (checked against its spec's
``instance_fields``) and the simulated engine's hints in ``Instance.simulation_hints``; the plan digest still hashes
the text it hashed when every field was a flat member of ``Instance``, so a run written before still resumes, and the
prediction rows keep the flat columns docs/reference.md names.

The recorded texts and digests below were made with the code before the fields moved (the flat ``Instance`` of
``main`` at that time: ``inst.model_dump_json(exclude=NAMING_FIELDS | DERIVED_FIELDS | unset LATER_FIELDS)`` for
each instance, and ``make_plan(...).expanded.digest`` for the synthetic benchmarks); they are not to be remade from
the code under test.
"""

from __future__ import annotations

import pytest

from omnieval.core.schema import Instance, Segment

BASE = dict(benchmark="b", split="real", question='Which one? \u00e9 "q"', option_labels=["A", "B", "C"],
            option_texts=["x", "y", "I cannot answer"], target="A")


def _seg(kind, **kw) -> Segment:
    return Segment(kind=kind, **kw)


def instances() -> dict[str, Instance]:
    """One instance per protocol shape, every field each protocol sets, in the new structure."""
    return {
        "dissonance": Instance(
            instance_id="q1|C010|s0", item_id="q1", protocol="dissonance", condition="C010",
            segments=[_seg("media", modality="video", path="v/a.mp4"), _seg("media", modality="audio", path="a/b.wav"),
                      _seg("text", text="Text: passage")], abstain_label="C", task="t", category="c",
            protocol_fields={"k": 1, "anchor": "cat"}, simulation_hints={"video": "A", "audio": None, "text": "A"},
            **BASE),
        "crossmodal": Instance(
            instance_id="q2|A->T|s0", item_id="q2", protocol="crossmodal", condition="A->T",
            segments=[_seg("media", modality="audio", path="a/x.wav")], option_segments=[_seg("text", text="x")] * 3,
            task="t", protocol_fields={"subtask": "st"}, media_unit="a/x.wav",
            simulation_hints={"audio+text": "A"}, **BASE),
        "contrastive": Instance(
            instance_id="q3|perm:BA|s0", item_id="q3", protocol="contrastive", condition="perm:BA", segments=[],
            option_segments=[_seg("media", modality="image", path="i/1.png")] * 3, category="cat",
            protocol_fields={"n_inputs": 3, "selection_type": "similar", "answer_modality": "image"},
            simulation_hints={"image": "A", "position:A": "A"}, media_unit="i/1.png", layout="scenes", **BASE),
        "spectrum": Instance(
            instance_id="q4|audio_only|s0", item_id="q4", protocol="spectrum", condition="audio_only",
            segments=[_seg("media", modality="video", path="v/c.mp4"), _seg("media", modality="audio", path="v/c.mp4")],
            task="t", category="k", simulation_hints={"audio": "A", "video": None}, donors={"video": "q9"},
            protocol_fields={"group": "g1", "evidence_modality": "audio", "breakdowns": {"duration": "long"}},
            media_unit="v/c.mp4", **BASE),
        "spectrum_open": Instance(
            instance_id="q5|normal|s0", item_id="q5", protocol="spectrum", condition="normal",
            segments=[_seg("media", modality="image", path="i/2.png")], benchmark="b", split="test",
            question="Say?", option_labels=[], option_texts=[], target="", simulation_hints={"image": ""},
            reference="ref", judge_question="jq", rated=True),
    }


RECORDED_TEXTS = {
    'dissonance': (
        '{"instance_id":"q1|C010|s0","item_id":"q1","protocol":"dissonance","benchmark":"b","split":"real'
        '","condition":"C010","segments":[{"kind":"media","text":null,"modality":"video","path":"v/a.mp4"'
        '},{"kind":"media","text":null,"modality":"audio","path":"a/b.wav"},{"kind":"text","text":"Text: '
        'passage","modality":null,"path":null}],"question":"Which one? é \\"q\\"","option_labels":["A","B",'
        '"C"],"option_texts":["x","y","I cannot answer"],"target":"A","abstain_label":"C","k":1,"anchor":'
        '"cat","task":"t","subtask":null,"category":"c","n_inputs":null,"selection_type":null,"answer_mod'
        'ality":null,"group":null,"option_segments":null,"evidence":{"video":"A","audio":null,"text":"A"}'
        ',"evidence_modality":null,"reference":null,"judge_question":null,"rated":false}'
    ),
    'crossmodal': (
        '{"instance_id":"q2|A->T|s0","item_id":"q2","protocol":"crossmodal","benchmark":"b","split":"real'
        '","condition":"A->T","segments":[{"kind":"media","text":null,"modality":"audio","path":"a/x.wav"'
        '}],"question":"Which one? é \\"q\\"","option_labels":["A","B","C"],"option_texts":["x","y","I cann'
        'ot answer"],"target":"A","abstain_label":null,"k":null,"anchor":null,"task":"t","subtask":"st","'
        'category":null,"n_inputs":null,"selection_type":null,"answer_modality":null,"group":null,"option'
        '_segments":[{"kind":"text","text":"x","modality":null,"path":null},{"kind":"text","text":"x","mo'
        'dality":null,"path":null},{"kind":"text","text":"x","modality":null,"path":null}],"evidence":{"a'
        'udio+text":"A"},"evidence_modality":null,"reference":null,"judge_question":null,"rated":false}'
    ),
    'contrastive': (
        '{"instance_id":"q3|perm:BA|s0","item_id":"q3","protocol":"contrastive","benchmark":"b","split":"'
        'real","condition":"perm:BA","segments":[],"question":"Which one? é \\"q\\"","option_labels":["A","'
        'B","C"],"option_texts":["x","y","I cannot answer"],"target":"A","abstain_label":null,"k":null,"a'
        'nchor":null,"task":null,"subtask":null,"category":"cat","n_inputs":3,"selection_type":"similar",'
        '"answer_modality":"image","group":null,"option_segments":[{"kind":"media","text":null,"modality"'
        ':"image","path":"i/1.png"},{"kind":"media","text":null,"modality":"image","path":"i/1.png"},{"ki'
        'nd":"media","text":null,"modality":"image","path":"i/1.png"}],"evidence":{"image":"A","position:'
        'A":"A"},"evidence_modality":null,"reference":null,"judge_question":null,"rated":false}'
    ),
    'spectrum': (
        '{"instance_id":"q4|audio_only|s0","item_id":"q4","protocol":"spectrum","benchmark":"b","split":"'
        'real","condition":"audio_only","segments":[{"kind":"media","text":null,"modality":"video","path"'
        ':"v/c.mp4"},{"kind":"media","text":null,"modality":"audio","path":"v/c.mp4"}],"question":"Which '
        'one? é \\"q\\"","option_labels":["A","B","C"],"option_texts":["x","y","I cannot answer"],"target":'
        '"A","abstain_label":null,"k":null,"anchor":null,"task":"t","subtask":null,"category":"k","n_inpu'
        'ts":null,"selection_type":null,"answer_modality":null,"group":"g1","option_segments":null,"evide'
        'nce":{"audio":"A","video":null},"evidence_modality":"audio","breakdowns":{"duration":"long"},"re'
        'ference":null,"judge_question":null,"rated":false}'
    ),
    'spectrum_open': (
        '{"instance_id":"q5|normal|s0","item_id":"q5","protocol":"spectrum","benchmark":"b","split":"test'
        '","condition":"normal","segments":[{"kind":"media","text":null,"modality":"image","path":"i/2.pn'
        'g"}],"question":"Say?","option_labels":[],"option_texts":[],"target":"","abstain_label":null,"k"'
        ':null,"anchor":null,"task":null,"subtask":null,"category":null,"n_inputs":null,"selection_type":'
        'null,"answer_modality":null,"group":null,"option_segments":null,"evidence":{"image":""},"evidenc'
        'e_modality":null,"reference":"ref","judge_question":"jq","rated":true}'
    ),
}


@pytest.mark.parametrize("name", sorted(RECORDED_TEXTS))
def test_the_digest_hashes_the_text_recorded_before_the_fields_moved(name):
    from omnieval.run.expansion import digest_text

    assert digest_text(instances()[name]) == RECORDED_TEXTS[name]


def test_a_field_no_flat_instance_had_is_hashed_at_the_end():
    """A protocol added since (its own field ``tells``) hashes that field after every flat field; an instance without
    one hashes exactly the recorded text, so adding the member changed no existing digest."""
    from omnieval.run.expansion import digest_text

    inst = instances()["spectrum_open"].model_copy(update={"protocol_fields": {"tells": True}})
    assert digest_text(inst) == RECORDED_TEXTS["spectrum_open"][:-1] + ',"protocol_fields":{"tells":true}}'


RECORDED_PLAN_DIGESTS = {  # (instances, digest): conftest's ``bench`` for dissonance, else ``datasets synth``, seed 0
    "dissonance": (128, "d4fd526b3742a178170e1505ad7467b168b44b48859adb6792dfeb337d41c73d"),
    "crossmodal": (72, "e12f80265bb50b28ff2257d6461aeb9b1cf544aa1adf77483d51cc80bf81afa7"),
    "contrastive": (384, "d34f231d56a6486bae6394da2456b2393f65669fa584bf41e2a5720e7bd9a2ac"),
    "spectrum": (192, "2a57d2eb05a51c4e573127249717580a56557db002cd17af40220ddf8312385b"),
}


@pytest.mark.parametrize("protocol", sorted(RECORDED_PLAN_DIGESTS))
def test_the_plan_digest_of_each_synthetic_benchmark_is_the_recorded_one(protocol, bench, tmp_path):
    """Through each real protocol's expansion: the plan's identity is the one a run written before had."""
    from omnieval.config import parse_run_config
    from omnieval.datasets.synthetic_registry import make_synthetic_benchmark
    from omnieval.run.plan import make_plan

    folder = bench if protocol == "dissonance" else make_synthetic_benchmark(protocol, tmp_path / "b", seed=0)
    plan = make_plan(parse_run_config({"benchmark": str(folder), "output": str(tmp_path / "r"),
                                       "models": [{"name": "sim", "engine": "simulated"}]}), keep_blocks=False)
    assert (plan.expanded.n_instances, plan.expanded.digest) == RECORDED_PLAN_DIGESTS[protocol]


@pytest.mark.parametrize(("name", "columns"), [
    ("dissonance", {"k": 1, "anchor": "cat", "task": "t", "category": "c", "subtask": None, "n_inputs": None,
                    "abstain_label": "C", "breakdowns": None}),
    ("crossmodal", {"subtask": "st", "task": "t", "k": None, "anchor": None, "media_unit": "a/x.wav"}),
    ("contrastive", {"n_inputs": 3, "selection_type": "similar", "answer_modality": "image", "category": "cat",
                     "group": None}),
    ("spectrum", {"group": "g1", "evidence_modality": "audio", "breakdowns": [{"name": "duration", "value": "long"}],
                  "donors": '{"video": "q9"}', "k": None}),
])
def test_prediction_rows_keep_the_flat_columns(name, columns):
    from omnieval.run.predictions import Prediction

    row = Prediction.scored(instances()[name], "m", "simulated", "zs", choice="A").row()
    assert {k: row[k] for k in columns} == columns


@pytest.mark.parametrize("name", sorted(RECORDED_TEXTS))
def test_an_instance_goes_through_its_arrow_record_unchanged(name):
    """The instance blocks and request rows carry the instance as an Arrow struct (``records.INSTANCE_TYPE``): read
    back from Arrow, it is the instance that was written, field for field (the map orders included)."""
    import pyarrow as pa

    from omnieval.run.records import INSTANCE_TYPE, instance_from_record, instance_record

    inst = instances()[name].model_copy(update={"protocol_fields": {**instances()[name].protocol_fields,
                                                                    "flagged": True, "none": None}})
    back = instance_from_record(pa.array([instance_record(inst)], INSTANCE_TYPE).to_pylist()[0])
    assert back == inst
    assert list(back.simulation_hints) == list(inst.simulation_hints)
    assert back.field("flagged") is True and back.field("k") == inst.field("k")
