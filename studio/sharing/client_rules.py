"""The rules the pages' JS applies, taken from where the server defines them.

The run page, the shared run page and the compare page carry this payload as JSON
(`{% client_rules as rules %}` then `{{ rules|json_script:"client-rules" }}`), and the JS reads
it instead of keeping copies that drift from the server:
- `rollouts`: the rollout list's orders, its default order and its filters; the inspector sends
  these parameters and applies the same filters to rollouts arriving live (studio.runs.rollout_query);
- `notes`: the note form's length limits and suggested tags (studio.sharing.models);
- `panels`: which chart shows which metric key (studio.runs.panels);
- `sampling_line`: what a trainer's "how far a sampling is" log line looks like (trainers.rollout.progress):
  the run page shows the latest under its header until the step's metrics arrive.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from studio.lib.env import TRUE
from studio.runs import rollout_query as rq
from studio.runs.panels import PANELS
from studio.sharing.models import QUICK_TAGS, SUGGESTED_TAGS, TAG_MAX, TEXT_MAX
from trainers.rollout.progress import LINE_PATTERN


def rollout_rules() -> dict[str, Any]:
    return {
        "orders": list(rq.ORDERS),
        "default_order": rq.DEFAULT_ORDER,
        "bounds": [{"param": name, "field": field, "bound": bound} for name, (field, bound, _) in rq.BOUNDS.items()],
        "equals": list(rq.EQUALS),
        "flags": list(rq.FLAGS),
        "counts": list(rq.COUNTS),
        "members": [{"param": name, "field": field} for name, field in rq.MEMBERS.items()],
        "flag_true": list(TRUE),
        "criterion": {"param": rq.CRITERION, "min": rq.SCORE_MIN, "max": rq.SCORE_MAX},
        "prompt": {"param": rq.PROMPT, "field": "prompt_id", "repeat_mark": rq.REPEAT_MARK},
        "text": rq.TEXT,
        "notes": {"any": rq.HAS_NOTE, "tag": rq.NOTE_TAG},
        "split": {
            "param": rq.SPLIT,
            "default": rq.DEFAULT_SPLIT,
            "all": rq.SPLIT_ALL,
            "choices": list(rq.SPLIT_CHOICES),
        },
    }


def client_rules() -> dict[str, Any]:
    """The JSON the pages hand their JS (see the module docstring)."""
    return {
        "rollouts": rollout_rules(),
        "notes": {
            "tag_max": TAG_MAX,
            "text_max": TEXT_MAX,
            "suggested_tags": list(SUGGESTED_TAGS),
            "quick_tags": list(QUICK_TAGS),
        },
        "panels": [asdict(panel) for panel in PANELS],
        "sampling_line": LINE_PATTERN,
    }
