"""The ``omnieval`` command: run | sweep | demo | metrics | stats | power | report | import | parse | filter |
datasets | models | bench.

Each subcommand parses its arguments and makes one library call; heavy modules (dev tooling included) are imported
inside the handlers so ``omnieval --help`` stays fast. Errors from bad input (``InputError``) print one clear line
and exit with code 2; a local Ray that would not start, one line and code 1; ``run`` and ``sweep`` stopped by Ctrl-C
or SIGTERM, one line with the command that resumes them and code 130 or 143.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
from collections.abc import Callable, Sequence

from omnieval.core.schema import InputError
from omnieval.datasets.synthetic_registry import SYNTHETIC_PROTOCOLS

DESCRIPTION = ("Evaluate omni-modal models (video, audio, image, text in; multiple-choice answers out): modality "
               "reliance, cross-modal consistency, calibrated abstention, with bootstrap CIs and significance tests. "
               "Every subcommand has its own --help.")


ADDRESS_HELP = ("join the Ray cluster at this address (host:port, or auto: the one RAY_ADDRESS or `ray start` names); "
                "given up after 30 s without an answer (OMNIEVAL_RAY_CONNECT_TIMEOUT_S). Default: start a local Ray "
                "of this command's own, even where a cluster runs on the machine")


class _DefaultsHelp(argparse.HelpFormatter):
    """Option help ends with the default, where there is one worth showing."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        worth = not any(action.default is v for v in (None, False, True, argparse.SUPPRESS))
        if worth and action.option_strings and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


