"""The shipped topic encoders (English, Chinese): unit vectors that do not depend on what else is in
the call, themes apart, and a replaced model file refused instead of mixed with vectors kept from
the shipped one."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from mem_assets.reorg.topic_encoder import ENCODERS, ModelChangedError, TopicEncoder, load

THEMES = {
    "en": (["Biscuit, the user's beagle, needs a long walk every evening.",
            "The user took the dog to the vet for its yearly vaccinations."],
           ["The user filed the tax return two weeks before the deadline.",
            "The user is collecting receipts for this year's tax deductions."]),
    "zh": (["用户的小狗每天晚上都要出去散步一个小时。",
            "我上周带狗去宠物医院打了年度疫苗。"],
           ["用户今年比截止日期提前两周报了个人所得税。",
            "我在整理今年抵扣个税要用的各种发票。"]),
}


@pytest.mark.parametrize("language", sorted(ENCODERS))
def test_vectors_are_unit_length_and_independent_of_their_neighbours(language):
    dog, tax = THEMES[language]
    encoder = load(language)
    together = encoder.embed(dog + tax)
    assert together.shape == (4, ENCODERS[language].dimension)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(encoder.embed([dog[0]])[0], together[0]), "a text's vector never depends on the batch"


@pytest.mark.parametrize("language", sorted(ENCODERS))
def test_memories_of_one_theme_are_closer_than_memories_of_two(language):
    dog, tax = THEMES[language]
    dog_a, dog_b, tax_a, tax_b = load(language).embed(dog + tax)
    assert dog_a @ dog_b > max(dog_a @ tax_a, dog_a @ tax_b, dog_b @ tax_a, dog_b @ tax_b)
    assert tax_a @ tax_b > max(dog_a @ tax_a, dog_b @ tax_b)


@pytest.mark.parametrize("language", sorted(ENCODERS))
def test_a_replaced_model_file_is_refused(tmp_path, language):
    model = ENCODERS[language]
    changed = tmp_path / model.file.name
    shutil.copyfile(model.file, changed)
    with changed.open("ab") as file:
        file.write(b"\0")
    with pytest.raises(ModelChangedError, match="bump its name and sha256"):
        TopicEncoder(model, changed)


@pytest.mark.parametrize("language", sorted(ENCODERS))
def test_one_sleeping_thread_gives_the_default_sessions_vectors_bit_for_bit(language):
    """The shipped session (one intra-op thread that sleeps between runs) is a speed setting only:
    vectors kept on nodes by onnxruntime's default session stay valid."""
    import onnxruntime

    encoder = load(language)
    assert encoder._session.get_session_options().intra_op_num_threads == 1
    reference = TopicEncoder(ENCODERS[language])
    reference._session = onnxruntime.InferenceSession(str(ENCODERS[language].file), providers=["CPUExecutionProvider"])
    texts = [text for theme in THEMES[language] for text in theme]
    assert np.array_equal(encoder.embed(texts), reference.embed(texts))
