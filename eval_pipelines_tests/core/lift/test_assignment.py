"""Exposure-arm assignment: hashing, buckets, cluster keys, the lever split, and vectors.json.

Oracles: the FNV reference test suite (test_fnv.c, FNV-1a 32-bit vectors) and a second FNV-1a
written independently below; the published vectors.json (a change of the hash input layout
breaks it); the plain scalar path as the oracle of the vectorised one; and the binomial
spread of bucket shares over 1,000,000 keys.
"""

import dataclasses
import functools
import hashlib
import json
import os
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.lift import assignment as lift
from eval_pipelines.core.lift.assignment import (
    ARMS,
    BUCKETS,
    ExposureArm,
    LiftConfig,
    Message,
    Request,
    artifact_arm,
    assign,
    assign_many,
    bucket,
    buckets,
    check_fraction,
    cluster_key,
    fnv1a_32,
    fnv1a_32_many,
    parse_arm,
)

VECTORS = json.loads(
    resources.files("eval_pipelines.core.lift").joinpath("vectors.json").read_text("utf-8")
)
WS = "ws-acme"
CONFIG = LiftConfig(WS, "epoch-1")


def independent_fnv1a_32(data: bytes) -> int:
    """FNV-1a 32 written apart from the library: reduce over bytes, modulo 2**32."""
    return functools.reduce(lambda h, byte: ((h ^ byte) * 16777619) % 2**32, data, 2166136261)


