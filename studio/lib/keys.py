"""Bearer keys the studio hands out once and keeps only as a digest (team API tokens, run ingest tokens).

A key is 32 random bytes (secrets.token_urlsafe) after a prefix that says what it opens; a SHA-256 rather than
a slow password hash is kept, as the key has 256 bits of entropy.
"""

from __future__ import annotations

import hashlib
import secrets


def new_key(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def digest(key: str) -> str:
    """The stored form of `key`; text that is no valid UTF-8 (a lone surrogate) digests without raising."""
    return hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()
