"""plotly.js served by the studio itself, from the installed `plotly` Python package.

Never from a CDN and never copied into the repository. The file is 4-5 MB; we read it once,
keep a gzipped copy in memory, and let browsers cache it for a year: the URL carries the
package version (`?v=`), so an upgrade changes the URL.
"""

from __future__ import annotations

import gzip
import hashlib
from functools import lru_cache
from importlib import metadata
from importlib.resources import files

from django.http import HttpRequest, HttpResponse, HttpResponseNotModified
from django.views.decorators.http import require_GET

CACHE_CONTROL = "public, max-age=31536000, immutable"


def plotly_version() -> str:
    return metadata.version("plotly")


@lru_cache(maxsize=1)
def _bundle() -> tuple[bytes, bytes, str]:
    """(raw bytes, gzipped bytes, etag). Reads and compresses the file once per process."""
    raw = (files("plotly") / "package_data" / "plotly.min.js").read_bytes()
    etag = f'"plotly-{plotly_version()}-{hashlib.sha256(raw).hexdigest()[:16]}"'
    return raw, gzip.compress(raw, compresslevel=6, mtime=0), etag


@require_GET
def plotly_js(request: HttpRequest) -> HttpResponse:
    raw, zipped, etag = _bundle()
    if request.headers.get("If-None-Match") == etag:
        return HttpResponseNotModified(headers={"ETag": etag, "Cache-Control": CACHE_CONTROL})
    use_gzip = "gzip" in request.headers.get("Accept-Encoding", "")
    response = HttpResponse(zipped if use_gzip else raw, content_type="text/javascript; charset=utf-8")
    if use_gzip:
        response["Content-Encoding"] = "gzip"
    response["Vary"] = "Accept-Encoding"
    response["ETag"] = etag
    response["Cache-Control"] = CACHE_CONTROL
    return response
