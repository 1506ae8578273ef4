"""A manifest's ``dataset.url`` is checked when the manifest loads: a malformed URL is reported on
its line, never as a raw ``ValueError`` from urllib when the download starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_mlrepro.errors import ManifestError
from pytest_mlrepro.manifest import load_manifest

REPO = Path(__file__).resolve().parents[2]
REAL = (REPO / "manifests" / "efficientnet_lite0_onnx.yaml").read_text(encoding="utf-8")
URL_LINE = next(line for line in REAL.splitlines() if line.startswith("  url: "))


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://[::1/", "Invalid IPv6 URL"),
        ("https://example.com:99999/data/", "Port out of range"),
        ("https://example.com:port/", "Port could not be cast"),
        ("https:///data/", "with a host name"),
        ("https://example.com/my data/", "no spaces or control characters"),
    ],
)
def test_a_malformed_url_is_reported_on_its_line(tmp_path: Path, url: str, says: str) -> None:
    path = tmp_path / "m.yaml"
    text = REAL.replace(URL_LINE, f"  url: '{url}'")
    path.write_text(text)
    with pytest.raises(ManifestError) as raised:
        load_manifest(path)
    line = text.splitlines().index(f"  url: '{url}'") + 1
    assert f"m.yaml:{line}: dataset.url: " in str(raised.value)
    assert says in str(raised.value)


def test_a_good_url_loads(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(REAL.replace(URL_LINE, "  url: 'http://[::1]:8080/imagenet-sample/'"))
    assert load_manifest(path).dataset.url == "http://[::1]:8080/imagenet-sample/"
