"""``report.html``: one self-contained file (inline CSS, plots as embedded PNG, a few lines of inline JS); it opens
without a network and prints legibly.

Tables sort by any column on a click on its header (numbers first from the highest, text from A); every number
shows its 95% interval beneath it and, on hover, its exact value, interval and n. A table wider than the page
scrolls sideways under a visible scrollbar, and a line above it says how many columns are out of view. Numeric cells
carry their metrics-table row in ``data-*`` attributes. When the page has loaded, the script marks ``<body>`` with
``data-ready`` and the number of decoded images in ``data-images-loaded``.
"""

from __future__ import annotations

import base64
from html import escape

from omnieval.report.blocks import Cell, Figure, Note, Report, Section, Table

CSS = """
:root { --ink: #1a1a1a; --muted: #5a5a5a; --rule: #c9c9c9; --band: #f4f4f2; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--ink); background: #fff; font: 14px/1.45 system-ui, -apple-system, "Segoe UI",
       "DejaVu Sans", sans-serif; }
header, main, nav { max-width: 1240px; margin: 0 auto; padding: 0 20px; }
header { padding-top: 18px; }
h1 { font-size: 1.6em; margin: 0 0 4px; }
h2 { font-size: 1.3em; margin: 30px 0 6px; padding-bottom: 3px; border-bottom: 2px solid var(--ink); }
h3 { font-size: 1.08em; margin: 20px 0 6px; }
p.meta, p.intro, p.note { color: var(--muted); margin: 4px 0 8px; }
p.note { font-size: .9em; }
nav.toc { margin-top: 8px; font-size: .95em; display: flex; flex-wrap: wrap; gap: 2px 14px; }
nav.toc a { color: #0b4f8a; text-decoration: none; white-space: nowrap; }
nav.toc a:hover { text-decoration: underline; }
.table-wrap { overflow-x: auto; margin: 6px 0 16px; }
.table-wrap::-webkit-scrollbar { height: 11px; }
.table-wrap::-webkit-scrollbar-track { background: #ececea; }
.table-wrap::-webkit-scrollbar-thumb { background: #8d8d8d; border-radius: 6px; }
@supports not selector(::-webkit-scrollbar) { .table-wrap { scrollbar-color: #8d8d8d #ececea; } }
.table-wrap.more-right { border-right: 3px solid #0b4f8a; }
p.scroll-cue { margin: 6px 0 -2px; text-align: right; font-size: .88em; font-weight: 600; color: #0b4f8a; }
table { border-collapse: collapse; font-size: .9em; font-variant-numeric: tabular-nums; }
caption { caption-side: top; text-align: left; font-weight: 600; padding: 2px 0 6px; }
th, td { padding: 3px 5px; border-bottom: 1px solid var(--rule); vertical-align: top; }
thead th { background: var(--band); border-bottom: 1.5px solid var(--ink); text-align: center; white-space: nowrap; }
thead tr.groups th { border-bottom: 1px solid var(--rule); font-weight: 600; color: var(--muted); }
thead tr:last-child th { cursor: pointer; user-select: none; }
thead tr:last-child th:hover { background: #e6e6e2; }
thead th[aria-sort="ascending"]::after { content: " \\25B2"; font-size: .7em; }
thead th[aria-sort="descending"]::after { content: " \\25BC"; font-size: .7em; }
tbody th { text-align: left; font-weight: 600; max-width: 22em; overflow-wrap: break-word; }
td.num { text-align: right; white-space: nowrap; }
td.text { text-align: left; }
td .ci { display: block; font-size: .74em; color: #333; }
td.strong > .v { font-weight: 700; }
figure { margin: 10px 0 22px; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--rule); }
figcaption { color: var(--muted); font-size: .9em; margin-top: 4px; }
details { margin: 6px 0 14px; }
details > summary { cursor: pointer; font-weight: 600; }
footer { max-width: 1240px; margin: 30px auto 20px; padding: 0 20px; color: var(--muted); font-size: .85em; }
@media print {
  body { font-size: 10.5px; }
  nav.toc { display: none; }
  .table-wrap { overflow: visible; }
  p.scroll-cue { display: none; }
  h2 { break-after: avoid; }
  figure, table { break-inside: avoid; }
}
"""

