"""Time, peak memory and golden size of the example's accuracy item as the data set grows
(issue 23): 1,000, 10,000 and 50,000 samples; and the main job's wall time with its manifests'
preprocessing shared and not, against the sum of their models alone.

The samples are the 1,000 ImageNet sample photos and label-preserving variants of them: up to
10,000, each photo re-encoded as JPEG at a lower quality, every other variant mirrored left to
right (a mirrored photo keeps its class); past 10,000, byte-distinct copies of those (a JPEG
comment segment added: the same pixels, the same decoding work). They are generated once into
``$MLREPRO_CACHE/scale-data/`` (never into the repository) with a checksum list and labels for
each size, in a temporary copy of the example project (the EfficientNet-Lite0 ONNX manifest, its
data set replaced).

For each size: one ``pytest --mlrepro-update`` run records the golden, then the measured run
compares with it (the verdict must be "pass"). Of the measured run it prints: the whole
process's wall time per sample, the evaluation's own time per sample (the results file's
``timing.seconds``), the process's peak resident memory (``ru_maxrss`` from ``os.wait4`` of that
one child), the golden's size (bytes and bytes per sample), and the time to load the golden and
compare a run's results with it in this process. Then the ratios of each size to 1,000.

    MLREPRO_CACHE=/tmp/mlcache-scale MLREPRO_DATA=../shared/data \\
        python benchmarks/scale.py [--sizes 1000 10000 50000] [--main-job-rounds 1]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import io
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = "efficientnet_lite0_onnx"


def variant(source: Path, target: Path, number: int) -> None:
    """Variant ``number`` (1, 2, ...) of a photo: JPEG quality 95 down to 46, mirrored when odd."""
    from PIL import Image, ImageOps

    with Image.open(source) as image:
        picture = image.convert("RGB")
    if number % 2:
        picture = ImageOps.mirror(picture)
    buffer = io.BytesIO()
    picture.save(buffer, "JPEG", quality=95 - number // 2)
    target.write_bytes(buffer.getvalue())


# Variants 1..9 are re-encodings; from 10 on, a variant is a byte-distinct copy of variant
# ``number % 10`` (of the photo itself when 0): a JPEG comment segment naming the copy, inserted
# after the start-of-image marker. Its pixels and its decoding cost are its source's, and making
# 40,000 of them takes seconds instead of the CPU-hour that 40,000 more re-encodings would.
REENCODED = 10


def copy_with_comment(source: Path, target: Path, number: int) -> None:
    data = source.read_bytes()
    if data[:2] != b"\xff\xd8":
        raise SystemExit(f"{source}: not a JPEG file")
    text = f"mlrepro scale copy {number}".encode()
    segment = b"\xff\xfe" + (len(text) + 2).to_bytes(2, "big") + text
    target.write_bytes(data[:2] + segment + data[2:])


def _make(args: tuple[str, str, int]) -> None:
    source, target, number = args
    if not Path(target).exists():
        variant(Path(source), Path(target), number)


def pool(data: Path, cache: Path, size: int) -> list[tuple[str, int]]:
    """(file, label) of ``size`` samples in ``cache/scale-data/pool``: the photos, then their
    variants 1, 2, ... (made when missing)."""
    with (data / "imagenet-sample" / "labels.csv").open() as fh:
        photos = [(row["file"], int(row["class_index"])) for row in csv.DictReader(fh)]
    folder = cache / "scale-data" / "pool"
    folder.mkdir(parents=True, exist_ok=True)
    chosen: list[tuple[str, int]] = []
    todo: list[tuple[str, str, int]] = []
    copies: list[tuple[int, str, Path]] = []
    for i in range(size):
        number, (name, label) = divmod(i, len(photos))[0], photos[i % len(photos)]
        file = name if number == 0 else f"v{number:02d}_{Path(name).stem}.jpg"
        target = folder / file
        source = data / "imagenet-sample" / name
        if number == 0 and not target.exists():
            shutil.copy(source, target)
        elif 0 < number < REENCODED:
            todo.append((str(source), str(target), number))
        elif number and not target.exists():
            copies.append((number, name, target))
        chosen.append((file, label))
    with ProcessPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as workers:
        list(workers.map(_make, todo, chunksize=64))
    for number, name, target in copies:
        base = number % REENCODED
        source_file = name if base == 0 else f"v{base:02d}_{Path(name).stem}.jpg"
        copy_with_comment(folder / source_file, target, number)
    return chosen


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_project(folder: Path, cache: Path, data: Path, size: int) -> str:
    """A copy of the example project whose manifest evaluates ``size`` samples; the data set's
    folder (hard links into the pool) lies in the cache. Returns the data mirror."""
    chosen = pool(data, cache, size)
    name = f"imagenet-scale-{size}"
    mirror = cache / "scale-data" / "mirror"
    dataset = mirror / name
    labels_dir = folder / "manifests" / "datasets" / name
    labels_dir.mkdir(parents=True)
    rows = ["file,class_index"] + [f"{file},{label}" for file, label in chosen]
    (labels_dir / "labels.csv").write_text("\n".join(rows) + "\n")
    shutil.copy(ROOT / "manifests" / "datasets" / "imagenet-sample" / "synset.txt", labels_dir)
    if not dataset.exists():
        dataset.mkdir(parents=True)
        for file, _ in chosen:
            os.link(mirror.parent / "pool" / file, dataset / file)
    shutil.copy(labels_dir / "labels.csv", dataset / "labels.csv")
    shutil.copy(labels_dir / "synset.txt", dataset / "synset.txt")
    sums = [f"{sha256(dataset / f)}  {f}" for f in ("labels.csv", "synset.txt")]
    sums += [f"{sha256(dataset / file)}  {file}" for file, _ in chosen]
    (folder / "manifests" / "datasets" / f"{name}.sha256").write_text("\n".join(sums) + "\n")
    text = (ROOT / "manifests" / f"{MANIFEST}.yaml").read_text()
    text = text.replace("name: imagenet-sample", f"name: {name}")
    text = text.replace("datasets/imagenet-sample.sha256", f"datasets/{name}.sha256")
    text = text.replace("labels_dir: datasets/imagenet-sample", f"labels_dir: datasets/{name}")
    text = re.sub(r"\n  url: .*", "", text)
    (folder / "manifests" / f"{MANIFEST}.yaml").write_text(text)
    shutil.copy(ROOT / "conftest.py", folder)
    shutil.copytree(ROOT / "examples", folder / "examples")
    (folder / "pytest.ini").write_text("[pytest]\n")
    return str(mirror)


@dataclass
class Row:
    size: int
    wall: float
    cpu: float
    evaluation: float
    peak_mb: float
    golden_bytes: int
    golden_gzip_bytes: int
    load: float
    compare: float


def pytest_run(folder: Path, mirror: str, extra: list[str]) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak resident MB) of one pytest process on the accuracy
    item. CPU time is the steadier figure on a machine that other work loads."""
    command = [sys.executable, "-m", "pytest", f"manifests/{MANIFEST}.yaml", "-m"]
    command += ["mlrepro_accuracy", "--mlrepro-device=cpu", "-p", "no:cacheprovider", "-q"]
    env = {**os.environ, "MLREPRO_DATA": mirror, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    child = subprocess.Popen(
        command + extra, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert child.stdout is not None
    output = child.stdout.read().decode()
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"pytest {' '.join(extra)} failed:\n{output}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024  # KiB on Linux


def load_and_compare(folder: Path) -> tuple[float, float]:
    """Seconds to read the golden, and to compare results as a run's (the golden's own) with it
    (the manifest loaded beforehand)."""
    sys.path.insert(0, str(ROOT))
    from pytest_mlrepro import goldens
    from pytest_mlrepro.goldens import KeptScores, compare
    from pytest_mlrepro.manifest import load_manifest

    manifest = load_manifest(folder / "manifests" / f"{MANIFEST}.yaml")
    start = time.perf_counter()
    golden = goldens.read(folder / "golden" / f"{MANIFEST}.json")
    loaded = time.perf_counter()
    assert golden is not None
    now = golden.results
    kept = KeptScores(now.topk, now.topk_scores, 1000)
    assert compare(golden.results, now, kept, manifest.tolerances).ok
    return loaded - start, time.perf_counter() - loaded


def measure(size: int, cache: Path, data: Path) -> Row:
    with tempfile.TemporaryDirectory(prefix="mlrepro-scale-") as tmp:
        folder = Path(tmp)
        mirror = make_project(folder, cache, data, size)
        pytest_run(folder, mirror, ["--mlrepro-update"])
        results = folder / "results.json"
        wall, cpu, peak = pytest_run(folder, mirror, [f"--mlrepro-json={results}"])
        evaluation = _evaluation_seconds(json.loads(results.read_text()))
        golden = folder / "golden" / f"{MANIFEST}.json"
        # Kept beside the data (never in the repository) for a look at its format afterwards.
        shutil.copy(golden, cache / "scale-data" / f"golden-{size}.json")
        golden_bytes = golden.stat().st_size
        squeezed = len(gzip.compress(golden.read_bytes()))
        load, comparison = load_and_compare(folder)
        return Row(size, wall, cpu, evaluation, peak, golden_bytes, squeezed, load, comparison)


def _evaluation_seconds(results: object) -> float:
    """The accuracy item's ``timing.seconds`` in a results file (searched: its layout is the
    results format's business)."""
    if isinstance(results, dict):
        if "timing.seconds" in results:
            return float(results["timing.seconds"])
        if isinstance(results.get("timing"), dict) and "seconds" in results["timing"]:
            return float(results["timing"]["seconds"])
        values = list(results.values())
    elif isinstance(results, list):
        values = results
    else:
        return float("nan")
    for value in values:
        found = _evaluation_seconds(value)
        if found == found:
            return found
    return float("nan")


def main_job_seconds(data: Path, shared: bool, results: Path) -> tuple[float, float]:
    """Wall seconds of the main job's accuracy items (``pytest manifests/``), with the
    preprocessing shared between them or not (``mlrepro_preprocessing_memory=0``), and its CPU
    seconds (user + system: steadier than wall time on a machine that is not quiet); its
    results file written to ``results``."""
    command = [sys.executable, "-m", "pytest", "manifests/", "-m", "mlrepro_accuracy", "-q"]
    command += ["-p", "no:cacheprovider", "--mlrepro-device=cpu", f"--mlrepro-json={results}"]
    if not shared:
        command += ["-o", "mlrepro_preprocessing_memory=0"]
    env = {**os.environ, "MLREPRO_DATA": str(data), "PYTHONPATH": str(ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"the main job failed:\n{done.stdout[-3000:]}")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return seconds, cpu


def models_alone_seconds(data: Path) -> dict[str, float]:
    """Each example manifest's model alone over the 1000 photos: the runner's calls over batches
    preprocessed beforehand (wall seconds, model loading excluded). Their sum is the least the
    main job's evaluations can take."""
    sys.path.insert(0, str(ROOT))
    from evaluation_throughput import batches_of

    import conftest  # noqa: F401  (registers the example's model builders)
    from pytest_mlrepro.data import resolve_dataset
    from pytest_mlrepro.manifest import load_manifest
    from pytest_mlrepro.runners import load_runner
    from pytest_mlrepro.settings import Settings

    settings = Settings.for_project(ROOT, data_mirrors=(data,))
    seconds: dict[str, float] = {}
    for path in sorted((ROOT / "manifests").glob("*.yaml")):
        manifest = load_manifest(path)
        dataset = resolve_dataset(manifest, settings)
        batches = batches_of(manifest, dataset)
        runner = load_runner(manifest, "cpu", settings, shares_cpu=True)
        runner(batches[0])  # warm-up: the first call allocates
        start = time.perf_counter()
        for batch in batches:
            runner(batch)
        seconds[manifest.name] = time.perf_counter() - start
        del runner, batches
    return seconds


def without_timings(path: Path) -> object:
    """A results file's content without what measures time (every ``timing`` entry, the
    session's ``one_time`` costs) and when it was written (``created``): what must not change
    when the preprocessing is shared."""

    def strip(value: object) -> object:
        if isinstance(value, dict):
            return {
                k: strip(v) for k, v in value.items() if k not in ("timing", "created", "one_time")
            }
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(json.loads(path.read_text()))


def main_job(data: Path, rounds: int) -> None:
    """The main job with and without shared preprocessing (interleaved rounds), and the sum of
    its models alone, in this one run."""
    print("main job (the example's accuracy items, `pytest manifests/ -m mlrepro_accuracy`):")
    times: dict[bool, list[float]] = {True: [], False: []}
    cpu: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="mlrepro-main-job-") as tmp:
        files = {shared: Path(tmp) / f"results-{shared}.json" for shared in (True, False)}
        for r in range(rounds):
            for shared in (False, True) if r % 2 == 0 else (True, False):
                wall, used = main_job_seconds(data, shared, files[shared])
                times[shared].append(wall)
                cpu[shared].append(used)
                label = "shared" if shared else "each alone"
                print(f"  round {r + 1}: preprocessing {label}: {wall:.1f} s, CPU {used:.1f} s")
        same = without_timings(files[True]) == without_timings(files[False])
        print(f"  results files shared and alone equal apart from timings: {same}", flush=True)
    alone = models_alone_seconds(data)
    for name, seconds in alone.items():
        print(f"  model alone {name}: {seconds:.1f} s")
    bound = sum(alone.values())
    with_sharing = statistics.median(times[True])
    without = statistics.median(times[False])
    cpu_shared, cpu_alone = statistics.median(cpu[True]), statistics.median(cpu[False])
    print(
        f"  median CPU: shared {cpu_shared:.1f} s, each alone {cpu_alone:.1f} s: shared/alone "
        f"×{cpu_shared / cpu_alone:.3f} ({cpu_alone - cpu_shared:+.1f} s saved)"
    )
    print(
        f"  median: shared {with_sharing:.1f} s, each alone {without:.1f} s: shared/alone "
        f"×{with_sharing / without:.3f} ({without - with_sharing:+.1f} s saved); the models "
        f"alone sum to {bound:.1f} s: main job / models alone ×{with_sharing / bound:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000, 10000, 50000])
    parser.add_argument(
        "--main-job-rounds",
        type=int,
        default=1,
        help="rounds of the main job with and without shared preprocessing (0: not measured)",
    )
    args = parser.parse_args()
    data = Path(os.environ.get("MLREPRO_DATA", ROOT.parent / "shared" / "data")).resolve()
    cache = Path(os.environ.get("MLREPRO_CACHE", Path.home() / ".cache" / "mlrepro")).resolve()
    print(f"CPUs usable: {len(os.sched_getaffinity(0))}")
    if args.main_job_rounds:
        main_job(data, args.main_job_rounds)
    if not args.sizes:
        return
    print(
        f"{'samples':>8} {'wall/sample':>12} {'CPU/sample':>12} {'eval/sample':>12} {'peak MB':>8} "
        f"{'golden KB':>10} {'B/sample':>9} {'gzip B/sample':>14} {'load s':>7} {'compare s':>10}"
    )
    rows = []
    for size in args.sizes:
        row = measure(size, cache, data)
        rows.append(row)
        print(
            f"{size:>8} {1000 * row.wall / size:>9.2f} ms {1000 * row.cpu / size:>9.2f} ms "
            f"{1000 * row.evaluation / size:>9.2f} ms "
            f"{row.peak_mb:>8.0f} {row.golden_bytes / 1024:>10.0f} "
            f"{row.golden_bytes / size:>9.0f} {row.golden_gzip_bytes / size:>14.0f} "
            f"{row.load:>7.3f} {row.compare:>10.3f}",
            flush=True,
        )
    base = rows[0]
    for row in rows[1:]:
        wall = (row.wall / row.size) / (base.wall / base.size)
        cpu = (row.cpu / row.size) / (base.cpu / base.size)
        evaluation = (row.evaluation / row.size) / (base.evaluation / base.size)
        golden = (row.golden_bytes / row.size) / (base.golden_bytes / base.size)
        print(
            f"{row.size}/{base.size}: wall per sample ×{wall:.3f}, CPU per sample ×{cpu:.3f}, "
            f"evaluation per sample "
            f"×{evaluation:.3f}, peak memory ×{row.peak_mb / base.peak_mb:.3f}, golden per "
            f"sample ×{golden:.3f}"
        )


if __name__ == "__main__":
    main()
