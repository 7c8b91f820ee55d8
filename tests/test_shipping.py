"""fastgrad.__version__ from its one place, fastgrad.version as torch.version, show_config(), and the
release wheels' configuration ([tool.cibuildwheel])."""

import pathlib
import re

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None

import pytest

import fastgrad

REPO = pathlib.Path(__file__).resolve().parent.parent


def test_the_version_is_written_once():
    pyproject = (REPO / "pyproject.toml").read_text()
    assert re.search(r'^dynamic = \["version"\]', pyproject, re.MULTILINE)
    assert not re.search(r"^version = ", pyproject, re.MULTILINE)
    assert 'metadata.version.input = "python/fastgrad/_version.py"' in pyproject
    source = (REPO / "python" / "fastgrad" / "_version.py").read_text()
    assert re.search(r'^__version__ = "(.+)"$', source, re.MULTILINE).group(1) == fastgrad.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+(\.dev\d+|(a|b|rc)\d+)?", fastgrad.__version__)


def test_version_module_has_torch_versions_names(fg, torch):
    for name in ("__version__", "debug", "cuda", "hip"):
        assert hasattr(torch.version, name) and hasattr(fg.version, name)
    assert fg.version.__version__ == fg.__version__ == fastgrad.__version__
    assert fg.version.cuda is None and fg.version.hip is None
    assert fg.version.debug == (fastgrad.config()["build_type"] == "Debug")


def test_show_config_prints_the_build_and_runtime(fg, capsys):
    config = fg.config()
    fg.show_config()
    printed = capsys.readouterr().out
    assert printed == fg.__config__.show() + "\n"
    assert printed.startswith(f"fastgrad {fg.__version__}\n")
    assert f"SIMD ISA: {config['isa']} (available: {', '.join(config['isas_available'])}" in printed
    assert fg.__config__.parallel_info() in printed
    assert f"Threads: {config['num_threads']}" in printed
    if config["compiler"] is not None:
        assert f"Compiler: {config['compiler']}\n" in printed and f"Build type: {config['build_type']}\n" in printed
        blocks = config["gemm_blocks"]["float32"]
        assert f"float32 {blocks['mr']}x{blocks['nr']} tiles, KC {blocks['kc']}, MC {blocks['mc']}" in printed
        assert f"(from {config['caches']['source']})" in printed


def test_show_config_follows_the_thread_count(fg):
    saved = fg.get_num_threads()
    try:
        fg.set_num_threads(saved + 1)
        assert f"Threads: {saved + 1} " in fg.__config__.parallel_info()
    finally:
        fg.set_num_threads(saved)


@pytest.mark.parametrize("key", ["compiler", "build_type", "cxx_flags"])
def test_config_names_how_the_core_was_built(key):
    import fastgrad.reference

    assert isinstance(fastgrad.config()[key], str) and fastgrad.reference.config()[key] is None
    assert fastgrad.config()["build_type"] in ("Release", "Debug", "RelWithDebInfo", "MinSizeRel")


def test_release_wheels_cover_the_supported_pythons_with_runtime_dispatch():
    if tomllib is None:
        pytest.skip("tomllib is Python 3.11+")
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    oldest_minor = int(re.fullmatch(r">=3\.(\d+)", pyproject["project"]["requires-python"]).group(1))
    cibuildwheel = pyproject["tool"]["cibuildwheel"]
    assert cibuildwheel["build"] == [f"cp3{minor}-*" for minor in range(oldest_minor, 14)]
    assert cibuildwheel["linux"]["archs"] == ["x86_64", "aarch64"] and cibuildwheel["macos"]["archs"] == ["arm64"]
    # A wheel runs on every CPU of its architecture only if nothing is compiled for the build machine's.
    assert "-march=native" not in (REPO / "CMakeLists.txt").read_text()
    assert "march" not in str(cibuildwheel)
