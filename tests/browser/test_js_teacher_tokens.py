"""The inspector's teacher disagreement (rollout_detail.js teacherTokensHtml) under node, without a browser: each
completion token shaded by the level of its reverse KL (warm above 0, cool below, muted where no teacher
scored it), its text escaped, the mean over scored tokens said; nothing at all without teacher tokens."""

import json

import pytest

from tests.browser.test_js_units import NODE, run_js

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed")


def test_each_token_is_shaded_by_its_reverse_kl_and_escaped(tmp_path):
    tokens = [["a", 0.0], ["<b>", 1.5], [" c", -0.6], ["d", None], ["e", 3.0]]
    got = run_js(tmp_path, f"""
        const {{ teacherTokensHtml }} = await import("./rollout_detail.js");
        console.log(JSON.stringify({{ html: teacherTokensHtml({json.dumps(tokens)}), none: teacherTokensHtml(null),
                                      empty: teacherTokensHtml([]) }}));
        """)  # fmt: skip
    html = got["html"]
    assert 'class="tkl tkl-p0" data-kl="0"' in html  # agreement: no shade
    assert 'class="tkl tkl-p3" data-kl="1.5" title="reverse KL 1.5">&lt;b&gt;</span>' in html
    assert 'class="tkl tkl-n2" data-kl="-0.6"' in html
    assert 'class="tkl tkl-none" title="not scored by a teacher">d</span>' in html
    assert 'class="tkl tkl-p4" data-kl="3"' in html
    assert "Mean 0.975 over 4 tokens" in html  # (0 + 1.5 - 0.6 + 3) / 4
    assert got["none"] == "" and got["empty"] == ""
