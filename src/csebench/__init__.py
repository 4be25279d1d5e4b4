"""csebench: unsupervised contrastive sentence embeddings on one training core."""

__version__ = "0.1.0"
