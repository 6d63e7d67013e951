"""Upload safety: each protection of advisor_chat.ui.uploads against a crafted zip."""

from __future__ import annotations

import os
import stat
import struct
import zipfile
from pathlib import Path

import pytest

from advisor_chat.errors import InputError
from advisor_chat.ui.uploads import UploadLimits, extract_zip, private_dir, remove_upload_dir

LIMITS = UploadLimits(
    max_compressed_bytes=5_000_000,
    max_uncompressed_bytes=30_000_000,
    max_ratio=200.0,
    max_members=50,
)


def _zip(path: Path, members: dict[str, bytes], *, compression: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression=compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _leftovers(dest: Path) -> list[Path]:
    return list(dest.rglob("*")) if dest.exists() else []


@pytest.fixture
def dest(tmp_path: Path) -> Path:
    return tmp_path / "uploads"


def test_good_zip_extracts_into_private_folder_and_finds_single_root(tmp_path: Path, dest: Path):
    payload = b"Step\tComputing\n1\t100.0\n"
    archive = _zip(
        tmp_path / "ok.zip",
        {"prof/rank0_ascend_pt/a.csv": payload, "prof/rank1_ascend_pt/b.csv": b"x" * 10},
    )
    root = extract_zip(archive, dest, LIMITS)
    assert root.name == "prof"
    private = root.parent
    assert private.parent == dest
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o700
    assert (root / "rank0_ascend_pt" / "a.csv").read_bytes() == payload
    assert archive.exists()  # the upload itself is not touched
    remove_upload_dir(private)
    assert not private.exists()


def test_flat_zip_returns_extraction_folder(tmp_path: Path, dest: Path):
    archive = _zip(tmp_path / "flat.zip", {"a.csv": b"1", "b.csv": b"2"})
    root = extract_zip(archive, dest, LIMITS)
    assert sorted(p.name for p in root.iterdir()) == ["a.csv", "b.csv"]
    assert root.parent == dest


@pytest.mark.parametrize(
    "name",
    [
        "../evil.txt",
        "prof/../../evil.txt",
        "/etc/evil.txt",
        "..\\evil.txt",
        "C:\\evil.txt",
        "C:/evil.txt",
    ],
)
def test_zip_slip_names_are_refused_before_writing(tmp_path: Path, dest: Path, name: str):
    archive = tmp_path / "slip.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("prof/ok.csv", b"ok")
        zf.writestr(zipfile.ZipInfo(name), b"pwned")
    with pytest.raises(InputError, match="refusing to extract") as exc:
        extract_zip(archive, dest, LIMITS)
    assert str(archive) in str(exc.value)
    assert _leftovers(dest) == []
    assert not (tmp_path / "evil.txt").exists()


def test_symlink_member_is_refused(tmp_path: Path, dest: Path):
    archive = tmp_path / "link.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        info = zipfile.ZipInfo("prof/passwd")
        info.create_system = 3
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(InputError, match="symbolic link"):
        extract_zip(archive, dest, LIMITS)
    assert _leftovers(dest) == []


def test_device_member_is_refused(tmp_path: Path, dest: Path):
    archive = tmp_path / "fifo.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        info = zipfile.ZipInfo("prof/fifo")
        info.create_system = 3
        info.external_attr = (stat.S_IFIFO | 0o644) << 16
        zf.writestr(info, b"")
    with pytest.raises(InputError, match="not a regular file"):
        extract_zip(archive, dest, LIMITS)


def test_zip_bomb_ratio_is_refused(tmp_path: Path, dest: Path):
    # 20 MB of zeros deflates to ~20 kB: a ratio near 1000, far above the cap of 200.
    archive = _zip(tmp_path / "bomb.zip", {"prof/zeros.bin": bytes(20_000_000)})
    info = zipfile.ZipFile(archive).infolist()[0]
    assert info.file_size / info.compress_size > 200  # the construction really is a bomb
    with pytest.raises(InputError, match="zip bomb"):
        extract_zip(archive, dest, LIMITS)
    assert _leftovers(dest) == []


def test_total_ratio_of_many_small_members_is_refused(tmp_path: Path, dest: Path):
    # Each member is below the 1 MB per-member threshold; the archive as a whole is a bomb.
    members = {f"prof/z{i}.bin": bytes(900_000) for i in range(20)}
    archive = _zip(tmp_path / "many.zip", members)
    with pytest.raises(InputError, match="zip bomb"):
        extract_zip(archive, dest, LIMITS)


def test_uncompressed_total_cap(tmp_path: Path, dest: Path):
    # Incompressible data (ratio ~1) but 12 MB against a 10 MB cap.
    limits = UploadLimits(5_000_000_000, 10_000_000, 200.0, 50)
    archive = _zip(
        tmp_path / "big.zip",
        {"prof/a.bin": os.urandom(6_000_000), "prof/b.bin": os.urandom(6_000_000)},
        compression=zipfile.ZIP_STORED,
    )
    with pytest.raises(InputError, match=r"expands to 12\.0 MB"):
        extract_zip(archive, dest, limits)


def test_compressed_size_cap(tmp_path: Path, dest: Path):
    archive = _zip(
        tmp_path / "c.zip", {"a.bin": os.urandom(2_000_000)}, compression=zipfile.ZIP_STORED
    )
    limits = UploadLimits(1_000_000, 10**9, 200.0, 50)
    with pytest.raises(InputError, match=r"more than the limit of 1\.0 MB"):
        extract_zip(archive, dest, limits)


def test_member_count_cap(tmp_path: Path, dest: Path):
    archive = _zip(tmp_path / "n.zip", {f"f{i}.txt": b"x" for i in range(51)})
    with pytest.raises(InputError, match="51 members"):
        extract_zip(archive, dest, LIMITS)


def test_header_that_lies_about_size_is_caught_while_streaming(tmp_path: Path, dest: Path):
    data = b"abc" * 400_000
    archive = _zip(tmp_path / "lie.zip", {"prof/x.bin": data})
    raw = bytearray(archive.read_bytes())
    # Patch the central-directory "uncompressed size" of the only member to 1000 bytes.
    cd = raw.rfind(b"PK\x01\x02")
    struct.pack_into("<I", raw, cd + 24, 1000)
    archive.write_bytes(bytes(raw))
    assert zipfile.ZipFile(archive).infolist()[0].file_size == 1000
    with pytest.raises(InputError):
        extract_zip(archive, dest, LIMITS)
    assert _leftovers(dest) == []  # the half-written folder was removed


def test_encrypted_member_is_refused(tmp_path: Path, dest: Path):
    archive = _zip(tmp_path / "enc.zip", {"a.txt": b"secret"})
    raw = bytearray(archive.read_bytes())
    cd = raw.rfind(b"PK\x01\x02")
    flags = struct.unpack_from("<H", raw, cd + 8)[0]
    struct.pack_into("<H", raw, cd + 8, flags | 0x1)
    archive.write_bytes(bytes(raw))
    with pytest.raises(InputError, match="encrypted"):
        extract_zip(archive, dest, LIMITS)


def test_not_a_zip_and_missing_file(tmp_path: Path, dest: Path):
    bad = tmp_path / "prof.zip"
    bad.write_text("this is not a zip")
    with pytest.raises(InputError, match="not a readable zip"):
        extract_zip(bad, dest, LIMITS)
    with pytest.raises(InputError, match="not found"):
        extract_zip(tmp_path / "nope.zip", dest, LIMITS)


def test_private_dir_mode(tmp_path: Path):
    d = private_dir(tmp_path / "u")
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tmp_path / "u").st_mode) == 0o700


