"""Make the site ``asv publish`` writes work without the internet.

asv's ``index.html`` loads jQuery, flot, bootstrap and two small libraries from CDNs and shows
no data without them, which on a closed network (CI, a lab) means an empty page. The same files
are on the npm registry: :func:`fetch_assets` runs ``npm pack`` once per package into a cache
folder, and :func:`make_offline` copies the files a page references (and the fonts its CSS
references) into ``<html_dir>/vendor/`` and points the page's tags at them. It runs after every
``asv publish``, which rewrites the pages.

Run as ``python -m srbench.asv_tracking.offline_html [--fetch-only] [HTML_DIR]``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from srbench.fileio import atomic_write_text

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_VENDOR_DIR = REPO_ROOT / ".asv" / "vendor"
VENDOR_DIR_VARIABLE = "SRBENCH_ASV_VENDOR_DIR"
VENDOR_SUBDIR = "vendor"


class OfflineAssetError(RuntimeError):
    """An asset could not be fetched, or a page references a CDN file we have no copy of."""


@dataclass(frozen=True)
class NpmPackage:
    name: str
    version: str

    @property
    def spec(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def tarball_name(self) -> str:
        return f"{self.name}-{self.version}.tgz"


@dataclass(frozen=True)
class CdnAsset:
    """One CDN URL of asv's pages and the file of an npm package that replaces it."""

    url: str
    package: NpmPackage
    path: str  # inside the package (without the tarball's leading "package/")


JQUERY = NpmPackage("jquery", "3.3.1")
FLOT = NpmPackage("flot", "0.8.3")
FLOT_ORDERBARS = NpmPackage("flot-orderbars", "1.0.0")
BOOTSTRAP = NpmPackage("bootstrap", "3.1.1")
BLUEIMP_MD5 = NpmPackage("blueimp-md5", "2.19.0")
STUPID_TABLE = NpmPackage("stupid-table-plugin", "1.1.3")
PACKAGES = (JQUERY, FLOT, FLOT_ORDERBARS, BOOTSTRAP, BLUEIMP_MD5, STUPID_TABLE)

_CDNJS = "https://cdnjs.cloudflare.com/ajax/libs"
_JSDELIVR = "https://cdn.jsdelivr.net/npm"
# The URLs in asv 0.6's www/index.html. flot's npm package ships its plugins unminified;
# cdnjs's stupidtable 1.0.1 is the same plugin as npm's stupid-table-plugin 1.1.3 for asv's use.
CDN_ASSETS = (
    CdnAsset("https://code.jquery.com/jquery-3.3.1.min.js", JQUERY, "dist/jquery.min.js"),
    CdnAsset(f"{_CDNJS}/flot/0.8.3/jquery.flot.min.js", FLOT, "jquery.flot.js"),
    CdnAsset(f"{_CDNJS}/flot/0.8.3/jquery.flot.time.min.js", FLOT, "jquery.flot.time.js"),
    CdnAsset(f"{_CDNJS}/flot/0.8.3/jquery.flot.selection.min.js", FLOT, "jquery.flot.selection.js"),
    CdnAsset(f"{_CDNJS}/flot/0.8.3/jquery.flot.categories.min.js", FLOT, "jquery.flot.categories.js"),
    CdnAsset(
        f"{_JSDELIVR}/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js",
        FLOT_ORDERBARS,
        "js/jquery.flot.orderBars.js",
    ),
    CdnAsset(f"{_CDNJS}/stupidtable/1.0.1/stupidtable.min.js", STUPID_TABLE, "stupidtable.min.js"),
    CdnAsset(f"{_CDNJS}/blueimp-md5/2.19.0/js/md5.min.js", BLUEIMP_MD5, "js/md5.min.js"),
    CdnAsset(f"{_JSDELIVR}/bootstrap@3.1.1/dist/js/bootstrap.min.js", BOOTSTRAP, "dist/js/bootstrap.min.js"),
    CdnAsset(f"{_JSDELIVR}/bootstrap@3.1.1/dist/css/bootstrap.min.css", BOOTSTRAP, "dist/css/bootstrap.min.css"),
)
_ASSET_BY_URL = {asset.url: asset for asset in CDN_ASSETS}

# A <script src=...> or <link href=...> tag; the URL attribute is captured.
_TAG = re.compile(r"<(?:script|link)\b[^>]*?\b(?:src|href)=\"(?P<url>[^\"]+)\"[^>]*>", re.IGNORECASE)
# Attributes that only make sense for a cross-origin CDN copy (the hashes are of the CDN's build).
_CDN_ATTRIBUTES = re.compile(r"\s+(?:integrity|crossorigin|referrerpolicy)=\"[^\"]*\"", re.IGNORECASE)
_CSS_URL = re.compile(r"url\(\s*['\"]?(?P<ref>[^'\")?#]+)[^)]*\)")


def vendor_dir() -> Path:
    """The cache of npm tarballs: ``$SRBENCH_ASV_VENDOR_DIR`` or ``.asv/vendor`` (gitignored)."""
    return Path(os.environ.get(VENDOR_DIR_VARIABLE) or DEFAULT_VENDOR_DIR)


