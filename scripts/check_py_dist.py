"""Checks the Python client's packages that `make py-dist` built (`python -m build`).

Usage: python3 scripts/check_py_dist.py DIST_DIR VERSION

DIST_DIR must hold exactly one wheel and one sdist of `redis-reclaim` at VERSION (the module's
version, from Cargo.toml). The wheel must hold every file of clients/python/src/redis_reclaim
(the package's modules and its `py.typed` marker) and nothing else but its .dist-info, with
metadata that names the version, redis-py 5 or later (and the optional groups' requirements,
as pyproject.toml declares them) and Python 3.10 or later. The sdist must
hold the package's sources, pyproject.toml and the README, with PKG-INFO at the same version.
Prints one line per package checked; exits 1 with every fault listed.
"""

import email.message
import email.parser
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "clients" / "python" / "src" / "redis_reclaim"


def package_files() -> set[str]:
    """The files the package ships: its sources, without caches, as paths from src/."""
    return {
        p.relative_to(SRC.parent).as_posix()
        for p in SRC.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


def metadata(text: str) -> email.message.Message:
    return email.parser.Parser().parsestr(text)


def check_metadata(where: str, meta: email.message.Message, version: str, faults: list[str]) -> None:
    if meta["Name"] != "redis-reclaim":
        faults.append(f"{where}: Name {meta['Name']!r}, expected 'redis-reclaim'")
    if meta["Version"] != version:
        faults.append(f"{where}: Version {meta['Version']!r}, expected {version!r} (Cargo.toml's)")
    if meta["Requires-Python"] != ">=3.10":
        faults.append(f"{where}: Requires-Python {meta['Requires-Python']!r}, expected '>=3.10'")
    requires = [r.replace(" ", "") for r in meta.get_all("Requires-Dist") or []]
    if requires != expected_requires():
        faults.append(f"{where}: Requires-Dist {requires}, expected {expected_requires()}")


def expected_requires() -> list[str]:
    """What pyproject.toml declares: redis-py 5 or later, then each optional group's (``web``)
    requirements marked with their extra, as the metadata lists them."""
    with open(ROOT / "clients" / "python" / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    out = [r.replace(" ", "") for r in project["dependencies"]]
    for extra, reqs in project.get("optional-dependencies", {}).items():
        out += [f'{r.replace(" ", "")};extra=="{extra}"' for r in reqs]
    return out


def check_wheel(path: Path, version: str, faults: list[str]) -> None:
    expected_name = f"redis_reclaim-{version}-py3-none-any.whl"
    if path.name != expected_name:
        faults.append(f"wheel: {path.name}, expected {expected_name}")
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        info = f"redis_reclaim-{version}.dist-info/"
        shipped = {n for n in names if not n.startswith(info)}
        if shipped != package_files():
            faults.append(
                f"wheel: files {sorted(shipped)}, expected those of {SRC.relative_to(ROOT)}: "
                f"{sorted(package_files())}"
            )
        if info + "METADATA" not in names:
            faults.append(f"wheel: no {info}METADATA")
            return
        check_metadata("wheel", metadata(z.read(info + "METADATA").decode()), version, faults)
    print(f"py-dist: {path.name}: {len(shipped)} files of the package, metadata at {version}")


def check_sdist(path: Path, version: str, faults: list[str]) -> None:
    expected_name = f"redis_reclaim-{version}.tar.gz"
    if path.name != expected_name:
        faults.append(f"sdist: {path.name}, expected {expected_name}")
    top = f"redis_reclaim-{version}/"
    with tarfile.open(path) as t:
        names = {m.name for m in t.getmembers() if m.isfile()}
        wanted = {top + "src/" + f for f in package_files()}
        wanted |= {top + "pyproject.toml", top + "README.md", top + "PKG-INFO"}
        missing = sorted(wanted - names)
        if missing:
            faults.append(f"sdist: lacks {missing}")
        if top + "PKG-INFO" in names:
            f = t.extractfile(top + "PKG-INFO")
            assert f is not None
            check_metadata("sdist", metadata(f.read().decode()), version, faults)
    print(f"py-dist: {path.name}: {len(names)} files, PKG-INFO at {version}")


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    dist, version = Path(sys.argv[1]), sys.argv[2]
    faults: list[str] = []
    wheels = sorted(dist.glob("*.whl"))
    sdists = sorted(dist.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        faults.append(f"{dist}: wheels {[w.name for w in wheels]}, sdists {[s.name for s in sdists]}: expected one of each")
    for w in wheels:
        check_wheel(w, version, faults)
    for s in sdists:
        check_sdist(s, version, faults)
    for f in faults:
        print(f"py-dist: {f}", file=sys.stderr)
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main())
