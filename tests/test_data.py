import numpy as np
import pytest

from csebench.study.params import SourceConfig
from csebench.training.data import check_senteval_dir, load_tokenized_corpus, prepare_corpus, tokenize_corpus
from csebench.core.corpus import read_corpus
from csebench.core.errors import DataError


def test_read_corpus_drops_blank_lines_and_strips(tmp_path):
    p = tmp_path / "c.txt"
    p.write_text("first sentence\n\n   \n  second one  \nthird\n", encoding="utf-8")
    assert read_corpus(p) == ["first sentence", "second one", "third"]


@pytest.mark.parametrize("content", [b"", b"\n\n  \n"])
def test_empty_corpus_is_an_error_naming_the_file(tmp_path, content):
    p = tmp_path / "empty.txt"
    p.write_bytes(content)
    with pytest.raises(DataError, match="empty.txt.*no sentences"):
        read_corpus(p)


def test_non_utf8_corpus_names_file_and_line(tmp_path):
    p = tmp_path / "latin1.txt"
    p.write_bytes("ok line\ncaf\xe9 au lait\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"latin1.txt is not UTF-8.*line 2"):
        read_corpus(p)


def test_missing_corpus(tmp_path):
    with pytest.raises(DataError, match="not found"):
        read_corpus(tmp_path / "nope.txt")


def test_prepare_corpus_sampling_is_seeded_and_keeps_order(tmp_path):
    src = tmp_path / "src.txt"
    src.write_text("\n".join(f"sentence {i}" for i in range(100)) + "\n")
    a, b, c = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "c.txt"
    assert prepare_corpus(SourceConfig(path=str(src), sample=10, sample_seed=3), a) == 10
    prepare_corpus(SourceConfig(path=str(src), sample=10, sample_seed=3), b)
    prepare_corpus(SourceConfig(path=str(src), sample=10, sample_seed=4), c)
    la, lc = a.read_text().splitlines(), c.read_text().splitlines()
    assert la == b.read_text().splitlines() and la != lc
    idx = [int(s.split()[1]) for s in la]
    assert idx == sorted(idx) and len(set(idx)) == 10


def test_tokenized_corpus_padding_and_truncation(tmp_path, tokenizer):
    sents = ["a short one", "a much longer sentence " * 20, "mid length sentence here"]
    tc = tokenize_corpus(sents, tokenizer, max_length=8)
    assert tc.lengths().max() == 8  # the long line is truncated, not an error
    ids, mask = tc.batch(np.array([0, 1]), pad_id=tokenizer.pad_token_id)
    assert ids.shape == (2, 8) and mask[0].sum() == tc.lengths()[0]
    ref = tokenizer(sents[0])["input_ids"]
    assert ids[0, : len(ref)].tolist() == ref
    assert (ids[0, len(ref):] == tokenizer.pad_token_id).all()


def test_tokenized_corpus_cache_roundtrip(tmp_path, tokenizer):
    p = tmp_path / "c.txt"
    p.write_text("one sentence\ntwo sentences here\n")
    a = load_tokenized_corpus(p, tokenizer, 16, tmp_path / "cache")
    assert len(list((tmp_path / "cache").glob("tokens-*.npz"))) == 1
    b = load_tokenized_corpus(p, tokenizer, 16, tmp_path / "cache")
    assert np.array_equal(a.ids, b.ids) and np.array_equal(a.offsets, b.offsets)


@pytest.mark.parametrize("damage", ["truncated", "empty", "other corpus"])
def test_a_damaged_token_cache_is_tokenized_again_with_a_warning(tmp_path, tokenizer, caplog, damage):
    """A truncated data/cache/tokens-*.npz (a full disk, a copy cut short) stopped train with a BadZipFile traceback
    and an empty --out; a cache is rebuilt instead, said in one warning, and written anew. A file whose arrays do not
    fit the corpus (another corpus's under this name) is damaged too."""
    import logging

    p = tmp_path / "c.txt"
    p.write_text("one sentence\ntwo sentences here\nand a third\n")
    a = load_tokenized_corpus(p, tokenizer, 16, tmp_path / "cache")
    (cache,) = (tmp_path / "cache").glob("tokens-*.npz")
    data = cache.read_bytes()
    if damage == "other corpus":
        np.savez(cache, ids=a.ids[:3], offsets=np.array([0, 3], dtype=np.int64))
    else:
        cache.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"")
    caplog.set_level(logging.WARNING)
    b = load_tokenized_corpus(p, tokenizer, 16, tmp_path / "cache")
    assert np.array_equal(a.ids, b.ids) and np.array_equal(a.offsets, b.offsets)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].startswith(f"tokenized-corpus cache {cache} is damaged (")
    assert said[0].endswith("): tokenizing the corpus again and writing it anew")
    assert cache.read_bytes() == data  # written anew: the next run reads it
    caplog.clear()
    load_tokenized_corpus(p, tokenizer, 16, tmp_path / "cache")
    assert not caplog.records


