"""The one policy for what a run may read and where it may send weights and prompts.

Every path a user can name (a dataset, a model, a reference or judge model, a checkpoint, a tool's
or environment's file parameter) and every network endpoint (a vLLM server, an LLM judge) goes
through here: the studio checks a setting when it is saved or launched, and the worker checks it
again right before it reads the files, since they may change in between.

Paths (`PathPolicy.check`):

- the named path is resolved (``~`` expanded, relative to the working folder, symbolic links
  followed), and so is every file and folder found inside a named folder, one by one: a real
  folder whose *files* link elsewhere is judged by where each file really lies;
- nothing may lie inside a forbidden area (the studio's data folder: its secrets, every team's
  uploads and checkpoints) unless the caller's `allowed_inside` says this team may read it (its
  own runs' checkpoints, its own uploads, the demo folder); a folder holding a forbidden area is
  refused whole;
- what is read as data (DATA: rows a preview or a tool result can show) must also lie under one
  of the allowed roots; models and checkpoints (MODEL) may lie anywhere else, as a server
  admin's model folder does;
- inside a folder only regular files and folders are read (a FIFO would block the reader, a
  device never ends), and at most `max_files` entries are looked at.

Endpoints (`endpoint_error`): an http(s) URL whose host (and port or scheme, where the entry
names them) is on the operator's list; "*" allows any.

Who applies it: the studio, for a team, when a setting is saved or launched, and its worker again
before the run reads anything (studio.experiments.paths); a run started without the studio
(`python -m trainers run|eval`) applies it itself at its start (`refusals` with `standalone_policy`):
the same checks on the same fields, with the folders the studio's own settings name
(STUDIO_DATASET_ROOTS, STUDIO_DATA_DIR, STUDIO_ALLOWED_ENDPOINTS) where they are set.

Which settings are paths or endpoints is declared beside each field, not listed here: a field
whose ``json_schema_extra`` holds ``{"x-user-path": DATA | MODEL | ENDPOINT}`` (with
``"x-when": {field: value}`` when it is one only for some settings, and ``"x-keywords"`` for words
that are not paths, like ``'latest'``). `named` finds them in a validated settings object,
following sub-sections, lists and a kind's params (a section's ``params_section()``).

Imports nothing from the rest of trainers/ (and never Django): the settings modules, the studio
and the workers all import it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel

DATA = "data"  # rows that can be shown back: must lie under the allowed roots
MODEL = "model"  # a model or checkpoint folder (or a hub id): anywhere outside the forbidden areas
ENDPOINT = "endpoint"  # a URL weights or prompts are sent to: on the operator's list

USER_PATH = "x-user-path"  # json_schema_extra key: what a field names (DATA, MODEL, ENDPOINT)
WHEN = "x-when"  # {other field: value}: the field names one only when those settings hold
KEYWORDS = "x-keywords"  # values that are words, not paths ("latest")

MAX_FILES = 100_000
# The studio's settings, read by a run started on its own (`standalone_policy`): the same names.
ROOTS_ENV = "STUDIO_DATASET_ROOTS"  # comma-separated folders data may be read from (unset: anywhere)
DATA_DIR_ENV = "STUDIO_DATA_DIR"  # the studio's data folder (unset: the checkout's var/, its default)
ENDPOINTS_ENV = "STUDIO_ALLOWED_ENDPOINTS"  # comma-separated (unset: not checked)
DEMO_FOLDER = "demo"  # inside the data folder: the demo's files, which any run may read


def marks(kind: str, *, when: dict[str, Any] | None = None, keywords: Sequence[str] = ()) -> dict[str, Any]:
    """The ``json_schema_extra`` of a field that names a path or endpoint of `kind`."""
    extra: dict[str, Any] = {USER_PATH: kind}
    if when:
        extra[WHEN] = dict(when)
    if keywords:
        extra[KEYWORDS] = list(keywords)
    return extra


class Refused(ValueError):
    """A path or endpoint the policy refuses; the message names it and says why."""


@dataclass(frozen=True)
class Named:
    """A path or endpoint named in settings: where (dotted field), what, and how it is used."""

    field: str
    value: str
    kind: str


def named(section: BaseModel, prefix: str = "") -> list[Named]:
    """Every path and endpoint `section` (a validated settings model) names, with its dotted field."""
    return list(_walk(section, prefix))


def _walk(section: BaseModel, prefix: str) -> Iterator[Named]:
    for name, info in type(section).model_fields.items():
        value = getattr(section, name, None)
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        kind = extra.get(USER_PATH)
        if kind and isinstance(value, str) and value and value not in extra.get(KEYWORDS, ()):
            if all(getattr(section, k, None) == v for k, v in (extra.get(WHEN) or {}).items()):
                yield Named(f"{prefix}{name}", value, str(kind))
        elif isinstance(value, BaseModel):
            yield from _walk(value, f"{prefix}{name}.")
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                if isinstance(item, BaseModel):
                    yield from _walk(item, f"{prefix}{name}.{i}.")
    params_section = getattr(section, "params_section", None)
    if callable(params_section):  # a kind's params, kept as a dict: validated by the kind's own model
        yield from _walk(params_section(), f"{prefix}params.")


@dataclass(frozen=True)
class PathPolicy:
    """Where named paths may lead (see the module docstring).

    `forbidden`: {area: why}, the sentence saying what the area is and what may be read from it.
    `allowed_inside(path, kind)`: whether this caller may read `path` although it lies in a
    forbidden area (its own checkpoints or uploads)."""

    roots: tuple[Path, ...]
    forbidden: dict[Path, str] = field(default_factory=dict)
    allowed_inside: Callable[[Path, str], bool] = lambda path, kind: False
    max_files: int = MAX_FILES

    def check(self, raw: str, kind: str, base: Path | None = None) -> Path:
        """The resolved path, once it and every file inside it are allowed; Refused otherwise.
        A relative path is read against `base` (the working folder by default). A DATA path must
        exist; a MODEL path that does not exist (yet) is checked for its place only."""
        try:
            path = Path(raw).expanduser()
            path = (path if path.is_absolute() else (base or Path.cwd()) / path).resolve()
        except (ValueError, OSError, RuntimeError):  # a NUL byte, an unknown home folder, a link loop
            raise Refused(f"{raw!r}: not a valid path") from None
        self._place(raw, path, kind)
        for area in self.forbidden:
            if path in area.parents:
                raise Refused(f"{raw}: a folder holding what lies inside {self.forbidden[area]}")
        try:
            mode = path.stat().st_mode
        except OSError:
            if kind == DATA:
                raise Refused(f"{raw}: no such file or folder") from None
            return path
        if stat.S_ISDIR(mode):
            self._walk_folder(raw, path, kind)
        elif not stat.S_ISREG(mode):
            raise Refused(f"{raw}: not a regular file or folder")
        return path

    def error(self, raw: str, kind: str, base: Path | None = None) -> str | None:
        try:
            self.check(raw, kind, base)
        except Refused as exc:
            return str(exc)
        return None

    def _place(self, raw: str, real: Path, kind: str, inside: str = "") -> None:
        """Refused unless `real` (a resolved path) may be read as `kind`."""
        what = f"{raw}: {inside} is {real}, which is" if inside else f"{raw}:"
        for area, why in self.forbidden.items():
            if (real == area or area in real.parents) and not self.allowed_inside(real, kind):
                raise Refused(f"{what} inside {why}")
        if kind == DATA and not any(real == root or root in real.parents for root in self.roots):
            if any((real == area or area in real.parents) for area in self.forbidden):
                return  # allowed_inside said yes: a team's own upload lies outside the roots' reach otherwise
            roots = ", ".join(str(r) for r in self.roots) or "none are set"
            raise Refused(f"{what} outside the folders data may be read from ({roots})")

    def _walk_folder(self, raw: str, folder: Path, kind: str) -> None:
        """Every entry under `folder`, each resolved on its own; linked folders are followed once."""
        seen, todo, count = {folder}, [(folder, "")], 0
        while todo:
            current, prefix = todo.pop()
            try:
                entries = list(os.scandir(current))
            except OSError as exc:
                raise Refused(f"{raw}: cannot list {prefix or 'the folder'}: {exc.strerror or exc}") from None
            for entry in entries:
                count += 1
                if count > self.max_files:
                    raise Refused(f"{raw}: more than {self.max_files:,} files and folders; name a smaller folder")
                shown = f"{prefix}{entry.name}"
                try:
                    real = Path(entry.path).resolve()
                except (OSError, RuntimeError):
                    raise Refused(f"{raw}: {shown} is a link that cannot be followed") from None
                self._place(raw, real, kind, inside=shown)
                try:
                    mode = real.stat().st_mode
                except OSError:
                    continue  # a dangling link: nothing to read (where it points was checked above)
                if stat.S_ISDIR(mode):
                    if real not in seen:
                        seen.add(real)
                        todo.append((real, f"{shown}/"))
                elif not stat.S_ISREG(mode):
                    raise Refused(f"{raw}: {shown} is not a regular file")


def endpoint_error(url: str, allowed: Sequence[str]) -> str | None:
    """Why `url` may not receive a run's weights or prompts, or None: it must be http(s) and its
    host on `allowed` (entries "host", "host:port", "scheme://host[:port]", or "*" for any)."""
    try:
        parts = urlsplit(url.strip())
        host, port = (parts.hostname or "").lower(), parts.port
    except ValueError:
        return f"{url!r}: not a valid URL"
    if parts.scheme not in ("http", "https") or not host:
        return f"{url!r}: not an http(s) URL"
    port = port or (443 if parts.scheme == "https" else 80)
    for entry in allowed:
        if entry.strip() == "*" or _matches(entry.strip().lower(), parts.scheme, host, port):
            return None
    listed = ", ".join(allowed) or "none"
    return (f"{url}: {host} is not an endpoint runs may send weights or prompts to (the operator's list: "
            f"{listed}; STUDIO_ALLOWED_ENDPOINTS)")  # fmt: skip


def _matches(entry: str, scheme: str, host: str, port: int) -> bool:
    if not entry:
        return False
    try:
        want = urlsplit(entry if "://" in entry else f"//{entry}")
        want_host, want_port = (want.hostname or "").lower(), want.port
    except ValueError:
        return False
    if want.scheme and want.scheme != scheme:
        return False
    return want_host == host and (want_port is None or want_port == port)


def endpoint_base(url: str) -> str:
    """The endpoint a secret is bound to, from the URL it was set for: ``scheme://host:port/path``, the
    default port written out, the host lower-cased, no query, fragment or trailing slash. Raises
    Refused for what is not an http(s) URL."""
    try:
        parts = urlsplit(url.strip())
        host, port = (parts.hostname or "").lower(), parts.port
    except ValueError:
        raise Refused(f"{url!r}: not a valid URL") from None
    if parts.scheme not in ("http", "https") or not host:
        raise Refused(f"{url!r}: not an http(s) URL")
    port = port or (443 if parts.scheme == "https" else 80)
    shown = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{shown}:{port}{parts.path.rstrip('/')}"


def bound_to(url: str, base: str) -> bool:
    """Whether a request to `url` goes to the endpoint `base` (an `endpoint_base`): the same scheme, host
    and port, and a path at or under base's path (segment by segment: /v1 holds /v1/chat, not /v10)."""
    if not base:
        return False
    try:
        want, got = endpoint_base(base), endpoint_base(url)
    except Refused:
        return False
    origin, path = _split_base(want)
    got_origin, got_path = _split_base(got)
    return got_origin == origin and (not path or got_path == path or got_path.startswith(path + "/"))


