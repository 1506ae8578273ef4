"""Fixed machine identities: the /proc/cpuinfo texts of four CPUs a nightly matrix meets.

No test may depend on the CPU it runs on. A test that compares machines builds both sides from
these; and the suite can run as any of them (``--as-machine NAME``, tests/conftest.py: the
plugin then reads that text instead of the host's /proc/cpuinfo, through ``MLREPRO_CPUINFO``), so
that a test which still assumes its host's vendor fails on every machine, not only on the other
one. The texts are the first processor's lines as Linux prints them (flags trimmed of the
virtualisation and security flags that the fingerprint ignores).
"""

from __future__ import annotations

from pathlib import Path

from pytest_mlrepro import fingerprint

INTEL_XEON_AMX = """\
processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8480+
stepping\t: 8
cpu MHz\t\t: 2000.000
cache size\t: 107520 KB
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx \
fxsr sse sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc pni pclmulqdq ssse3 fma cx16 \
pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm abm \
3dnowprefetch fsgsbase bmi1 avx2 smep bmi2 erms invpcid avx512f avx512dq rdseed adx smap \
avx512ifma clflushopt clwb avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves \
avx_vnni avx512_bf16 avx512vbmi umip pku ospke waitpkg avx512_vbmi2 gfni vaes vpclmulqdq \
avx512_vnni avx512_bitalg avx512_vpopcntdq rdpid movdiri movdir64b fsrm serialize \
amx_bf16 avx512_fp16 amx_tile amx_int8 arch_capabilities

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse sse2 avx avx2 avx512f amx_tile
"""

AMD_EPYC_AVX2 = """\
processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC 7763 64-Core Processor
stepping\t: 1
cpu MHz\t\t: 2445.404
cache size\t: 512 KB
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx \
fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl \
xtopology nonstop_tsc cpuid extd_apicid tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid \
sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm cmp_legacy \
abm sse4a misalignsse 3dnowprefetch osvw topoext invpcid_single ssbd ibrs ibpb stibp \
vmmcall fsgsbase bmi1 avx2 smep bmi2 erms invpcid rdseed adx smap clflushopt clwb sha_ni \
xsaveopt xsavec xgetbv1 xsaves clzero xsaveerptr rdpru wbnoinvd arat npt nrip_save umip \
vaes vpclmulqdq rdpid fsrm
"""

LAPTOP_AVX2 = """\
processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 142
model name\t: Intel(R) Core(TM) i7-10510U CPU @ 1.80GHz
stepping\t: 12
cpu MHz\t\t: 2300.000
cache size\t: 8192 KB
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts \
acpi mmx fxsr sse sse2 ss ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc art arch_perfmon \
pebs bts rep_good nopl xtopology nonstop_tsc cpuid aperfmperf pni pclmulqdq dtes64 monitor \
ds_cpl vmx est tm2 ssse3 sdbg fma cx16 xtpr pdcm pcid sse4_1 sse4_2 x2apic movbe popcnt \
tsc_deadline_timer aes xsave avx f16c rdrand lahf_lm abm 3dnowprefetch cpuid_fault epb \
invpcid_single ssbd ibrs ibpb stibp fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid \
mpx rdseed adx smap clflushopt intel_pt xsaveopt xsavec xgetbv1 xsaves dtherm ida arat pln pts \
hwp md_clear flush_l1d arch_capabilities
"""

# Arm has no vendor_id or model name: the implementer names the vendor (0x41: Arm's own
# Neoverse V1, as in an AWS Graviton3), and the Features line holds NEON (asimd) and SVE.
ARM_NEOVERSE_SVE = """\
processor\t: 0
BogoMIPS\t: 2100.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm \
jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs \
paca pacg dcpodp svei8mm svebf16 i8mm bf16 dgh rng
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x1
CPU part\t: 0xd40
CPU revision\t: 1
"""

MACHINES: dict[str, str] = {
    "intel-xeon-amx": INTEL_XEON_AMX,
    "amd-epyc-avx2": AMD_EPYC_AVX2,
    "laptop-avx2": LAPTOP_AVX2,
    "arm-neoverse-sve": ARM_NEOVERSE_SVE,
}


def identity(name: str) -> dict[str, object]:
    """The fingerprint's reading of machine ``name`` (its vendor, model and ISA flags): the very
    reading the plugin makes when run as that machine (``MLREPRO_CPUINFO``), the model of a text
    that names none (Arm's) included."""
    return fingerprint.read_cpu_identity(MACHINES[name])


def environment_of(name: str, base: dict[str, object]) -> dict[str, object]:
    """``base`` (an environment as the plugin records it) as if recorded on machine ``name``."""
    found = identity(name)
    return {
        **base,
        "cpu": found["cpu"],
        "cpu_vendor": found["cpu_vendor"],
        "cpu_flags": found["cpu_flags"],
    }


def write_cpuinfo(name: str, folder: Path) -> Path:
    """Machine ``name``'s cpuinfo text as a file in ``folder`` (for ``MLREPRO_CPUINFO``)."""
    path = folder / f"cpuinfo-{name}"
    path.write_text(MACHINES[name], encoding="utf-8")
    return path
