"""What every test in the test process shares."""

import pytest
from django.test import override_settings


@pytest.fixture(autouse=True, scope="session")
def fast_password_hashing():
    """Passwords hashed with MD5 in the test process, as Django's testing docs advise: the studio's hasher
    (PBKDF2, about 0.25 s a password here by design) made each studio test case's setUp, which creates its
    four people (tests/studio/people.py), cost a second. What a test checks of sign-in does not depend on
    the hasher; studios that tests start as processes of their own keep the studio's."""
    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield
