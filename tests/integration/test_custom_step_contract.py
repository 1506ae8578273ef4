"""Registered steps held to their contract (issue 45, point 4): what ``apply`` returns is checked
against what the step's ``transition`` declared (a Tensor of a numpy array, the declared dtype
and channels), failing the item at the step's manifest line, naming the step, with no golden
recorded from it; a step whose op is a built-in's, or whose field the loader cannot build (a
bare ``list``), is refused when it is registered, naming the step and the field."""

from __future__ import annotations

import textwrap

import pytest
from helpers import PREPROCESS_RGB, BareProject, line_of

from pytest_mlrepro import pipeline
from pytest_mlrepro.pipeline import Step, StepRegistrationError, register_step

pytest.importorskip("onnxruntime")

BROKEN_STEPS = """
from dataclasses import dataclass

import numpy as np

from pytest_mlrepro import Step, Tensor, register_step


@register_step
@dataclass(frozen=True)
class ReturnsNone(Step):
    op = "returns_none"

    def apply(self, t):
        t.array.sum()  # works on the image, forgets to return it


@register_step
@dataclass(frozen=True)
class ReturnsList(Step):
    op = "returns_list"

    def apply(self, t):
        return [t.array]


@register_step
@dataclass(frozen=True)
class ReturnsFloat64(Step):
    op = "returns_float64"  # declares the uint8 it was given (transition keeps the state)

    def apply(self, t):
        return Tensor(t.array / 255.0, t.order, t.layout)


@register_step
@dataclass(frozen=True)
class DropsChannels(Step):
    op = "drops_channels"

    def apply(self, t):
        return Tensor(t.array[:, :, :1], t.order, t.layout)


@register_step
@dataclass(frozen=True)
class Keeps(Step):
    op = "keeps"  # keeps its contract: a copy of its input

    def apply(self, t):
        return Tensor(t.array.copy(), t.order, t.layout)
"""

CASES = {
    "returns_none": "registered step 'returns_none' (ReturnsNone.apply) returned None, not a "
    "pytest_mlrepro.Tensor",
    "returns_list": "registered step 'returns_list' (ReturnsList.apply) returned list, not a "
    "pytest_mlrepro.Tensor",
    "returns_float64": "registered step 'returns_float64' (ReturnsFloat64.apply) returned "
    "float64 samples, its transition() declared uint8",
    "drops_channels": "registered step 'drops_channels' (DropsChannels.apply) returned a "
    "40×48×1 array, its transition() declared 3 channel(s) in layout HWC",
}


def test_what_apply_returns_is_checked_against_what_the_step_declared(bare: BareProject) -> None:
    (bare.path / "conftest.py").write_text(BROKEN_STEPS)
    for op in (*CASES, "keeps"):
        bare.manifest(op, decode=PREPROCESS_RGB + f"\n              - {op}")
    result = bare.run("--mlrepro-update", "-rf")
    result.assert_outcomes(passed=1, failed=len(CASES))
    out = result.stdout.str()
    for op, message in CASES.items():
        text = (bare.path / "manifests" / f"{op}.yaml").read_text()
        line = line_of(text, f"- {op}")
        where = f"manifests/{op}.yaml:{line}: inputs[0].preprocess[1].{op}: "
        assert where + message in out, (op, out)
        assert not bare.golden(op).exists(), f"nothing {op} returned is recorded"
    assert "Traceback" not in out and "AttributeError" not in out
    assert bare.golden("keeps").exists(), "a step that keeps its contract records its golden"


def registration_error(code: str) -> str:
    namespace: dict[str, object] = {"Step": Step, "register_step": register_step}
    with pytest.raises(StepRegistrationError) as refused:
        exec(textwrap.dedent(code), namespace)
    return str(refused.value)


def test_a_step_named_like_a_built_in_is_refused_at_registration() -> None:
    builtin = pipeline.STEPS["normalize"]
    message = registration_error("""
        from dataclasses import dataclass

        @register_step
        @dataclass(frozen=True)
        class MyNormalize(Step):
            op = "normalize"
    """)
    assert message.startswith("step MyNormalize (op 'normalize'): 'normalize' is a built-in step")
    assert "give the step another op name" in message
    assert pipeline.STEPS["normalize"] is builtin, "the built-in is not replaced"


@pytest.mark.parametrize(
    ("annotation", "said"),
    [
        ("list", "field 'weights': a bare list does not say what it holds: name the item type"),
        ("dict", "field 'weights': a bare dict does not say what it holds"),
        ("set[int]", "field 'weights': set[int] is not a type a manifest value can be read as"),
        ("list[object]", "field 'weights': <class 'object'> is not a type a manifest value"),
    ],
)
def test_a_field_the_loader_cannot_build_is_refused_at_registration(
    annotation: str, said: str
) -> None:
    message = registration_error(f"""
        from dataclasses import dataclass, field

        @register_step
        @dataclass(frozen=True)
        class Weighted(Step):
            op = "weighted_{annotation.replace("[", "_").replace("]", "")}"
            weights: {annotation} = field(default_factory={annotation.split("[")[0]})
    """)
    assert message.startswith("step Weighted (op 'weighted_"), message
    assert said in message, message
    assert "a manifest could not give it" in message


def test_a_bad_registration_in_conftest_is_one_line_naming_the_step(bare: BareProject) -> None:
    (bare.path / "conftest.py").write_text(
        textwrap.dedent("""
            from dataclasses import dataclass

            from pytest_mlrepro import Step, register_step

            @register_step
            @dataclass(frozen=True)
            class Weighted(Step):
                op = "weighted"
                weights: list = ()
        """)
    )
    bare.manifest("tiny_onnx")
    result = bare.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "E   pytest_mlrepro.pipeline._steps.StepRegistrationError: step Weighted (op "
            "'weighted'): field 'weights': a bare list does not say what it holds*"
        ]
    )
