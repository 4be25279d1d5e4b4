"""Write benchmarks/device-bundle/ (git-ignored, about 10 MB): what benchmarks/device.sh needs beside the
checkout on a GPU machine without network (docs/gpu.md).

    python benchmarks/device_bundle.py            # from the packaged MiniLM and ../shared

  tokenizer-bert/     the packaged MiniLM's tokenizer files only (bert-base-uncased's uncased WordPiece vocabulary)
  tokenizer-roberta/  byte-level BPE trained on the demo corpus (csebench.model.standins: <s> 0, <pad> 1, </s> 2, <unk> 3)
  corpus.txt          20,000 demo sentences
  senteval/downstream/STS, SICK   the 7 STS tasks (SentEval's files)
  wheels/             pure-Python wheels of anything the machine lacks (imported from the zip, never installed):
                      none today (csebench's training and evaluation need torch, transformers, numpy, scipy,
                      safetensors, pyyaml, tqdm, which sentence-transformers brings)
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ROOT / "benchmarks" / "device-bundle"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
CORPUS_LINES = 20_000


def main(argv=None) -> Path:
    sys.path.insert(0, str(ROOT / "src"))
    from csebench.study.params import shared_dir
    from csebench.model.encoder import packaged_model_dir
    from csebench.model.standins import train_tokenizer

    shared = Path(shared_dir()) if Path(shared_dir()).is_absolute() else (ROOT / shared_dir()).resolve()
    out = Path(argv[0]) if argv else BUNDLE
    shutil.rmtree(out, ignore_errors=True)
    (out / "tokenizer-bert").mkdir(parents=True)
    for name in TOKENIZER_FILES:
        if (packaged_model_dir() / name).is_file():
            shutil.copy2(packaged_model_dir() / name, out / "tokenizer-bert" / name)
    lines = (shared / "corpus" / "demo-sentences.txt").read_text(encoding="utf-8").splitlines()[:CORPUS_LINES]
    (out / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    train_tokenizer("roberta", lines).save_pretrained(out / "tokenizer-roberta")
    src = shared / "senteval" / "downstream"
    ignore = shutil.ignore_patterns("STSBenchmark-raw", "sts-train.csv", "SICK_train.txt")
    for task in ("STS", "SICK"):
        shutil.copytree(src / task, out / "senteval" / "downstream" / task, ignore=ignore)
    (out / "wheels").mkdir()
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"wrote {out} ({size / 2**20:.1f} MiB)")
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
