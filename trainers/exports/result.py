"""What an export hands back: the file's text and name, the settings it carried over, and what it lost."""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field
from typing import Any

from trainers.exports.embed import comment
from trainers.exports.ledger import Ledger, Unmapped


@dataclass(frozen=True)
class Export:
    """One export of a run's settings: `text` saved as `filename`; `settings` the target's values set;
    `unmapped` every setting of the run with no equivalent there; `approximate` what maps with a difference."""

    target: str
    filename: str
    text: str
    settings: dict[str, Any]
    unmapped: list[Unmapped] = field(default_factory=list)
    approximate: list[str] = field(default_factory=list)

    def losses(self) -> dict[str, Any]:
        """What the run page and the API show beside the download."""
        return {"target": self.target, "filename": self.filename, "unmapped": [u.as_dict() for u in self.unmapped],
                "approximate": list(self.approximate)}  # fmt: skip


def header_lines(ledger: Ledger, prefix: str = "# ") -> list[str]:
    """The file's opening comment: each setting with no equivalent that changes training here (set away from
    its default, or with a reason of its own) with why; then, by name, those left at their defaults; then
    what maps with a difference. With a `prefix` ("# ") the lines are comments no value can end
    (`embed.comment`); without one they are plain text for the caller to embed (a docstring)."""
    unmapped = ledger.unmapped()
    detailed = [u for u in unmapped if not u.default or u.field in ledger.reasons]
    quiet = [u.field for u in unmapped if u.default and u.field not in ledger.reasons]
    lines = [f"Settings of the run with no equivalent in {ledger.target} (not carried over): {len(unmapped)}"]
    for item in detailed:
        mark = "" if item.default else " [changed from the default]"
        lines.append(f"  - {item.field} = {_short(item.value)}{mark}: {item.why}")
    if quiet:
        lines.append(f"  - at their defaults, with no equivalent ({len(quiet)}):")
        lines += [f"      {line}" for line in textwrap.wrap(", ".join(quiet), 100)]
    if not unmapped:
        lines.append("  (none)")
    lines.append(f"Carried over with a difference ({len(ledger.approximate)}):")
    lines += [f"  - {note}" for note in ledger.approximate] or ["  (none)"]
    return [out for line in lines for out in comment(line, prefix)] if prefix else lines


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