class _Parser(argparse.ArgumentParser):
    """Every (sub)command's help shows its defaults."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _DefaultsHelp)
        super().__init__(*args, **kwargs)


def _version() -> str:
    import importlib.metadata as md

    try:
        return md.version("omnieval")
    except md.PackageNotFoundError:
        return "unknown"


def _bounded(low: int, high: int | None = None):
    def parse(text: str) -> int:
        value = int(text)
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be in {low}..{high}" if high is not None else f"must be >= {low}")
        return value

    return parse


def _questions(text: str) -> int:
    from omnieval.datasets.synthetic import QUESTIONS

    return _bounded(1, len(QUESTIONS))(text)


def _colours(low: int):
    """A count of distinct synthetic creatures (anchors, entities): one colour each, so at most the colours there
    are."""
    def parse(text: str) -> int:
        from omnieval.datasets.synthetic import COLOURS

        return _bounded(low, len(COLOURS))(text)

    return parse


def _run(args: argparse.Namespace) -> int:
    from omnieval.config import load_run_config
    from omnieval.run.pipeline import run_evaluation

    config = load_run_config(args.config)
    if args.out:
        config = config.model_copy(update={"output": args.out})
    result = run_evaluation(config, address=args.address, overwrite=args.overwrite)
    print(result.summary())
    if result.measured:  # else the summary says that nothing was measured: no metrics to compute
        print(next_steps(result.output, result.predictions_path))
    return 0 if result.ok else 1


def next_steps(output: str, predictions: str) -> str:
    """The commands that take a finished run on, printed so that they run as printed (local ``--out`` folders:
    beside a local run, in the working folder for a remote one)."""
    import shlex

    from omnieval.core.commands import command_prefix

    cmd, q = command_prefix(), shlex.quote
    base = output.rstrip("/") if "://" not in output else f"./{output.rstrip('/').rsplit('/', 1)[-1]}"
    return "\n".join(["", "next:",
                      f"  {cmd} metrics {q(predictions)} --out {q(base + '/metrics')}",
                      f"  {cmd} stats {q(predictions)} --out {q(base + '/stats')}",
                      f"  {cmd} report {q(output)} --out {q(base + '/report')}"])


def _sweep(args: argparse.Namespace) -> int:
    from omnieval.sweep import load_sweep_config, run_sweep

    result = run_sweep(load_sweep_config(args.config), address=args.address)
    print(result.summary(), flush=True)
    return 0 if result.ok else 1


def _demo(args: argparse.Namespace) -> int:
    from omnieval.demo.run import run_demo

    return run_demo(args.out, with_hf=not args.no_hf, anchors=args.anchors, questions=args.questions,
                    seed=args.seed)


def _cluster(args: argparse.Namespace):
    from omnieval.stats.clusters import parse_cluster_option

    return parse_cluster_option(args.cluster)


def _metrics(args: argparse.Namespace) -> int:
    from omnieval.stats.command import metrics_command

    with _statistics_ray(args.predictions, args.address):
        return metrics_command(args.predictions, args.out, resamples=args.resamples, seed=args.seed,
                               permutations=args.permutations, cluster=_cluster(args), interval=args.interval,
                               address=args.address, random=args.random)


@contextlib.contextmanager
def _statistics_ray(paths: list[str], address: str | None):
    """The Ray that ``metrics`` spreads its protocols over (``stats.distributed``), where it does: the cluster at
    ``--address``, or a local one for an input of ``SCALE_THRESHOLD_ROWS`` or more; shut down after."""
    from omnieval.stats.distributed import use_ray

    if not use_ray(paths, address):
        yield
        return
    import ray

    from omnieval.run.ray_start import join_cluster, start_local

    if address:
        join_cluster(address)
    else:
        start_local(os.cpu_count() or 1)
    try:
        yield
    finally:
        ray.shutdown()


def _stats(args: argparse.Namespace) -> int:
    from omnieval.stats.significance import stats_command

    with _statistics_ray(args.predictions, args.address):
        return stats_command(args.predictions, args.out, permutations=args.permutations, seed=args.seed,
                             cluster=_cluster(args), address=args.address)


def _power(args: argparse.Namespace) -> int:
    from omnieval.stats.power import power_command

    # from numbers alone there is nothing to spread
    with _statistics_ray(args.predictions, args.address) if args.predictions else contextlib.nullcontext():
        return power_command(args.predictions, args.out, n_items=args.items, accuracy=args.accuracy,
                             correlation=args.correlation, instances=args.instances, icc=args.icc,
                             effect=args.effect, alpha=args.alpha, power=args.power, cluster=_cluster(args),
                             address=args.address)


def _compare(args: argparse.Namespace) -> int:
    from omnieval.stats.compare import compare_command

    return compare_command(args.candidate, args.baseline, margin=args.margin, alpha=args.alpha)


def _report(args: argparse.Namespace) -> int:
    from omnieval.report import report_command

    return report_command(args.inputs, args.out, resamples=args.resamples, permutations=args.permutations,
                          seed=args.seed, title=args.title, cluster=_cluster(args))


def _cards(args: argparse.Namespace) -> int:
    from omnieval.report.cards import cards_command

    return cards_command(model=args.model, benchmark=args.benchmark)


def _filter_rtc(args: argparse.Namespace) -> int:
    from omnieval.stats.contrastive_filter import filter_command

    return filter_command(args.predictions, args.items, args.out, models=args.models, prompt=args.prompt)


def _datasets_synth(args: argparse.Namespace) -> int:
    from omnieval.datasets.synthetic_registry import SynthOptions, make_synthetic_benchmark

    options = SynthOptions(anchors=args.anchors, questions=args.questions, question_jitter=args.question_jitter,
                           speech=args.speech, soundtrack=args.soundtrack, entities=args.entities, items=args.items)
    if args.soundtrack and args.protocol != "dissonance":
        raise SystemExit(f"omnieval datasets synth: --soundtrack applies to --protocol dissonance only, "
                         f"not {args.protocol}")
    path = make_synthetic_benchmark(args.protocol, args.out, seed=args.seed, options=options, overwrite=args.overwrite)
    print(f"wrote synthetic {args.protocol} benchmark to {path}")
    return 0


def _datasets_xmodbench(args: argparse.Namespace) -> int:
    from omnieval.datasets.xmodbench import convert_xmodbench

    report = convert_xmodbench(args.release, args.out, copy_media=args.copy, name=args.name,
                               media_root=args.media_root, overwrite=args.overwrite)
    print(report.summary())
    return 0


def _column_role(text: str) -> tuple[str, str]:
    """``ROLE=NAME`` of ``datasets mcq --column``: a known role and a source column name."""
    from dataclasses import fields

    from omnieval.datasets.mcq import Columns

    role, sep, name = text.partition("=")
    roles = [f.name for f in fields(Columns)]
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected ROLE=NAME, got {text!r}")
    if role not in roles:
        raise argparse.ArgumentTypeError(f"unknown column role {role!r}; known: {', '.join(roles)}")
    return role, name


def _datasets_mcq(args: argparse.Namespace) -> int:
    from omnieval.datasets.mcq import Columns, convert_mcq

    splits = [s.strip() for text in args.split or [] for s in text.split(",") if s.strip()] or None
    columns = Columns(**dict(args.column or []))
    converted = convert_mcq(args.source, args.out, name=args.name, fmt=args.format, splits=splits, columns=columns,
                            answer_format=args.answer_format, skip_missing_image=args.skip_missing_image,
                            limit=args.limit, overwrite=args.overwrite, media_root=args.media_root)
    for split, rows in converted.skipped_splits.items():
        print(f"omnieval: note: skipped split {split!r} ({rows} rows): none of its rows has an answer in column "
              f"{columns.answer!r}", file=sys.stderr)
    print(converted.summary())
    return 0


def _media_root(text: str) -> tuple[str | None, str]:
    """``[SOURCE=]DIR`` of ``datasets contra4 --media-root``: a folder of one source's files, or (no ``SOURCE=``)
    the folder holding one folder per source. A name before ``=`` with no ``/`` is a source (write ``./a=b`` for a
    folder named ``a=b``)."""
    source, sep, folder = text.partition("=")
    if sep and source and "/" not in source:
        if not folder:
            raise argparse.ArgumentTypeError(f"expected SOURCE=DIR, got {text!r}")
        return source, folder
    return None, text


def _datasets_check(args: argparse.Namespace) -> int:
    import json

    from omnieval.datasets.check import check_benchmark

    options = None
    if args.protocol_options:
        try:
            options = json.loads(args.protocol_options)
        except json.JSONDecodeError as exc:
            raise InputError(f"not valid JSON ({exc}): give an object, e.g. '{{\"donor_within\": [\"category\"]}}'",
                             field="--protocol-options") from None
        if not isinstance(options, dict):
            raise InputError(f"expected a JSON object of the run's protocol_options, got {args.protocol_options!r}",
                             field="--protocol-options")
    print(check_benchmark(args.folder, item=args.item, seed=args.seed, media_check=args.media_check,
                          protocol_options=options))
    return 0


def _datasets_contra4(args: argparse.Namespace) -> int:
    from omnieval.datasets.contra4 import convert_contra4, read_media_map

    roots = [folder for source, folder in args.media_root or [] if source is None]
    if len(roots) > 1:
        raise InputError(f"--media-root DIR given {len(roots)} times (one folder of source folders; give the others "
                         "as SOURCE=DIR)", field="--media-root")
    media_dirs: dict[str, list[str]] = {}
    for source, folder in args.media_root or []:
        if source is not None:
            media_dirs.setdefault(source, []).append(folder)
    media_map = read_media_map(args.media_map) if args.media_map else None
    report = convert_contra4(args.release, roots[0] if roots else None, args.out, name=args.name, split=args.split,
                             media_map=media_map, media_dirs=media_dirs, copy=args.copy, on_missing=args.on_missing,
                             overwrite=args.overwrite)
    print(report.summary())
    return 0


def _datasets_omni(args: argparse.Namespace) -> int:
    from omnieval.datasets.omni import (
        av_odyssey,
        daily_omni,
        jointavbench,
        mmar,
        mmau,
        mmau_pro,
        mmsu,
        omnibench,
        omnivideobench,
        video_holmes,
        videomme,
        videomme_v2,
        voicebench,
        worldsense,
    )

    common = {"name": args.name, "media_root": args.media_root, "copy": args.copy, "overwrite": args.overwrite}
    if args.release_name == "videomme":
        durations = [d.strip() for text in args.duration or [] for d in text.split(",") if d.strip()] or None
        converted = videomme.convert_videomme(args.release, args.out, durations=durations, **common)
    elif args.release_name == "mmau":
        converted = mmau.convert_mmau(args.release, args.out, version=args.version, **common)
    elif args.release_name == "jointavbench":
        converted = jointavbench.convert_jointavbench(args.release, args.out, option_order=args.option_order,
                                                      seed=args.seed, **common)
    else:
        convert = {"daily-omni": daily_omni.convert_daily_omni, "worldsense": worldsense.convert_worldsense,
                   "omnibench": omnibench.convert_omnibench, "mmar": mmar.convert_mmar,
                   "av-odyssey": av_odyssey.convert_av_odyssey,
                   "omnivideobench": omnivideobench.convert_omnivideobench,
                   "voicebench": voicebench.convert_voicebench, "mmsu": mmsu.convert_mmsu,
                   "mmau-pro": mmau_pro.convert_mmau_pro,
                   "videomme-v2": videomme_v2.convert_videomme_v2,
                   "video-holmes": video_holmes.convert_video_holmes}[args.release_name]
        converted = convert(args.release, args.out, **common)
    for split, n in converted.skipped_splits.items():
        print(f"omnieval: note: skipped split {split!r} ({n} questions): none of its questions has an answer",
              file=sys.stderr)
    for note in converted.notes:
        print(f"omnieval: note: {note}", file=sys.stderr)
    print(converted.summary())
    return 0


def _overwrite_flag(parser: argparse.ArgumentParser, converter: str) -> None:
    """``--overwrite`` of a converter: the one way to replace a folder, and only its own earlier output."""
    parser.add_argument("--overwrite", action="store_true",
                        help=f"--out holds a benchmark an earlier `datasets {converter}` wrote: replace it (any "
                             "other non-empty folder is refused, with or without this flag)")


DEV_INSTALL = ("install omnieval from a clone of its repository (`pip install -e '.[dev]'`): the wheel leaves the "
               "benches and tiny builds (omnieval.dev) out")


def _dev(module: str, command: str):
    """``omnieval.dev.<module>``, which only a source install has: where it is absent, one line (exit 2) saying
    what to install, not a traceback."""
    import importlib

    try:
        return importlib.import_module(f"omnieval.dev.{module}")
    except ModuleNotFoundError as exc:
        if exc.name not in ("omnieval.dev", f"omnieval.dev.{module}"):
            raise
        raise InputError(f"`omnieval {command}` needs the development tools: {DEV_INSTALL}") from None


def _models_tiny(args: argparse.Namespace) -> int:
    if args.arch == "qwen2.5-omni":  # the demo's, in every install
        from omnieval.demo.tiny_model import build_tiny_omni

        build = functools.partial(build_tiny_omni, args.out, seed=args.seed)
    else:
        build = functools.partial(_dev("tiny_models", "models tiny").build_tiny_model, args.arch, args.out,
                                  seed=args.seed)
    try:
        path = build()
    except ModuleNotFoundError as exc:  # a family's model code needs a package that is not installed (timm)
        print(f"omnieval: error: tiny {args.arch}: missing package {exc.name!r} (pip install {exc.name})",
              file=sys.stderr)
        return 2
    print(f"wrote tiny random-weight {args.arch} model to {path}")
    return 0


def _bench_pipeline(args: argparse.Namespace) -> int:
    return _dev("bench_pipeline", "bench pipeline").bench_pipeline(quick=args.quick, workdir=args.workdir)


def _bench_sweep(args: argparse.Namespace) -> int:
    return _dev("bench_sweep", "bench sweep").bench_sweep(quick=args.quick, workdir=args.workdir)


def _bench_engine(args: argparse.Namespace) -> int:
    bench_engine = _dev("bench_engine", "bench engine").bench_engine
    return bench_engine(model=args.model, anchors=args.anchors, questions=args.questions, device=args.device,
                        vllm_options=args.vllm_options, workdir=args.workdir, small_items=args.small_items,
                        repeats=args.repeats, quick=args.quick)


def _bench_gpu(args: argparse.Namespace) -> int:
    bench_gpu = _dev("bench_gpu", "bench gpu").bench_gpu
    return bench_gpu(size=args.size, device=args.device, dtype=args.dtype, benchmark=args.benchmark,
                     workdir=args.workdir, out=args.out, batch_size=args.batch_size, instances=args.instances,
                     peer_instances=args.peer_instances, max_batch=args.max_batch,
                     decode_seconds=args.decode_seconds, skip=tuple(args.skip or ()))


def _bench_decode(args: argparse.Namespace) -> int:
    bench_decode = _dev("bench_decode", "bench decode").bench_decode
    return bench_decode(quick=args.quick, long=args.long, workdir=args.workdir, only=args.only,
                        counts=args.counts.split(",") if args.counts else None)


def _bench_stats(args: argparse.Namespace) -> int:
    if args.scale:
        sizes = args.sizes or ([20_000] if args.quick else [1_000_000, 5_000_000, 20_000_000])
        return _dev("bench_scale", "bench stats --scale").bench_scale(sizes, workdir=args.workdir)
    return _dev("bench_stats", "bench stats").bench_stats(quick=args.quick)


def _bench_report(args: argparse.Namespace) -> int:
    if not args.scale:
        raise InputError("omnieval bench report has one measurement, at scale: pass --scale (with --quick for a "
                         "smoke test)", field="--scale")
    sizes = args.sizes or ([20_000] if args.quick else [1_000_000, 5_000_000])
    return _dev("bench_report", "bench report --scale").bench_report(sizes, workdir=args.workdir)


def _bench_coverage(args: argparse.Namespace) -> int:
    coverage = _dev("bench_coverage", "bench coverage")
    return coverage.bench_coverage(quick=args.quick, replicates=args.replicates, resamples=args.resamples,
                                   seed=args.seed, parts=tuple(args.part) if args.part else coverage.PARTS)


class _WholeNamesFormatter(argparse.HelpFormatter):
    """Help text wrapped between words only: a family name such as ``granite-speech`` is never cut at its hyphen."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        import textwrap

        return textwrap.wrap(self._whitespace_matcher.sub(" ", text).strip(), width, break_on_hyphens=False)


