"""A .pt2 file is vetted before torch opens it: a file that is no zip archive, or a zip that
torch.export did not write, is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_mlrepro.errors import IntegrityError


def test_a_file_that_is_no_archive_is_refused_before_torch_sees_it(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from pytest_mlrepro.runners.torch_archive import vet_export_archive

    junk = tmp_path / "model.pt2"
    junk.write_bytes(b"\x80\x04not a zip")
    with pytest.raises(IntegrityError, match=r"is not a torch.export archive \(.pt2, a zip file\)"):
        vet_export_archive(junk, "m.yaml")
    import zipfile

    with zipfile.ZipFile(tmp_path / "other.pt2", "w") as archive:  # a zip, but no pt2 marker
        archive.writestr("m/data.pkl", b"\x80\x04N.")
    with pytest.raises(IntegrityError, match=r"not a \.pt2 archive written by torch\.export"):
        vet_export_archive(tmp_path / "other.pt2", "m.yaml")
