"""The tracking URI a run asks for, the embedded default, and the URI shown without credentials."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

# MLflow 3's own default names (sqlite:///mlflow.db, mlruns/), in the project root: what
# ``mlflow ui`` run there finds.
DEFAULT_DB = "mlflow.db"
ARTIFACTS = "mlruns"
TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"
EXPERIMENT_ENV = "MLFLOW_EXPERIMENT_NAME"
EXPERIMENT = "mlrepro"  # when MLFLOW_EXPERIMENT_NAME names none
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)[^/@\s]*@")


def default_uri(root: Path) -> str:
    """The embedded default: an SQLite file in the project root (no server)."""
    return f"sqlite:///{root.resolve() / DEFAULT_DB}"


def chosen_uri(given: str | None, ini: str | None, root: Path) -> str:
    """The command line's URI, else MLFLOW_TRACKING_URI, else the ini file's, else the default."""
    for uri in (given, os.environ.get(TRACKING_URI_ENV), ini):
        if uri and uri.strip():
            return uri.strip()
    return default_uri(root)


def experiment_name() -> str:
    return os.environ.get(EXPERIMENT_ENV, "").strip() or EXPERIMENT


def artifact_root(uri: str) -> str | None:
    """A new experiment's artifacts: beside a local SQLite store's file (MLflow's default, the
    working directory's ``mlruns``, moves with the cwd); a server's decides itself (None)."""
    if not uri.startswith("sqlite:///"):
        return None
    database = Path(uri[len("sqlite:///") :])
    return (database.parent / ARTIFACTS).resolve().as_uri()


def shown_uri(uri: str) -> str:
    """``uri`` without the user name and password it may carry: what a message or file may say."""
    parts = urlsplit(uri)
    if "@" not in parts.netloc:
        return _USERINFO.sub(r"\g<scheme>", uri)
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def scrubbed(text: str, uri: str) -> str:
    """``text`` (an exception's) without credentials: ``uri`` as :func:`shown_uri`, any other
    ``scheme://user:password@`` stripped, MLflow's password and token variables replaced."""
    text = _USERINFO.sub(r"\g<scheme>", text.replace(uri, shown_uri(uri)))
    for name in ("MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN"):
        secret = os.environ.get(name, "")
        if len(secret) >= 4:
            text = text.replace(secret, "***")
    return text
