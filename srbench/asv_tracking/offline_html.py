"""Make the site ``asv publish`` writes work without the internet.

asv's ``index.html`` loads jQuery, flot, bootstrap and two small libraries from CDNs and shows
no data without them, which on a closed network (CI, a lab) means an empty page; asv has no
setting for where they come from. The same files are on the npm registry: :func:`fetch_assets`
runs ``npm pack`` once per package into a cache folder, and :func:`make_offline` copies the files
the page loads into ``<site>/vendor/`` and points the page's tags at them (found with the
standard library's HTML parser). The nightly runs it after every ``asv publish``.

Run as ``python -m srbench.asv_tracking.offline_html [--fetch-only] [HTML_DIR]``.
"""

from __future__ import annotations

import argparse
import html
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from srbench.fileio import atomic_write_text

REPO_ROOT = Path(__file__).resolve().parents[2]
VENDOR_DIR_VARIABLE = "SRBENCH_ASV_VENDOR_DIR"
# Attributes that only make sense for a cross-origin copy (the hashes are of the CDN's build).
CDN_ATTRIBUTES = ("integrity", "crossorigin", "referrerpolicy")


class OfflineAssetError(RuntimeError):
    """An asset could not be fetched, or a page loads a remote file we have no copy of."""


@dataclass(frozen=True)
class CdnAsset:
    """One CDN URL of asv's page and the file of an npm package (``name@version``) that replaces it."""

    url: str
    package: str
    path: str  # inside the package

    @property
    def tarball(self) -> str:
        return self.package.replace("@", "-") + ".tgz"  # what npm pack names it

    @property
    def local_path(self) -> str:
        return f"vendor/{self.package.replace('@', '-')}/{self.path}"


_CDNJS = "https://cdnjs.cloudflare.com/ajax/libs"
_JSDELIVR = "https://cdn.jsdelivr.net/npm"
# The URLs in asv 0.6's www/index.html. flot's npm package ships its plugins unminified;
# cdnjs's stupidtable 1.0.1 is the same plugin as npm's stupid-table-plugin 1.1.3 for asv's use.
CDN_ASSETS = (
    CdnAsset("https://code.jquery.com/jquery-3.3.1.min.js", "jquery@3.3.1", "dist/jquery.min.js"),
    CdnAsset(f"{_CDNJS}/flot/0.8.3/jquery.flot.min.js", "flot@0.8.3", "jquery.flot.js"),
    CdnAsset(f"{_CDNJS}/flot/0.8.3/jquery.flot.time.min.js", "flot@0.8.3", "jquery.flot.time.js"),
    CdnAsset(f"{_CDNJS}/flot/0.8.3/jquery.flot.selection.min.js", "flot@0.8.3", "jquery.flot.selection.js"),
    CdnAsset(f"{_CDNJS}/flot/0.8.3/jquery.flot.categories.min.js", "flot@0.8.3", "jquery.flot.categories.js"),
    CdnAsset(
        f"{_JSDELIVR}/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js",
        "flot-orderbars@1.0.0",
        "js/jquery.flot.orderBars.js",
    ),
    CdnAsset(f"{_CDNJS}/stupidtable/1.0.1/stupidtable.min.js", "stupid-table-plugin@1.1.3", "stupidtable.min.js"),
    CdnAsset(f"{_CDNJS}/blueimp-md5/2.19.0/js/md5.min.js", "blueimp-md5@2.19.0", "js/md5.min.js"),
    CdnAsset(f"{_JSDELIVR}/bootstrap@3.1.1/dist/js/bootstrap.min.js", "bootstrap@3.1.1", "dist/js/bootstrap.min.js"),
    CdnAsset(
        f"{_JSDELIVR}/bootstrap@3.1.1/dist/css/bootstrap.min.css", "bootstrap@3.1.1", "dist/css/bootstrap.min.css"
    ),
)


def vendor_dir() -> Path:
    """The cache of npm tarballs: ``$SRBENCH_ASV_VENDOR_DIR`` or ``.asv/vendor`` (gitignored)."""
    return Path(os.environ.get(VENDOR_DIR_VARIABLE) or REPO_ROOT / ".asv" / "vendor")


