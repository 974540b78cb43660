"""`solve --report FILE`: the plan as a Markdown or HTML document with plots, by file extension.

Markdown writes its PNGs beside the report (`<stem>-<plot>.png`) and links them; HTML embeds
them as base64 so the one file travels alone. The tables are the terminal report's
(`report/text.py`), so every format shows the same numbers.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

from fleetopt.errors import InputError
from fleetopt.plan import HOURS_PER_MONTH, Plan
from fleetopt.report import plots
from fleetopt.report.text import markdown_table, pool_rows, summary_lines, workload_rows

FORMATS = (".md", ".html")


def write_report(plan: Plan, path: str | Path) -> list[Path]:
    """Write the report and its images; returns every file written."""
    path = Path(path)
    if path.suffix not in FORMATS:
        raise InputError(f"--report {path}: unknown format; name the file .md or .html")
    images = plots.render(plan)
    try:
        if path.suffix == ".html":
            path.write_text(to_html(plan, images))
            return [path]
        written, links = [], []
        for stem, title, png in images:
            image = path.with_name(f"{path.stem}-{stem}.png")
            image.write_bytes(png)
            written.append(image)
            links.append(f"![{title}]({image.name})")
        path.write_text(to_markdown(plan, links))
    except OSError as exc:
        raise InputError(f"--report {path}: cannot write ({exc.strerror})") from None
    return [path, *written]


def cost_rows(plan: Plan) -> tuple[list[str], list[list[str]]]:
    """The cost breakdown: $/h and share per GPU type."""
    by_type: dict[str, tuple[int, float]] = {}
    for pool in plan.pools:
        gpus, cost = by_type.get(pool.gpu, (0, 0.0))
        by_type[pool.gpu] = (gpus + pool.gpus, cost + pool.cost_per_hour)
    total = sum(cost for _, cost in by_type.values()) or 1.0
    rows = [
        [gpu, str(gpus), f"{cost:,.2f}", f"{cost * HOURS_PER_MONTH:,.0f}", f"{cost / total:.0%}"]
        for gpu, (gpus, cost) in sorted(by_type.items(), key=lambda kv: -kv[1][1])
    ]
    return ["gpu", "gpus", "$/h", "$/month", "share"], rows


def _cost_heading(plan: Plan) -> str:
    """With a demand profile the pools shown are the peak period's."""
    return "Cost by GPU type" + (" (peak period)" if plan.periods else "")


def to_markdown(plan: Plan, images: list[str]) -> str:
    parts = [
        f"# fleetopt plan: {plan.name}",
        "\n".join(f"- {line}" for line in summary_lines(plan)),
        "## Pools",
        markdown_table(*pool_rows(plan)),
        "## Workloads",
        markdown_table(*workload_rows(plan)),
        f"## {_cost_heading(plan)}",
        markdown_table(*cost_rows(plan)),
        "## Plots",
        *images,
    ]
    return "\n\n".join(parts) + "\n"


def _html_table(head: list[str], rows: list[list[str]]) -> str:
    def cells(tag: str, values: list[str]) -> str:
        return "".join(f"<{tag}>{html.escape(v)}</{tag}>" for v in values)

    body = "".join(f"<tr>{cells('td', r)}</tr>" for r in rows)
    return f"<table><thead><tr>{cells('th', head)}</tr></thead><tbody>{body}</tbody></table>"


STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right}th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}img{max-width:100%;display:block;margin:1em 0}"""


def to_html(plan: Plan, images: list[tuple[str, str, bytes]]) -> str:
    summary = "".join(f"<li>{html.escape(line)}</li>" for line in summary_lines(plan))
    figures = "".join(
        f'<img alt="{html.escape(title)}" src="data:image/png;base64,'
        f'{base64.b64encode(png).decode()}">'
        for _, title, png in images
    )
    title = html.escape(f"fleetopt plan: {plan.name}")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
        f"<style>{STYLE}</style></head><body><h1>{title}</h1><ul>{summary}</ul>"
        f"<h2>Pools</h2>{_html_table(*pool_rows(plan))}"
        f"<h2>Workloads</h2>{_html_table(*workload_rows(plan))}"
        f"<h2>{_cost_heading(plan)}</h2>{_html_table(*cost_rows(plan))}"
        f"<h2>Plots</h2>{figures}</body></html>\n"
    )
