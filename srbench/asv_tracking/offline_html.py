"""Make the site ``asv publish`` writes work without the internet.

asv's ``index.html`` loads jQuery, flot, bootstrap and two small libraries from CDNs and shows
no data without them, which on a closed network (CI, a lab) means an empty page; asv has no
setting for where they come from. The same files are on the npm registry: :func:`fetch_assets`
runs ``npm pack`` once per package into a cache folder, and :func:`make_offline` copies the files
the page loads into ``<site>/vendor/`` and points the page's tags at them (found with the
standard library's HTML parser). The nightly runs it after every ``asv publish``; by hand:
``python -m srbench.asv_tracking.offline_html [--fetch-only] [HTML_DIR]``.
"""

from __future__ import annotations

import argparse
import html
import os
import subprocess
import sys
import tarfile
from html.parser import HTMLParser
from pathlib import Path

from srbench.fileio import atomic_write_text

REPO_ROOT = Path(__file__).resolve().parents[2]
_CDNJS = "https://cdnjs.cloudflare.com/ajax/libs"
_JSDELIVR = "https://cdn.jsdelivr.net/npm"
# The URLs in asv 0.6's www/index.html: (npm package, its file). flot's npm package ships its
# plugins unminified; cdnjs's stupidtable 1.0.1 is npm's stupid-table-plugin 1.1.3 for asv's use.
CDN_ASSETS = {
    "https://code.jquery.com/jquery-3.3.1.min.js": ("jquery@3.3.1", "dist/jquery.min.js"),
    f"{_CDNJS}/flot/0.8.3/jquery.flot.min.js": ("flot@0.8.3", "jquery.flot.js"),
    f"{_CDNJS}/flot/0.8.3/jquery.flot.time.min.js": ("flot@0.8.3", "jquery.flot.time.js"),
    f"{_CDNJS}/flot/0.8.3/jquery.flot.selection.min.js": ("flot@0.8.3", "jquery.flot.selection.js"),
    f"{_CDNJS}/flot/0.8.3/jquery.flot.categories.min.js": ("flot@0.8.3", "jquery.flot.categories.js"),
    f"{_JSDELIVR}/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js": (
        "flot-orderbars@1.0.0",
        "js/jquery.flot.orderBars.js",
    ),
    f"{_CDNJS}/stupidtable/1.0.1/stupidtable.min.js": ("stupid-table-plugin@1.1.3", "stupidtable.min.js"),
    f"{_CDNJS}/blueimp-md5/2.19.0/js/md5.min.js": ("blueimp-md5@2.19.0", "js/md5.min.js"),
    f"{_JSDELIVR}/bootstrap@3.1.1/dist/js/bootstrap.min.js": ("bootstrap@3.1.1", "dist/js/bootstrap.min.js"),
    f"{_JSDELIVR}/bootstrap@3.1.1/dist/css/bootstrap.min.css": ("bootstrap@3.1.1", "dist/css/bootstrap.min.css"),
}
LOCAL_PATHS = {url: f"vendor/{package}/{path}" for url, (package, path) in CDN_ASSETS.items()}
# Attributes that only make sense for the CDN's copy (the hashes are of its builds).
CDN_ATTRIBUTES = ("integrity", "crossorigin", "referrerpolicy")


class OfflineAssetError(RuntimeError):
    """An asset could not be fetched, or a page loads a remote file we have no copy of."""


def vendor_dir() -> Path:
    """The cache of npm tarballs: ``$SRBENCH_ASV_VENDOR_DIR`` or ``.asv/vendor`` (gitignored)."""
    return Path(os.environ.get("SRBENCH_ASV_VENDOR_DIR") or REPO_ROOT / ".asv" / "vendor")


def _tarball(package: str) -> Path:
    return vendor_dir() / (package.replace("@", "-") + ".tgz")  # what npm pack names it


def fetch_assets() -> Path:
    """Download the npm tarballs not in :func:`vendor_dir` yet (``npm pack``); return the folder."""
    missing = sorted({package for package, _ in CDN_ASSETS.values() if not _tarball(package).is_file()})
    if missing:
        vendor_dir().mkdir(parents=True, exist_ok=True)
        command = ["npm", "pack", "--silent", "--pack-destination", str(vendor_dir()), *missing]
        try:
            completed = subprocess.run(command, capture_output=True, text=True)
        except FileNotFoundError:
            raise OfflineAssetError(
                f"npm is needed once to fetch {', '.join(missing)} into {vendor_dir()} "
                "(install Node.js, or copy the tarballs there from a machine that has npm)"
            ) from None
        if still_missing := [package for package in missing if not _tarball(package).is_file()]:
            raise OfflineAssetError(
                f"`{' '.join(command)}` failed (exit {completed.returncode}), missing {', '.join(still_missing)}:"
                f"\n{completed.stderr.strip()}"
            )
    return vendor_dir()


class _RemoteTags(HTMLParser):
    """The ``<script>`` and ``<link>`` start tags of a page that load a remote URL, with their attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, str, str, list[tuple[str, str | None]]]] = []  # (text, name, url, attributes)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        url = dict(attrs).get("src" if tag == "script" else "href")
        if tag in ("script", "link") and url and url.startswith(("http://", "https://", "//")):
            self.tags.append((self.get_starttag_text() or "", tag, url, attrs))


def rewrite_page(page: str) -> str:
    """Point every remote ``<script>``/``<link>`` of ``page`` at its local copy, without CDN
    attributes. Fails on a remote file with no local copy, so that a newer asv loading new files is
    noticed rather than publishing a page that silently needs the internet."""
    parser = _RemoteTags()
    parser.feed(page)
    for text, tag, url, attributes in parser.tags:
        if url not in LOCAL_PATHS:
            raise OfflineAssetError(
                f"the page loads {url}, which has no local copy; add it to CDN_ASSETS in {__file__}"
            )
        rendered = "".join(
            f" {name}" if value is None else f' {name}="{html.escape(LOCAL_PATHS[url] if value == url else value)}"'
            for name, value in attributes
            if name not in CDN_ATTRIBUTES
        )
        page = page.replace(text, f"<{tag}{rendered}>")
    return page


def make_offline(html_dir: Path) -> None:
    """Copy the CDN files into ``html_dir`` and point its pages at them."""
    pages = sorted(Path(html_dir).glob("*.html"))
    if not pages:
        raise OfflineAssetError(f"no .html pages in {html_dir}: run `asv publish` first")
    fetch_assets()
    for url, (package, path) in CDN_ASSETS.items():
        with tarfile.open(_tarball(package)) as archive:
            member = archive.extractfile(f"package/{path}")  # npm tarballs hold one folder, "package"
            assert member is not None, f"{path} is not a file in {_tarball(package)}"
            destination = Path(html_dir) / LOCAL_PATHS[url]
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(member.read())
    for page in pages:
        atomic_write_text(page, rewrite_page(page.read_text(encoding="utf-8")))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Make the site asv publishes work without the internet.")
    parser.add_argument("html_dir", nargs="?", type=Path, default=REPO_ROOT / "results" / "html")
    parser.add_argument("--fetch-only", action="store_true", help=f"only fill the npm tarball cache ({vendor_dir()})")
    args = parser.parse_args()
    try:
        if args.fetch_only:
            print(f"npm assets cached in {fetch_assets()}")
        else:
            make_offline(args.html_dir)
            print(f"the pages in {args.html_dir} now load their scripts locally")
    except OfflineAssetError as error:
        sys.exit(f"error: {error}")
