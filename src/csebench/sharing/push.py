"""`csebench push`: a run's model/ folder, with its model card, to a Hugging Face hub model repo.

The card is written first into model/README.md with the repo id in its usage snippets (modelcard.py),
so the folder uploaded is exactly the folder on disk; `--dry-run` writes that card and lists the files
without any network access. The repo is private unless --public (an existing repo keeps its
visibility). The token is huggingface_hub's usual one: $HF_TOKEN, else the one `hf auth login` stored.
"""

from __future__ import annotations

import os
from pathlib import Path

from csebench.core.errors import ConfigError, CsebenchError, DataError

IGNORE = [".*", "*/.*"]  # hidden files (an interrupted write's temporaries, .git): never uploaded


def upload_list(model_dir: Path) -> list[str]:
    """The files push sends from a run's ``model_dir``: the ones csebench wrote there (train.json's
    ``model_files``), each with the sha256 recorded for it when the run was trained, and the card,
    README.md. Hidden files (an interrupted write's temporaries, .git) are skipped, as upload_folder's
    filter does. A symbolic link is never followed out of the folder, a file csebench did not write is
    never sent, and neither is a listed file whose content is no longer what the run wrote (replaced, or
    a hard link to a file elsewhere: the name is the run's, the bytes are not): each is an error naming
    it. ``model_dir`` itself may be a link only into a run's folder (a suite's view of the run)."""
    from huggingface_hub.utils import filter_repo_objects

    from csebench.model.encoder import recorded_files

    train, listed = recorded_files(model_dir)
    if model_dir.is_symlink() and listed is None:
        raise DataError(f"{model_dir} is a symbolic link to {os.readlink(model_dir)}, which is no csebench run's model "
                        "folder: push uploads only a run's own files; push the run it belongs to")
    if listed is None:
        raise DataError(f"{train} records no sha256 of the files of {model_dir} (model_files: a run of an older csebench, "
                        "or not a run): push uploads only files it can check against what the run wrote; train the run "
                        "again")
    root = model_dir.resolve()
    files = []
    for folder, dirs, names in os.walk(root):  # links are not followed
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in sorted([*dirs, *names]):
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            if name.startswith("."):
                continue
            if path.is_symlink():
                raise DataError(f"{model_dir / rel} is a symbolic link (to {os.readlink(path)}): push uploads only the "
                                "files csebench wrote in the run's model/, never what a link points to; remove the link")
            if path.is_file():
                if rel not in listed and rel != "README.md":
                    raise DataError(f"{model_dir / rel} was not written by csebench ({train} lists the files of model/ "
                                    "under model_files): push uploads only the run's own files; move it out of model/")
                files.append(rel)
    for rel, want in sorted(listed.items()):
        _check_recorded(model_dir / rel, root / rel, want, train)
    return list(filter_repo_objects(sorted(files), ignore_patterns=IGNORE))


def _check_recorded(shown: Path, path: Path, want, train: Path) -> None:
    """A file the run wrote is on disk, a plain file, with the sha256 ``train`` recorded for it. Hashed
    afresh: no cached digest keyed by name, size and time, which a file put in its place could match."""
    import hashlib

    if path.is_symlink() or not path.is_file():
        raise DataError(f"{shown} is missing: {train} lists it among the files the run wrote in model/; restore it (or "
                        "train the run again) before pushing")
    with open(path, "rb") as fh:
        have = hashlib.file_digest(fh, "sha256").hexdigest()
    if have != want:
        raise DataError(f"{shown} has sha256 {have[:12]}…, not the {str(want)[:12]}… that {train} recorded when the run "
                        "was trained: push uploads only the files the run wrote, as it wrote them; restore the file "
                        "(or train the run again)")


def check_repo_id(repo_id: str) -> None:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as exc:
        raise ConfigError(f"--repo-id {repo_id!r} is not a hub repo id (ORG/NAME or NAME): {str(exc).splitlines()[0]}") from None


def push(run_dir: str | os.PathLike, repo_id: str, public: bool = False, dry_run: bool = False) -> list[str]:
    """Write the card, then upload RUN/model/ (unless ``dry_run``); returns the files (relative paths)."""
    from csebench.training.data import offline
    from csebench.sharing.modelcard import write_card

    check_repo_id(repo_id)
    run = Path(run_dir)
    if (run / "train.json").is_file():
        upload_list(run / "model")  # a link or a stranger in model/ is refused before the card is written there
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
        api.upload_folder(repo_id=repo_id, repo_type="model", folder_path=str(run / "model"), allow_patterns=files,
                          ignore_patterns=IGNORE,
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
