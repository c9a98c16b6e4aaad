"""Models named by a Hugging Face Hub id ("owner/name"): whether a worker can get one, and one line
saying what to do when it cannot.

Many studios cannot reach the Hub. Left alone, transformers retries every file for about a minute
and the run ends with a traceback naming the network error again and again. Instead:

- when a hub id is saved (the studio's side, `save_problem`, `source_note`): it is accepted with a
  note that the worker downloads it, and refused where the Hub is switched off (HF_HUB_OFFLINE or
  TRANSFORMERS_OFFLINE set where the studio runs, and so on the workers it starts) unless the
  model is in the Hub cache;
- when a run loads it (`prepare`, then `download_errors` around transformers' own download): one
  quick look at the Hub first, without retries; a model the Hub will not give ends the run with
  `ModelDownloadError`, whose message is the run's error in one line (the traceback goes to the
  run's log only).

No torch and no Django; huggingface_hub is imported where it is used.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from trainers.report import PlainFailure

HUB = "the Hugging Face Hub"
HUB_HOST = "huggingface.co"
# As huggingface_hub reads them: the first one set decides.
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
TRUE = ("1", "ON", "YES", "TRUE")
PROBE_TIMEOUT_S = 15.0
MAX_REASON_CHARS = 300
WHAT_TO_DO = (
    f"Put the model in a folder the studio can read and give its path, or let the workers reach {HUB_HOST} "
    "(or fill their Hub cache, HF_HOME, beforehand)."
)


class ModelDownloadError(PlainFailure):
    """A hub model this worker cannot get; the message is the one line the run ends with."""


def failure_line(repo_id: str, reason: str) -> str:
    """The one line a run ends with when it cannot get `repo_id`."""
    reason = " ".join(reason.split()).rstrip(".")
    if len(reason) > MAX_REASON_CHARS:
        reason = reason[: MAX_REASON_CHARS - 1] + "…"
    return f"could not download {repo_id} from {HUB}: {reason}. {WHAT_TO_DO}"


def offline_variable(environ: Mapping[str, str] | None = None) -> str | None:
    """The variable that switches the Hub off here (HF_HUB_OFFLINE=1), or None."""
    environ = os.environ if environ is None else environ
    for name in OFFLINE_VARIABLES:
        value = environ.get(name)
        if value:  # huggingface_hub: HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE, the first one not empty
            return name if value.strip().upper() in TRUE else None
    return None


def in_cache(repo_id: str) -> bool:
    """Whether the Hub cache here holds the model's config (it was downloaded before)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except Exception:  # noqa: BLE001 - a malformed id, an unreadable cache: not there
        return False


# ---------------------------------------------------------------- the studio's side, when it is saved


def save_problem(repo_id: str, environ: Mapping[str, str] | None = None) -> str | None:
    """Why runs could not get hub model `repo_id` (the Hub switched off and the model not in the
    Hub cache), or None. Asked of the studio's own environment, which the workers it starts share."""
    variable = offline_variable(environ)
    if variable is None or in_cache(repo_id):
        return None
    return (f"{repo_id} is a hub id, but {variable} is set where the studio runs (and so on the workers it "
            f"starts): they cannot download it from {HUB} and it is not in their Hub cache. Put the model in a "
            "folder the studio can read and give its path.")  # fmt: skip


def source_note(repo_id: str, environ: Mapping[str, str] | None = None) -> str:
    """What the form says beside a hub id: where the model will come from."""
    variable = offline_variable(environ)
    if variable is not None:
        return (f"A hub id, read from the Hub cache: {variable} is set, so the workers load the copy "
                "downloaded before and download nothing.")  # fmt: skip
    cached = " (already in the Hub cache here)" if in_cache(repo_id) else ""
    return (f"A hub id{cached}: the worker downloads it from {HUB} ({HUB_HOST}) when a run starts; the studio "
            "does not look it up. Where the workers cannot reach the Hub, put the model in a folder and give "
            "its path.")  # fmt: skip


# ---------------------------------------------------------------- the worker's side, when a run loads it


def prepare(repo_id: str) -> bool:
    """Before transformers loads hub model `repo_id`: True when it must be read from the Hub cache only
    (the Hub switched off, or out of reach while the cache holds the model), False to download as
    usual. ModelDownloadError, one line, when the model cannot be had: one look at the Hub, no retries."""
    variable = offline_variable()
    if variable is not None:
        if in_cache(repo_id):
            return True
        raise ModelDownloadError(failure_line(repo_id, f"{variable} is set on this worker and the model is not in "
                                                       "its Hub cache"))  # fmt: skip
    try:
        from huggingface_hub import HfApi

        HfApi().model_info(repo_id, timeout=PROBE_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - every way the Hub refuses ends the run the same way
        if unreachable(exc) and in_cache(repo_id):
            return True
        raise ModelDownloadError(failure_line(repo_id, reason(exc))) from exc
    return False


@contextmanager
def download_errors(repo_id: str) -> Iterator[None]:
    """Turn a failure to download `repo_id` inside the block (transformers' OSError, the Hub's and the
    network's errors) into ModelDownloadError; other errors pass as they are."""
    try:
        yield
    except PlainFailure:
        raise
    except Exception as exc:
        if not _about_the_download(exc):
            raise
        raise ModelDownloadError(failure_line(repo_id, reason(exc))) from exc


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and those it was raised from or while handling, outermost first."""
    out: list[BaseException] = []
    while exc is not None and exc not in out and len(out) < 8:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def _names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _about_the_download(exc: BaseException) -> bool:
    for link in _chain(exc):
        module = type(link).__module__.split(".")[0]
        if isinstance(link, OSError) or module.startswith(("huggingface_hub", "httpx", "requests", "urllib3")):
            return True
    return False


def unreachable(exc: BaseException) -> bool:
    """Whether the Hub could not be reached at all (no network, no name resolution, a timeout)."""
    for link in _chain(exc):
        names = _names(link)
        if names & {"ConnectError", "ConnectTimeout", "TimeoutException", "NetworkError", "ConnectionError",
                    "LocalEntryNotFoundError", "OfflineModeIsEnabled", "TimeoutError", "gaierror"}:  # fmt: skip
            return True
    return False


def reason(exc: BaseException) -> str:
    """Why the download failed, in words: no such model, a gated one, the Hub out of reach, or the
    error's own first line."""
    chain = _chain(exc)
    for link in chain:
        names = _names(link)
        if "GatedRepoError" in names:
            return (f"the model is gated: accept its terms on {HUB_HOST} and give the workers a token that may "
                    "read it (HF_TOKEN)")  # fmt: skip
        if "RepositoryNotFoundError" in names:
            return (
                "there is no such model on the Hub (or it is private, and the workers have no token for it: HF_TOKEN)"
            )
        if "RevisionNotFoundError" in names:
            return "the Hub has no such revision of the model"
    if unreachable(exc):
        detail = next((_first_line(link) for link in reversed(chain) if _first_line(link)), "")
        return f"{HUB_HOST} cannot be reached from this worker" + (f" ({detail})" if detail else "")
    return _first_line(exc) or type(exc).__name__


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else ""
