"""Every route under /api/ answers its errors as JSON ({"detail": ...}), never Django's HTML page: an id
in the path that names nothing (whatever its spelling: 0, -1, letters, past 64 bits), a path that names
no route, a method the route does not take, and a view that fails. Pages outside /api/ keep the HTML
page. Every operation of the published schema is tried, so a new route is covered without a line here."""

from __future__ import annotations

import logging
import re

import pytest
from django.test import Client, RequestFactory
from django.urls import get_resolver
from drf_spectacular.generators import SchemaGenerator
from rest_framework.authtoken.models import Token

# Spellings of an id that names nothing: none of them may reach a user of the API as HTML.
UNKNOWN_IDS = ("987654321", "0", "-1", "abc", "1.5", "99999999999999999999", "%20")
WELL_FORMED_UNKNOWN = "987654321"  # what the other parameters of the path hold meanwhile
STRING_PARAMETERS = {"target": "trl", "prompt_id": "nope", "name": "nope"}  # path parameters that are not ids
UNKNOWN_ROUTES = ("/api/nope/", "/api/runs/1/nope/", "/api/nope", "/api/teams/1/members/2/3/")


def operations() -> list[tuple[str, str, list[str], set[str]]]:
    """(path, method, path parameter names, status codes documented) of every operation of the schema."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    out = []
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            names = [p["name"] for p in operation.get("parameters", []) if p["in"] == "path"]
            out.append((path, method, names, set(operation["responses"])))
    return out


def with_values(path: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], path)


def unknown_values(names: list[str]) -> dict[str, str]:
    """Each path parameter as a well-formed value that names nothing."""
    return {name: STRING_PARAMETERS.get(name, WELL_FORMED_UNKNOWN) for name in names}


def is_json_error(response) -> bool:
    if not response["Content-Type"].startswith("application/json"):
        return False
    body = response.json()
    return isinstance(body, dict) and bool(body)


@pytest.fixture
def client(alice, monkeypatch) -> Client:
    # 4xx are what is tried here; Django logs each one as a warning.
    monkeypatch.setattr(logging.getLogger("django.request"), "level", logging.ERROR)
    client = Client(raise_request_exception=False)
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {Token.objects.create(user=alice).key}"
    return client


def send(client: Client, method: str, url: str):
    return getattr(client, method)(url, data={}, content_type="application/json")


def test_every_operation_answers_an_unknown_id_with_a_json_404(client):
    tried, html = 0, []
    for path, method, names, documented in operations():
        # 404, or 401 where the operation reads a token that names its object (a run token names its run).
        allowed = {404} | ({401} & {int(code) for code in documented})
        for name in names:
            if name in STRING_PARAMETERS:
                continue
            others = unknown_values(names)
            for value in UNKNOWN_IDS:
                url = with_values(path, {**others, name: value})
                response = send(client, method, url)
                tried += 1
                if response.status_code not in allowed or not is_json_error(response):
                    html.append(f"{method.upper()} {url}: {response.status_code} {response['Content-Type']}")
    print(f"{tried} requests, {len(html)} not a JSON 404")
    assert tried > 300
    assert html == []


def test_a_string_path_parameter_that_names_nothing_is_a_json_404(client):
    for method, url in (("get", "/api/runs/1/export/nope/"), ("get", "/api/runs/1/prompts/nope/"),
                        ("delete", "/api/teams/1/tracker-secrets/nope/")):  # fmt: skip
        response = send(client, method, url)
        assert response.status_code == 404, url
        assert is_json_error(response), url


@pytest.mark.parametrize("url", UNKNOWN_ROUTES)
def test_a_path_under_the_api_that_names_no_route_is_a_json_404(client, url):
    response = client.get(url)
    assert response.status_code == 404
    assert response.json() == {"detail": "Not found."}


def test_a_page_that_names_nothing_keeps_the_html_404(client):
    response = client.get("/runs/987654321/nope/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_every_operation_refuses_a_method_it_does_not_take_with_json(client):
    by_path: dict[str, set[str]] = {}
    for path, method, _, _ in operations():
        by_path.setdefault(path, set()).add(method)
    wrong = []
    for path, methods in by_path.items():
        url = with_values(path, unknown_values(re.findall(r"\{(\w+)\}", path)))
        for method in {"get", "post", "put", "patch", "delete"} - methods:
            response = send(client, method, url)
            # DRF authenticates before it looks at the method: 401 where the route takes another kind of token.
            if response.status_code not in (401, 405) or not is_json_error(response):
                wrong.append(f"{method.upper()} {url}: {response.status_code} {response['Content-Type']}")
    assert wrong == []


def test_a_failing_api_view_answers_a_json_500_and_a_failing_page_the_html_one(client, monkeypatch):
    from studio.experiments import catalog

    def fail(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(logging.getLogger("django.request"), "disabled", True)  # the failure is the point here
    monkeypatch.setattr(catalog, "preset_values", fail)
    response = client.get("/api/presets/")
    assert response.status_code == 500
    assert response.json() == {"detail": "Server error: the studio could not answer (see its log)."}
    page = get_resolver().resolve_error_handler(500)(RequestFactory().get("/runs/"))
    assert page.status_code == 500
    assert page["Content-Type"].startswith("text/html")
