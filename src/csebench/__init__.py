"""csebench: unsupervised contrastive sentence embeddings on one training core.

The Python entry (docs/api.md): ``csebench.evaluate_sts(model)`` and ``csebench.evaluate_transfer(model)``
score a model with the papers' protocol; the pipeline itself runs through the ``csebench`` command and
Snakemake.
"""

from csebench._version import __version__
from csebench.api import STSResult, TransferResult, evaluate_sts, evaluate_transfer  # torch-free to import

__all__ = ["STSResult", "TransferResult", "evaluate_sts", "evaluate_transfer", "__version__"]
