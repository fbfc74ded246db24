"""Every asset a page asks for is served: each `/static/...` a template references answers 200, and the
pages declare their icon (without one a browser asks for `/favicon.ico`, which the console does not serve:
a 404 in the console of every page)."""

from __future__ import annotations

import re

from console.entrypoints.templating import TEMPLATES_DIR
from tests.unit.console.conftest import ClientFactory, login_page

REFERENCE = re.compile(r"""(?:href|src)="(/static/[^"{}]+)\"""")
ICON = re.compile(r"""<link rel="icon" href="(/static/[^"]+)" type="image/svg\+xml">""")


def _references() -> set[str]:
    return {
        r for t in TEMPLATES_DIR.rglob("*.html") for r in REFERENCE.findall(t.read_text(encoding="utf-8"))
    }


async def test_every_asset_a_template_references_is_served(
    console_env: dict[str, str], client_for: ClientFactory
) -> None:
    references = _references()
    assert {"/static/console.css", "/static/console.js", "/static/vendor/htmx.min.js"} <= references
    client = client_for()
    for path in sorted(references):
        answer = await client.get(path)
        assert answer.status_code == 200, path
        assert answer.content, path


async def test_the_pages_declare_an_svg_icon_that_is_served(
    console_env: dict[str, str], client_for: ClientFactory
) -> None:
    page = await login_page(client_for())
    icon = ICON.search(page.text)
    assert icon is not None, "no <link rel=icon>: browsers ask for /favicon.ico"
    answer = await client_for().get(icon[1])
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("image/svg+xml")
    assert answer.text.startswith("<svg ")