def fetch_assets(cache: Path | None = None, packages: Iterable[NpmPackage] = PACKAGES) -> Path:
    """Download the npm tarballs that are not in ``cache`` yet (``npm pack``); return ``cache``."""
    cache = cache or vendor_dir()
    cache.mkdir(parents=True, exist_ok=True)
    missing = [package for package in packages if not (cache / package.tarball_name).is_file()]
    if not missing:
        return cache
    npm = shutil.which("npm")
    if npm is None:
        raise OfflineAssetError(
            f"npm is needed once to fetch {', '.join(p.spec for p in missing)} into {cache} "
            "(install Node.js, or copy the tarballs there from a machine that has npm)"
        )
    command = [npm, "pack", "--silent", "--pack-destination", str(cache), *(p.spec for p in missing)]
    completed = subprocess.run(command, capture_output=True, text=True)
    still_missing = [p.spec for p in missing if not (cache / p.tarball_name).is_file()]
    if completed.returncode != 0 or still_missing:
        raise OfflineAssetError(
            f"`{' '.join(command)}` failed (exit {completed.returncode}); missing: "
            f"{', '.join(still_missing) or 'none'}\n{completed.stderr.strip()}"
        )
    return cache


def _read_member(cache: Path, package: NpmPackage, path: str) -> bytes:
    tarball = cache / package.tarball_name
    if not tarball.is_file():
        raise OfflineAssetError(
            f"{tarball} is missing: run `python -m srbench.asv_tracking.offline_html --fetch-only` "
            "(or scripts/asv-setup) once where the npm registry is reachable"
        )
    with tarfile.open(tarball) as archive:
        try:
            member = archive.extractfile(f"package/{path}")
        except KeyError:
            member = None
        if member is None:
            raise OfflineAssetError(f"{package.spec} has no file {path!r} (looked in {tarball})")
        return member.read()


def _copy_asset(cache: Path, package: NpmPackage, path: str, site: Path, copied: set[str]) -> str:
    """Copy one package file, and for CSS the files its ``url(...)`` refer to; return its site path."""
    relative = f"{VENDOR_SUBDIR}/{package.name}-{package.version}/{path}"
    if relative in copied:
        return relative
    data = _read_member(cache, package, path)
    destination = site / relative
    destination.parent.mkdir(parents=True, exist_ok=True)
    destination.write_bytes(data)
    copied.add(relative)
    if path.endswith(".css"):
        for match in _CSS_URL.finditer(data.decode("utf-8")):
            reference = match.group("ref")
            if reference.startswith(("data:", "http:", "https:", "/")):
                continue
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), reference))
            _copy_asset(cache, package, resolved.replace(os.sep, "/"), site, copied)
    return relative


def rewrite_page(html: str, local_path_of: dict[str, str]) -> str:
    """Point every CDN ``<script>``/``<link>`` of ``html`` at its local copy.

    Fails on a remote URL with no local copy, so a newer asv with new CDN files is noticed rather
    than publishing a page that silently needs the internet.
    """

    def replace(match: re.Match[str]) -> str:
        url = match.group("url")
        if not url.startswith(("http://", "https://", "//")):
            return match.group(0)
        if url not in local_path_of:
            raise OfflineAssetError(
                f"the page loads {url}, which has no local copy; add it to CDN_ASSETS in {__file__}"
            )
        tag = _CDN_ATTRIBUTES.sub("", match.group(0))
        return tag.replace(f'"{url}"', f'"{local_path_of[url]}"')

    return _TAG.sub(replace, html)


def make_offline(html_dir: Path, cache: Path | None = None) -> list[Path]:
    """Vendor the CDN files into ``html_dir`` and rewrite its pages; return the pages rewritten."""
    html_dir = Path(html_dir)
    pages = sorted(html_dir.glob("*.html"))
    if not pages:
        raise OfflineAssetError(f"no .html pages in {html_dir}: run `asv publish` first")
    cache = fetch_assets(cache)
    copied: set[str] = set()
    local_path_of = {asset.url: _copy_asset(cache, asset.package, asset.path, html_dir, copied) for asset in CDN_ASSETS}
    rewritten = []
    for page in pages:
        original = page.read_text(encoding="utf-8")
        offline = rewrite_page(original, local_path_of)
        if offline != original:
            atomic_write_text(page, offline)
            rewritten.append(page)
    return rewritten


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html_dir", nargs="?", type=Path, default=REPO_ROOT / "results" / "html")
    parser.add_argument("--fetch-only", action="store_true", help="only fill the npm tarball cache")
    parser.add_argument("--cache", type=Path, default=None, help=f"tarball cache (default {vendor_dir()})")
    args = parser.parse_args(argv)
    try:
        if args.fetch_only:
            print(f"npm assets cached in {fetch_assets(args.cache)}")
        else:
            pages = make_offline(args.html_dir, args.cache)
            print(f"{len(pages)} page(s) in {args.html_dir} now load their scripts locally")
    except OfflineAssetError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
