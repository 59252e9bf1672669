"""costmodel.inputs.cache: a shipped file's parsed form is kept between runs and used only while the file is
unchanged (issue 14: start-up); a user's own files are never kept; a cache that cannot be used is no error."""

import datetime
import os
import subprocess
import sys
from pathlib import Path

import pytest

from costmodel.inputs import cache
from costmodel.specs.load import hardware_dir, load_hardware


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    """A stand-in for the shipped folder holding one file, and an empty cache folder."""
    monkeypatch.setenv(cache.ENV, str(tmp_path / "cache"))
    folder = tmp_path / "shipped"
    folder.mkdir()
    (folder / "dev.toml").write_text("a = 1\n")
    return folder


def counted(path: Path):
    """A parse of ``path`` that counts its calls."""
    calls = []

    def parse():
        calls.append(1)
        return {"text": path.read_text()}
    return parse, calls


def test_a_shipped_file_is_parsed_once_then_read_back_until_it_changes(shipped):
    file = shipped / "dev.toml"
    parse, calls = counted(file)
    first = cache.parsed(file, "spec", parse, shipped)
    assert cache.parsed(file, "spec", parse, shipped) == first == {"text": "a = 1\n"} and len(calls) == 1
    assert cache.parsed(file, "other", parse, shipped) == first and len(calls) == 2  # another kind: its own entry
    file.write_text("a = 22\n")  # another size and time: stale
    assert cache.parsed(file, "spec", parse, shipped) == {"text": "a = 22\n"} and len(calls) == 3
    os.utime(file, ns=(1, 1))  # same size, another time: stale too
    file.write_text("a = 33\n")
    os.utime(file, ns=(5, 5))
    assert cache.parsed(file, "spec", parse, shipped) == {"text": "a = 33\n"} and len(calls) == 4


def test_user_files_off_and_broken_caches_parse_every_time(shipped, tmp_path, monkeypatch):
    mine = tmp_path / "mine.toml"
    mine.write_text("b = 2\n")
    parse, calls = counted(mine)
    for _ in range(2):
        cache.parsed(mine, "spec", parse, shipped)
    assert len(calls) == 2 and not (tmp_path / "cache").exists()  # outside the shipped folder: never kept

    file = shipped / "dev.toml"
    parse, calls = counted(file)
    cache.parsed(file, "spec", parse, shipped)
    (entry,) = (tmp_path / "cache").rglob("*.marshal")
    entry.write_bytes(b"\x00garbage")
    assert cache.parsed(file, "spec", parse, shipped) == {"text": "a = 1\n"} and len(calls) == 2
    entry.write_bytes(b"")
    assert cache.parsed(file, "spec", parse, shipped) == {"text": "a = 1\n"} and len(calls) == 3

    for off in ("off", ""):
        monkeypatch.setenv(cache.ENV, off)
        assert cache.folder() is None
        cache.parsed(file, "spec", parse, shipped)
    assert len(calls) == 5

    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv(cache.ENV, str(blocked / "cache"))  # cannot be made: parsed, nothing said
    assert cache.parsed(file, "spec", parse, shipped) == {"text": "a = 1\n"}
    monkeypatch.setenv(cache.ENV, str(tmp_path / "cache"))
    dated = {"when": datetime.date(2026, 1, 1)}  # a TOML date: marshal cannot store it, so it is returned, not kept
    assert cache.parsed(file, "dated", lambda: dated, shipped) is dated and not list((tmp_path / "cache").rglob("*dated*"))


def test_shipped_hardware_read_back_from_the_cache_equals_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV, str(tmp_path / "cache"))
    first = load_hardware("h100-sxm")
    assert list((tmp_path / "cache").rglob("h100-sxm.toml.spec.marshal"))
    assert load_hardware("h100-sxm") == first
    monkeypatch.setenv(cache.ENV, "off")
    assert load_hardware("h100-sxm") == first and hardware_dir().is_dir()


@pytest.mark.slow
def test_the_cli_prints_the_same_with_and_without_the_cache_and_skips_the_toml_parser(tmp_path):
    args = [sys.executable, "-c", "import sys\nfrom costmodel.cli import main\nsys.argv = ['cost4d'] + sys.argv[1:]\n"
            "try:\n    main()\nfinally:\n    print('tomllib' in sys.modules, file=sys.stderr)",
            "step", "--model", "llama3-8b", "--hardware", "h100-sxm", "--tokens", "8192"]
    runs = [subprocess.run(args, capture_output=True, text=True, env={**os.environ, cache.ENV: where})
            for where in ("off", str(tmp_path), str(tmp_path))]
    assert runs[0].stdout == runs[1].stdout == runs[2].stdout and "step" in runs[0].stdout.lower()
    assert [r.stderr.strip().splitlines()[-1] for r in runs] == ["True", "True", "False"]
