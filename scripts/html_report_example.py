"""Make the HTML report of a drifted run of the example, and a screenshot of it.

    MLREPRO_DATA=../shared/data python scripts/html_report_example.py --out /tmp/report \
        [--manifest manifests/efficientnet_lite0_onnx.yaml] [--edit 'order: RGB=order: BGR']

Copies the example (manifests, goldens, the builders) into a temporary project, edits one
manifest's preprocessing there (by default the decoder's colour order, RGB to BGR: the classic
pitfall), runs its accuracy item against the committed golden with ``--mlrepro-html``, and, where
Debian's ``chromium`` is installed, saves a 1280 × 2000 screenshot of the page beside it. The
repository itself is not touched. The run evaluates the whole data set once (and the drift's
diagnosis), so it takes a minute or two.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for report.html/.png")
    parser.add_argument("--manifest", default="manifests/efficientnet_lite0_onnx.yaml")
    parser.add_argument(
        "--edit", default="order: RGB=order: BGR", help="OLD=NEW, replaced once in the manifest"
    )
    args = parser.parse_args()
    old, _, new = args.edit.partition("=")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mlrepro-report-") as tmp:
        project = Path(tmp)
        for name in ("manifests", "golden", "examples"):
            shutil.copytree(REPO / name, project / name)
        shutil.copy(REPO / "conftest.py", project / "conftest.py")
        (project / "pytest.ini").write_text("[pytest]\n")  # data: MLREPRO_DATA
        manifest = project / args.manifest
        text = manifest.read_text()
        if old not in text:
            print(f"{args.manifest}: {old!r} not found", file=sys.stderr)
            return 2
        manifest.write_text(text.replace(old, new, 1))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(project)])}
        env.setdefault("MLREPRO_CACHE", str(REPO / ".mlrepro_cache"))
        report = out / "report.html"
        command = [sys.executable, "-m", "pytest", args.manifest, "-m", "mlrepro_accuracy"]
        command += ["-p", "no:randomly", "-p", "no:cacheprovider", "--mlrepro-html", str(report)]
        print("$", " ".join(command), f"(in a copy of the example, {args.edit})")
        run = subprocess.run(command, cwd=project, env=env)
        print(f"pytest exit status {run.returncode} (1: the drift, as expected)")
    if not report.is_file():
        print("no report was written", file=sys.stderr)
        return 1
    print(f"report: {report}")
    chromium = shutil.which("chromium")
    if chromium is None:
        print("no chromium: no screenshot")
        return 0
    shot = out / "report.png"
    with tempfile.TemporaryDirectory(prefix="mlrepro-chromium-") as home:
        subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--window-size=1280,2000",
             f"--screenshot={shot}", report.as_uri()],
            cwd=home, env={**os.environ, "HOME": home}, capture_output=True, timeout=120,
            check=True,
        )  # fmt: skip
    print(f"screenshot: {shot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