class _LazyChoices(Sequence):
    """Choices read from a module only when they are needed (the command's ``--help``, or parsing its option), so
    that building the parser imports no dev tooling. The option needs a ``metavar``: argparse lists the choices of
    an option without one as soon as the option is added."""

    def __init__(self, load: Callable[[], Sequence[str]]):
        self._load, self._items = load, None

    def _all(self) -> tuple[str, ...]:
        if self._items is None:
            self._items = tuple(self._load())
        return self._items

    def __getitem__(self, index):
        return self._all()[index]

    def __len__(self) -> int:
        return len(self._all())


def _tiny_archs() -> Sequence[str]:
    """Every tiny arch where the development tools are installed; the demo's alone where they are not."""
    try:
        from omnieval.dev.tiny_models import ARCHS
    except ModuleNotFoundError as exc:
        if exc.name != "omnieval.dev":
            raise
        return ("qwen2.5-omni",)
    return ARCHS


def build_parser() -> argparse.ArgumentParser:
    """The ``omnieval`` parser, one function per command group; what a handler calls is imported when it runs."""
    parser = _Parser(prog="omnieval", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"omnieval {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for add in (_add_run_commands, _add_demo, _add_statistics_commands, _add_report, _add_import, _add_parse,
                _add_cards, _add_filter,
                _add_datasets, _add_models, _add_bench):
        add(sub)
    return parser


