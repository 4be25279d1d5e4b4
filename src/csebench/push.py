"""`csebench push`: a run's model/ folder, with its model card, to a Hugging Face hub model repo.

The card is written first into model/README.md with the repo id in its usage snippets (modelcard.py),
so the folder uploaded is exactly the folder on disk; `--dry-run` writes that card and lists the files
without any network access. The repo is private unless --public (an existing repo keeps its
visibility). The token is huggingface_hub's usual one: $HF_TOKEN, else the one `hf auth login` stored.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ConfigError, CsebenchError

IGNORE = [".*", "*/.*"]  # hidden files (an interrupted write's temporaries, .git): never uploaded


def upload_list(model_dir: Path) -> list[str]:
    """The files upload_folder sends from ``model_dir`` (same filter: huggingface_hub's own)."""
    from huggingface_hub.utils import filter_repo_objects

    files = sorted(p.relative_to(model_dir).as_posix() for p in model_dir.rglob("*") if p.is_file())
    return list(filter_repo_objects(files, ignore_patterns=IGNORE))


def check_repo_id(repo_id: str) -> None:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as exc:
        raise ConfigError(f"--repo-id {repo_id!r} is not a hub repo id (ORG/NAME or NAME): {str(exc).splitlines()[0]}") from None


def push(run_dir: str | os.PathLike, repo_id: str, public: bool = False, dry_run: bool = False) -> list[str]:
    """Write the card, then upload RUN/model/ (unless ``dry_run``); returns the files (relative paths)."""
    from .data import offline
    from .modelcard import write_card

    check_repo_id(repo_id)
    run = Path(run_dir)
    write_card(run, repo_id)  # also checks that RUN is a finished run folder
    files = upload_list(run / "model")
    if dry_run:
        return files
    if offline():
        raise CsebenchError(f"offline (HF_HUB_OFFLINE or CSEBENCH_OFFLINE is set): nothing uploaded to {repo_id}; unset it "
                            "on a machine with network access, or pass --dry-run to see the card and the files")
    from huggingface_hub import HfApi, get_token
    from huggingface_hub.errors import HfHubHTTPError

    if not get_token():
        raise CsebenchError("no Hugging Face token: set HF_TOKEN, or run `hf auth login` (a token with write access)")
    api = HfApi()
    try:
        api.create_repo(repo_id, private=not public, repo_type="model", exist_ok=True)
        api.upload_folder(repo_id=repo_id, repo_type="model", folder_path=str(run / "model"), ignore_patterns=IGNORE,
                          commit_message=f"csebench: {run.parent.name}/{run.name} with its model card")
    except HfHubHTTPError as exc:
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status in (401, 403):
            raise CsebenchError(f"the Hugging Face token cannot write to {repo_id} (HTTP {status}): use a token with "
                                "write access to that namespace (HF_TOKEN or `hf auth login`)") from None
        raise CsebenchError(f"the hub refused the upload to {repo_id}: {str(exc).splitlines()[0]}") from None
    except Exception as exc:  # no network: the HTTP client's connection errors are no common base class
        raise CsebenchError(f"could not reach the Hugging Face hub ({exc.__class__.__name__}: "
                            f"{(str(exc).splitlines() or [''])[0]}): nothing uploaded to {repo_id}; check the network "
                            "and retry (an upload that stopped midway is not committed)") from None
    return files