def conversation_digest(messages):
    """The opening digest as 004 and the module docstring define it (re-derived here)."""
    opening = []
    for role, content in messages:
        opening.append([role, None if role in ("system", "developer") else content])
        if role == "user":
            break
    text = json.dumps(opening, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def chat(*pairs, **fields):
    return Request(WS, messages=tuple(Message(role, content) for role, content in pairs), **fields)


# --------------------------------------------------------------------------------------------
# FNV-1a
# --------------------------------------------------------------------------------------------


def test_fnv1a_32_published_vectors():
    # FNV reference test suite, fnv1a_32 vectors (test_fnv.c).
    assert fnv1a_32(b"") == 0x811C9DC5
    assert fnv1a_32(b"a") == 0xE40C292C
    assert fnv1a_32(b"foobar") == 0xBF9CF968
    assert fnv1a_32(b"\x00") == 0x050C5D1F
    assert fnv1a_32(b"chongo") == 0xBD564E7D


def test_fnv1a_32_matches_the_published_vector_file_and_an_independent_implementation():
    vectors = VECTORS["fnv1a_32"]["vectors"]
    assert len(vectors) >= 3
    seen = {}
    for vector in vectors:
        data = bytes.fromhex(vector["bytes_hex"])
        expected = int(vector["fnv1a_32"], 16)
        assert vector["fnv1a_32"] == f"0x{expected:08x}"
        assert fnv1a_32(data) == expected == independent_fnv1a_32(data)
        if vector["text"] is not None:
            assert vector["text"].encode() == data
        seen[data] = expected
    assert seen[b""] == 0x811C9DC5
    assert seen[b"a"] == 0xE40C292C
    assert seen[b"foobar"] == 0xBF9CF968


def test_fnv1a_32_many_equals_the_scalar_hash_on_mixed_lengths():
    rng = np.random.default_rng(20260509)
    lengths = np.concatenate(
        [rng.integers(0, 40, size=3000), [0, 0, 1, 257, 1000, 4096], rng.integers(0, 3, 50)]
    )
    keys = [rng.integers(0, 256, size=int(n), dtype=np.uint8).tobytes() for n in lengths]
    many = fnv1a_32_many(keys)
    assert many.dtype == np.uint32
    assert many.tolist() == [fnv1a_32(key) for key in keys]
    assert fnv1a_32_many([]).shape == (0,)
    assert fnv1a_32_many([b"", b""]).tolist() == [0x811C9DC5, 0x811C9DC5]


# --------------------------------------------------------------------------------------------
# Buckets and fractions
# --------------------------------------------------------------------------------------------


def test_bucket_vectors_pin_the_hash_input_layout():
    vectors = VECTORS["bucket"]["vectors"]
    assert len(vectors) >= 12
    assert {v["arm_at_10_percent"] for v in vectors} == {"holdout", "pre_lever"}
    for v in vectors:
        layout = v["workspace_id"].encode() + b"\x00" + v["cluster_key"].encode()
        assert independent_fnv1a_32(layout) % BUCKETS == v["bucket"]
        assert bucket(v["workspace_id"], v["cluster_key"]) == v["bucket"]
        config = LiftConfig(v["workspace_id"], "vectors", holdout_fraction=0.10)
        stamped = assign(Request(v["workspace_id"], trace_id=v["cluster_key"]), config)
        assert (stamped.bucket, stamped.arm.value) == (v["bucket"], v["arm_at_10_percent"])


def test_lever_vectors_pin_the_salted_layout():
    doc = VECTORS["lever"]
    assert {v["arm"] for v in doc["vectors"]} == {"holdout", "lever_holdout", "treated"}
    for v in doc["vectors"]:
        salted = f"{v['workspace_id']}\x00{v['lever']}\x00{v['cluster_key']}".encode()
        assert independent_fnv1a_32(salted) % BUCKETS == v["lever_bucket"]
        config = LiftConfig(
            v["workspace_id"],
            "vectors",
            holdout_fraction=doc["holdout_fraction"],
            lever=v["lever"],
            lever_holdout_share=doc["lever_holdout_share"],
        )
        stamped = assign(Request(v["workspace_id"], trace_id=v["cluster_key"]), config)
        assert (stamped.bucket, stamped.arm.value) == (v["bucket"], v["arm"])


def test_conversation_vectors_pin_the_opening_digest():
    for v in VECTORS["conversation"]["vectors"]:
        request = Request(v["workspace_id"], messages=tuple(Message(*m) for m in v["messages"]))
        stamped = assign(request, LiftConfig(v["workspace_id"], "vectors"))
        assert (stamped.cluster, stamped.bucket, stamped.arm.value) == (
            v["token"],
            v["bucket"],
            v["arm_at_10_percent"],
        )
        digest = hashlib.sha256(v["opening_json"].encode()).hexdigest()
        assert digest == conversation_digest(v["messages"])
        assert bucket(v["workspace_id"], digest) == v["bucket"]
        token = independent_fnv1a_32(b"eval_pipelines.lift.conversation\x00" + digest.encode())
        assert v["token"] == f"conv-{token:08x}"


def test_buckets_equals_bucket():
    keys = ["", "a", "trace-1", "ключ-🔑", "x" * 300, "\udc80lone-surrogate"]
    assert buckets(WS, keys).tolist() == [bucket(WS, key) for key in keys]


@pytest.mark.exhaustive
def test_holdout_fractions_over_a_million_keys():
    # Binomial sd of a 10% share over 1e6 keys is 0.03 points; 0.3 points is ten of them.
    keys = [f"trace-{i}" for i in range(1_000_000)]
    assigned = buckets("ws-sim", keys)
    assert assigned.min() >= 0 and assigned.max() < BUCKETS
    for fraction in (0.05, 0.10, 0.30):
        share = float(np.mean(assigned < round(fraction * BUCKETS)))
        assert share == pytest.approx(fraction, abs=0.003)
        codes = assign_many("ws-sim", keys, LiftConfig("ws-sim", "e", holdout_fraction=fraction))
        holdout = codes == ARMS.index(ExposureArm.HOLDOUT)
        assert np.array_equal(holdout, assigned < round(fraction * BUCKETS))


@pytest.mark.parametrize("good", [0.05, 0.1, 0.30, 1 / 4, np.float64(0.2)])
def test_check_fraction_accepts_the_band(good):
    assert check_fraction(good) == pytest.approx(float(good))
    assert type(check_fraction(good)) is float


@pytest.mark.parametrize("bad", [0.04, 0.31, -1, 0, 1, float("nan"), float("inf"), "x", None, True])
def test_check_fraction_refuses_outside_the_band(bad):
    with pytest.raises(InputError) as caught:
        check_fraction(bad)
    assert caught.value.field == "holdout_fraction"
    assert caught.value.value is bad
    assert "0.05" in str(caught.value) and "0.30" in str(caught.value)


def test_lift_config_validates_once_at_the_boundary():
    assert LiftConfig(WS, "e").holdout_fraction == 0.10
    with pytest.raises(InputError, match="holdout_fraction"):
        LiftConfig(WS, "e", holdout_fraction=0.5)
    shares: list = [0, 1, -0.1, 1.5, float("nan"), "0.5", True]
    for share in shares:
        with pytest.raises(InputError, match="lever_holdout_share"):
            LiftConfig(WS, "e", lever="l", lever_holdout_share=share)
    cases: list[tuple[str, dict]] = [
        ("workspace_id", {"workspace_id": ""}),
        ("epoch", {"epoch": ""}),
        ("lever", {"lever": ""}),
        ("lever", {"lever": "a\x00b"}),
        ("workspace_id", {"workspace_id": "a\x00b"}),
    ]
    for field, kwargs in cases:
        with pytest.raises(InputError) as caught:
            LiftConfig(**{"workspace_id": WS, "epoch": "e", **kwargs})
        assert caught.value.field == field


# --------------------------------------------------------------------------------------------
# Cluster keys
# --------------------------------------------------------------------------------------------


def test_cluster_key_precedence():
    full = dict(artifact_key="art-1", trace_id="tr-1", request_id="req-1")
    opening = [("system", "be brief"), ("user", "hello")]
    assert cluster_key(chat(*opening, **full)) == lift.ClusterKey("artifact", "art-1")
    assert cluster_key(chat(*opening, trace_id="tr-1", request_id="req-1")) == lift.ClusterKey(
        "trace", "tr-1"
    )
    conversation = cluster_key(chat(*opening, request_id="req-1"))
    assert conversation.source == "conversation"
    assert re.fullmatch(r"conv-[0-9a-f]{8}", conversation.token)
    assert cluster_key(chat(("system", "be brief"), request_id="req-1")) == lift.ClusterKey(
        "request", "req-1"
    )
    with pytest.raises(InputError, match="nothing to key on"):
        cluster_key(chat(("system", "be brief"), ("assistant", "hi")))


def test_empty_strings_count_as_absent():
    assert cluster_key(chat(artifact_key="", trace_id="tr", request_id="r")).source == "trace"
    assert cluster_key(chat(("user", "q"), artifact_key="", trace_id="")).source == "conversation"
    assert cluster_key(chat(trace_id="", request_id="r")).source == "request"
    with pytest.raises(InputError):
        cluster_key(chat(artifact_key="", trace_id="", request_id=""))


def test_a_tagged_request_is_keyed_on_its_tag_whatever_its_messages():
    a = assign(chat(("user", "one"), trace_id="tr-9"), CONFIG)
    b = assign(chat(("user", "two"), ("assistant", "x"), trace_id="tr-9"), CONFIG)
    assert a == b
    assert a.bucket == bucket(WS, "tr-9")


def test_every_turn_of_a_conversation_gets_the_same_key_and_arm():
    history = [("system", "You are helpful. Now: 2026-05-09T10:00:00Z"), ("user", "refund 42")]
    first = assign(chat(*history, request_id="r0"), CONFIG)
    assert first.key_source == "conversation"
    for turn in range(1, 8):
        history = [
            ("system", f"You are helpful. Now: 2026-05-09T10:{turn:02d}:00Z"),
            *history[1:],
            ("assistant", f"answer {turn}"),
            ("tool", f"tool output {turn}"),
            ("user", f"follow-up {turn}"),
        ]
        later = assign(chat(*history, request_id=f"r{turn}"), CONFIG)
        assert later == first
    assert first.bucket == bucket(WS, conversation_digest(history))


def test_a_changing_system_prompt_does_not_split_a_conversation():
    morning = chat(("system", "Now: 08:00"), ("user", "hello"))
    evening = chat(("system", "Now: 20:00, today is Friday"), ("user", "hello"))
    developer = chat(("developer", "Now: 21:00"), ("user", "hello"))
    assert cluster_key(morning) == cluster_key(evening)
    assert assign(morning, CONFIG) == assign(evening, CONFIG)
    # The role stays in the opening: only the content is masked.
    assert cluster_key(developer) != cluster_key(morning)
    assert cluster_key(chat(("user", "hello"))) != cluster_key(morning)


def test_a_different_first_user_message_starts_a_different_cluster():
    base = cluster_key(chat(("system", "s"), ("user", "refund order 42")))
    other = cluster_key(chat(("system", "s"), ("user", "refund order 43")))
    assert base != other
    # What follows the first user message never matters.
    assert base == cluster_key(
        chat(("system", "s"), ("user", "refund order 42"), ("assistant", "?"), ("user", "43"))
    )


def test_a_request_without_a_user_message_uses_its_request_id():
    stamped = assign(chat(("system", "batch job"), ("assistant", "…"), request_id="req-77"), CONFIG)
    assert (stamped.key_source, stamped.cluster) == ("request", "req-77")
    assert stamped.bucket == bucket(WS, "req-77")


def test_the_conversation_digest_never_leaves_the_library():
    messages = [("system", "time 12:00"), ("user", "secret question about my account")]
    digest = conversation_digest(messages)
    request = chat(*messages, request_id="r-1")
    key = cluster_key(request)
    stamped = assign(request, CONFIG)
    assert stamped.bucket == bucket(WS, digest)  # the digest did pick the bucket
    shown = [
        repr(key),
        str(key),
        key.token,
        repr(stamped),
        str(stamped),
        stamped.cluster,
        repr(dataclasses.asdict(key)),
        repr(dataclasses.asdict(stamped)),
        repr(vars(key)),
        repr(vars(stamped)),
        repr(dataclasses.fields(lift.ClusterKey)),
    ]
    for text in shown:
        assert digest not in text
        assert digest[:12] not in text
    assert {f.name for f in dataclasses.fields(lift.ClusterKey)} == {"source", "token"}


def test_request_validates_its_fields():
    with pytest.raises(InputError, match="workspace_id"):
        Request("")
    with pytest.raises(InputError, match="trace_id"):
        Request(WS, trace_id=42)  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"messages\[0\]"):
        Request(WS, messages=({"role": "user", "content": "hi"},))  # type: ignore[arg-type]
    with pytest.raises(InputError, match="content"):
        Message("user", None)  # type: ignore[arg-type]
    listed = Request(WS, messages=[Message("user", "hi")])  # type: ignore[arg-type]
    assert listed.messages == (Message("user", "hi"),)


