"""Models run one input (or one batch) at a time on one thread — cross-encoders, topic encoders,
bge-small's token states, e5 on OpenVINO — run them side by side on a lone process's cores and
in turn in a pool worker that has one core, with the same outputs bit for bit
(mem_resources/bge.py ``run_each``)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from mem_assets.dedup import offline_judge_cross_encoder as cross_encoder
from mem_assets.reorg import topic_encoder
from mem_resources import bge
from mem_resources.settings import DEFAULT_MODELS_DIR


@pytest.fixture
def cores():
    """Sets this process's share of the cores; puts back the one it had."""
    before = bge.threads_per_process()
    yield bge.share_cores
    bge.share_cores(before)


def test_inputs_run_side_by_side_in_order(cores):
    cores(2)
    both_running = threading.Barrier(2, timeout=10)

    def run(item: int) -> tuple[int, int]:
        both_running.wait()
        return item * item, threading.get_ident()

    out = bge.run_each(run, list(range(6)))
    assert [square for square, _ in out] == [0, 1, 4, 9, 16, 25]
    assert threading.get_ident() not in {ident for _, ident in out}


def test_a_worker_with_one_core_runs_them_in_turn_on_its_own_thread(cores):
    cores(1)
    out = bge.run_each(lambda item: (item + 1, threading.get_ident()), [1, 2, 3])
    assert out == [(2, threading.get_ident()), (3, threading.get_ident()), (4, threading.get_ident())]
    assert bge.run_each(lambda item: item, []) == []


PAIRS = {
    "en": [("The user is allergic to cats.", "The user has a cat allergy."),
           ("Mia's dog Biscuit is a beagle.", "Mia's dog Biscuit is a golden retriever."),
           ("The user works in Shanghai.", "The user moved to Berlin for a new job last spring."),
           ("The user likes jazz.", "The user likes jazz and old cameras on weekends.")] * 3,
    "zh": [("用户对猫过敏", "用户对猫已经不过敏了"), ("用户喜欢喝乌龙茶", "用户爱喝乌龙"),
           ("用户在上海工作", "用户去年春天搬到北京换了工作"), ("用户喜欢爵士乐", "用户周末喜欢爵士乐和老相机")] * 3,
}


@pytest.mark.parametrize("language", ["en", "zh"])
def test_models_give_the_same_outputs_side_by_side_as_in_turn(cores, language):
    pairs = [(a + " " * k, b) for k, (a, b) in enumerate(PAIRS[language])]
    texts = [text for pair in pairs for text in pair]
    jar = bge.existing_jar(DEFAULT_MODELS_DIR, language)
    outputs = []
    for share in (1, 2):
        cores(share)
        judge = cross_encoder.CrossEncoder(cross_encoder.MODEL_FILES[language], jar, language)
        topics = topic_encoder.TopicEncoder(topic_encoder.ENCODERS[language])
        states = bge.TokenEncoder(jar, bge.JARS[language]).encode(texts * 3)
        outputs.append((judge.probabilities(pairs), topics.embed(texts),
                        np.concatenate([np.vstack([s.sentence, s.tokens]) for s in states])))
    in_turn, side_by_side = outputs
    assert in_turn[0].shape == (len(pairs), 3) and in_turn[1].shape[0] == len(texts)
    assert len(in_turn[2]) > 3 * len(texts)
    for one, other in zip(in_turn, side_by_side, strict=True):
        assert np.array_equal(one, other)


def test_e5_gives_the_same_vectors_on_two_streams_as_on_one(cores):
    from mem_resources.e5_onnx import E5Onnx

    texts = [text for pairs in PAIRS.values() for pair in pairs[:4] for text in pair] + ["word " * 700]
    vectors = []
    for share in (1, 2):
        cores(share)
        e5 = E5Onnx()
        vectors.append((e5.passage(texts), e5.query(texts)))
    assert vectors[0][0].shape == (len(texts), 384)
    assert np.array_equal(vectors[0][0], vectors[1][0]) and np.array_equal(vectors[0][1], vectors[1][1])
