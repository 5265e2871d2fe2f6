"""The documentation site builds in strict mode: no broken link, anchor or API reference."""

from __future__ import annotations

import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

# Tags the theme and Markdown emit. Anything else in a page is a `<placeholder>` from a docstring or page
# that Markdown took for HTML and the browser will hide.
# fmt: off
HTML_TAGS = frozenset((
    "a", "abbr", "article", "aside", "b", "blockquote", "body", "br", "button", "caption", "code", "col",
    "colgroup", "dd", "del", "details", "div", "dl", "dt", "em", "figcaption", "figure", "footer", "form", "h1",
    "h2", "h3", "h4", "h5", "h6", "head", "header", "hr", "html", "i", "img", "input", "kbd", "label", "li",
    "link", "main", "mark", "meta", "nav", "ol", "option", "p", "path", "pre", "q", "s", "samp", "script",
    "section", "select", "small", "span", "strong", "style", "sub", "summary", "sup", "svg", "table", "tbody",
    "td", "textarea", "th", "thead", "time", "title", "tr", "u", "ul", "var",
))
# fmt: on


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.unknown: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in HTML_TAGS:
            self.unknown.add(tag)


def test_the_site_builds_strictly_with_its_api_reference(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    reference = (site / "api" / "data" / "index.html").read_text()
    for name in ("dew.data.Loading", "dew.data.tokens.windows.TokenWindows", "dew.data.checkpoints.DataPositionSave"):
        assert f'id="{name}"' in reference, f"the API reference has no entry {name}"
    swallowed = {}
    for page in site.rglob("*.html"):
        parser = _Tags()
        parser.feed(page.read_text())
        if parser.unknown:
            swallowed[str(page.relative_to(site))] = sorted(parser.unknown)
    assert not swallowed, f"text in angle brackets rendered as HTML tags (put it in backticks): {swallowed}"
