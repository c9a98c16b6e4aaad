"""Sign-in resists guessing (django-axes, studio.accounts.lockout): after AXES_FAILURE_LIMIT wrong
passwords for one username from one address, the sign-in page and POST /api/token/ refuse even the
right password (429, saying why and for how long) until the cool-off has passed or an admin lifts it.
A password change ends the user's sessions and revokes their API token. Static files are served with
nosniff; HTTPS settings come from one switch.

Each test that fails sign-ins on purpose has a user of its own ("guessed") and an address of its own,
so no lockout reaches another test (and the database rows are rolled back after each)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from channels.testing import ApplicationCommunicator
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

PASSWORD = "right-password-1"
GUESSES = 20
ADDRESS = "198.51.100.7"  # TEST-NET-2: an address no other test signs in from

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def lockout_on(settings):
    # The defaults, whatever STUDIO_LOGIN_* the suite runs under.
    settings.AXES_ENABLED, settings.AXES_FAILURE_LIMIT, settings.AXES_COOLOFF_TIME = True, 10, timedelta(minutes=15)


@pytest.fixture
def guessed(db):
    return get_user_model().objects.create_user("guessed", password=PASSWORD)


def sign_in(client: Client, password: str, address: str = ADDRESS):
    return client.post("/login/", {"username": "guessed", "password": password}, REMOTE_ADDR=address)


def ask_token(client: APIClient, password: str, address: str = ADDRESS):
    return client.post("/api/token/", {"username": "guessed", "password": password}, format="json",
                       REMOTE_ADDR=address)  # fmt: skip


def signed_in(client: Client) -> bool:
    return client.get("/").status_code == 200  # the home page; otherwise a redirect to /login/


def test_twenty_wrong_passwords_lock_the_sign_in_page_even_for_the_right_one(guessed, settings):
    client = Client()
    answers = [sign_in(client, f"guess-{i}").status_code for i in range(GUESSES)]
    limit = settings.AXES_FAILURE_LIMIT
    assert answers[: limit - 1] == [200] * (limit - 1)  # the form again: "Wrong username or password"
    assert set(answers[limit:]) == {429}
    locked = sign_in(client, PASSWORD)
    assert locked.status_code == 429
    assert b"Too many failed sign-ins" in locked.content and b"locked for 15 minutes" in locked.content
    assert not signed_in(client)
    assert sign_in(Client(), PASSWORD, address="203.0.113.9").status_code == 302  # another address is not locked


def test_after_the_cool_off_the_right_password_signs_in_again(guessed, settings):
    client = Client()
    for i in range(settings.AXES_FAILURE_LIMIT):
        sign_in(client, f"guess-{i}")
    assert sign_in(client, PASSWORD).status_code == 429
    # The cool-off passes: the failures are moved back in time rather than the test waiting for it.
    past = settings.AXES_COOLOFF_TIME + timedelta(seconds=1)
    for attempt in AccessAttempt.objects.filter(username="guessed"):
        AccessAttempt.objects.filter(pk=attempt.pk).update(attempt_time=attempt.attempt_time - past)
    assert sign_in(client, PASSWORD).status_code == 302
    assert signed_in(client)
    assert not AccessAttempt.objects.filter(username="guessed").exists()  # a success clears the count


def test_twenty_wrong_passwords_lock_the_token_endpoint_until_an_admin_lifts_it(guessed, settings):
    client = APIClient()
    answers = [ask_token(client, f"guess-{i}") for i in range(GUESSES)]
    limit = settings.AXES_FAILURE_LIMIT
    assert [a.status_code for a in answers[: limit - 1]] == [400] * (limit - 1)
    assert {a.status_code for a in answers[limit:]} == {429}
    locked = ask_token(client, PASSWORD)
    assert locked.status_code == 429
    assert locked.json()["locked"] is True and "Too many failed sign-ins" in locked.json()["detail"]
    assert not Token.objects.filter(user=guessed).exists()
    call_command("axes_reset_username", "guessed")
    answer = ask_token(client, PASSWORD)
    assert answer.status_code == 200 and answer.json()["token"] == Token.objects.get(user=guessed).key


def test_a_username_longer_than_any_user_s_is_refused_before_sign_in_is_tried(guessed):
    # django-axes would record it in a 255-character column, which PostgreSQL refuses to overflow (a 500).
    for long_name in ("x" * 151, "é" * 300):
        for body in ({"username": long_name, "password": "p"}, {"username": long_name, "password": PASSWORD}):
            answer = APIClient().post("/api/token/", body, format="json", REMOTE_ADDR=ADDRESS)
            assert answer.status_code == 400 and "username" in answer.json()
    assert not AccessAttempt.objects.exists()  # not a failed sign-in: no attempt was made
    assert ask_token(APIClient(), PASSWORD).status_code == 200


def test_a_lockout_on_the_page_also_locks_the_token_endpoint(guessed, settings):
    for i in range(settings.AXES_FAILURE_LIMIT):
        sign_in(Client(), f"guess-{i}")
    assert ask_token(APIClient(), PASSWORD).status_code == 429


def test_a_success_resets_the_count_so_a_user_who_mistypes_now_and_then_is_never_locked(guessed, settings):
    client = Client()
    for _ in range(3):
        for i in range(settings.AXES_FAILURE_LIMIT - 1):
            assert sign_in(client, f"typo-{i}").status_code == 200
        assert sign_in(client, PASSWORD).status_code == 302
        client.post("/logout/")


def test_changing_the_password_revokes_the_api_token_and_ends_sessions(guessed):
    token = Token.objects.create(user=guessed)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert api.get("/api/teams/").status_code == 200
    browser = Client()
    assert sign_in(browser, PASSWORD).status_code == 302 and signed_in(browser)

    guessed.set_password("a-new-password-2")
    guessed.save()

    refused = api.get("/api/teams/")
    assert refused.status_code == 403 and refused.json()["detail"] == "Invalid token."
    assert not Token.objects.filter(user=guessed).exists()
    assert not signed_in(browser)  # the session was made with the old password
    answer = APIClient().post("/api/token/", {"username": "guessed", "password": "a-new-password-2"}, format="json")
    assert answer.status_code == 200 and answer.json()["token"] != token.key


def test_saving_a_user_without_a_new_password_keeps_the_token(guessed):
    token = Token.objects.create(user=guessed)
    guessed.first_name = "G"
    guessed.save()
    sign_in(Client(), PASSWORD)  # records last_login: a save too
    assert Token.objects.filter(key=token.key).exists()


def test_a_static_file_is_served_with_nosniff(settings):
    from studio.asgi import application

    async def get(path: str) -> tuple[int, dict]:
        scope = {"type": "http", "http_version": "1.1", "method": "GET", "path": path, "raw_path": path.encode(),
                 "query_string": b"", "headers": [(b"host", b"localhost")], "scheme": "http",
                 "server": ("localhost", 80), "client": ("127.0.0.1", 5000)}  # fmt: skip
        communicator = ApplicationCommunicator(application, scope)
        await communicator.send_input({"type": "http.request", "body": b"", "more_body": False})
        start = await communicator.receive_output(timeout=10)
        while (await communicator.receive_output(timeout=10)).get("more_body"):
            pass
        await communicator.wait(timeout=10)
        return start["status"], {name.lower(): value for name, value in start["headers"]}

    from asgiref.sync import async_to_sync

    status, headers = async_to_sync(get)("/static/js/share.js")
    assert status == 200 and headers[b"x-content-type-options"] == b"nosniff"
    assert headers[b"content-type"].startswith(b"text/javascript")
    status, headers = async_to_sync(get)("/static/js/no-such-file.js")
    assert status == 404 and headers[b"x-content-type-options"] == b"nosniff"


def https_settings(**env: str) -> dict:
    """The settings the studio starts with under this environment (a fresh process reads them)."""
    names = ["SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_HSTS_SECONDS", "SECURE_PROXY_SSL_HEADER",
             "SECURE_SSL_REDIRECT", "AXES_FAILURE_LIMIT", "AXES_COOLOFF_TIME"]  # fmt: skip
    code = ("import json, django; from django.conf import settings; django.setup(); "
            f"print(json.dumps({{n: str(getattr(settings, n)) for n in {names!r}}}))")  # fmt: skip
    environ = {**os.environ, "DJANGO_SETTINGS_MODULE": "studio.settings", **env}
    out = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_https_settings_and_the_lockout_come_from_the_environment():
    plain = https_settings(STUDIO_HTTPS="0")
    assert (plain["SESSION_COOKIE_SECURE"], plain["SECURE_HSTS_SECONDS"], plain["SECURE_PROXY_SSL_HEADER"]) == (
        "False", "0", "None")  # fmt: skip
    secure = https_settings(STUDIO_HTTPS="1", STUDIO_LOGIN_FAILURE_LIMIT="5", STUDIO_LOGIN_COOLOFF_MINUTES="2")
    assert secure["SESSION_COOKIE_SECURE"] == secure["CSRF_COOKIE_SECURE"] == "True"
    assert secure["SECURE_HSTS_SECONDS"] == "31536000"
    assert secure["SECURE_PROXY_SSL_HEADER"] == "('HTTP_X_FORWARDED_PROTO', 'https')"
    assert secure["SECURE_SSL_REDIRECT"] == "False"  # the proxy redirects; the launcher's checks use plain HTTP
    assert (secure["AXES_FAILURE_LIMIT"], secure["AXES_COOLOFF_TIME"]) == ("5", "0:02:00")


@pytest.mark.timeout(120)
@pytest.mark.django_db(transaction=True)
async def test_the_lockout_holds_through_the_studios_asgi_application(settings):
    """The path daphne serves (django-axes' asynchronous middleware, a real CSRF check on the page)."""
    import httpx
    from channels.db import database_sync_to_async

    from studio.asgi import application

    settings.AXES_ENABLED, settings.AXES_FAILURE_LIMIT = True, 10
    await database_sync_to_async(get_user_model().objects.create_user)("guessed", password=PASSWORD)
    transport = httpx.ASGITransport(app=application, client=(ADDRESS, 5000))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as web:
        await web.get("/login/")
        form = {"username": "guessed", "csrfmiddlewaretoken": web.cookies["csrftoken"]}
        for i in range(GUESSES):
            await web.post("/login/", data={**form, "password": f"guess-{i}"})
        page = await web.post("/login/", data={**form, "password": PASSWORD})
        assert page.status_code == 429 and "Too many failed sign-ins" in page.text
        token = await web.post("/api/token/", json={"username": "guessed", "password": PASSWORD})
        assert token.status_code == 429 and token.json()["locked"] is True
        await database_sync_to_async(call_command)("axes_reset_username", "guessed")
        token = await web.post("/api/token/", json={"username": "guessed", "password": PASSWORD})
        assert token.status_code == 200, token.text


def test_a_guesser_cannot_reach_a_fresh_count_by_writing_x_forwarded_for(guessed, settings):
    settings.BEHIND_PROXY = False
    client = Client()
    for i in range(settings.AXES_FAILURE_LIMIT):
        client.post("/login/", {"username": "guessed", "password": f"g-{i}"}, REMOTE_ADDR=ADDRESS,
                    HTTP_X_FORWARDED_FOR=f"10.0.0.{i}")  # fmt: skip
    assert sign_in(client, PASSWORD).status_code == 429


def test_behind_the_proxy_the_address_it_appended_is_the_one_locked(guessed, settings):
    settings.BEHIND_PROXY = True
    proxy = "10.1.1.1"

    def through_proxy(password: str, client_says: str, proxy_saw: str):
        return Client().post("/login/", {"username": "guessed", "password": password}, REMOTE_ADDR=proxy,
                             HTTP_X_FORWARDED_FOR=f"{client_says}, {proxy_saw}")  # fmt: skip

    for i in range(settings.AXES_FAILURE_LIMIT):
        through_proxy(f"g-{i}", client_says=f"10.0.0.{i}", proxy_saw=ADDRESS)
    assert through_proxy(PASSWORD, client_says="10.9.9.9", proxy_saw=ADDRESS).status_code == 429
    assert through_proxy(PASSWORD, client_says=ADDRESS, proxy_saw="203.0.113.9").status_code == 302  # someone else
