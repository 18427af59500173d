"""The shape of the code: the import layers hold, and every module imports the project by its one name."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("encoding", "tablebase", "analysis")


def test_import_layers_hold():
    """import-linter's contracts (pyproject.toml): no module imports a layer above its own."""
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if lint is None:
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    result = subprocess.run([lint], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:]


def test_no_module_imports_a_bare_folder_name():
    """Code imports dobutsu_tb.encoding, never encoding (which would load a second copy)."""
    bare = re.compile(rf"^\s*(from|import)\s+({'|'.join(FOLDERS)})\b", re.M)
    offenders = [str(path.relative_to(ROOT)) for folder in (*FOLDERS, "tests", "scripts")
                 for path in (ROOT / folder).rglob("*.py") if bare.search(path.read_text())]
    assert offenders == []


def test_every_package_is_installed():
    """pyproject.toml lists the root (dobutsu_tb itself, the public face) and every folder with an
    __init__.py as a dobutsu_tb package; no other folder at the root is a package."""
    tomllib = pytest.importorskip("tomllib")

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {"dobutsu_tb." + ".".join(init.parent.relative_to(ROOT).parts)
             for folder in FOLDERS for init in (ROOT / folder).rglob("__init__.py")}
    assert (ROOT / "__init__.py").is_file() and found | {"dobutsu_tb"} == listed
    assert {p.parent.name for p in ROOT.glob("*/__init__.py")} == set(FOLDERS)
