"""Memories on five known topics (English and Chinese), written for the reorganization tests."""

from __future__ import annotations

import itertools
import random

TOPICS: dict[str, dict[str, list[str]]] = {
    "cooking": {
        "templates": [
            "I cooked {a} with {b} in the kitchen for dinner",
            "My dinner recipe: cook the {a} slowly with {b}",
            "In the kitchen I cook {a} with {b} from a family recipe",
            "晚饭我在厨房用{c}做{d},这个菜谱很好",
            "周末在厨房做饭,用{c}炖{d},菜谱来自奶奶",
            "我的拿手菜谱是{c}烧{d},晚饭常在厨房做",
        ],
        "a": ["pasta", "risotto", "curry", "dumplings", "lasagna", "soup", "pancakes"],
        "b": ["garlic", "tomatoes", "butter", "basil", "ginger", "mushrooms"],
        "c": ["大蒜", "生姜", "酱油", "葱花", "辣椒"],
        "d": ["牛肉", "豆腐", "鸡蛋", "排骨", "青菜"],
    },
    "travel": {
        "templates": [
            "Next summer I travel to {a} by plane and stay in a hotel near {b}",
            "Booked the flight and the hotel for my trip to {a}, close to {b}",
            "My travel plan for {a}: a hotel by {b} and a return flight",
            "我打算坐飞机去{c}旅行,酒店订在{d}附近",
            "上次去{c}旅行,住的酒店就在{d}旁边,机票很便宜",
            "旅行计划:飞{c},参观{d},酒店已经订好",
        ],
        "a": ["Lisbon", "Kyoto", "Iceland", "Vienna", "Cairo", "Peru", "Bali"],
        "b": ["the old harbour", "the museum", "the beach", "the mountains", "the station"],
        "c": ["云南", "西藏", "成都", "厦门", "桂林"],
        "d": ["古城", "博物馆", "海边", "雪山", "火车站"],
    },
    "programming": {
        "templates": [
            "Refactored the {a} code in Python and fixed a bug caused by {b}",
            "The Python unit tests for the {a} code fail because of {b}",
            "Fixed a bug in the {a} code; the cause was {b}, Python tests pass now",
            "今天写Python代码,重构了{c}模块,修复了{d}的bug",
            "{c}模块的Python代码测试失败,bug原因是{d}",
            "修复{c}代码里的bug,问题出在{d},测试通过了",
        ],
        "a": ["parser", "database", "scheduler", "login", "billing", "cache"],
        "b": ["the API client", "a race condition", "null pointers", "the build script"],
        "c": ["数据库", "登录", "缓存", "调度", "支付"],
        "d": ["空指针", "并发", "编译脚本", "接口超时", "内存泄漏"],
    },
    "fitness": {
        "templates": [
            "At the gym I ran {a} km and did {b} push-ups in my workout",
            "Workout plan from the gym coach: {b} squats and a {a} km run",
            "Gym workout today: {a} km on the treadmill, then {b} sit-ups",
            "今天去健身房锻炼,跑步{c}公里,做了{d}个俯卧撑",
            "健身教练让我每周锻炼{c}次,每次深蹲{d}个",
            "健身计划:跑步{c}公里,再做{d}个仰卧起坐",
        ],
        "a": ["5", "8", "10", "12", "21", "3"],
        "b": ["20", "30", "40", "50", "15"],
        "c": ["三", "五", "六", "十", "四"],
        "d": ["二十", "三十", "四十", "五十", "十五"],
    },
    "music": {
        "templates": [
            "Practised {b} music on the {a} for an hour",
            "Went to a {b} music concert and loved the {a} solo",
            "I am learning to play {b} music on the {a}, practising every day",
            "每天练习{c}一个小时,最近在学{d}音乐",
            "昨晚听了一场{d}音乐会,{c}独奏特别好听",
            "学{c}半年了,每天练习{d}音乐的曲子",
        ],
        "a": ["guitar", "piano", "violin", "drums", "cello", "saxophone"],
        "b": ["jazz", "blues", "classical", "folk", "rock"],
        "c": ["钢琴", "吉他", "小提琴", "古筝", "二胡"],
        "d": ["爵士", "古典", "民谣", "摇滚", "流行"],
    },
}


def topic_memories(per_topic: int = 50, seed: int = 7) -> list[tuple[str, str]]:
    """``(topic, text)`` pairs, distinct texts, ``per_topic`` per topic, half of them Chinese."""
    rng = random.Random(seed)
    corpus: list[tuple[str, str]] = []
    for topic, parts in TOPICS.items():
        texts: set[str] = set()
        for template in itertools.cycle(parts["templates"]):
            if len(texts) >= per_topic:
                break
            fields = {slot: rng.choice(parts[slot]) for slot in "abcd"}
            texts.add(template.format(**fields))
        corpus.extend((topic, text) for text in sorted(texts))
    return corpus
