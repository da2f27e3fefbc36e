"""Lines an open skipped, counted: one warning per file and reason, however many lines.

A lost day file can leave hundreds of records behind; a warning per record buries the one
line a user needs to read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

_SHOWN = 5  # line numbers named in a warning before "…"


@dataclass(slots=True)
class _Group:
    lines: list[int] = field(default_factory=list)
    count: int = 0


@dataclass(slots=True)
class Skipped:
    """Skipped lines by (file, reason), in the order first seen; a reason says what was done
    (`not valid JSON; skipped`)."""

    groups: dict[tuple[str, str], _Group] = field(default_factory=dict)

    def add(self, path: str, lineno: int, reason: str) -> None:
        group = self.groups.setdefault((path, reason), _Group())
        group.count += 1
        if len(group.lines) < _SHOWN:
            group.lines.append(lineno)

    def warnings(self) -> list[str]:
        lines = []
        for (path, reason), group in self.groups.items():
            if group.count == 1:
                lines.append(f"{path} line {group.lines[0]}: {reason}")
                continue
            shown = ", ".join(map(str, group.lines))
            more = ", …" if group.count > len(group.lines) else ""
            lines.append(f"{path}: {group.count} lines ({shown}{more}): {reason}")
        return lines

    def clear(self) -> None:
        self.groups.clear()
