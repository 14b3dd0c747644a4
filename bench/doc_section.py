"""Writing a bench's table into docs/benchmarks.md: its section replaced in place, or added at the end."""

from __future__ import annotations

from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


def write_section(section: str, block: str) -> None:
    """Replace the section headed `section` (up to the next `## `) with `block`, or append it."""
    text = DOC.read_text()
    if section in text:
        head, _, rest = text.partition(section)
        nxt = rest.find("\n## ")
        text = head + block + (rest[nxt:] if nxt >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + block
    DOC.write_text(text)
