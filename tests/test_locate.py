"""Where the evaluation data are (csebench.evaluation.locate): a prepared pointer folder (ROOT), the folder
SentEval's layout puts the data in, or the data folder itself; a folder that is not there is one clear error."""

from __future__ import annotations

import pytest

from csebench.core.errors import DataError
from csebench.evaluation.locate import probing_root, senteval_root


@pytest.mark.parametrize("locate, inner, what", [(senteval_root, "downstream", "SentEval data"),
                                                 (probing_root, "data/probing", "probing data")])
def test_a_pointer_a_checkout_or_the_folder_itself(tmp_path, locate, inner, what):
    data = tmp_path / "data-itself"
    data.mkdir()
    assert locate(data) == data
    checkout = tmp_path / "checkout"
    (checkout / inner).mkdir(parents=True)
    assert locate(checkout) == checkout / inner
    pointer = tmp_path / "pointer"
    pointer.mkdir()
    (pointer / "ROOT").write_text(f"{checkout / inner}\n", encoding="utf-8")
    assert locate(pointer) == checkout / inner
    with pytest.raises(DataError, match=f"{what} folder not found: .*missing"):
        locate(tmp_path / "missing")
