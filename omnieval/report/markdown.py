"""``report.md``: the same sections as the HTML report in GitHub-flavoured Markdown; every number is followed by its
95% interval in brackets, plots are PNG files in ``figures/`` beside it."""

from __future__ import annotations

from omnieval.report.blocks import Figure, Note, Report, Section, Table

FIGURES = "figures"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


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
    parts = [f"{'#' * level} {section.title}"]
    if section.intro:
        parts.append(section.intro)
    for block in section.blocks:
        if isinstance(block, Table):
            parts.append(table_md(block))
        elif isinstance(block, Figure):
            parts.append(f"![{_escape(block.caption)}]({FIGURES}/{block.name}.png)")
        elif isinstance(block, Note):
            parts.append(block.text)
    for sub in section.subsections:
        parts.append(section_md(sub, min(level + 1, 4)))
    return "\n\n".join(parts)


def render(report: Report) -> str:
    parts = [f"# {report.title}", *report.intro]
    parts += [section_md(s) for s in report.sections]
    parts.append(f"_omnieval report · {report.generated}_")
    return "\n\n".join(parts) + "\n"


def figures(report: Report) -> list[Figure]:
    """Every figure of the report, to be written as ``figures/<name>.png``."""
    out = []
    for section in report.sections:
        out.extend(b for b in section.walk() if isinstance(b, Figure))
    return out