def test_tokenizer_fingerprint_is_remembered_until_the_vocabulary_grows():
    import hashlib

    from csebench.study.params import BackboneConfig
    from csebench.model.encoder import load_tokenizer
    from csebench.model.tokens import tokenizer_fingerprint

    tok = load_tokenizer(BackboneConfig(model="random"))  # its own copy: tokens are added below
    h = hashlib.sha256(tok.__class__.__name__.encode())  # the hash spelled out: caches made before stay valid
    for t, i in sorted(tok.get_vocab().items(), key=lambda kv: kv[1]):
        h.update(f"{i}:{t}\n".encode())
    h.update(str(tok.do_lower_case).encode())
    first = tokenizer_fingerprint(tok)
    assert first == h.hexdigest()[:16] and tokenizer_fingerprint(tok) == first
    tok.add_tokens(["zqxjv"])
    assert tokenizer_fingerprint(tok) != first


def test_senteval_dir_check_names_missing_files(tmp_path):
    with pytest.raises(DataError, match="STS12-en-test"):
        check_senteval_dir(tmp_path)


def test_shared_senteval_is_complete(shared_dir):
    assert check_senteval_dir(shared_dir / "senteval").name == "downstream"


def test_corpus_is_split_at_newlines_only(tmp_path):
    from csebench.core.corpus import read_corpus

    corpus = tmp_path / "c.txt"
    corpus.write_bytes("one\u2028still one\r\ntwo\x85 too\x0cand this\r\n\r\nthree\n".encode("utf-8"))
    assert read_corpus(corpus) == ["one\u2028still one", "two\x85 too\x0cand this", "three"]


@pytest.mark.parametrize("line,chars", [("\u200b\u200b", "U+200B"), ("\u202e \u200b", "U+200B, U+202E"),
                                        ("\ufeff\u2060", "U+2060, U+FEFF")])
def test_a_line_of_invisible_characters_is_refused(tmp_path, capsys, line, chars):
    """Lines of U+200B or U+202E only trained as sentences."""
    from csebench.core.corpus import read_corpus
    from csebench.core.errors import DataError

    corpus = tmp_path / "c.txt"
    corpus.write_text(f"a sentence .\n{line}\nanother one .\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        read_corpus(corpus)
    assert f"corpus {corpus} line 2 holds only invisible characters ({chars}): not text; remove the line" in str(err.value)
    corpus.write_text("a zero\u200bwidth join is text .\n\u200bleading one too\n", encoding="utf-8")
    assert len(read_corpus(corpus)) == 2


def _tar(path, members: dict) -> None:
    """A tarball of ``members``: name -> bytes (a file) or ("link", target) (a symbolic link)."""
    import io
    import tarfile

    with tarfile.open(path, "w") as tar:
        for name, what in members.items():
            info = tarfile.TarInfo(name)
            if isinstance(what, tuple):
                info.type, info.linkname = tarfile.SYMTYPE, what[1]
                tar.addfile(info)
            else:
                info.size, info.mode = len(what), 0o4777  # set-id and world-writable: never extracted as such
                tar.addfile(info, io.BytesIO(what))


@pytest.mark.parametrize("filters", [True, False], ids=["python-with-tar-filters", "python-3.11.0-3.11.3"])
def test_the_hub_s_senteval_tar_extracts_inside_its_folder_with_or_without_tarfile_s_filters(tmp_path, monkeypatch, filters):
    """senteval.tar's extraction (prepare-senteval from the hub): its files under the folder, no set-id or
    world-writable mode; a member out of the folder or a link refused. Python 3.11.0-3.11.3 (Debian 12's
    python3.11) has no tarfile filters: `filter="data"` was a TypeError there."""
    import tarfile

    from csebench.core.errors import DataError
    from csebench.training.data import extract_tar

    if not filters:
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    elif not hasattr(tarfile, "data_filter"):
        pytest.skip("this Python's tarfile has no filters")
    good = tmp_path / "good.tar"
    _tar(good, {"SentEval/data/downstream/STS/a.txt": b"one\n", "SentEval/data/downstream/b.txt": b"two\n"})
    extract_tar(good, tmp_path / "out")
    f = tmp_path / "out/SentEval/data/downstream/STS/a.txt"
    assert f.read_bytes() == b"one\n" and (tmp_path / "out/SentEval/data/downstream/b.txt").read_bytes() == b"two\n"
    assert f.stat().st_mode & 0o7777 == 0o755
    for name, members in {"up.tar": {"../escaped.txt": b"x"}, "link.tar": {"SentEval/l": ("link", "/etc/passwd")}}.items():
        _tar(tmp_path / name, members)
        with pytest.raises((DataError, tarfile.FilterError) if filters else DataError):
            extract_tar(tmp_path / name, tmp_path / name.replace(".tar", ""))
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "link" / "SentEval" / "l").exists()
    outside = tmp_path / "absolute.txt"  # an absolute name: the filter puts it under the folder, the fallback refuses it
    _tar(tmp_path / "abs.tar", {str(outside): b"x"})
    if filters:
        extract_tar(tmp_path / "abs.tar", tmp_path / "abs")
        assert (tmp_path / "abs" / str(outside).lstrip("/")).is_file()
    else:
        with pytest.raises(DataError, match="is a path out of the folder; refused"):
            extract_tar(tmp_path / "abs.tar", tmp_path / "abs")
    assert not outside.exists()
