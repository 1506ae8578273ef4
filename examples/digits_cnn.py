"""The grey-digit classifier of the second example: its architecture, registered as the builder
``digits_cnn`` for the PyTorch manifest (``manifests/digits_torch.yaml``), whose weights are the
committed ``examples/digits/digits_cnn.pt`` (loaded with ``torch.load(weights_only=True)``).

Input: N×1×8×8 float32, grey 0..1 (x / 255); output: 10 logits (``zero`` … ``nine``). Trained
by ``examples/train_digits.py``; see ``examples/digits/README.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_mlrepro.errors import Unavailable
from pytest_mlrepro.registry import model_builder

if TYPE_CHECKING:
    import torch

SIZE = 8
CLASSES = 10


@model_builder("digits_cnn", input_size=SIZE)
def build_model() -> torch.nn.Module:
    """The architecture only; the runner loads the verified weights into it."""
    try:
        from torch import nn
    except ImportError:
        raise Unavailable("torch is not installed", how="pip install torch") from None
    # Two 3×3 convolutions (same padding), a 2×2 max pool, one linear layer: 9.8k parameters.
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * (SIZE // 2) ** 2, CLASSES),
    )