def _add_run_commands(sub) -> None:
    """``run`` and ``sweep``: model work on Ray."""
    p = sub.add_parser("run", help="run one evaluation from a YAML config")
    p.add_argument("config", help="YAML run config: benchmark, output, models (format: README, 'A run config'; "
                                  "every field: docs/runs.md)")
    p.add_argument("--out", help="override the config's output directory")
    p.add_argument("--address", help=ADDRESS_HELP)
    p.add_argument("--overwrite", action="store_true",
                   help="the output holds predictions of another config: delete those (only the folders whose "
                        "config changed) and compute them again, instead of refusing")
    p.set_defaults(func=_run)

    p = sub.add_parser("sweep", help="run a sweep (models x protocols x prompts) from a YAML file, resumable")
    p.add_argument("config", help="YAML sweep file: output, protocols with benchmarks, models, prompts (format: "
                                  "the docstring of omnieval/sweep/__init__.py)")
    p.add_argument("--address", help=ADDRESS_HELP)
    p.set_defaults(func=_sweep)


def _add_demo(sub) -> None:
    p = sub.add_parser("demo", help="synthetic benchmark + local Ray + simulated and tiny transformers models")
    p.add_argument("--out", default="./omnieval-demo")
    p.add_argument("--no-hf", action="store_true", help="skip the tiny transformers model")
    p.add_argument("--anchors", type=int, default=4)
    p.add_argument("--questions", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_demo)


def _add_statistics_commands(sub) -> None:
    """``metrics``, ``stats`` and ``power``: statistics of predictions files."""
    p = sub.add_parser("metrics", help="metrics table and paired differences with bootstrap CIs from predictions "
                       "files")
    p.add_argument("predictions", nargs="+", help="predictions files (.parquet, .jsonl, .csv) of one or more runs")
    p.add_argument("--out", required=True, help="folder for metrics.csv/.parquet/.json and paired.csv/.parquet")
    p.add_argument("--resamples", type=_bounded(1), default=10_000,
                   help="bootstrap resamples (clustered by each protocol's unit, --cluster)")
    p.add_argument("--permutations", type=_bounded(1), default=10_000,
                   help="for the paired differences' permutation tests")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (recorded in the output)")
    p.add_argument("--interval", choices=("t", "percentile", "bca"), default="t",
                   help="how a 95%% interval is formed from the resamples (default t, with C - 1 degrees of freedom "
                        "over the C clusters; recorded in metrics.json; docs/reference.md)")
    p.add_argument("--address", default=None,
                   help="compute one protocol per Ray task on the cluster at this address (host:port, or auto); "
                        "inputs of 2 million Parquet rows or more use a local Ray without it (docs/runs.md, "
                        "Statistics at scale)")
    p.add_argument("--random", default=None, metavar="COLUMN",
                   help="a random factor: pool its levels (prompt: a model's prompt styles or paraphrases; judge, "
                        "a recipe setting recorded per row) and count their spread in the interval (se_COLUMN; "
                        "docs/reference.md, Random factors)")
    _cluster_flag(p)
    p.set_defaults(func=_metrics)

    p = sub.add_parser("stats", help="significance tests from predictions files")
    p.add_argument("predictions", nargs="+", help="predictions files (.parquet, .jsonl, .csv) of one or more runs")
    p.add_argument("--out", required=True, help="folder for tests.csv and tests.parquet")
    p.add_argument("--permutations", type=_bounded(1), default=10_000, help="sign-flip permutations per test")
    p.add_argument("--seed", type=int, default=0, help="permutation seed")
    p.add_argument("--address", default=None,
                   help="compute one protocol per Ray task on the cluster at this address (host:port, or auto); "
                        "inputs of 2 million Parquet rows or more use a local Ray without it (docs/runs.md, "
                        "Statistics at scale)")
    _cluster_flag(p)
    p.set_defaults(func=_stats)

    p = sub.add_parser("power", help="minimum detectable paired difference (and items needed for an effect) from "
                       "predictions files or from numbers")
    p.add_argument("predictions", nargs="*", help="predictions files (or none, with --items and --accuracy)")
    p.add_argument("--out", default=None, help="also write power.csv and power.parquet here")
    p.add_argument("--items", type=int, default=None, help="without predictions: number of items")
    p.add_argument("--accuracy", type=float, default=None, help="without predictions: base accuracy")
    p.add_argument("--correlation", type=float, default=None,
                   help="per-item correlation of two models (default: observed between models, or 0)")
    p.add_argument("--instances", type=int, default=1, help="without predictions: instances per item")
    p.add_argument("--icc", type=float, default=0.0, help="without predictions: intra-item correlation")
    p.add_argument("--effect", type=float, default=None, help="also the items needed to detect this difference")
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--power", type=float, default=0.80)
    p.add_argument("--address", default=None,
                   help="compute one split or protocol per Ray task on the cluster at this address (host:port, or "
                        "auto); inputs of 2 million Parquet rows or more use a local Ray without it (docs/runs.md, "
                        "Statistics at scale)")
    _cluster_flag(p)
    p.set_defaults(func=_power)

    p = sub.add_parser("compare", help="non-inferiority gate: exit 1 unless the candidate is shown no worse than "
                       "the baseline by more than --margin on every benchmark (exit 2: bad input)")
    p.add_argument("candidate", help="the candidate's predictions file, run folder or sweep folder (one model)")
    p.add_argument("baseline", help="the baseline's predictions file, run folder or sweep folder (one model)")
    p.add_argument("--margin", type=float, required=True,
                   help="the accuracy the candidate may lose (e.g. 0.02): H0 candidate - baseline <= -margin")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="family-wise error across benchmarks (Holm); docs/reference.md, Non-inferiority gate")
    p.set_defaults(func=_compare)


