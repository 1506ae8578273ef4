"""What layer fingerprints cost: the golden's growth, and the time they add to recording and to
diagnosis, against one evaluation of the data set.

Evaluates a manifest (default: the example's EfficientNet-Lite0 on ONNX Runtime, CPU, over the
1000-image sample) once, then, ``--rounds`` times each:

  (a) recording: the layer fingerprints of the golden's first step probes (every node output's
      shape, dtype, mean, std, max |x| and a short hash);
  (b) diagnosis: the same probes traced again and compared layer by layer with (a).

and prints the golden's size without and with the ``probes.layers`` block (as ``--mlrepro-update``
writes it), and the medians of (a) and (b) as a fraction of the evaluation's own ``seconds``.

    MLREPRO_CACHE=/work/.mlrepro_cache MLREPRO_DATA=../shared/data \\
        python benchmarks/layer_fingerprints.py [--rounds 3] [--manifest PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import conftest  # noqa: E402, F401  (registers the example's model builders)
from pytest_mlrepro.diagnosis import _layer_fingerprints as layers  # noqa: E402
from pytest_mlrepro.diagnosis import _step_fingerprints as steps  # noqa: E402
from pytest_mlrepro.evaluation._evaluate import evaluate  # noqa: E402
from pytest_mlrepro.fingerprint import environment  # noqa: E402
from pytest_mlrepro.goldens import _store as golden_store  # noqa: E402
from pytest_mlrepro.manifest import load_manifest  # noqa: E402
from pytest_mlrepro.settings import Settings, mirrors_from_env  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", default="manifests/efficientnet_lite0_onnx.yaml")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    manifest = load_manifest(ROOT / args.manifest)
    settings = Settings.for_project(ROOT, data_mirrors=mirrors_from_env())
    ev = evaluate(manifest, args.device, settings)
    probes = steps.record(manifest.input.preprocess, ev.samples, steps.STEP_PROBES)
    assert probes is not None and ev.runner is not None
    golden = golden_store.Golden(
        manifest.name,
        manifest.normalized(),
        environment(ev.runner_info),
        ev.results,
        probes,
        data={s.id: s.sha256 for s in ev.samples},  # as an update records it
        manifest_file=args.manifest,
    )
    before = len(golden_store.dumps(golden).encode())
    recording, diagnosis = [], []
    block = None
    for _ in range(args.rounds):
        start = time.perf_counter()
        block = layers.record(ev.runner, manifest, ev.samples, probes["samples"])
        recording.append(time.perf_counter() - start)
        assert block is not None, "this runner cannot trace its layers"
        start = time.perf_counter()
        report = layers.compare(block, ev.runner, manifest, ev.samples)
        diagnosis.append(time.perf_counter() - start)
        assert report is not None and report.first is None, "the same model must not differ"
    assert block is not None
    with_layers = dataclasses.replace(golden, probes={**probes, "layers": block})
    after = len(golden_store.dumps(with_layers).encode())
    rec, diag = statistics.median(recording), statistics.median(diagnosis)
    print(f"manifest {args.manifest}: {len(ev.samples)} samples, evaluation {ev.seconds:.1f} s")
    print(f"layers traced: {len(block['rows'])} on {len(block['samples'])} probes")
    print(
        f"golden {before} bytes → {after} bytes: +{after - before} bytes "
        f"({(after - before) / before:.1%})"
    )
    print(f"recording the layers: median {rec:.2f} s ({rec / ev.seconds:.1%} of the evaluation)")
    print(f"comparing the layers: median {diag:.2f} s ({diag / ev.seconds:.1%} of the evaluation)")


if __name__ == "__main__":
    main()
