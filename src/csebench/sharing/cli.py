"""`csebench model-card`, `push`: a finished run's model card, and its upload to the Hugging Face hub.
"""

from __future__ import annotations

import logging
import os

from csebench.core.commands import Commands, option

COMMANDS = Commands(stage=60)


def run_model_folder(args) -> list[tuple[str, bool]]:
    """What model-card and push write besides their options' outputs: RUN/model_card.md and RUN/model/README.md."""
    return [(os.path.join(args.run, "model"), True)]


FINISHED_RUN = option("--run", required=True, help="a finished run: its own folder, RESULTS/runs/KEY/seedN (its train.json's "
                      "names), or a suite's view of it, RESULTS/SUITE/runs/RUN/seedN (that suite's names and results)")


@COMMANDS.command("model-card", "write a run's model card: RUN/model_card.md and RUN/model/README.md", FINISHED_RUN, also_writes=run_model_folder)
def cmd_model_card(args) -> None:
    from csebench.sharing.modelcard import write_card

    path = write_card(args.run)
    logging.getLogger("csebench").info("model card: %s (and %s)", path, os.path.join(args.run, "model_card.md"))


@COMMANDS.command("push", "upload a run's model/ folder with its model card to the Hugging Face hub", FINISHED_RUN,
                  option("--repo-id", required=True, help="hub model repo, ORG/NAME (created if missing)"),
                  option("--public", action="store_true", help="create the repo public (default: private)"),
                  option("--dry-run", action="store_true", help="write the card and list the files that would be uploaded; no network access"), also_writes=run_model_folder)
def cmd_push(args) -> None:
    from csebench.sharing.push import push

    files = push(args.run, args.repo_id, public=args.public, dry_run=args.dry_run)
    folder = os.path.join(args.run, "model")
    if args.dry_run:
        print(f"would upload {len(files)} files from {folder} to {args.repo_id} "
              f"({'public' if args.public else 'private'}); the card is {os.path.join(folder, 'README.md')}:")
        print("\n".join(f"  {f}" for f in files))
    else:
        logging.getLogger("csebench").info("pushed %d files from %s to https://huggingface.co/%s", len(files), folder, args.repo_id)