def _add_report(sub) -> None:
    p = sub.add_parser("report", help="report.html (self-contained) and report.md from runs or metrics folders")
    p.add_argument("inputs", nargs="+", help="run folders, metrics folders, predictions or metrics files")
    p.add_argument("--out", required=True)
    p.add_argument("--resamples", type=int, default=None,
                   help="for what the report computes (default 10000; a sweep's stored pooled result is read with "
                   "the sweep's own unless this is given)")
    p.add_argument("--permutations", type=int, default=None,
                   help="for tests computed from predictions (default 10000; as --resamples for a stored result)")
    p.add_argument("--seed", type=int, default=None, help="default 0 (as --resamples for a stored result)")
    p.add_argument("--title", default=None)
    _cluster_flag(p)
    p.set_defaults(func=_report)


def _add_import(sub) -> None:
    p = sub.add_parser("import", help="other harnesses' per-sample outputs (lmms-eval, lm-eval, ...) as "
                       "predictions.parquet, so metrics, stats, power and report read them (docs/import.md)")
    p.add_argument("format", help="the tool that wrote the files: lmms-eval, lm-eval, ...")
    p.add_argument("paths", nargs="+", help="its files, or folders searched for them")
    p.add_argument("--out", required=True, help="folder for predictions.parquet, import.json and "
                                                "unpaired_items.csv (new, empty, or an earlier import's)")
    p.add_argument("--model", default=None, help="the model's name instead of the one the files record")
    p.add_argument("--cluster-field", default=None, metavar="FIELD",
                   help="the logged field naming the resampling unit (a video id); default: the format's own")
    p.add_argument("--filter", default=None, help="the answer filter to keep where a task was scored under several "
                                                  "(lm-eval's strict-match / flexible-extract)")
    p.set_defaults(func=_import)


def _import(args: argparse.Namespace) -> int:
    from omnieval.imports.command import import_command

    return import_command(args.format, args.paths, args.out, model=args.model, cluster_field=args.cluster_field,
                          filter=args.filter)


def _add_parse(sub) -> None:
    p = sub.add_parser("parse", help="score answer texts by a benchmark's released rule (or omnieval's own): rows "
                       "{id, options, answer, text} in, the same with choice, correct, source out (docs/scoring.md)")
    p.add_argument("input", help="JSON Lines: id, options (list, labelled A, B, ..., or object label -> text), "
                                 "answer (the gold label), text (the answer; null for none)")
    p.add_argument("--scorer", required=True, help="the benchmark's scorer: mmau, mmar, omnibench, av-odyssey, ... "
                                                   "(docs/scoring.md lists them)")
    p.add_argument("--out", required=True, help="JSON Lines: the input rows with choice, correct and source")
    p.add_argument("--robust", action="store_true",
                   help="score by omnieval's own rule instead of the benchmark's (the other verdict)")
    p.set_defaults(func=_parse)


def _parse(args: argparse.Namespace) -> int:
    from omnieval.scoring.command import parse_command

    return parse_command(args.scorer, args.input, args.out, robust=args.robust)


def _add_cards(sub) -> None:
    p = sub.add_parser("cards", help="the published numbers shipped with omnieval (model cards, technical reports)")
    p.add_argument("--model", default=None, help="one model's rows (its published name, case aside)")
    p.add_argument("--benchmark", default=None, help="one benchmark's rows (a converter name: mmau, videomme, ...)")
    p.set_defaults(func=_cards)


def _cluster_flag(p) -> None:
    p.add_argument("--cluster", action="append", default=None, metavar="[PROTOCOL=]COLUMN",
                   help="the resampling unit of intervals, paired differences, tests and power: item (the question; "
                        "also group), anchor, or any column of the predictions holding whole questions; "
                        "PROTOCOL=COLUMN for one protocol (repeatable; default: each protocol's own, "
                        "docs/reference.md)")


def _add_filter(sub) -> None:
    p = sub.add_parser("filter", help="dataset filters")
    fsub = p.add_subparsers(dest="filter_command", required=True)
    s = fsub.add_parser("rtc", help="contrastive mixture-of-models round-trip-consistency filter (MF/UF/PMF/PUF)")
    s.add_argument("predictions", nargs="+", help="every ensemble model on every order of every candidate item")
    s.add_argument("--items", required=True, help="the candidate items: a benchmark folder or items.jsonl")
    s.add_argument("--out", required=True)
    s.add_argument("--models", nargs="+", default=None, help="the ensemble (default: every model found)")
    s.add_argument("--prompt", default=None, help="prompt style to use when the predictions hold several")
    s.set_defaults(func=_filter_rtc)


def _add_datasets(sub) -> None:
    """``datasets``: a synthetic benchmark, the converters, the check."""
    p = sub.add_parser("datasets", help="benchmark tools")
    dsub = p.add_subparsers(dest="datasets_command", required=True)
    _add_datasets_synth(dsub)
    _add_datasets_xmodbench(dsub)
    _add_datasets_mcq(dsub)
    _add_datasets_contra4(dsub)
    _add_datasets_omni(dsub)
    _add_datasets_check(dsub)


def _add_datasets_synth(sub) -> None:
    s = sub.add_parser("synth", help="write a built-in synthetic benchmark (real media files)")
    s.add_argument("--out", required=True, help="the benchmark folder to write (new or empty)")
    s.add_argument("--protocol", default="dissonance", choices=SYNTHETIC_PROTOCOLS, metavar="PROTOCOL",
                   help="the protocol whose synthetic benchmark to write (default: %(default)s; any registered "
                        "protocol that has one: a wrong name lists them)")
    s.add_argument("--entities", type=_colours(4), default=6,
                   help="crossmodal: creatures (items = 2 x entities); contrastive: creatures (items = 6 x entities); "
                        "4..30")
    s.add_argument("--items", type=_bounded(8), default=48, help="spectrum: items (at least 8)")
    s.add_argument("--anchors", type=_colours(2), default=4, help="anchors per split, 2..30 (paper scale: 27)")
    s.add_argument("--questions", type=_questions, default=2, help="questions per anchor, 1..12 (paper scale: ~9.4)")
    s.add_argument("--question-jitter", action="store_true",
                   help="vary the questions per anchor around --questions (paper scale: 10 with jitter ~ 9.6)")
    s.add_argument("--speech", action="store_true", help="add the creature's spoken name (needs espeak-ng)")
    s.add_argument("--soundtrack", action="store_true",
                   help="dissonance: write each anchor as one video file with its call as the soundtrack (the "
                        "item's audio is the video's own audio stream)")
    s.add_argument("--seed", type=int, default=0)
    _overwrite_flag(s, "synth")
    s.set_defaults(func=_datasets_synth)


