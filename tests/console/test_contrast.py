"""Contrast of the console's danger colours, read from `console.css` for both themes: WCAG
2's 4.5:1 for normal text. The dark theme's filled danger buttons ("Purge permanently",
"Delete schedule", the confirmations) were white on #ff7a6e, 2.54:1."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

CSS = (Path(__file__).resolve().parents[2] / "static" / "console" / "console.css").read_text()
TOKENS = {
    name: {"light": light, "dark": dark}
    for name, light, dark in re.findall(
        r"(--[\w-]+):\s*light-dark\((#[0-9a-f]{6}),\s*(#[0-9a-f]{6})\)", CSS
    )
}
AA_NORMAL_TEXT = 4.5


def declarations(selector: str) -> dict[str, str]:
    """The declarations of the rule written for exactly `selector`."""
    body = re.search(rf"^{re.escape(selector)}\s*\{{([^}}]*)\}}", CSS, re.MULTILINE)
    assert body is not None, selector
    pairs = (part.split(":", 1) for part in body.group(1).split(";") if part.strip())
    return {name.strip(): value.strip() for name, value in pairs}


def colour(value: str, theme: str) -> str:
    """A `#rgb`, `#rrggbb` or `var(--token)` value as the theme draws it, as `#rrggbb`."""
    token = re.fullmatch(r"var\((--[\w-]+)\)", value)
    drawn = TOKENS[token.group(1)][theme] if token else value
    return "#" + "".join(digit * 2 for digit in drawn[1:]) if len(drawn) == 4 else drawn


def luminance(hex_colour: str) -> float:
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    red, green, blue = (
        c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels
    )
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def contrast(one: str, other: str) -> float:
    darker, lighter = sorted([luminance(one), luminance(other)])
    return (lighter + 0.05) / (darker + 0.05)


def test_the_ratio_is_wcags() -> None:
    assert contrast("#ffffff", "#000000") == pytest.approx(21)
    assert contrast("#ffffff", "#ff7a6e") == pytest.approx(2.54, abs=0.01)


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize(
    "selector",
    ['form .btn.danger[type="submit"]', ".btn.danger", ".flash-error", ".form-error"],
)
def test_danger_text_is_readable_on_its_own_background(selector: str, theme: str) -> None:
    drawn = declarations(selector)
    ratio = contrast(colour(drawn["color"], theme), colour(drawn["background"], theme))
    assert ratio >= AA_NORMAL_TEXT, (selector, theme, round(ratio, 2))


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("background", ["--bg", "--surface", "--surface-2", "--danger-soft"])
def test_danger_text_is_readable_on_every_background_it_is_drawn_on(
    background: str, theme: str
) -> None:
    # Error text, field errors and outlined danger buttons sit on the page, on panels, on
    # table headers and hovered rows, and on the soft danger of refused rows and of a hover.
    ratio = contrast(TOKENS["--danger"][theme], TOKENS[background][theme])
    assert ratio >= AA_NORMAL_TEXT, (background, theme, round(ratio, 2))
