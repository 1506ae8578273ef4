"""A manifest's pitfall sensitivity table (``mlrepro pitfalls``) laid out for the terminal."""

from __future__ import annotations

import textwrap

from ..diagnosis import PitfallRow, PitfallTable


def sensitivity_text(table: PitfallTable, width: int = 100) -> str:
    subset = f"the first {table.samples}" if table.limit else f"all {table.samples}"
    title = (
        f"pitfall sensitivity of {table.name} ({table.framework}, {table.device}) on "
        f"{subset} samples of {table.dataset} ({table.seconds:.0f} s); agreement: the "
        "share of samples whose top-1 class is the declared pipeline's"
    )
    head = [*textwrap.wrap(title, width), ""]
    numbers = 33  # "  top-1     Δ  top-5  agreement"
    label = width - numbers - 2
    lines = [f"{'with':<{label}}  {'top-1':>6} {'Δ top-1':>7} {'top-5':>6} {'agreement':>9}"]
    declared = table.declared

    def row(text: str, r: PitfallRow) -> None:
        wrapped = textwrap.wrap(text, label, subsequent_indent="    ") or [""]
        if r.error:
            lines.extend(wrapped)
            lines.extend(
                textwrap.wrap(
                    f"cannot run: {r.error}",
                    width - 4,
                    initial_indent="    ",
                    subsequent_indent="    ",
                )
            )
            return
        assert r.top1 is not None and r.top5 is not None and r.agreement is not None
        assert declared.top1 is not None
        delta = r.top1 - declared.top1
        shown_delta = "" if r is declared else f"{delta:+.2f}"
        lines.extend(wrapped[:-1])
        lines.append(
            f"{wrapped[-1]:<{label}}  {r.top1:6.2f} {shown_delta:>7} {r.top5:6.2f} "
            f"{r.agreement * 100:8.1f}%"
        )

    row("the declared pipeline", declared)
    current = ""
    for r in table.rows:
        if r.pitfall != current:
            current = r.pitfall
            lines.append(f"{current}:")
        row(f"  {r.description}", r)
    return "\n".join(head + lines)
