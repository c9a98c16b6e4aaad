"""A run's tags (RunTag): the words its team puts on it to find it again in the runs table (?tag=). Set whole, from
the run page's form or `POST /api/runs/<id>/tags/`; editors and owners only (the callers check the role)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from django.db import transaction

from studio.lib.errors import FieldErrors
from studio.runs.models import Run, RunTag

TAGS_MAX = 20
# Letters, digits and . _ : / + - (a tag is a word to type in a link's ?tag=, so no spaces or commas).
_TAG = re.compile(r"[\w.:/+-]+")
# The same rule as the API schema states it (a tag is trimmed before the check; an empty one is dropped).
TAG_SCHEMA_PATTERN = rf"^\s*[\w.:/+-]{{0,{RunTag.NAME_MAX}}}\s*$"


def cleaned(names: Iterable[object]) -> list[str]:
    """The tags as stored: trimmed, repeats dropped, in the order given; FieldErrors naming `tags` for a tag that
    is not text, empty after trimming, too long or holds other characters, or for more than TAGS_MAX."""
    out: list[str] = []
    for name in names:
        if not isinstance(name, str):
            raise FieldErrors({"tags": f"a tag is text, got {name!r}"})
        name = name.strip()
        if not name:
            continue
        if len(name) > RunTag.NAME_MAX:
            raise FieldErrors({"tags": f"a tag is at most {RunTag.NAME_MAX} characters: {name[:50]!r}"})
        if not _TAG.fullmatch(name):
            raise FieldErrors({"tags": f"{name!r}: a tag holds letters, digits and . _ : / + - only"})
        if name not in out:
            out.append(name)
    if len(out) > TAGS_MAX:
        raise FieldErrors({"tags": f"at most {TAGS_MAX} tags on a run"})
    return out


def from_text(text: str) -> list[str]:
    """The tags of the run page's field: separated by commas or spaces."""
    return cleaned(re.split(r"[,\s]+", text or ""))


def names(run: Run) -> list[str]:
    return [tag.name for tag in run.tags.all()]


@transaction.atomic
def set_tags(run: Run, wanted: Iterable[object]) -> list[str]:
    """Make the run's tags exactly `wanted` (cleaned); returns them sorted as the table shows them."""
    new = cleaned(wanted)
    RunTag.objects.filter(run=run).exclude(name__in=new).delete()
    have = set(RunTag.objects.filter(run=run).values_list("name", flat=True))
    RunTag.objects.bulk_create([RunTag(run=run, name=name) for name in new if name not in have])
    return sorted(new)