# --------------------------------------------------------------------------------------------
# Assignment
# --------------------------------------------------------------------------------------------


def test_assign_refuses_another_workspace():
    with pytest.raises(InputError) as caught:
        assign(Request("ws-other", trace_id="t"), CONFIG)
    assert caught.value.field == "workspace_id"
    with pytest.raises(InputError):
        assign_many("ws-other", ["t"], CONFIG)


def test_assign_stamps_the_epoch_without_hashing_it():
    request = Request(WS, trace_id="tr-1")
    one = assign(request, LiftConfig(WS, "epoch-1"))
    two = assign(request, LiftConfig(WS, "epoch-2"))
    assert (one.epoch, two.epoch) == ("epoch-1", "epoch-2")
    assert (one.arm, one.bucket) == (two.arm, two.bucket)


def test_assign_many_equals_assign():
    keys = [f"k-{i}" for i in range(3000)] + ["ключ-🔑", "x" * 500]
    for config in (
        LiftConfig(WS, "e"),
        LiftConfig(WS, "e", holdout_fraction=0.3, lever="lever-a", lever_holdout_share=0.2),
    ):
        codes = assign_many(WS, keys, config)
        assert codes.dtype == np.int8
        expected = [assign(Request(WS, artifact_key=key), config).arm for key in keys]
        assert [ARMS[code] for code in codes] == expected