def _add_datasets_xmodbench(sub) -> None:
    s = sub.add_parser("xmodbench", help="convert an XModBench release (JSON per subtask and direction)")
    s.add_argument("release", help="the release folder (JSON files and media)")
    s.add_argument("--out", required=True, help="the benchmark folder to write (new or empty)")
    s.add_argument("--copy", action="store_true", help="copy media instead of hard-linking them")
    s.add_argument("--name", default="xmodbench")
    s.add_argument("--media-root", default=None,
                   help="a folder the release's media may also be read from (default: the release folder only)")
    _overwrite_flag(s, "xmodbench")
    s.set_defaults(func=_datasets_xmodbench)


def _add_datasets_mcq(sub) -> None:
    s = sub.add_parser("mcq", help="convert a multiple-choice VQA benchmark (Parquet, datasets folder, VLMEvalKit "
                        "TSV) into a spectrum benchmark")
    s.add_argument("source", help="a .parquet file or folder, a datasets.save_to_disk folder, or a .tsv file")
    s.add_argument("--out", required=True, help="the benchmark folder to write (new or empty)")
    s.add_argument("--name", default=None, help="benchmark name (default: the source's name)")
    s.add_argument("--format", default="auto", choices=["auto", "parquet", "hf-disk", "tsv"],
                   help="source format (auto: from the file suffix or the folder's contents)")
    s.add_argument("--split", action="append", metavar="NAME",
                   help="convert only this split (repeat, or NAME,NAME; a row's split: its shard name, a split "
                        "column, or 'all'); default: every split with answers, each answerless one skipped with a "
                        "note")
    s.add_argument("--answer-format", default="auto", choices=["auto", "label", "index", "text"],
                   help="how the answer column names the correct option (auto: label, 0-based index or text)")
    s.add_argument("--column", action="append", metavar="ROLE=NAME", type=_column_role,
                   help="source column of a role (id, question, hint, options, answer, image, category, task, split); "
                        "repeat for several roles")
    s.add_argument("--skip-missing-image", action="store_true", help="drop rows without an image")
    s.add_argument("--limit", type=_bounded(1), default=None, help="convert only the first rows")
    s.add_argument("--media-root", default=None,
                   help="a folder image paths may also point into (default: the source's folder only)")
    _overwrite_flag(s, "mcq")
    s.set_defaults(func=_datasets_mcq)


def _add_datasets_contra4(sub) -> None:
    s = sub.add_parser("contra4", help="convert a released Contra4 JSON file into a contrastive benchmark")
    s.add_argument("release", help="the release JSON file (data/final_data/test.json or val.json)")
    s.add_argument("--media-root", action="append", metavar="[SOURCE=]DIR", type=_media_root,
                   help="SOURCE=DIR: a folder of that source's files, as the release's baselines read them "
                        "(coco_val=COCO_DIR, pointllm=OBJAVERSE_DIR, ...; repeat per source, or for several "
                        "folders of one source); DIR: a folder with one folder per source. Names tried per source: "
                        "omnieval/datasets/contra4_media.py (default: the release file's folder)")
    s.add_argument("--media-map", default=None, metavar="JSON",
                   help="files by id: {source: {id: file}} or the release's data2path.json (its directories are "
                        "ignored; files are looked up in the source's folders)")
    s.add_argument("--out", required=True, help="the benchmark folder to write (new or empty)")
    s.add_argument("--name", default="contra4")
    s.add_argument("--split", default=None)
    s.add_argument("--copy", action="store_true", help="copy media instead of hard-linking them")
    s.add_argument("--on-missing", default="error", choices=["error", "skip"],
                   help="an entry whose media file is missing: stop with an error, or skip it and list it")
    _overwrite_flag(s, "contra4")
    s.set_defaults(func=_datasets_contra4)


OMNI_RELEASES: dict[str, tuple[str, str]] = {
    "daily-omni": ("Daily-Omni: qa.json beside Videos/<id>/<id>_video.mp4 and <id>_audio.wav",
                   "a folder holding Videos/"),
    "worldsense": ("WorldSense: worldsense_qa.json beside worldsense_videos_*.zip and worldsense_subtitles.zip, or "
                   "those unpacked to videos/<id>.mp4 (the audio is each mp4's soundtrack) and subtitles/<id>.srt",
                   "a folder holding videos/ and subtitles/, or the archives"),
    "videomme": ("Video-MME with audio: videomme/test-*.parquet beside videos_chunked_*.zip and subtitle.zip, or "
                 "those unpacked to data/<videoID>.mp4 (their soundtracks) and subtitle/<videoID>.srt",
                 "a folder holding data/ and subtitle/, or the archives"),
    "omnibench": ("OmniBench: dataset/*.jsonl beside mm_data/audio/ and mm_data/image/ (GitHub), or data/*.parquet "
                  "with embedded media (Hugging Face)", "a folder holding mm_data/"),
    "mmau": ("MMAU: mmau-test-mini.json beside test-mini-audios/ (and mmau-test.json beside test-audios/, its answers "
             "withheld: skipped), or lmms-eval's data/test_mini-*.parquet; the version is told and recorded",
             "a folder holding test-mini-audios/"),
    "mmar": ("MMAR: MMAR-meta.jsonl (or the first release's MMAR-meta.json) beside audio/",
             "a folder holding audio/"),
    "av-odyssey": ("AV-Odyssey: the authors' av_odyssey_part<n>.parquet (media embedded), or lmms-eval's copy "
                   "av_odyssey.parquet beside the media its rows name; one benchmark, items with several pictures or "
                   "sounds kept", "a folder holding the media folders of lmms-eval's copy"),
    "omnivideobench": ("OmniVideoBench: data.json beside videos/<video>.mp4 (their soundtracks); each item carries "
                       "its evidence label", "a folder holding videos/"),
    "voicebench": ("VoiceBench: <subset>/<split>-*.parquet (recordings embedded); its multiple-choice subsets "
                   "openbookqa and mmsu, the options read out of each prompt; its open subsets as open items "
                   "(modes: [open]): sd-qa and bbh judged against their reference (bbh also scored by its answer "
                   "phrases), advbench scored by its refusal list, alpacaeval, commoneval and wildvoice rated 1-5 by "
                   "the judges",
                   "a folder of media (not needed: the recordings are embedded)"),
    "mmsu": ("MMSU: data/*.parquet (clips embedded, or named under audio/); the answer's text mapped to its choice",
             "a folder holding audio/"),
    "mmau-pro": ("MMAU-Pro: test.parquet beside data.zip, or that unpacked to data/<uuid>.wav; closed-form questions "
                 "with the answer's text mapped to its choice, open ones as open items (modes: [open]) with their "
                 "reference for the judges, instruction-following ones skipped and listed",
                 "a folder holding data/ or data.zip"),
    "jointavbench": ("JointAVBench: jointavbench.json; the release ships no media: each question's clip, cut by the "
                     "user, named <qid>.mp4 (its soundtrack the audio), a missing one skipped and listed",
                     "the folder holding the <qid>.mp4 clips"),
    "videomme-v2": ("Video-MME-v2: test.parquet (groups of four questions per clip) beside videos/*.zip and "
                    "subtitle.zip, or those unpacked to videos/<video_id>.mp4 (their soundtracks) and "
                    "subtitle/<video_id>.jsonl", "a folder holding videos/ and subtitle/, or the archives"),
    "video-holmes": ("Video-Holmes: test_Video-Holmes.json beside videos.zip, or that unpacked to "
                     "videos/<video ID>.mp4 (their soundtracks); each item carries its question type",
                     "a folder holding videos/ or videos.zip"),
}
"""The omni-release converters (``omnieval.datasets.omni``): what the release folder holds, what --media-root
may hold."""


