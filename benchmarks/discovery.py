"""Recipe discovery's cost against one evaluation, and what it finds, on the five held-out
re-parametrisations of the example's EfficientNet-Lite0 (``tests/lite0_variants.py``: each
expects another colour order, value convention or layout; the geometry is Lite0's own).

    MLREPRO_DATA=../shared/data python benchmarks/discovery.py [VARIANT ...]

One evaluation of the example's ONNX manifest over the 1000 images (``evaluate``, the plugin's
own path), then, per variant, ``discover`` on 300 images spread over the sample (what
``mlrepro init --discover`` runs), on a session of the variant model loaded once. Both are timed
in this run, on this machine: only their ratio is the figure (the machine may be shared). For
each variant it prints the ranking's head, whether the colour order, values and layout found are
the variant's, and the resize method found with the comparison of the best recipe with the
other method (``<``: told apart by the paired likelihood test; ``≈``: not).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

SAMPLES = 300


def main(argv: list[str]) -> int:
    import onnxruntime as ort
    from lite0_variants import VARIANTS, lite0_source, write_variant

    from pytest_mlrepro.data import resolve_dataset
    from pytest_mlrepro.evaluation import evaluate
    from pytest_mlrepro.manifest import load_manifest
    from pytest_mlrepro.onboarding import Progress, Search, spread
    from pytest_mlrepro.onboarding._discovery import versus
    from pytest_mlrepro.settings import Settings, mirrors_from_env

    data = Path(os.environ.get("MLREPRO_DATA", REPO.parent / "shared" / "data")).resolve()
    settings = Settings.for_project(REPO, data_mirrors=mirrors_from_env())
    manifest = load_manifest(REPO / "manifests" / "efficientnet_lite0_onnx.yaml")
    dataset = resolve_dataset(manifest, settings)
    start = time.perf_counter()
    evaluation = evaluate(manifest, "cpu", settings, dataset)
    one = time.perf_counter() - start
    print(f"one evaluation of {len(dataset.samples)} images: {one:.1f} s "
          f"(top-1 {evaluation.results.top1:.2f} %)")  # fmt: skip
    subset = spread(dataset.samples, SAMPLES)
    chosen = [v for v in VARIANTS if not argv or v.name in argv]
    with tempfile.TemporaryDirectory() as tmp:
        for variant in chosen:
            path = write_variant(lite0_source(data), variant, Path(tmp) / f"{variant.name}.onnx")
            options = ort.SessionOptions()
            options.log_severity_level = 3
            session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            name = session.get_inputs()[0].name

            def run(batch: object, session: object = session, name: str = name) -> object:
                return session.run(None, {name: batch})[0]  # type: ignore[attr-defined]

            start = time.perf_counter()
            found = Search(run, subset, 224, 224, variant.layout, "float32",
                           progress=Progress.to_terminal()).discover()  # fmt: skip
            seconds = time.perf_counter() - start
            best = found.best
            other = next(
                (s for s in found.ranking[1:] if s.n == best.n
                 and s.candidate.geometry.method != best.candidate.geometry.method),
                None,
            )  # fmt: skip
            right = (best.candidate.order, best.candidate.values) == (
                variant.order, variant.values)  # fmt: skip
            print(f"\n{variant.name}: discovery {seconds:.1f} s / one evaluation {one:.1f} s = "
                  f"{seconds / one:.2f}×, {found.inputs} model inputs")  # fmt: skip
            print("\n".join(found.render().splitlines()[:4]))
            print(f"  colour order and values {'right' if right else 'WRONG'}; resize method "
                  f"{best.candidate.geometry.method}"
                  + (f", against {other.candidate.geometry.method}: "
                     f"{versus(best, other)}" if other else ""))  # fmt: skip
    load = os.getloadavg()
    print(f"\nload average {load[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
