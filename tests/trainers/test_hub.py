"""trainers.models.hub: a hub model a worker cannot get ends the run with one line saying what to do."""

import pytest

from trainers.models import hub
from trainers.report import PlainFailure, failure_detail


# Stand-ins named as huggingface_hub's errors (the reasons are read from the class names).
class RepositoryNotFoundError(OSError):
    pass


class GatedRepoError(RepositoryNotFoundError):
    pass


class ConnectError(Exception):
    pass


def raised_from(outer: Exception, inner: Exception) -> Exception:
    try:
        try:
            raise inner
        except Exception as exc:
            raise outer from exc
    except Exception as exc:  # noqa: BLE001
        return exc


def test_the_failure_is_one_line_with_the_reason_and_what_to_do():
    line = hub.failure_line("org/name", "first line\n  second line.")
    assert line.splitlines() == [line]
    assert line.startswith(
        "could not download org/name from the Hugging Face Hub: first line second line. Put the model"
    )
    assert "give its path" in line
    assert len(hub.failure_line("org/name", "x" * 5000)) < 600


def test_reasons_in_words():
    assert "no such model on the Hub" in hub.reason(RepositoryNotFoundError("404 ... long body"))
    assert "gated" in hub.reason(GatedRepoError("403"))
    # transformers' OSError raised from the network's error: the network's reason, once.
    wrapped = raised_from(OSError("We couldn't connect to 'https://huggingface.co'\nCheck your connection"),
                          ConnectError("[Errno -2] Name or service not known"))  # fmt: skip
    assert hub.unreachable(wrapped)
    assert (
        hub.reason(wrapped)
        == "huggingface.co cannot be reached from this worker ([Errno -2] Name or service not known)"
    )
    assert hub.reason(ValueError("odd\nmore")) == "odd"


def test_the_offline_variables_read_as_huggingface_hub_reads_them():
    assert hub.offline_variable({"HF_HUB_OFFLINE": "1"}) == "HF_HUB_OFFLINE"
    assert hub.offline_variable({"HF_HUB_OFFLINE": "yes"}) == "HF_HUB_OFFLINE"
    assert hub.offline_variable({"TRANSFORMERS_OFFLINE": "1"}) == "TRANSFORMERS_OFFLINE"
    assert (
        hub.offline_variable({"HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "1"}) is None
    )  # the first one set decides
    assert hub.offline_variable({}) is None


def test_offline_and_not_cached_fails_at_once_without_looking_at_the_hub(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(hub.ModelDownloadError) as caught:
        hub.prepare("studio-tests/never-downloaded")
    assert "HF_HUB_OFFLINE is set on this worker" in str(caught.value)
    assert isinstance(caught.value, PlainFailure)
    assert failure_detail(caught.value) == str(caught.value)  # no "ModelDownloadError: " in front
    assert hub.save_problem("studio-tests/never-downloaded", {"HF_HUB_OFFLINE": "1"}).startswith(
        "studio-tests/never-downloaded is a hub id, but HF_HUB_OFFLINE is set"
    )
    assert hub.save_problem("studio-tests/never-downloaded", {}) is None


def test_only_download_errors_become_the_one_line():
    with pytest.raises(hub.ModelDownloadError), hub.download_errors("org/name"):
        raise OSError("org/name does not appear to have a file named config.json")
    with pytest.raises(KeyError), hub.download_errors("org/name"):
        raise KeyError("a model type transformers does not know")
