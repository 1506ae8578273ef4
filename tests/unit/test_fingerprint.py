"""The environment that explains a cross-machine difference: the CPU's vendor and ISA flags read
from ``/proc/cpuinfo`` text, the numeric packages and settings, and how the diagnosis words a
change of them against a golden (one recorded before they were kept included)."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import CHILD_TIMEOUT_S
from machines import MACHINES, identity, write_cpuinfo

from pytest_mlrepro import fingerprint
from pytest_mlrepro.diagnosis._environment_diff import env_diff
from pytest_mlrepro.report._diagnosis_lead import env_change_text

# Abridged from a Sapphire Rapids server: AVX-512 with VNNI and BF16, AMX; "smep"/"smap" are
# not SME.
INTEL = """\
processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu vme sse sse2 ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt aes xsave avx f16c rdrand \
smep bmi2 avx2 avx512f avx512dq avx512cd avx512bw avx512vl avx512_vnni avx512_bf16 avx_vnni \
amx_bf16 amx_tile amx_int8 smap

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse sse2
"""

AMD = """\
processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7763 64-Core Processor
flags\t\t: fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 smep bmi2 sha_ni
"""

# A Graviton 3 (Neoverse V1): no model name, the vendor as an implementer code.
ARM = """\
processor\t: 0
BogoMIPS\t: 2100.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm \
lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs paca pacg dcpodp \
svei8mm svebf16 i8mm bf16 dgh rng
CPU implementer\t: 0x41
CPU architecture: 8
CPU part\t: 0xd40
"""


def test_x86_cpuinfo_gives_the_vendor_model_and_the_flags_that_matter() -> None:
    assert fingerprint.parse_cpuinfo(INTEL) == {
        "cpu_vendor": "GenuineIntel",
        "cpu": "Intel(R) Xeon(R) Platinum 8480+",
        "cpu_flags": [
            "amx_bf16",
            "amx_int8",
            "amx_tile",
            "avx",
            "avx2",
            "avx512_bf16",
            "avx512_vnni",
            "avx512bw",
            "avx512cd",
            "avx512dq",
            "avx512f",
            "avx512vl",
            "avx_vnni",
            "f16c",
            "fma",
            "sse4_1",
            "sse4_2",
        ],
    }
    amd = fingerprint.parse_cpuinfo(AMD)
    assert amd["cpu_vendor"] == "AuthenticAMD"
    assert amd["cpu_flags"] == ["avx", "avx2", "f16c", "fma", "sse4_1", "sse4_2"]


def test_arm_cpuinfo_gives_the_implementer_and_the_neon_sve_features() -> None:
    assert fingerprint.parse_cpuinfo(ARM) == {
        "cpu_vendor": "ARM",
        "cpu": None,
        "cpu_flags": [
            "asimd",
            "asimddp",
            "asimdfhm",
            "asimdhp",
            "bf16",
            "fphp",
            "i8mm",
            "sve",
            "svebf16",
            "svei8mm",
        ],
    }
    other = fingerprint.parse_cpuinfo(ARM.replace("0x41", "0x99"))
    assert other["cpu_vendor"] == "implementer 0x99"


def test_text_without_those_lines_gives_no_vendor_and_no_flags() -> None:
    assert fingerprint.parse_cpuinfo("") == {"cpu_vendor": None, "cpu": None, "cpu_flags": []}


def test_this_machines_identity_uses_the_same_model_name_as_the_hardware_key() -> None:
    identity = fingerprint.cpu_identity()
    assert identity["cpu"] == fingerprint.cpu_model()
    assert identity["cpu_flags"] == sorted(set(identity["cpu_flags"]))
    env = fingerprint.environment({"framework": "onnxruntime"})
    assert env["cpu_flags"] == identity["cpu_flags"]
    assert env["cpu_vendor"] == identity["cpu_vendor"]
    # The keys goldens always had are still there, with the same values.
    assert env["cpu"] == fingerprint.cpu_model()
    assert env["numpy"] == importlib.metadata.version("numpy")
    assert env["runtime"] == {"framework": "onnxruntime"}


def test_numeric_packages_are_the_installed_ones_with_their_versions() -> None:
    packages = fingerprint.numeric_packages()
    for dist in fingerprint.NUMERIC_PACKAGES:
        try:
            version: str | None = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            version = None
        assert packages.get(dist) == version, dist  # absent when not installed
    assert packages["numpy"] == importlib.metadata.version("numpy")


def test_numeric_settings_are_the_set_variables_only(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*fingerprint.NUMERIC_SETTINGS, *fingerprint.THREAD_SETTINGS):
        monkeypatch.delenv(name, raising=False)
    assert fingerprint.numeric_settings() == {}
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "0")
    monkeypatch.setenv("MLREPRO_UNRELATED", "1")
    assert fingerprint.numeric_settings() == {
        "OMP_NUM_THREADS": "3",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "TF_ENABLE_ONEDNN_OPTS": "0",
    }
    assert fingerprint.environment()["numeric_settings"]["OMP_NUM_THREADS"] == "3"


def test_the_environment_imports_no_framework() -> None:
    code = (
        "import json, sys\n"
        "from pytest_mlrepro.fingerprint import environment\n"
        "environment()\n"
        "print(json.dumps(sorted(m for m in ('torch', 'tensorflow', 'onnxruntime', 'onnx',"
        " 'ai_edge_litert') if m in sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=CHILD_TIMEOUT_S,
    ).stdout
    assert json.loads(out) == []


# --- the diagnosis's environment diff ---------------------------------------------------------

OLD: dict[str, object] = {
    "python": "3.11.7",
    "cpu": "AMD EPYC",
    "numpy": "2.4.6",
    "runtime": {"framework": "onnxruntime", "version": "1.20.0"},
}
NEW_FIELDS: dict[str, object] = {
    "cpu_vendor": "AuthenticAMD",
    "cpu_flags": ["avx", "avx2", "fma"],
    "numeric_packages": {"numpy": "2.4.6", "onnxruntime": "1.20.0"},
    "numeric_settings": {},
}


def _lines(old: dict[str, object], new: dict[str, object]) -> list[str]:
    return [f"{k}: {env_change_text(k, a, b)}" for k, a, b in env_diff(old, new)]


def test_a_golden_without_the_new_fields_shows_no_change_of_them() -> None:
    assert _lines(OLD, {**OLD, **NEW_FIELDS}) == []
    newer = {**OLD, **NEW_FIELDS, "python": "3.12.1"}
    assert _lines(OLD, newer) == ["python: '3.11.7' → '3.12.1'"]


def test_isa_flags_packages_and_settings_changes_read_as_what_changed() -> None:
    golden = {**OLD, **NEW_FIELDS}
    now = {
        **OLD,
        "cpu": "Intel Xeon",
        "cpu_vendor": "GenuineIntel",
        "cpu_flags": ["avx", "avx2", "avx512_vnni", "avx512f"],  # and no fma
        "numeric_packages": {"numpy": "2.4.6", "onnxruntime": "1.21.0", "torch": "2.5.0"},
        "numeric_settings": {"OMP_NUM_THREADS": "1"},
    }
    assert _lines(golden, now) == [
        "cpu: 'AMD EPYC' → 'Intel Xeon'",
        "cpu_flags: +avx512_vnni +avx512f -fma",
        "cpu_vendor: 'AuthenticAMD' → 'GenuineIntel'",
        "numeric_packages.onnxruntime: '1.20.0' → '1.21.0'",
        "numeric_packages.torch: (not installed) → '2.5.0'",
        "numeric_settings.OMP_NUM_THREADS: (unset) → '1'",
    ]


def test_numpy_is_named_once_when_it_changes() -> None:
    golden = {**OLD, **NEW_FIELDS}
    now = {
        **golden,
        "numpy": "2.5.0",
        "numeric_packages": {"numpy": "2.5.0", "onnxruntime": "1.20.0"},
    }
    assert _lines(golden, now) == ["numpy: '2.4.6' → '2.5.0'"]


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_the_cpu_reader_takes_its_text_from_a_parameter(name: str) -> None:
    """Each fixed machine of tests/machines.py reads as its own vendor, model and flags, on any
    host: the reader is handed the text and never looks at this machine."""
    found = fingerprint.read_cpu_identity(
        MACHINES[name], processor=lambda: "host processor", machine=lambda: "host"
    )
    expected = {
        "intel-xeon-amx": ("GenuineIntel", "Intel(R) Xeon(R) Platinum 8480+", "amx_tile"),
        "amd-epyc-avx2": ("AuthenticAMD", "AMD EPYC 7763 64-Core Processor", "avx2"),
        "laptop-avx2": ("GenuineIntel", "Intel(R) Core(TM) i7-10510U CPU @ 1.80GHz", "avx2"),
        "arm-neoverse-sve": ("ARM", "host processor", "sve"),
    }[name]
    assert (found["cpu_vendor"], found["cpu"]) == expected[:2]
    assert expected[2] in found["cpu_flags"] and found["cpu_flags"] == sorted(found["cpu_flags"])
    has_avx512 = any(f.startswith("avx512") for f in found["cpu_flags"])
    assert has_avx512 == (name == "intel-xeon-amx")


def test_without_cpuinfo_the_processor_names_the_vendor_and_the_model() -> None:
    windows = "Intel64 Family 6 Model 85 Stepping 7, GenuineIntel"
    found = fingerprint.read_cpu_identity(None, processor=lambda: windows, machine=lambda: "x")
    assert found == {"cpu_vendor": "GenuineIntel", "cpu": windows, "cpu_flags": []}
    bare = fingerprint.read_cpu_identity(None, processor=lambda: "", machine=lambda: "arm64")
    assert bare == {"cpu_vendor": None, "cpu": "arm64", "cpu_flags": []}


def test_mlrepro_cpuinfo_names_the_text_this_machine_is_read_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("intel-xeon-amx", "arm-neoverse-sve"):
        monkeypatch.setenv(fingerprint.CPUINFO_ENV, str(write_cpuinfo(name, tmp_path)))
        found = fingerprint.cpu_identity()
        assert found["cpu_flags"] == identity(name)["cpu_flags"]
        assert found["cpu_vendor"] == identity(name)["cpu_vendor"]
        env = fingerprint.environment()
        assert env["cpu_flags"] == found["cpu_flags"] and env["cpu"] == fingerprint.cpu_model()
        found["cpu_flags"].append("mutated")  # a caller's copy: the next reading is untouched
        assert "mutated" not in fingerprint.cpu_identity()["cpu_flags"]
