"""`jobs.outbound.sendable_url`: what a URL is sent as, and the characters no URL holds as
they are, as the `http_request` payload schema states them too."""

from __future__ import annotations

import re
import sys
import unicodedata

import jsonschema_rs
import pytest
from jsonschema import Draft202012Validator

from jobs.outbound import SENDABLE_URL_PATTERN, UnsendableURL, sendable_url

UNWRITTEN_CATEGORIES = {"Cc", "Cf", "Zs", "Zl", "Zp"}


@pytest.mark.parametrize(
    ("url", "sent"),
    [
        ("http://127.0.0.1:18210/café", "http://127.0.0.1:18210/caf%C3%A9"),
        (
            "https://例え.テスト/パス?q=ü#top",
            "https://xn--r8jz45g.xn--zckzah/%E3%83%91%E3%82%B9?q=%C3%BC#top",
        ),
        # IDNA 2008, as browsers: IDNA 2003 (Python's "idna" codec) would send it to fass.de.
        ("https://faß.de/", "https://xn--fa-hia.de/"),
        # UTS 46 maps full-width forms and the ideographic full stop.
        ("https://\uff25\uff38\uff21\uff2d\uff30\uff2c\uff25\u3002com/", "https://example.com/"),
        # The escapes written stay as they are; only what is beyond ASCII is %-encoded.
        (
            "https://example.com/caf%C3%A9/é?a=%2F&b=<x>",
            "https://example.com/caf%C3%A9/%C3%A9?a=%2F&b=<x>",
        ),
        ("http://[::1]:8080/ü", "http://[::1]:8080/%C3%BC"),
        ("https://my_svc.例え:8443/x", "https://my_svc.xn--r8jz45g:8443/x"),
        ("https://example.com./é", "https://example.com./%C3%A9"),
        ("https://Example.COM/a?x=<y>|{z}", "https://Example.COM/a?x=<y>|{z}"),
    ],
)
def test_a_url_is_sent_with_its_host_through_idna_and_the_rest_percent_encoded(
    url: str, sent: str
) -> None:
    assert sendable_url(url) == sent


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://example.com/", "Enter an http:// or https:// URL."),
        (
            "https://example.com/a\N{LEFT-TO-RIGHT MARK}b",
            "Must not hold U+200E LEFT-TO-RIGHT MARK (character 22)",
        ),
        ("https://example.com/\N{NO-BREAK SPACE}", "Must not hold U+00A0 NO-BREAK SPACE"),
        ("https://example.com/\x85", "Must not hold U+0085 (character 21)"),
        ("https://example.com/\U000e0041", "Must not hold U+E0041 TAG LATIN CAPITAL LETTER A"),
        ("https://[::1/", "Its host or port cannot be read: Invalid IPv6 URL."),
        (
            "https://example.com:99999/",
            "Its port 99999 is no port a request can reach: use 1 to 65535",
        ),
        ("https://:443/", "Names no host after https://."),
        ("https://" + "a" * 64 + ".com/", "has a label over 63 characters."),
        ("https://exa mple.com/", "Must not hold U+0020 SPACE"),
        ("https://exa%41mple.com/", "Its host 'exa%41mple.com' holds '%'"),
        ("https://☃.net/", "Its host '☃.net' is not a name IDNA can encode"),
        # A label of right-to-left letters cannot end in a left-to-right one (RFC 5893).
        ("https://\N{ARABIC LETTER ALEF}b.com/", "is not a name IDNA can encode"),
    ],
)
def test_what_no_request_can_carry_is_refused_naming_it(url: str, message: str) -> None:
    with pytest.raises(UnsendableURL) as refused:
        sendable_url(url)
    assert message in str(refused.value)


def test_the_characters_no_url_holds_are_unicodes_controls_spaces_and_format_characters() -> None:
    unwritten = re.compile(SENDABLE_URL_PATTERN)
    for code_point in range(sys.maxunicode + 1):
        character = chr(code_point)
        category = unicodedata.category(character)
        if 0xD800 <= code_point <= 0xDFFF:
            continue  # no JSON payload holds a lone surrogate (jobs.limits)
        refused = unwritten.match(f"https://example.com/{character}") is None
        # Beyond those categories only code points Python's Unicode has not assigned yet.
        assert refused == (category in UNWRITTEN_CATEGORIES) or (refused and category == "Cn"), (
            f"U+{code_point:04X} ({category})"
        )


@pytest.mark.parametrize(
    "url",
    [
        "https://例え.テスト/パス",
        "https://例え.テスト/\N{RIGHT-TO-LEFT OVERRIDE}evil",
        "https://example.com/\U000e0041",
        "https://example.com/\U0001f600",
        "https://example.com/a\nb",
        "https://example.com/a\n",
        "http://x",
        "ftp://x",
    ],
)
def test_both_schema_implementations_read_the_pattern_alike(url: str) -> None:
    # jsonschema-rs answers first and jsonschema decides what it refuses (jobs.registry).
    schema = {"type": "string", "pattern": SENDABLE_URL_PATTERN}
    fits = jsonschema_rs.Draft202012Validator(schema, offline=True).is_valid(url)
    assert fits == Draft202012Validator(schema).is_valid(url)
    if not fits:  # the schema states a part of sendable_url's rules, never more
        with pytest.raises(UnsendableURL):
            sendable_url(url)
