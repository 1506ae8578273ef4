"""One configuration: ``mlrepro pitfalls|diagnose`` sees exactly the settings that
``pytest`` sees in the same project, for every way pytest reads them.

Each case writes a project configured one way, then takes a snapshot of what matters to the plugin
(its settings, counts, time limit, the plugins conftests load) twice: from the configuration pytest
builds for ``pytest MANIFEST`` (``pytester.parseconfigure``), and from the configuration the
``mlrepro`` command works with. They must be equal, and show the configured values (not defaults).
"""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pytest_mlrepro import Settings
from pytest_mlrepro.cli import _configured, _main
from pytest_mlrepro.plugin._base import options, settings_key

MANIFEST = "manifests/m.yaml"
PYTEST_9 = int(pytest.__version__.split(".")[0]) >= 9

INI_KEYS = """\
mlrepro_golden_dir = goldens_x
mlrepro_data = mirror
mlrepro_cache = .cache_x
mlrepro_counterfactual_samples = 7
mlrepro_fingerprint_samples = 3
mlrepro_timeout = 5
"""
TOML_KEYS = """\
mlrepro_golden_dir = "goldens_x"
mlrepro_data = ["mirror"]
mlrepro_cache = ".cache_x"
mlrepro_counterfactual_samples = "7"
mlrepro_fingerprint_samples = "3"
mlrepro_timeout = "5"
"""
TOML_INI_OPTIONS = TOML_KEYS.replace('["mirror"]', '"mirror"')
EXPECTED: dict[str, Any] = {
    "golden": "goldens_x",
    "cache": ".cache_x",
    "probes": 7,
    "step": 3,
    "timeout": "5",
}


@dataclasses.dataclass(frozen=True)
class Case:
    files: dict[str, str]
    args: tuple[str, ...] = ()
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    needs_pytest_9: bool = False


CASES = {
    "pytest.ini": Case({"pytest.ini": "[pytest]\n" + INI_KEYS}),
    "pytest.toml": Case({"pytest.toml": "[pytest]\n" + TOML_KEYS}, needs_pytest_9=True),
    "pyproject ini_options": Case(
        {"pyproject.toml": "[tool.pytest.ini_options]\n" + TOML_INI_OPTIONS}
    ),
    "pyproject tool.pytest": Case(
        {"pyproject.toml": "[tool.pytest]\n" + TOML_KEYS}, needs_pytest_9=True
    ),
    "tox.ini": Case({"tox.ini": "[pytest]\n" + INI_KEYS}),
    "setup.cfg": Case({"setup.cfg": "[tool:pytest]\n" + INI_KEYS}),
    "-c": Case(
        {"pytest.ini": "[pytest]\n", "ci/custom.ini": "[pytest]\n" + INI_KEYS},
        args=("-c", "ci/custom.ini", "--rootdir", "."),
    ),
    "-o": Case(
        {"pytest.ini": "[pytest]\n" + INI_KEYS.replace("goldens_x", "other")},
        args=("-o", "mlrepro_golden_dir=goldens_x"),
    ),
    "PYTEST_ADDOPTS": Case(
        {"pytest.ini": "[pytest]\n" + INI_KEYS.replace("mlrepro_counterfactual_samples = 7", "")},
        env={"PYTEST_ADDOPTS": "--mlrepro-counterfactual-samples 7"},
    ),
    "addopts": Case(
        {"pytest.ini": "[pytest]\naddopts = --mlrepro-timeout 5\n" + INI_KEYS.replace("5", "9")}
    ),
    "command-line twins": Case(
        {"pytest.ini": "[pytest]\n" + INI_KEYS},
        args=("--mlrepro-golden-dir", "goldens_x", "--mlrepro-cache", ".cache_x"),
    ),
    "conftest pytest_plugins": Case(
        {
            "pytest.ini": "[pytest]\n" + INI_KEYS,
            "manifests/conftest.py": "pytest_plugins = ['equivalence_extra']\n",
            "equivalence_extra.py": "# loaded by pytest_plugins of manifests/conftest.py\n",
            "conftest.py": "",  # puts the root on sys.path (pytest's prepend import mode)
        }
    ),
}


