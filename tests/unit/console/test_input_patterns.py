"""Every `pattern` attribute of the console is valid as browsers compile it (the `v` flag) and accepts and
refuses exactly what the server-side rule it mirrors does.

Templates take their patterns from `console.domain.input_patterns` only (so each names its rule); each one
is compiled by Node.js as a browser compiles it and tested, with its rule, on the same samples: every
printable ASCII character and a few others, pairs of them, runs at and around the length limits, and
lookalikes of real values. The browser suite checks the same in Chromium on every page it visits.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from itertools import product

from console.domain.input_patterns import INPUT_PATTERNS
from console.entrypoints.templating import TEMPLATES_DIR
from tests.unit.console.conftest import ClientFactory, login_page
from tests.unit.console.ecmascript import pattern_verdicts

ATTRIBUTE = re.compile(r"""\spattern\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""")
FROM_INPUT_PATTERNS = re.compile(r"\{\{ input_patterns\.(\w+)\.html \}\}")
ALPHABET = [chr(c) for c in range(0x20, 0x7F)] + ["\t", "\n", "\u00a0", "é", "ß", "\u212a", "٣", "😀"]
PAIRS = "aZ09._:@-/\\ é|[]"
LENGTHS = (63, 64, 65, 127, 128, 129, 255, 256, 257)
LOOKALIKES = [
    "",
    "alice",
    "alice@example.com",
    "svc:media-worker",
    "op-1a2b3c",
    "a b",
    "a\nb",
    "alice\n",
    "\nalice",
    "-a",
    "a-",
    "..",
    "a..b",
    "@@",
    "--",
    "a&&b",
]


def _samples() -> list[str]:
    pairs = ["".join(p) for p in product(PAIRS, repeat=2)]
    runs = [c * n for c in ALPHABET for n in LENGTHS]
    return list(dict.fromkeys([*ALPHABET, *pairs, *runs, *LOOKALIKES]))


def test_every_pattern_attribute_of_a_template_is_an_input_pattern() -> None:
    used: set[str] = set()
    templates = sorted(TEMPLATES_DIR.rglob("*.html"))
    assert templates
    for template in templates:
        for found in ATTRIBUTE.finditer(template.read_text(encoding="utf-8")):
            value = next(v for v in found.groups() if v is not None)
            name = FROM_INPUT_PATTERNS.fullmatch(value)
            where = template.relative_to(TEMPLATES_DIR)
            assert name is not None, f"{where}: pattern={value!r}: take it from INPUT_PATTERNS, with its rule"
            assert name[1] in INPUT_PATTERNS, f"{where}: no input pattern {name[1]!r}"
            used.add(name[1])
    assert used == set(INPUT_PATTERNS), f"input patterns no template uses: {set(INPUT_PATTERNS) - used}"


def test_every_input_pattern_compiles_under_the_v_flag_and_mirrors_its_rule() -> None:
    samples = _samples()
    names = list(INPUT_PATTERNS)
    verdicts = pattern_verdicts([INPUT_PATTERNS[n].html for n in names], samples)
    for name, verdict in zip(names, verdicts, strict=True):
        pattern = INPUT_PATTERNS[name]
        assert verdict.error is None, f"{name}: {pattern.html!r} does not compile under v: {verdict.error}"
        differ = [
            (repr(s[:12]) + (f" +{len(s) - 12} more" if len(s) > 12 else ""), browser)
            for s, browser in zip(samples, verdict.accepts, strict=True)
            if browser != (pattern.mirrors.fullmatch(s) is not None)
        ]
        assert not differ, (
            f"{name}: the browser and {pattern.rule} disagree on (sample, browser's verdict): "
            + (f"{differ[:10]}")
        )
        assert any(verdict.accepts) and not all(verdict.accepts), f"{name}: the samples prove nothing"


def test_the_engine_refuses_what_browsers_refuse_under_v() -> None:
    """The check itself: what the `u` flag accepts and `v` refuses (a class ending in `-`, a doubled
    punctuator, an unescaped `(` in a class) fails here, and its escaped form passes."""
    refused = ["[A-Za-z0-9._:@-]+", "[a..b]", "[(]", "[a-z|]"]
    verdicts = pattern_verdicts([*refused, r"[A-Za-z0-9._:@\-]+", r"[a.\.b]", r"[\(]"], ["a"])
    assert [v.error is not None for v in verdicts] == [True] * 4 + [False] * 3, verdicts
    assert "Invalid character in character class" in (verdicts[0].error or "")


class _Patterns(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("pattern") is not None:
            self.found[values.get("id") or tag] = values["pattern"] or ""


async def test_the_login_page_serves_the_subject_pattern_as_written(
    console_env: dict[str, str], client_for: ClientFactory
) -> None:
    """Rendered and served (autoescaped, then read back by an HTML parser as a browser does)."""
    page = await login_page(client_for())
    parser = _Patterns()
    parser.feed(page.text)
    assert parser.found == {"subject": INPUT_PATTERNS["subject"].html}
