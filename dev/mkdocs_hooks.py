"""Build hooks for the documentation site (mkdocs.yml names this file twice).

The Markdown files are written to read on a repository host: docs/ links to ``../dev/...``,
``../README.md`` and ``../examples/*.py`` by their paths in the repository. The site is built
from docs/ alone, so these hooks

- add the pages and files that live outside docs/ (`EXTRA`, `RENAMED`: dev/*.md, the README,
  changelog, contributing guide, house conventions, licence, bench/README.md and the examples)
  at their site paths, and
- rewrite every relative link of every page from its repository path to the target's site path;
  a relative link to anything that is not part of the site is logged as a warning, which fails
  ``mkdocs build --strict``.

`DoctestFences` is a griffe extension (mkdocstrings' ``extensions:`` option): the docstrings'
``>>>`` examples are plain doctest text, which Markdown would read as nested block quotes, so
each run of example lines is wrapped in a ``pycon`` fence before rendering.
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path
from typing import Any

log = logging.getLogger("mkdocs.hooks.repository_links")

ROOT = Path(__file__).resolve().parent.parent
# repository path (glob) -> site directory; a file keeps its name, except where renamed.
EXTRA = (
    ("dev/*.md", "dev"),
    ("examples/*.py", "examples"),
)
RENAMED = {
    "README.md": "project/readme.md",
    "CHANGELOG.md": "project/changelog.md",
    "CONTRIBUTING.md": "project/contributing.md",
    "CLAUDE.md": "project/conventions.md",
    "LICENSE": "project/LICENSE",
    "bench/README.md": "dev/benchmark-scripts.md",
}
_LINK = re.compile(r"(\]\()([^()\s]+)(\))")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")

# repository path -> site path (src_uri), filled by on_files
_site_of: dict[str, str] = {}
_repo_of: dict[str, str] = {}


def _extra_files() -> dict[str, str]:
    found = {}
    for pattern, directory in EXTRA:
        for path in sorted(ROOT.glob(pattern)):
            found[path.relative_to(ROOT).as_posix()] = f"{directory}/{path.name}"
    for repo_path, site_path in RENAMED.items():
        if (ROOT / repo_path).is_file():
            found[repo_path] = site_path
    return found


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    docs_dir = Path(config["docs_dir"]).resolve()
    prefix = docs_dir.relative_to(ROOT).as_posix()
    _site_of.clear()
    _repo_of.clear()
    for file in files:
        if file.abs_src_path and Path(file.abs_src_path).resolve().is_relative_to(docs_dir):
            _site_of[f"{prefix}/{file.src_uri}"] = file.src_uri
    for repo_path, site_path in _extra_files().items():
        files.append(File.generated(config, site_path, abs_src_path=str(ROOT / repo_path)))
        _site_of[repo_path] = site_path
    _repo_of.update({site: repo for repo, site in _site_of.items()})
    return files


def _rewrite(target: str, repo_dir: str, site_dir: str, where: str) -> str:
    if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:|#|/", target):
        return target  # a URL, an anchor on the same page, or absolute
    path, hash_, fragment = target.partition("#")
    repo_target = posixpath.normpath(posixpath.join(repo_dir, path))
    site_target = _site_of.get(repo_target)
    if site_target is None:
        log.warning("%s links to %r (%s in the repository), which is not part of the site",
                    where, target, repo_target)
        return target
    return posixpath.relpath(site_target, site_dir or ".") + hash_ + fragment


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    site_path = page.file.src_uri
    repo_path = _repo_of.get(site_path, site_path)
    repo_dir, site_dir = posixpath.dirname(repo_path), posixpath.dirname(site_path)
    out = []
    fence: str | None = None
    for line in markdown.split("\n"):
        opening = _FENCE.match(line)
        if opening and (fence is None or opening[1].startswith(fence)):
            fence = opening[1] if fence is None else None
        elif fence is None:
            line = _LINK.sub(lambda m: m[1] + _rewrite(m[2], repo_dir, site_dir, repo_path) + m[3], line)
        out.append(line)
    return "\n".join(out)


# ---- the griffe extension ---------------------------------------------------------------------
try:
    import griffe
except ImportError:  # pragma: no cover - only the site build loads this part
    griffe = None


def fence_doctests(text: str) -> str:
    """Wrap each run of ``>>>`` example lines (with their output, up to a blank line) in a
    ``pycon`` fence; text already inside a fence is left alone."""
    out: list[str] = []
    in_example = False
    in_fence = False
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")) and not in_example:
            in_fence = not in_fence
        elif not in_fence and stripped.startswith(">>>") and not in_example:
            out.append(line[: len(line) - len(line.lstrip())] + "```pycon")
            in_example = True
        elif in_example and not stripped:
            out.append(_close(out))
            in_example = False
        out.append(line)
    if in_example:
        out.append(_close(out))
    return "\n".join(out)


def _close(out: list[str]) -> str:
    opening = next(line for line in reversed(out) if line.strip() == "```pycon")
    return opening[: len(opening) - len(opening.lstrip())] + "```"


if griffe is not None:

    class DoctestFences(griffe.Extension):
        """Fence the doctest examples of every docstring (see the module docstring)."""

        def on_object(self, *, obj: Any, **kwargs: Any) -> None:
            if obj.docstring is not None and ">>>" in obj.docstring.value:
                obj.docstring.value = fence_doctests(obj.docstring.value)
