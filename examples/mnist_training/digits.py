"""MNIST-shaped handwritten digits that ship inside a package: nothing is downloaded.

scikit-learn's digits (1797 images, 8x8, values 0..16; ``sklearn.datasets.load_digits`` reads
them from the installed package) are scaled to 0..255, upsampled bilinearly to 20x20 and
centred in a 28x28 frame, as MNIST centres its 20x20 digits. A fixed split (seeded) keeps one
image in five for testing (360 centred images). Each training digit is used at the 25 positions
within 2 pixels of the centre (35 925 images): with 1437 images an epoch is 23 steps, and one
epoch leaves the network anywhere between 30 % and 70 % accurate depending on the seed; 562
steps train it (about 99 %), as one epoch of MNIST does. ``DIGITS_SAMPLES=n`` keeps only the first n
digits (quick runs).

``Digits(train, transform)`` is a drop-in for ``torchvision.datasets.mnist.MNIST(root,
train, transform)``: items are ``(transform(uint8 28x28 array), label)``.
"""
from __future__ import annotations

import os
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

SIDE, DIGIT_SIDE = 28, 20
TEST_EVERY = 5
SPLIT_SEED = 0
SHIFTS = range(-2, 3)  # pixels, in each direction; the frame's 4-pixel border keeps digits whole


def _images_and_labels() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    pixels = torch.from_numpy(digits.images).float().unsqueeze(1) * (255.0 / 16.0)
    digit = F.interpolate(pixels, size=(DIGIT_SIDE, DIGIT_SIDE), mode="bilinear", align_corners=False)
    border = (SIDE - DIGIT_SIDE) // 2
    framed = F.pad(digit, (border, border, border, border))
    images = framed.squeeze(1).round().clamp(0, 255).to(torch.uint8).numpy()
    order = np.random.RandomState(SPLIT_SEED).permutation(len(images))
    limit = int(os.environ.get("DIGITS_SAMPLES", len(images)))
    order = order[:limit]
    return images[order], digits.target[order]


def _shifted(images: np.ndarray) -> np.ndarray:
    """Every image at every (dy, dx) position of SHIFTS x SHIFTS, position by position."""
    return np.concatenate([np.roll(images, (dy, dx), axis=(1, 2)) for dy in SHIFTS for dx in SHIFTS])


class Digits(Dataset):
    """The train (4/5) or test (1/5) part of the upsampled digits."""

    def __init__(self, train: bool = True, transform: Callable | None = None) -> None:
        images, labels = _images_and_labels()
        test = np.arange(len(images)) % TEST_EVERY == 0
        if train:
            images, labels = _shifted(images[~test]), np.tile(labels[~test], len(SHIFTS) ** 2)
        else:
            images, labels = images[test], labels[test]
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int):
        image = self.images[index]
        return (self.transform(image) if self.transform else image), int(self.labels[index])