def _add_datasets_omni(sub) -> None:
    for release, (reads, media_root) in OMNI_RELEASES.items():
        what = "a spectrum benchmark"
        s = sub.add_parser(release, help=f"convert {reads.split(':')[0]} into {what}",
                           description=f"Convert a release folder into {what}. {reads}. "
                                       "Every field read: docs/benchmarks.md.")
        s.add_argument("release", help="the release folder, laid out as the release ships it")
        s.add_argument("--out", required=True, help="the folder to write (new or empty): the benchmark folder")
        s.add_argument("--name", default=release, help="benchmark name (default: %(default)s)")
        s.add_argument("--media-root", default=None,
                       help=f"{media_root}, if the media live outside the release folder (media are read only under "
                            "the release folder and this one)")
        s.add_argument("--copy", action="store_true", help="copy media instead of hard-linking them")
        if release == "videomme":
            s.add_argument("--duration", action="append", metavar="NAME",
                           help="keep only the questions on videos of this duration: short, medium, long (repeat, "
                                "or NAME,NAME); default: all")
        if release == "jointavbench":
            s.add_argument("--option-order", choices=("release", "seeded"), default="release",
                           help="the options in the release's order, or permuted per question by --seed (the "
                                "release's script shuffles them unseeded on every run; default: %(default)s)")
            s.add_argument("--seed", type=int, default=0, help="the seed of --option-order seeded (default: 0)")
        if release == "mmau":
            from omnieval.datasets.omni import MMAU_VERSIONS

            s.add_argument("--version", choices=MMAU_VERSIONS, default=None,
                           help="the release version the files are; needed only where their answers do not tell it, "
                                "and otherwise checked against them (default: from the files)")
        _overwrite_flag(s, release)
        s.set_defaults(func=_datasets_omni, release_name=release)


def _add_datasets_check(sub) -> None:
    s = sub.add_parser("check", help="validate a benchmark folder as a run would, and show one item's instances "
                                      "(the media each condition shows, and where a shuffle took them from)")
    s.add_argument("folder", help="the benchmark folder (benchmark.json, items.jsonl, media)")
    s.add_argument("--item", default=None, help="the item to show (default: the first by id)")
    s.add_argument("--seed", type=int, default=0, help="the run's seed (shuffles and option orders follow it)")
    s.add_argument("--media-check", default="probe", choices=["probe", "exists", "off"],
                   help="open every media file (probe), check it exists, or skip the check")
    s.add_argument("--protocol-options", default=None, metavar="JSON",
                   help="the run's protocol_options as JSON, e.g. '{\"donor_within\": [\"category\"]}'")
    s.set_defaults(func=_datasets_check)


def _add_models(sub) -> None:
    p = sub.add_parser("models", help="model tools")
    msub = p.add_subparsers(dest="models_command", required=True)
    s = msub.add_parser("tiny", help="write a tiny random-weight model and its tokenizer (no download)",
                        formatter_class=_WholeNamesFormatter)
    s.add_argument("--arch", required=True, choices=_LazyChoices(_tiny_archs), metavar="ARCH",
                   help="the model family: %(choices)s")
    s.add_argument("--out", required=True)
    s.add_argument("--seed", type=int, default=0)
    s.set_defaults(func=_models_tiny)