def snapshot(config: pytest.Config) -> dict[str, object]:
    """What the plugin works with, from one configuration."""
    return {
        "settings": config.stash[settings_key],
        "probes": options(config).counterfactual_samples,
        "step": options(config).fingerprint_samples,
        "timeout": config.getoption("mlrepro_timeout") or config.getini("mlrepro_timeout"),
        "plugins": sorted(
            Path(file).relative_to(config.rootpath).as_posix()
            for plugin in config.pluginmanager.get_plugins()
            if (file := getattr(plugin, "__file__", None))
            and Path(file).is_relative_to(config.rootpath)
        ),
    }


def _through_the_command(args: tuple[str, ...], manifest: str = MANIFEST) -> dict[str, object]:
    seen: dict[str, object] = {}

    def capture(_: object, config: pytest.Config) -> int:
        seen.update(snapshot(config))
        return 0

    parsed, passed = _main.parser().parse_known_args(["diagnose", manifest, *args])
    assert _configured.run(capture, parsed, passed) == 0
    return seen


@pytest.mark.parametrize("name", list(CASES))
def test_the_command_sees_what_pytest_sees(
    name: str, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = CASES[name]
    if case.needs_pytest_9 and not PYTEST_9:
        pytest.skip(f"{name}: read by pytest 9 and later")
    monkeypatch.delenv("MLREPRO_DATA", raising=False)
    monkeypatch.delenv("MLREPRO_CACHE", raising=False)
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    for key, value in case.env.items():
        monkeypatch.setenv(key, value)
    for file, text in {**case.files, MANIFEST: "name: m\n"}.items():
        path = pytester.path / file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))

    by_pytest = snapshot(pytester.parseconfigure(*case.args, MANIFEST))
    by_command = _through_the_command(case.args)

    assert by_command == by_pytest
    settings = by_command["settings"]
    assert isinstance(settings, Settings)
    root = pytester.path.resolve()
    assert settings.golden_dir == root / EXPECTED["golden"]
    assert settings.cache_dir == root / EXPECTED["cache"]
    assert by_command["probes"] == EXPECTED["probes"]
    assert by_command["step"] == EXPECTED["step"]
    assert str(by_command["timeout"]) == EXPECTED["timeout"]
    mirror_base = root / "ci" if name == "-c" else root  # paths are relative to their ini file
    assert settings.data_mirrors == ((mirror_base / "mirror").resolve(),)
    if name == "conftest pytest_plugins":
        expected = ["conftest.py", "equivalence_extra.py", "manifests/conftest.py"]
        assert by_command["plugins"] == expected


def test_the_command_reports_pytest_usage_errors_as_its_own(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    (pytester.path / "manifests").mkdir()
    (pytester.path / MANIFEST).write_text("name: m\n")
    (pytester.path / "pytest.ini").write_text("[pytest]\nmlrepro_timeout = soon\n")
    assert _main.main(["diagnose", MANIFEST]) == 2
    assert "mlrepro: mlrepro_timeout: expected seconds, got 'soon'" in capsys.readouterr().err
    assert _main.main(["diagnose", MANIFEST, "--no-such-option"]) == 2


def test_an_explicit_path_option_is_relative_to_where_the_command_runs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLREPRO_DATA", raising=False)
    (pytester.path / "manifests").mkdir()
    (pytester.path / MANIFEST).write_text("name: m\n")
    (pytester.path / "pytest.ini").write_text("[pytest]\n")
    monkeypatch.chdir(pytester.path / "manifests")
    settings = _through_the_command(("--mlrepro-data", "here"), "m.yaml")["settings"]
    assert isinstance(settings, Settings)
    assert settings.data_mirrors == ((pytester.path / "manifests" / "here").resolve(),)
