"""The console's static files and the vendored htmx (`CONSOLE_ASSETS_DIR`, `make setup`)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Response
from fastapi.responses import FileResponse

from console.entrypoints.dependencies import ConsoleDep

PACKAGE_DIR = Path(__file__).resolve().parents[1]
STATIC_DIR = PACKAGE_DIR / "static"
VENDOR_FILES = {"htmx.min.js": Path("htmx.org/dist/htmx.min.js")}  # axe-core (npm) is the tests' alone

router = APIRouter(include_in_schema=False)


@router.get("/static/{name}")
async def static(name: str) -> Response:
    if name not in {p.name for p in STATIC_DIR.iterdir()}:
        return Response(status_code=404)
    return FileResponse(STATIC_DIR / name, headers={"Cache-Control": "public, max-age=300"})


@router.get("/static/vendor/{name}")
async def vendor(name: str, console: ConsoleDep) -> Response:
    relative = VENDOR_FILES.get(name)
    if relative is None or not (console.settings.assets_dir / relative).is_file():
        return Response(status_code=404)
    return FileResponse(
        console.settings.assets_dir / relative, headers={"Cache-Control": "public, max-age=3600"}
    )
