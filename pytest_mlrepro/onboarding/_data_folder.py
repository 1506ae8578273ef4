"""The labelled data folder ``mlrepro init`` is given: a labels CSV or one folder per class,
every file it names confined to the folder, and its ``sha256sum`` checksum list."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from .._files import sha256_file
from ..errors import MlreproError
from ..settings import resolve_within

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".npy")
CLASS_NAME_FILES = ("synset.txt", "synsets.txt", "class_names.txt", "classes.txt")
_INT = re.compile(r"[0-9]+")


class InitError(MlreproError):
    """What ``mlrepro init`` cannot do with the files it was given."""


@dataclass
class DataInfo:
    folder: Path
    labels_from: str  # "file" or "folders"
    images: list[str]
    labels: str | None = None
    file_column: str = "file"
    label_column: str = "class_index"
    class_names: str | None = None
    classes: int = 0  # the least number of classes the labels need

    @property
    def files(self) -> list[str]:
        meta = [f for f in (self.labels, self.class_names) if f is not None]
        return sorted({*meta, *self.images})


def read_data(folder: Path, labels: str | None = None) -> DataInfo:
    """The data folder: a labels CSV (``labels.csv`` or ``labels``) naming each image and its
    class index, or one folder per class (torchvision's ``ImageFolder``)."""
    if not folder.is_dir():
        raise InitError(f"--data {folder}: no such folder")
    class_names = next((n for n in CLASS_NAME_FILES if (folder / n).is_file()), None)
    found = sorted(p.name for p in folder.glob("*.csv"))
    labels = labels or ("labels.csv" if "labels.csv" in found else next(iter(found), None))
    if labels:
        return _read_labels_file(folder, labels, class_names)
    classes = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    images = [
        f"{c}/{p.name}"
        for c in classes
        for p in sorted((folder / c).iterdir())
        if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES
    ]
    if not images:
        raise InitError(
            f"--data {folder}: found neither a labels CSV (file,class_index) nor class folders "
            "with images (one folder per class)"
        )
    return _confined(
        DataInfo(folder, "folders", images, class_names=class_names, classes=len(classes))
    )


def _confined(data: DataInfo) -> DataInfo:
    """``data``, once every file it names resolves inside its folder, as a test run requires."""
    folder = data.folder.resolve()
    for name in data.files:
        if resolve_within(folder, name, [folder]) is None:
            raise InitError(
                f"--data {data.folder}: {name!r} resolves to {(folder / name).resolve()}, outside "
                "the data folder: refusing to read it (a test run refuses it too)"
            )
    return data


def _read_labels_file(folder: Path, name: str, class_names: str | None) -> DataInfo:
    if resolve_within(folder.resolve(), name, [folder.resolve()]) is None:
        raise InitError(f"--labels {name}: not a file inside the data folder {folder}")
    path = folder / name
    with path.open(newline="", encoding="utf-8-sig") as stream:
        rows = list(csv.DictReader(stream))
    columns = list(rows[0]) if rows else []
    if not rows:
        raise InitError(f"{path}: no rows")
    file_column = (
        "file"
        if "file" in columns
        else next((c for c in columns if (folder / str(rows[0][c])).is_file()), None)
    )
    ints = [c for c in columns if all(_INT.fullmatch(str(r[c] or "").strip()) for r in rows)]
    label_column = next((c for c in ("class_index", "label", "class") if c in ints), None)
    label_column = label_column or (ints[0] if ints else None)
    if file_column is None or label_column is None:
        raise InitError(
            f"{path}: cannot tell the image column and the class-index column among "
            f"{columns} (expected e.g. 'file' and 'class_index')"
        )
    images = [str(r[file_column]) for r in rows]
    data = DataInfo(folder, "file", images, name, file_column, label_column, class_names)
    _confined(data)  # before any image is looked at
    missing = [i for i in images if not (folder / i).is_file()]
    if missing:
        raise InitError(f"{path} names {len(missing)} missing images, e.g. {missing[0]!r}")
    data.classes = max(int(str(r[label_column]).strip()) for r in rows) + 1
    return data


def checksum_line(digest: str, name: str) -> str:
    """One ``sha256sum`` line; a name with a backslash or a line break escaped as sha256sum
    does (other characters, spaces and quotes included, stay as they are)."""
    if any(c in name for c in "\\\n\r"):
        escaped = name.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        return f"\\{digest}  {escaped}\n"
    return f"{digest}  {name}\n"


def write_checksums(data: DataInfo, path: Path) -> int:
    lines = [checksum_line(sha256_file(data.folder / name), name) for name in data.files]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines), encoding="utf-8")
    return len(lines)
