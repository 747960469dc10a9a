"""The repository's documentation stands on its own: nothing cites a design or style document outside it, no page
carries one machine's absolute paths, every relative link of docs/ and README.md resolves to a file, and
docs/architecture.md names every module of the package."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                                reason="needs a git checkout (git grep / ls-files)")

# Built from parts so that this file does not match its own patterns.
OUTSIDE_DOCS = "DESIGN" + r"\.md|STYLE" + r"\.md"
MACHINE_PATHS = "/" + "work/|/" + "tmp/"
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]+`")  # inline code: `[1/1](3/9751)` in a quoted log line is not a link


def _git(*args: str) -> list[str]:
    out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    assert out.returncode in (0, 1), out.stderr  # git grep: 1 = no match
    return [line for line in out.stdout.splitlines() if line]


def test_nothing_cites_a_design_or_style_document_outside_the_repository() -> None:
    hits = _git("grep", "-nIE", OUTSIDE_DOCS, "--", ".")
    assert hits == [], "cites a document outside the repository (point to docs/architecture.md):\n" + "\n".join(hits)


def test_no_absolute_machine_paths_in_docs_lab_or_readme() -> None:
    hits = _git("grep", "-nIE", MACHINE_PATHS, "--", "docs", "lab", "README.md")
    assert hits == [], "absolute machine path (write STORE, $COLLAPSEWATCH_CACHE, a relative path):\n" + "\n".join(hits)


def _links(page: Path) -> list[str]:
    text = CODE_SPAN.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))
    return [m.group(1) for m in LINK.finditer(text)]


def test_link_regex_sees_relative_links_and_skips_code(tmp_path: Path) -> None:
    # a made-up page: two links, one image, one URL, one anchor, a link inside a fenced block and one inside inline
    # code (neither is a link)
    page = tmp_path / "page.md"
    page.write_text("[a](a.md#x) ![i](img/i.png) [u](https://x.org) [h](#here) `Epoch:[1/1](3/9751)`\n"
                    "```\n[c](code.md)\n```\n",
                    encoding="utf-8")
    assert _links(page) == ["a.md#x", "img/i.png", "https://x.org", "#here"]


def test_every_relative_link_in_docs_and_readme_resolves() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        for target in _links(page):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = target.split("#", 1)[0]
            if not (page.parent / path).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == [], "links to files that do not exist:\n" + "\n".join(broken)


def _sections(text: str) -> dict[str, str]:
    """'### <folder>/ …' headings of docs/architecture.md -> the text under each."""
    parts = re.split(r"^### (\S+/)[^\n]*\n", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def test_architecture_names_every_module() -> None:
    sections = _sections((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))
    missing = []
    for f in _git("ls-files", "collapsewatch/*.py", "dashboard/*.py"):
        folder, _, name = f.rpartition("/")
        top, _, inner = f.partition("/")
        # listed by file name under its folder's heading, or by its path inside the top package under that heading
        if f"`{name}`" not in sections.get(folder + "/", "") and f"`{inner}`" not in sections.get(top + "/", ""):
            missing.append(f)
    assert missing == [], "docs/architecture.md, 'Where each concept lives', lacks a line for:\n" + "\n".join(missing)


def test_docs_hold_no_before_screenshots() -> None:
    # history lives in git and docs/lab/, not as images beside the reference pages
    stale = [f for f in _git("ls-files", "docs/img") if Path(f).name.startswith("before")]
    assert stale == [], "before-screenshots in docs/img (git keeps history):\n" + "\n".join(stale)
