"""The shipped topic encoder: unit vectors that do not depend on what else is in the call, themes
apart, and a replaced model file refused instead of mixed with vectors kept from the shipped one."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from mem_assets.reorg.topic_encoder import DIMENSION, MODEL_FILE, ModelChangedError, TopicEncoder, load

DOG = ["Biscuit, the user's beagle, needs a long walk every evening.",
       "The user took the dog to the vet for its yearly vaccinations."]
TAX = ["The user filed the tax return two weeks before the deadline.",
       "The user is collecting receipts for this year's tax deductions."]


def test_vectors_are_unit_length_and_independent_of_their_neighbours():
    encoder = load()
    together = encoder.embed(DOG + TAX)
    assert together.shape == (4, DIMENSION)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(encoder.embed([DOG[0]])[0], together[0]), "a text's vector never depends on the batch"


def test_memories_of_one_theme_are_closer_than_memories_of_two():
    dog_a, dog_b, tax_a, tax_b = load().embed(DOG + TAX)
    assert dog_a @ dog_b > max(dog_a @ tax_a, dog_a @ tax_b, dog_b @ tax_a, dog_b @ tax_b)
    assert tax_a @ tax_b > max(dog_a @ tax_a, dog_b @ tax_b)


def test_a_replaced_model_file_is_refused(tmp_path):
    changed = tmp_path / MODEL_FILE.name
    shutil.copyfile(MODEL_FILE, changed)
    with changed.open("ab") as file:
        file.write(b"\0")
    with pytest.raises(ModelChangedError, match="bump topic_encoder.NAME"):
        TopicEncoder(changed)
