"""What a share link's reader receives: a member's view of a run with the machines taken out.

A member sees where a run ran: worker names (``gpu@node-7``), host names in queue text, log lines
and errors, and server paths (checkpoint folders under the data folder, a model folder, a dataset's
path in a warning). A share link is for someone outside the team, who is shown the run's curves,
rollouts and notes, not the studio's machines. `share_view` turns anything a member would be sent
(an API answer, a websocket message, a page's context) into what a share link's reader is sent:

- every host name the studio knows (this machine's names and addresses, every worker that ever
  joined the fleet, the run's own worker) becomes ``[host]``, so ``local@vm`` reads ``local@[host]``;
- every absolute path (one whose first folder is a top-level folder of a server: /home, /tmp, /var,
  the root folder's own entries...) becomes ``[path]/<its last name>``: "checkpoint [path]/step_10"
  still says which checkpoint, not where it lies.

It is the one place this is decided: the share page (studio.runs.pages), the API reads a share token
opens (`ShareViewMixin`, which studio.runs.access.readable_run arms) and the websocket consumer each hand
it what a member would get, whole. Members are never sent through it.

Strings are rewritten wherever they sit (values and keys, at any depth); numbers, booleans, dates
and None pass as they are; a model instance (a page's `run`) is wrapped so that what the template
reads from it is rewritten too.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import socket
from collections.abc import Iterable
from datetime import date, datetime
from decimal import Decimal
from pathlib import PurePath
from typing import Any

from django.apps import apps

HOST = "[host]"
PATH = "[path]"
# Top folders of a server's paths besides the root folder's own entries (those of other machines too:
# a worker's home or scratch folder need not exist on the web server).
SERVER_TOPS = frozenset({"home", "Users", "root", "tmp", "var", "opt", "srv", "mnt", "media", "data", "scratch",
                         "work", "nfs", "private", "Volumes", "workspace", "dev", "proc", "run", "usr", "etc"})  # fmt: skip
# A path: starts after a space, quote, bracket, ':' or the text's start, never inside a word or a URL
# ("http://host/api", "host:8000/v1" and "reward/mean" keep theirs); file:// URLs count as paths.
_PATH = re.compile(r"(?<![\w.~/@%+=-])(?:file://)?(/[\w.@%+=~-]+)+/?")


@functools.lru_cache(maxsize=1)
def machine_names() -> frozenset[str]:
    """This machine's host names and addresses (asked once per process: a name lookup can be slow)."""
    names = {socket.gethostname(), socket.getfqdn()}
    with contextlib.suppress(OSError):  # a name the resolver does not know: its names alone
        names.update(socket.gethostbyname_ex(socket.gethostname())[2])
    return frozenset(n for n in names if n)


def known_hosts(run: Any = None) -> set[str]:
    """The host names a share view hides: this machine's, every fleet worker's (its Celery name and the
    host in it) and the run's own worker's."""
    names = set(machine_names())
    workers = list(apps.get_model("fleet", "WorkerNode").objects.values_list("hostname", flat=True))
    worker = getattr(run, "worker", "") if run is not None else ""
    for name in [*workers, worker]:
        if name:
            names.update({name, name.rpartition("@")[2]})
    # Loopback names say nothing about the studio's machines; hiding them would only blur URLs.
    return {n for n in names if n and n.lower() not in ("localhost", "localhost.localdomain")
            and not n.startswith("127.") and n != "::1"}  # fmt: skip


class ShareView:
    """A share view's rewriting of values (see the module docstring); one per request or socket."""

    def __init__(self, hosts: Iterable[str]) -> None:
        ordered = sorted({h for h in hosts if h}, key=len, reverse=True)  # node-7.lan before node-7
        self.hosts = (
            re.compile(r"(?<![\w.-])(?:" + "|".join(re.escape(h) for h in ordered) + r")(?![\w-])", re.IGNORECASE)
            if ordered
            else None
        )
        self.tops = SERVER_TOPS | _root_entries()

    def text(self, value: str) -> str:
        if self.hosts is not None:
            value = self.hosts.sub(HOST, value)
        return _PATH.sub(self._path, value) if "/" in value else value

    def _path(self, match: re.Match) -> str:
        raw = match.group(0)
        parts = [p for p in raw.removeprefix("file://").split("/") if p]
        if not parts or parts[0] not in self.tops:
            return raw
        return PATH if len(parts) == 1 else f"{PATH}/{parts[-1]}"

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if value is None or isinstance(value, (bool, int, float, Decimal, date, datetime)):
            return value
        if isinstance(value, dict):
            return {self(k) if isinstance(k, str) else k: self(v) for k, v in value.items()}
        if isinstance(value, (list, tuple, set, frozenset)):
            return [self(v) for v in value]
        if isinstance(value, PurePath):
            return self.text(str(value))
        return Shared(value, self)


class Shared:
    """An object (a model instance a page template reads) whose attributes, and what its methods
    return, come through the share view; templates read it as they would the object."""

    __slots__ = ("_target", "_view")

    def __init__(self, target: Any, view: ShareView) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_view", view)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if callable(value) and not isinstance(value, type):

            @functools.wraps(value)  # keeps alters_data / do_not_call_in_templates for the template engine
            def through(*args: Any, **kwargs: Any) -> Any:
                return self._view(value(*args, **kwargs))

            return through
        return self._view(value)

    def __str__(self) -> str:
        return self._view.text(str(self._target))

    def __eq__(self, other: object) -> bool:
        return self._target == (other._target if isinstance(other, Shared) else other)

    def __hash__(self) -> int:
        return hash(self._target)


def _root_entries() -> frozenset[str]:
    try:
        return frozenset(os.listdir("/"))
    except OSError:
        return frozenset()


def share_view(value: Any, run: Any = None) -> Any:
    """`value` (what a member would be sent) as a share link's reader is sent it."""
    return ShareView(known_hosts(run))(value)


class ShareViewMixin:
    """For DRF views whose reads a share token opens: an answer to a request that came in through a share
    link (studio.runs.access.readable_run marks it) goes out through `share_view`, whatever the action."""

    def finalize_response(self, request, response, *args, **kwargs):
        view = getattr(request, "share_view", None)
        if view is not None and hasattr(response, "data") and response.data is not None:
            response.data = view(response.data)
        return super().finalize_response(request, response, *args, **kwargs)
