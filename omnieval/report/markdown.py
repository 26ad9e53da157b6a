"""``report.md``: the same sections as the HTML report in GitHub-flavoured Markdown; every number is followed by its
95% interval in brackets, plots are PNG files in ``figures/`` beside it.

Every text that comes from the data (model, run, anchor and category names, titles) is written as text: Markdown
renders inline HTML, so a model named ``<script>...`` would otherwise become markup in any viewer that does not
sanitise. ``_text`` turns ``<`` before a tag-like character into ``&lt;`` and ``&`` before an entity into ``&amp;``
(exactly what CommonMark would read as HTML); ``V<->T`` and ``A->T`` stay as they are."""

from __future__ import annotations

import re

from omnieval.report.blocks import Figure, Note, Report, Section, Table

FIGURES = "figures"
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
_ENTITY = re.compile(r"&(?=#?[A-Za-z0-9]+;)")


def _text(text: str) -> str:
    """Text that Markdown shows as written, inline HTML included (see the module doc)."""
    return _TAG_START.sub("&lt;", _ENTITY.sub("&amp;", text))


def _escape(text: str) -> str:
    """Text for a table cell: ``_text``, with pipes and backslashes escaped and line breaks flattened."""
    return _text(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def table_md(table: Table) -> str:
    header = list(table.header)
    if table.groups:
        labels = [label for label, span in table.groups for _ in range(span)]
        header = [f"{g} · {h}" if g else h for g, h in zip(labels, header)]
    lines = [f"**{_escape(table.caption)}**", ""]
    lines.append("| " + " | ".join(_escape(h) for h in header) + " |")
    numeric = [any(isinstance(row[i].sort, float) for row in table.rows) for i in range(len(header))]
    lines.append("|" + "|".join("---:" if n else "---" for n in numeric) + "|")
    for row in table.rows:
        lines.append("| " + " | ".join(_escape(f"**{c.plain}**" if c.strong else c.plain) for c in row) + " |")
    if table.note:
        lines += ["", f"_{_escape(table.note)}_"]
    return "\n".join(lines)


def section_md(section: Section, level: int = 2) -> str:
    parts = [f"{'#' * level} {_text(section.title)}"]
    if section.intro:
        parts.append(_text(section.intro))
    for block in section.blocks:
        if isinstance(block, Table):
            parts.append(table_md(block))
        elif isinstance(block, Figure):
            parts.append(f"![{_escape(block.caption)}]({FIGURES}/{block.name}.png)")
        elif isinstance(block, Note):
            parts.append(_text(block.text))
    for sub in section.subsections:
        parts.append(section_md(sub, min(level + 1, 4)))
    return "\n\n".join(parts)


def render(report: Report) -> str:
    parts = [f"# {_text(report.title)}", *map(_text, report.intro)]
    parts += [section_md(s) for s in report.sections]
    parts.append(f"_omnieval report · {report.generated}_")
    return "\n\n".join(parts) + "\n"


def figures(report: Report) -> list[Figure]:
    """Every figure of the report, to be written as ``figures/<name>.png``."""
    out = []
    for section in report.sections:
        out.extend(b for b in section.walk() if isinstance(b, Figure))
    return out