def _split_base(base: str) -> tuple[str, str]:
    scheme, _, rest = base.partition("://")
    authority, slash, path = rest.partition("/")
    return f"{scheme}://{authority}", slash + path


OPENAI_SERVER = "https://api.openai.com/v1"  # where OPENAI_API_KEY goes when OPENAI_BASE_URL is unset (OpenAI's SDK)


def key_server_variable(variable: str) -> str:
    """The variable naming the server an API key variable is for: FOO_API_KEY -> FOO_BASE_URL."""
    return variable.removesuffix("API_KEY") + "BASE_URL"


def key_server(variable: str, environ: Mapping[str, str] | None = None) -> str:
    """The server the API key in `variable` was set for, by whoever set it (the worker's operator):
    FOO_API_KEY goes to FOO_BASE_URL only (OpenAI's SDK reads OPENAI_BASE_URL the same way), and
    OPENAI_API_KEY without one to OpenAI's API. Empty: the key goes nowhere."""
    environ = os.environ if environ is None else environ
    server = environ.get(key_server_variable(variable), "").strip()
    return server or (OPENAI_SERVER if variable == "OPENAI_API_KEY" else "")


def _env_list(name: str) -> list[str] | None:
    raw = os.environ.get(name)
    return None if raw is None else [item.strip() for item in raw.split(",") if item.strip()]