def fetch_assets() -> Path:
    """Download the npm tarballs not in :func:`vendor_dir` yet (``npm pack``); return the folder."""
    cache = vendor_dir()
    cache.mkdir(parents=True, exist_ok=True)
    missing = sorted({asset.package for asset in CDN_ASSETS if not (cache / asset.tarball).is_file()})
    if not missing:
        return cache
    npm = shutil.which("npm")
    if npm is None:
        raise OfflineAssetError(
            f"npm is needed once to fetch {', '.join(missing)} into {cache} "
            "(install Node.js, or copy the tarballs there from a machine that has npm)"
        )
    command = [npm, "pack", "--silent", "--pack-destination", str(cache), *missing]
    completed = subprocess.run(command, capture_output=True, text=True)
    still_missing = [asset.package for asset in CDN_ASSETS if not (cache / asset.tarball).is_file()]
    if completed.returncode != 0 or still_missing:
        raise OfflineAssetError(
            f"`{' '.join(command)}` failed (exit {completed.returncode}); missing: "
            f"{', '.join(sorted(set(still_missing))) or 'none'}\n{completed.stderr.strip()}"
        )
    return cache


class _RemoteTags(HTMLParser):
    """The ``<script>`` and ``<link>`` start tags of a page that load a remote URL, with their attributes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, str, str, list[tuple[str, str | None]]]] = []  # (text, name, url, attributes)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        url = dict(attrs).get("src" if tag == "script" else "href")
        if tag in ("script", "link") and url and url.startswith(("http://", "https://", "//")):
            self.tags.append((self.get_starttag_text() or "", tag, url, attrs))


def rewrite_page(page: str, local_path_of: dict[str, str]) -> str:
    """Point every remote ``<script>``/``<link>`` of ``page`` at its local copy, without CDN
    attributes. Fails on a remote file with no local copy, so that a newer asv loading new files is
    noticed rather than publishing a page that silently needs the internet."""
    parser = _RemoteTags()
    parser.feed(page)
    for text, tag, url, attributes in parser.tags:
        if url not in local_path_of:
            raise OfflineAssetError(
                f"the page loads {url}, which has no local copy; add it to CDN_ASSETS in {__file__}"
            )
        rendered = "".join(
            f" {name}" if value is None else f' {name}="{html.escape(local_path_of[url] if value == url else value)}"'
            for name, value in attributes
            if name not in CDN_ATTRIBUTES
        )
        page = page.replace(text, f"<{tag}{rendered}>")
    return page


def make_offline(html_dir: Path) -> list[Path]:
    """Copy the CDN files into ``html_dir`` and point its pages at them; return the pages rewritten."""
    pages = sorted(Path(html_dir).glob("*.html"))
    if not pages:
        raise OfflineAssetError(f"no .html pages in {html_dir}: run `asv publish` first")
    cache = fetch_assets()
    for asset in CDN_ASSETS:
        with tarfile.open(cache / asset.tarball) as archive:
            member = archive.extractfile(f"package/{asset.path}")  # npm tarballs hold one folder, "package"
            assert member is not None, f"{asset.path} is not a file in {asset.tarball}"
            destination = Path(html_dir) / asset.local_path
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(member.read())
    local_path_of = {asset.url: asset.local_path for asset in CDN_ASSETS}
    rewritten = []
    for page in pages:
        original = page.read_text(encoding="utf-8")
        offline = rewrite_page(original, local_path_of)
        if offline != original:
            atomic_write_text(page, offline)
            rewritten.append(page)
    return rewritten


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Make the site asv publishes work without the internet.")
    parser.add_argument("html_dir", nargs="?", type=Path, default=REPO_ROOT / "results" / "html")
    parser.add_argument("--fetch-only", action="store_true", help=f"only fill the npm tarball cache ({vendor_dir()})")
    args = parser.parse_args(argv)
    try:
        if args.fetch_only:
            print(f"npm assets cached in {fetch_assets()}")
        else:
            print(f"{len(make_offline(args.html_dir))} page(s) in {args.html_dir} now load locally")
    except OfflineAssetError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
