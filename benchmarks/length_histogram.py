"""The sentence-length histogram behind `csebench plan`'s training-token count
(src/csebench/resources/sentence_lengths.json), computed once from SentEval data:

    python benchmarks/length_histogram.py [--senteval ../shared/senteval]

wiki1m (10^6 Wikipedia sentences) is not on these machines. Its stand-in are the whole-sentence
SentEval transfer sets, written prose of wiki-like length: MR and SST-2 dev/test (movie-review
sentences), CR (product-review sentences), SUBJ (plot-summary and review sentences) and MRPC (news
sentences), distinct sentences. Left out: MPQA (opinion phrases of ~5 tokens), TREC (short
questions) and SST-2 train (mostly phrases). Lengths are in tokens of the packaged MiniLM
tokenizer (BERT uncased WordPiece, bert-base's vocabulary), [CLS] and [SEP] included, uncapped:
`csebench plan` applies each run's max_seq_length. Only counts per length are shipped, no text.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "csebench" / "resources" / "sentence_lengths.json"
PROXY = {"MR": ("all",), "CR": ("all",), "SUBJ": ("all",), "MRPC": ("train", "test"), "SST2": ("dev", "test")}


def histogram(senteval: str | Path) -> dict:
    from transformers import AutoTokenizer

    from csebench.evaluation.locate import senteval_root
    from csebench.model.encoder import packaged_model_dir
    from csebench.evaluation.transfer import load_transfer_task

    root = senteval_root(senteval)
    sentences: set[str] = set()
    for task, splits in PROXY.items():
        data = load_transfer_task(root, task)
        for split in splits:
            sentences.update(data.splits[split].sentences())
    tok = AutoTokenizer.from_pretrained(str(packaged_model_dir()))
    lengths = Counter(len(ids) for ids in tok(sorted(sentences))["input_ids"])
    return {
        "source": "SentEval transfer sentences, a stand-in for wiki1m: "
                  + ", ".join(f"{t} {'/'.join(s)}" for t, s in PROXY.items()) + " (distinct sentences)",
        "tokenizer": "packaged MiniLM (BERT uncased WordPiece), [CLS] and [SEP] included, uncapped",
        "script": "benchmarks/length_histogram.py",
        "sentences": len(sentences),
        "counts": {str(n): lengths[n] for n in sorted(lengths)},
    }


def main(argv=None) -> None:
    from csebench.core.io import write_json

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--senteval", default=str(ROOT.parent / "shared" / "senteval"))
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    res = histogram(a.senteval)
    write_json(a.out, res)
    print(f"wrote {a.out}: {res['sentences']} sentences, lengths {min(map(int, res['counts']))}-"
          f"{max(map(int, res['counts']))}")


if __name__ == "__main__":
    main()