def standalone_policy() -> PathPolicy:
    """The policy of a run started without the studio: data under STUDIO_DATASET_ROOTS where that is set
    (anywhere else), nothing inside the studio's data folder (STUDIO_DATA_DIR, else the checkout's var/)
    but its demo folder, and everywhere the same checks of what a folder holds (regular files only, each
    judged by where it really lies)."""
    roots = _env_list(ROOTS_ENV)
    data_dir = Path(os.environ.get(DATA_DIR_ENV) or Path(__file__).resolve().parents[1] / "var").resolve()
    demo = data_dir / DEMO_FOLDER
    why = f"the studio's data folder ({data_dir}), which holds its secrets and every team's files"
    return PathPolicy(
        roots=tuple(Path(r).resolve() for r in roots) if roots is not None else (Path("/"),),
        forbidden={data_dir: why},
        allowed_inside=lambda path, kind: path == demo or demo in path.parents,
    )


def refusals(
    section: BaseModel, policy: PathPolicy, *, is_local: Callable[[str], bool] = lambda raw: True,
    endpoints: Sequence[str] | None = None, base: Path | None = None,
) -> dict[str, str]:  # fmt: skip
    """{dotted field: why} for every path and endpoint `section` names that `policy` refuses. A MODEL value
    that `is_local` says is no folder (a hub id) is not a path; endpoints are checked against `endpoints`
    (None: not checked)."""
    errors: dict[str, str] = {}
    for item in named(section):
        if item.kind == ENDPOINT:
            error = endpoint_error(item.value, endpoints) if endpoints is not None else None
        elif item.kind == MODEL and not is_local(item.value):
            error = None
        else:
            error = policy.error(item.value, item.kind, base)
        if error:
            errors[item.field] = error
    return errors