@pytest.mark.exhaustive
def test_the_lever_split_never_touches_the_standing_holdout():
    keys = [f"trace-{i}" for i in range(200_000)]
    before = assign_many(WS, keys, LiftConfig(WS, "e"))
    holdout = before == ARMS.index(ExposureArm.HOLDOUT)
    assert set(np.unique(before).tolist()) == {
        ARMS.index(ExposureArm.HOLDOUT),
        ARMS.index(ExposureArm.PRE_LEVER),
    }
    for lever, share in [("lever-a", 0.5), ("lever-a", 0.2), ("lever-b", 0.5)]:
        codes = assign_many(WS, keys, LiftConfig(WS, "e", lever=lever, lever_holdout_share=share))
        assert np.array_equal(codes == ARMS.index(ExposureArm.HOLDOUT), holdout)
        rest = codes[~holdout]
        # 180,000 non-holdout keys: sd of the share is about 0.0012; 0.01 is about eight.
        lever_holdout = float(np.mean(rest == ARMS.index(ExposureArm.LEVER_HOLDOUT)))
        assert lever_holdout == pytest.approx(share, abs=0.01)
        assert set(np.unique(rest).tolist()) == {
            ARMS.index(ExposureArm.LEVER_HOLDOUT),
            ARMS.index(ExposureArm.TREATED),
        }
    # The lever salt reshuffles the split: lever-b's contrast arm is not lever-a's.
    a = assign_many(WS, keys, LiftConfig(WS, "e", lever="lever-a"))
    b = assign_many(WS, keys, LiftConfig(WS, "e", lever="lever-b"))
    agreement = float(np.mean((a == b)[~holdout]))
    assert agreement == pytest.approx(0.5, abs=0.01)


