"""pytest-xdist: the items carry no marker that only xdist registers (their ``--dist loadgroup``
group is the ``@group`` suffix of their node ids, ``plugin/_item.item_nodeid``), so
``--strict-markers`` and ``-W error`` runs collect and pass every item, with xdist loaded or not
(issue 30, 1)."""

from __future__ import annotations

import pytest
from compat_helpers import LATENCY, needs
from helpers import Project

pytestmark = needs("xdist", "pytest-xdist")

STRICT = ("--strict-markers", "-W", "error")


@pytest.mark.about_xdist
@pytest.mark.parametrize("xdist", [["-p", "no:xdist"], ["-n", "2"]], ids=["without", "with"])
def test_strict_markers_and_warnings_as_errors_pass_latency_items(
    serial_project: Project, xdist: list[str]
) -> None:
    serial_project.make(
        {"tiny_onnx.yaml": serial_project.manifest("tiny_onnx", extra=LATENCY)},
        goldens=["tiny_onnx"],
    )
    # In a subprocess: pytest's mark generator remembers the markers of every configuration of
    # its process, this test run's (xdist's) included, so an in-process run would not see one
    # missing. Collection alone first: an unregistered marker is refused there.
    collected = serial_project.run("--collect-only", "-q", *STRICT, *xdist, subprocess=True)
    collected.assert_outcomes()
    assert collected.ret == 0, collected.stdout.str()
    assert "xdist_group" not in collected.stdout.str()
    # Then the run: latency goldens recorded (this machine has none), accuracy compared.
    ran = serial_project.run(*STRICT, *xdist, "--mlrepro-update", subprocess=True)
    # A latency golden may stay unrecorded on a loaded machine (a skip, not a failure).
    outcomes = ran.parseoutcomes()
    assert ran.ret == 0 and outcomes.get("passed", 0) >= 1, ran.stdout.str()
    assert not {"failed", "error", "errors", "warnings"} & set(outcomes), outcomes


def test_the_plugin_registers_no_marker_of_xdist(serial_project: Project) -> None:
    """xdist's own ``xdist_group`` line stands alone with xdist; without it there is none, and
    no item needs one."""
    serial_project.make({})
    with_xdist = serial_project.run("--markers").stdout.str()
    assert with_xdist.count("@pytest.mark.xdist_group") == 1
    without = serial_project.run("--markers", "-p", "no:xdist").stdout.str()
    assert "xdist_group" not in without
    assert "@pytest.mark.mlrepro_latency" in without


@pytest.mark.skipif(pytest.version_tuple < (9,), reason="the strict ini key is pytest 9's")
def test_strict_ini_without_xdist_collects_latency_items(serial_project: Project) -> None:
    serial_project.make({"tiny_onnx.yaml": serial_project.manifest("tiny_onnx", extra=LATENCY)})
    with (serial_project.path / "pytest.ini").open("a") as ini:
        ini.write("strict = true\n")
    collected = serial_project.run("--collect-only", "-q", "-p", "no:xdist", subprocess=True)
    assert collected.ret == 0, collected.stdout.str()
    assert "3 tests collected" in collected.stdout.str()
