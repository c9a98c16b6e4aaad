"""plotly.js comes from the installed plotly package, served by the studio with long caching."""

import gzip
from importlib import metadata

from django.template import Context, Template


def test_it_serves_plotly_gzipped_with_a_year_of_caching(client, db):
    resp = client.get("/static-vendor/plotly.min.js", HTTP_ACCEPT_ENCODING="gzip, br")
    assert resp.status_code == 200
    assert resp["Content-Type"].startswith("text/javascript")
    assert resp["Content-Encoding"] == "gzip"
    assert "max-age=31536000" in resp["Cache-Control"]
    body = gzip.decompress(resp.content)
    assert b"plotly.js" in body[:2000] and len(body) > 1_000_000


def test_it_answers_304_when_the_browser_has_it(client, db):
    etag = client.get("/static-vendor/plotly.min.js")["ETag"]
    resp = client.get("/static-vendor/plotly.min.js", HTTP_IF_NONE_MATCH=etag)
    assert resp.status_code == 304


def test_the_template_tag_puts_the_version_in_the_url(db):
    html = Template("{% load vendor_assets %}{% plotly_js_url %}").render(Context())
    assert html == f"/static-vendor/plotly.min.js?v={metadata.version('plotly')}"