_SUBPROCESS = """
import json, sys
from eval_pipelines.core.lift.assignment import LiftConfig, Message, Request, assign
config = LiftConfig("ws-acme", "epoch-1", holdout_fraction=0.2, lever="lever-a")
requests = [
    Request("ws-acme", artifact_key="art-1"),
    Request("ws-acme", trace_id="tr-1"),
    Request("ws-acme", messages=(Message("system", "t=1"), Message("user", "héllo"))),
    Request("ws-acme", request_id="req-1"),
] + [Request("ws-acme", trace_id=f"t-{i}") for i in range(200)]
print(json.dumps([[a.arm.value, a.bucket, a.cluster, a.key_source]
                  for a in (assign(r, config) for r in requests)]))
"""


def test_assignment_is_deterministic_across_processes():
    namespace: dict = {}
    exec(_SUBPROCESS.replace("print(", "result = ("), namespace)
    here = json.loads(namespace["result"])
    for hash_seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-c", _SUBPROCESS], capture_output=True, text=True, check=True, env=env
        )
        assert json.loads(out.stdout) == here
    assert {row[0] for row in here} >= {"holdout", "treated", "lever_holdout"}


# --------------------------------------------------------------------------------------------
# Arms
# --------------------------------------------------------------------------------------------


def test_arms_are_a_closed_set():
    assert [arm.value for arm in ARMS] == [
        "treated",
        "pre_lever",
        "imported",
        "holdout",
        "lever_holdout",
    ]
    assert lift.TEACHING_ARMS == frozenset({"treated", "pre_lever", "imported"})
    assert parse_arm("holdout") is ExposureArm.HOLDOUT
    assert parse_arm(ExposureArm.TREATED) is ExposureArm.TREATED
    with pytest.raises(InputError) as caught:
        parse_arm("control", field="arm")
    assert caught.value.field == "arm"
    assert "treated, pre_lever, imported, holdout, lever_holdout" in str(caught.value)


def test_artifact_arm_is_none_when_requests_disagree():
    assert artifact_arm(["treated", ExposureArm.TREATED, "treated"]) is ExposureArm.TREATED
    assert artifact_arm([ExposureArm.HOLDOUT]) is ExposureArm.HOLDOUT
    assert artifact_arm(["treated", "lever_holdout"]) is None
    assert artifact_arm([]) is None
    with pytest.raises(InputError):
        artifact_arm(["treated", "nope"])


# --------------------------------------------------------------------------------------------
# No unseeded randomness
# --------------------------------------------------------------------------------------------


ASSIGNMENT_LIBRARY = ("__init__.py", "arms.py", "assignment.py", "exemplars.py")


def test_the_assignment_library_uses_no_randomness():
    # Assignment must be a pure function of its inputs: not even a seeded generator.
    package = Path(lift.__file__).parent
    for name in ASSIGNMENT_LIBRARY:
        text = (package / name).read_text("utf-8")
        for forbidden in ("import random", "from random", "np.random", "numpy.random", "secrets"):
            assert forbidden not in text, f"{name} mentions {forbidden!r}"


def test_no_lift_module_uses_the_global_random_module():
    # Simulations elsewhere in the package may draw from a generator they are handed (rng=),
    # never from the stdlib's process-global one.
    for path in sorted(Path(lift.__file__).parent.glob("*.py")):
        text = path.read_text("utf-8")
        assert not re.search(r"^\s*(import random\b|from random import)", text, re.M), path.name
        assert "np.random.seed" not in text and "numpy.random.seed" not in text, path.name


def test_the_library_imports_neither_dagster_nor_polars():
    code = (
        "import sys, eval_pipelines.core.lift.assignment\n"
        "print(sorted(m for m in ('dagster', 'polars') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