def test_limits_from_settings():
    from advisor_chat.config import Settings

    limits = UploadLimits.from_settings(
        Settings(
            upload_max_mb=3, upload_max_uncompressed_mb=7, upload_max_ratio=50, upload_max_files=9
        )
    )
    assert limits == UploadLimits(3_000_000, 7_000_000, 50.0, 9)


@pytest.mark.parametrize("depth", [40, 2000])
def test_very_deep_member_path_is_refused_cleanly(tmp_path: Path, dest: Path, depth: int):
    name = "/".join(["d"] * depth) + "/kernel_details.csv"
    z = _zip(tmp_path / "deep.zip", {name: b"x"})
    with pytest.raises(InputError) as err:
        extract_zip(z, dest, LIMITS)
    msg = str(err.value)
    assert "deeper than" in msg and len(msg) < 1000  # the name is shown bounded
    assert _leftovers(dest) == []


def test_upload_refusal_names_the_zip_not_server_folders(tmp_path: Path, monkeypatch):
    """The message shows the zip's name, never Gradio's cache path or the upload root."""
    from advisor_chat.config import load_settings
    from advisor_chat.ui import app as ui_app
    from advisor_chat.ui.session import Session, UIController

    cache = tmp_path / "gradio-cache"
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(cache))
    stored = cache / "0123abcd" / "evil.zip"
    stored.parent.mkdir(parents=True)
    _zip(stored, {"../../evil.txt": b"x"})
    ctl = UIController(load_settings())
    s = Session()
    ctl.load_upload(s, str(stored))
    ui_app._drop_gradio_copy(str(stored))
    text = s.messages[-1]["content"]
    assert "evil.zip" in text and "refusing to extract" in text
    assert str(tmp_path) not in text and str(ctl.upload_root) not in text
    # nothing left behind: Gradio's copy and its per-upload folder are gone, no extraction folder
    assert not stored.parent.exists() and cache.is_dir()
    assert list(ctl.upload_root.iterdir()) == []
    ctl.close()


def test_a_file_and_a_folder_of_one_name_are_refused_cleanly(tmp_path: Path, dest: Path):
    archive = _zip(tmp_path / "dup.zip", {"prof/a": b"x", "prof/a/b.csv": b"y"})
    with pytest.raises(InputError, match="has the name of another member"):
        extract_zip(archive, dest, LIMITS)
    assert _leftovers(dest) == []


def test_an_unsupported_compression_method_is_refused_cleanly(tmp_path: Path, dest: Path):
    archive = _zip(tmp_path / "m.zip", {"prof/a.csv": b"x" * 100}, compression=zipfile.ZIP_STORED)
    raw = bytearray(archive.read_bytes())
    for sig, off in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):  # method field, local + central
        at = raw.find(sig)
        struct.pack_into("<H", raw, at + off, 99)  # AES / unknown method id
    archive.write_bytes(bytes(raw))
    with pytest.raises(InputError, match="compression method"):
        extract_zip(archive, dest, LIMITS)
    assert _leftovers(dest) == []


def test_a_name_longer_than_255_bytes_is_refused_cleanly(tmp_path: Path, dest: Path):
    archive = _zip(tmp_path / "long.zip", {"prof/" + "n" * 256 + ".csv": b"x"})
    with pytest.raises(InputError, match="longer than 255 bytes"):
        extract_zip(archive, dest, LIMITS)
    assert _leftovers(dest) == []
