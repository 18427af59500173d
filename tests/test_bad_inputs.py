"""The bad-input corpus (tests/data/bad_inputs.txt) through the command line: each case's exit
code, no traceback, and the line it names (the file's header says how cases are written)."""

import ast
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import DATA

CORPUS = Path(DATA) / "bad_inputs.txt"
ROOT = Path(__file__).resolve().parent.parent
#: Environment variables read while a command runs, so a case may set them in-process.
IN_PROCESS_ENV = {"DOBUTSU_TB"}


@dataclass
class Case:
    line_no: int
    env: dict
    args: list
    exit_code: int
    expected: str

    def __str__(self):
        return f"bad_inputs.txt:{self.line_no}"


def _read_corpus():
    files, cases = {}, []
    for n, raw in enumerate(CORPUS.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("fifo "):  # a named pipe (None: made by the fixture)
            files[line[5:].strip()] = None
            continue
        if line.startswith("link "):  # a symbolic link to TARGET (a str: made by the fixture)
            name, target = (part.strip() for part in line[5:].split("->", 1))
            files[name] = target
            continue
        if line.startswith("file "):
            name, value = (part.strip() for part in line[5:].split("=", 1))
            data = b""
            for term in value.split(" + "):
                literal, _, times = term.partition(" * ")
                data += ast.literal_eval(literal) * (int(times) if times else 1)
            files[name] = data
            continue
        command, _, outcome = line.rpartition(" -> ")
        words = shlex.split(command)
        env = {}
        while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
            name, value = words.pop(0).split("=", 1)
            env[name] = value
        code, _, expected = outcome.partition(" ")
        cases.append(Case(n, env, words, int(code), expected))
    return files, cases


FILES, CASES = _read_corpus()


def test_corpus_size():
    """At least 100 cases, over every command and environment variable."""
    assert len(CASES) >= 100
    commands = {c.args[0] if c.args[0] != "puzzle" else " ".join(c.args[:2]) for c in CASES if c.args}
    assert commands >= {"build", "probe", "show", "line", "verify-line", "verify", "stats", "serve", "uci", "export",
                        "puzzle lastone", "puzzle tankchange", "puzzle othello", "puzzle squares", "puzzle sweep"}
    names = {name for c in CASES for name in c.env}
    assert names >= {"DOBUTSU_TB", "DOBUTSU_TB_CACHE", "NUMBA_NUM_THREADS", "NUMBA_DISABLE_JIT", "NUMBA_BOUNDSCHECK"}


@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus-files")
    for name, data in FILES.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if data is None:
            os.mkfifo(path)
        elif isinstance(data, str):
            os.symlink(data, path)
        else:
            path.write_bytes(data)
    return folder


def _fill(text, places):
    for name, value in places.items():
        text = text.replace("{" + name + "}", str(value))
    for name in re.findall(r"\{copy:([^{}/]+)\}", text):  # a copy of the tablebase of the case's own
        copy = Path(places["tmp"]) / name
        if not copy.exists():
            shutil.copyfile(places["lc"], copy)
        text = text.replace("{copy:" + name + "}", str(copy))
    return text


@pytest.mark.parametrize("case", CASES, ids=str)
def test_bad_input(case, cli_split, lion_chick_tb, corpus_files, tmp_path, monkeypatch):
    places = {"lc": lion_chick_tb.path, "data": ROOT / "data", "files": corpus_files, "tmp": tmp_path,
              "missing": tmp_path / "missing" / "none.h5"}
    args = [_fill(a, places) for a in case.args]
    env = {k: _fill(v, places) for k, v in case.env.items()}
    expected = _fill(case.expected, places)
    monkeypatch.chdir(tmp_path)  # no dobutsu.h5 here: defaults never find one by chance
    if set(env) <= IN_PROCESS_ENV:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        code, out, err = cli_split(*args)
    else:
        run = subprocess.run([sys.executable, "-m", "dobutsu_tb.analysis.cli", *args], capture_output=True,
                             check=False, text=True, env={**os.environ, **env}, timeout=120, cwd=tmp_path)
        code, out, err = run.returncode, run.stdout, run.stderr
    shown = f"{case}: exit {code}\n--- stdout\n{out[-2000:]}\n--- stderr\n{err[-2000:]}"
    assert "Traceback" not in out + err, shown
    assert code == case.exit_code, shown
    if code == 1:  # always one error line, which says what went wrong
        assert err.count("\n") == 1 and err.startswith("error: ") and len(err.strip()) > len("error:"), shown
    if expected.startswith("error:"):
        assert err.startswith(expected), shown
    elif code == 2:
        assert any(ln.startswith(expected) for ln in err.splitlines()), shown
    else:
        assert any(ln.strip().startswith(expected) for ln in out.splitlines()), shown