SCRIPT = """
(function () {
  function key(cell) {
    if (!cell) { return null; }
    var s = cell.getAttribute('data-sort');
    if (s === null || s === '') { return null; }
    var n = Number(s);
    return isNaN(n) ? s.toLowerCase() : n;
  }
  function sortBy(table, col, th) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var numeric = rows.some(function (r) { return typeof key(r.cells[col]) === 'number'; });
    var current = th.getAttribute('aria-sort');
    var dir = current ? (current === 'ascending' ? -1 : 1) : (numeric ? -1 : 1);
    rows.sort(function (a, b) {
      var x = key(a.cells[col]), y = key(b.cells[col]);
      if (x === null && y === null) { return 0; }
      if (x === null) { return 1; }
      if (y === null) { return -1; }
      if (typeof x !== typeof y) { return typeof x === 'number' ? -1 : 1; }
      return (x < y ? -1 : x > y ? 1 : 0) * dir;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    Array.prototype.forEach.call(th.parentNode.cells, function (h) { h.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', dir === 1 ? 'ascending' : 'descending');
  }
  document.querySelectorAll('table.sortable').forEach(function (table) {
    var head = table.tHead.rows[table.tHead.rows.length - 1];
    Array.prototype.forEach.call(head.cells, function (th, i) {
      th.tabIndex = 0;
      th.addEventListener('click', function () { sortBy(table, i, th); });
      th.addEventListener('keydown', function (e) {
        if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); sortBy(table, i, th); }
      });
    });
  });
  function plural(n) { return n + ' more column' + (n === 1 ? '' : 's'); }
  function scrollCue(wrap) {
    var cue = wrap.previousElementSibling, table = wrap.querySelector('table');
    if (!cue || !cue.classList.contains('scroll-cue') || !table || !table.tHead) { return; }
    var over = wrap.clientWidth > 0 && wrap.scrollWidth > wrap.clientWidth + 1;
    var box = wrap.getBoundingClientRect(), right = 0, left = 0;
    if (over) {
      Array.prototype.forEach.call(table.tHead.rows[table.tHead.rows.length - 1].cells, function (th) {
        var r = th.getBoundingClientRect();
        if (r.right > box.right + 1) { right += 1; } else if (r.left < box.left - 1) { left += 1; }
      });
    }
    cue.hidden = !over;
    cue.textContent = right > 0 ? 'Scroll the table right for ' + plural(right) + ' \u2192'
      : '\u2190 ' + plural(left) + ' to the left';
    wrap.classList.toggle('more-right', right > 0);
  }
  function scrollCues() { document.querySelectorAll('.table-wrap').forEach(scrollCue); }
  document.querySelectorAll('.table-wrap').forEach(function (wrap) {
    wrap.addEventListener('scroll', function () { scrollCue(wrap); }, { passive: true });
  });
  document.querySelectorAll('details').forEach(function (d) { d.addEventListener('toggle', scrollCues); });
  window.addEventListener('resize', scrollCues);
  scrollCues();
  window.addEventListener('load', function () {
    scrollCues();
    var ok = 0;
    Array.prototype.forEach.call(document.images, function (img) {
      if (img.complete && img.naturalWidth > 0) { ok += 1; }
    });
    document.body.setAttribute('data-images-loaded', String(ok));
    document.body.setAttribute('data-ready', 'yes');
  });
})();
"""


def _attrs(pairs: dict[str, str | None]) -> str:
    return "".join(f' {k}="{escape(v, quote=True)}"' for k, v in pairs.items() if v is not None)


def _cell(cell: Cell) -> str:
    sort = None if cell.sort is None else (repr(cell.sort) if isinstance(cell.sort, float) else str(cell.sort))
    attrs = {"data-sort": sort, "title": cell.title}
    if cell.header:
        return f'<th scope="row"{_attrs(attrs)}>{escape(cell.text)}</th>'
    numeric = isinstance(cell.sort, float) or cell.text == "—"
    classes = ["num" if numeric else "text"] + (["strong"] if cell.strong else [])
    attrs["class"] = " ".join(classes)
    if cell.shade:
        attrs["style"] = f"background:{cell.shade}"
    attrs.update({f"data-{k.replace('_', '-')}": v for k, v in cell.data.items()})
    ci = f'<span class="ci">{escape(cell.ci)}</span>' if cell.ci else ""
    return f'<td{_attrs(attrs)}><span class="v">{escape(cell.text)}</span>{ci}</td>'


def table_html(table: Table) -> str:
    head = []
    if table.groups:
        head.append('<tr class="groups">' + "".join(
            f'<th colspan="{span}">{escape(label)}</th>' for label, span in table.groups) + "</tr>")
    titles = table.header_titles or [None] * len(table.header)
    head.append("<tr>" + "".join(f'<th scope="col"{_attrs({"title": t})}>{escape(h)}</th>'
                                 for h, t in zip(table.header, titles)) + "</tr>")
    body = "\n".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in table.rows)
    # the line above the table: filled and shown by the script when the table is wider than the page
    html = ('<p class="scroll-cue" hidden></p>'
            f'<div class="table-wrap"><table class="sortable"{_attrs({"data-table": table.name or None})}>'
            f"<caption>{escape(table.caption)}</caption><thead>{''.join(head)}</thead>"
            f"<tbody>\n{body}\n</tbody></table></div>")
    if table.note:
        html += f'<p class="note">{escape(table.note)}</p>'
    if table.collapsed:
        html = (f"<details><summary>{escape(table.caption)} ({len(table.rows)} rows)</summary>{html}</details>")
    return html


def figure_html(figure: Figure) -> str:
    data = base64.b64encode(figure.png).decode("ascii")
    return (f'<figure data-figure="{escape(figure.name, quote=True)}"><img src="data:image/png;base64,{data}" '
            f'alt="{escape(figure.alt or figure.caption, quote=True)}"><figcaption>{escape(figure.caption)}'
            "</figcaption></figure>")


def section_html(section: Section, level: int = 2) -> str:
    parts = [f'<section id="{escape(section.id, quote=True)}"><h{level}>{escape(section.title)}</h{level}>']
    if section.intro:
        parts.append(f'<p class="intro">{escape(section.intro)}</p>')
    for block in section.blocks:
        if isinstance(block, Table):
            parts.append(table_html(block))
        elif isinstance(block, Figure):
            parts.append(figure_html(block))
        elif isinstance(block, Note):
            parts.append(f'<p class="note">{escape(block.text)}</p>')
    for sub in section.subsections:
        parts.append(section_html(sub, min(level + 1, 4)))
    parts.append("</section>")
    return "\n".join(parts)


def render(report: Report) -> str:
    toc = "".join(f'<a href="#{escape(s.id, quote=True)}">{escape(s.title)}</a>' for s in report.sections)
    intro = "".join(f'<p class="meta">{escape(p)}</p>' for p in report.intro)
    body = "\n".join(section_html(s) for s in report.sections)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(report.title)}</title>
<style>{CSS}</style>
</head>
<body>
<header><h1>{escape(report.title)}</h1>{intro}</header>
<nav class="toc">{toc}</nav>
<main>
{body}
</main>
<footer>omnieval report · {escape(report.generated)}</footer>
<script>{SCRIPT}</script>
</body>
</html>
"""