def _add_bench(sub) -> None:
    """``bench``: measurements that print a table (dev tooling, imported by the handlers)."""
    p = sub.add_parser("bench", help="benchmarks that print a table with ratios against a baseline")
    bsub = p.add_subparsers(dest="bench_command", required=True)
    s = bsub.add_parser("pipeline", help="fixed start-up per run, marginal instances/s vs the bare engine, driver "
                        "peak memory at ~1k and ~16k instances, model loads in a sweep")
    s.add_argument("--quick", action="store_true", help="smaller sizes (smoke test)")
    s.add_argument("--workdir", default=None, help="keep the benchmarks here and reuse them next time")
    s.set_defaults(func=_bench_pipeline)
    _add_bench_engine(bsub)
    _add_bench_gpu(bsub)
    s = bsub.add_parser("decode", help="sampling 8-128 frames of 1- and 10-minute clips: the seeking decoder vs a full "
                        "decode, ffmpeg's own -ss seeking and torchcodec, seconds, ms per frame, peak memory")
    s.add_argument("--quick", action="store_true", help="clips of seconds at 160x90 (smoke test)")
    s.add_argument("--long", action="store_true", help="1-30 minutes, 720p and 1080p, H.264, HEVC, VP9, MP4, MKV, "
                   "WebM, also at 2 fps up to 768 frames (long to run)")
    s.add_argument("--only", action="append", default=None, metavar="CLIP",
                   help="measure this clip only, by its name in the table (repeatable)")
    s.add_argument("--counts", default=None, help="comma-separated frame counts to measure (e.g. 8,32,2fps)")
    s.add_argument("--workdir", default=None, help="keep the generated clips here and reuse them next time")
    s.set_defaults(func=_bench_decode)
    s = bsub.add_parser("stats", help="metrics at paper scale vs scipy.stats.bootstrap")
    s.add_argument("--quick", action="store_true", help="smaller sizes (smoke test)")
    s.add_argument("--scale", action="store_true",
                   help="omnieval metrics over millions of rows: one protocol per Ray task on 1 and 2 simulated "
                        "nodes against the single process (seconds, peak memory of the driver and largest worker)")
    s.add_argument("--sizes", type=_bounded(1), nargs="+", default=None,
                   help="with --scale: input rows (default 1000000 5000000 20000000; --quick 20000)")
    s.add_argument("--workdir", default=None, help="with --scale: keep the Parquet inputs and outputs here")
    s.set_defaults(func=_bench_stats)
    s = bsub.add_parser("report", help="what omnieval report holds of a sweep's predictions: per-run summaries "
                        "against the rows read whole (seconds, peak memory)")
    s.add_argument("--quick", action="store_true", help="20,000 rows (smoke test)")
    s.add_argument("--scale", action="store_true", help="a sweep-like folder of millions of rows (required: the "
                   "bench's one measurement)")
    s.add_argument("--sizes", type=_bounded(1), nargs="+", default=None,
                   help="input rows (default 1000000 5000000; --quick 20000)")
    s.add_argument("--workdir", default=None, help="keep the sweep-like folders here and reuse them next time")
    s.set_defaults(func=_bench_report)
    s = bsub.add_parser("sweep", help="models side by side vs one at a time on a local multi-node Ray with logical "
                        "GPUs: wall time, GPU occupancy, decodes against distinct media")
    s.add_argument("--quick", action="store_true", help="3 small models on 4 GPUs (smoke test)")
    s.add_argument("--workdir", default=None, help="keep the benchmark and outputs here")
    s.set_defaults(func=_bench_sweep)
    s = bsub.add_parser("coverage", help="coverage of each interval method against a known truth on simulated "
                        "predictions at the seed papers' sizes, with and without cluster effects")
    s.add_argument("--quick", action="store_true", help="smaller sizes and 12 replicates (smoke test)")
    s.add_argument("--replicates", type=_bounded(1), default=None, help="simulated studies per design (1,000 for "
                   "dissonance, 400 for crossmodal)")
    s.add_argument("--resamples", type=_bounded(1), default=None, help="bootstrap resamples per study (2000)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--part", action="append", choices=("main", "few-anchors", "few-items", "ranks", "samples"),
                   default=None,
                   help="only these tables (repeatable; default: all): main (27 anchors, XModBench), few-anchors, "
                        "few-items, ranks (30 models: rank intervals, groups, the compare gate), samples (k repeated "
                        "samples per question)")
    s.set_defaults(func=_bench_coverage)


def _add_bench_engine(sub) -> None:
    s = sub.add_parser("engine", help="steady-state vLLM pipeline vs bare vLLM vs a transformers loop (needs vllm)")
    s.add_argument("--model", default=None, help="model folder (default: a tiny random-weight Qwen2)")
    s.add_argument("--quick", action="store_true", help="smaller sizes, 2 repeats (smoke test)")
    s.add_argument("--anchors", type=int, default=None,
                   help="anchors per split (2 splits x 8 conditions per item; default 30, --quick 8)")
    s.add_argument("--questions", type=int, default=None, help="questions per anchor (default 12, --quick 6)")
    s.add_argument("--small-items", type=int, default=None,
                   help="items of the small run; the marginal rate between it and the full run is the steady state "
                        "(default 16, --quick 4)")
    s.add_argument("--repeats", type=int, default=None,
                   help="timed runs of each measurement, the best kept (default 3, --quick 2; at least 2)")
    s.add_argument("--device", default="cpu", help="cpu | cuda")
    s.add_argument("--vllm-options", default=None, help="JSON of extra vllm engine options")
    s.add_argument("--workdir", default=None)
    s.set_defaults(func=_bench_engine)


def _add_bench_gpu(sub) -> None:
    s = sub.add_parser("gpu", help="hf engine on a real-size random-weight Qwen2.5-Omni thinker: batched vs batch-1 "
                        "instances/s, GPU memory, largest batch, decode cores per GPU (docs/gpu.md)")
    s.add_argument("--size", choices=("7b", "tiny"), default="7b",
                   help="7b: the released architecture (a GPU); tiny: the test model (runs anywhere)")
    s.add_argument("--device", default="cuda", help="cuda | cuda:N | cpu")
    s.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    s.add_argument("--benchmark", default=None,
                   help="a dissonance benchmark folder (default: a synthetic one written here; needs ffmpeg)")
    s.add_argument("--batch-size", type=int, default=None, help="the engine's batch size (default 32)")
    s.add_argument("--instances", type=int, default=None, help="instances scored batched (default 128)")
    s.add_argument("--peer-instances", type=int, default=None, help="instances scored one at a time (default 32)")
    s.add_argument("--max-batch", type=int, default=None, help="largest batch tried for the memory limit (512)")
    s.add_argument("--decode-seconds", type=float, default=None, help="seconds of decoding per measurement (20)")
    s.add_argument("--skip", action="append", choices=("throughput", "profile", "max_batch", "decode"),
                   help="leave a measurement out (repeatable)")
    s.add_argument("--out", default=None, help="also write the figures as JSON here")
    s.add_argument("--workdir", default=None)
    s.set_defaults(func=_bench_gpu)


STOPPABLE = ("run", "sweep")
"""Commands that end with one line and the resume command on Ctrl-C or SIGTERM (``omnieval.run.stopping``)."""
UNDONE_ON_STOP = ("datasets",)
"""Commands that write a folder only when complete (``omnieval.datasets.output_folder``): on Ctrl-C or SIGTERM the
half-built folder is removed on the way out and one line says so."""


def main(argv: list[str] | None = None) -> int:
    import signal

    from omnieval.run.ray_start import RayStartFailed
    from omnieval.run.stopping import Terminated, exit_status, stoppable, stopped_line, undone_line

    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    try:
        if args.command not in STOPPABLE + UNDONE_ON_STOP:
            return int(args.func(args) or 0)
        with stoppable():
            return int(args.func(args) or 0)
    except InputError as exc:
        print(f"omnieval: error: {exc}", file=sys.stderr)
        return 2
    except RayStartFailed as exc:
        print(f"omnieval: error: {exc}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, Terminated) as exc:
        if args.command not in STOPPABLE + UNDONE_ON_STOP:
            raise
        signum = exc.signum if isinstance(exc, Terminated) else signal.SIGINT
        line = stopped_line(signum, args.command, argv) if args.command in STOPPABLE else undone_line(signum, argv)
        print(f"\n{line}", file=sys.stderr, flush=True)
        return exit_status(signum)


if __name__ == "__main__":
    sys.exit(main())
