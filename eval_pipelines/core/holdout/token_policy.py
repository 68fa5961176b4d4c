"""The token-confirmation policy of a holdout evaluation (spec 000): the tokens it is expected
to spend, per variant and in total, and when that needs an explicit yes.

A variant's tokens are the sample size times its classifier's declared tokens per record
(the built-in knn-vote declares 0; :func:`~eval_pipelines.core.holdout.classify.tokens_per_record`),
or, for a chat variant, the estimate from real prompts stored in the spec
(:mod:`eval_pipelines.core.holdout.chat_variants`). Above :data:`TOKEN_CONFIRMATION_LIMIT` the
evaluation is refused with :class:`TokenConfirmationNeeded` unless confirmed, before anything
is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eval_pipelines.core.errors import ConflictError
from eval_pipelines.core.holdout.classify import tokens_per_record
from eval_pipelines.core.holdout.spec import HoldoutSpec
from eval_pipelines.core.results import JsonResult, json_field

# Above this many estimated tokens an evaluation needs an explicit yes (spec 000).
TOKEN_CONFIRMATION_LIMIT = 400_000


@dataclass(frozen=True)
class TokenEstimateVariant(JsonResult):
    """One variant's expected spend: ``records`` x ``tokens_per_record`` = ``tokens``; for a
    chat variant ``chat`` says how
    (:class:`~eval_pipelines.core.holdout.chat_estimate.ChatEstimate`: real prompts of sampled
    rows, trials, the answer budget, the cost)."""

    name: str
    classifier: str
    records: int
    tokens_per_record: int
    tokens: int
    chat: dict[str, Any] | None = json_field(omit_none=True, default=None)


@dataclass(frozen=True)
class TokenEstimate(JsonResult):
    """The tokens an evaluation is expected to spend, per variant and in total."""

    variants: tuple[TokenEstimateVariant, ...]
    total_tokens: int


class TokenConfirmationNeeded(ConflictError):
    """The evaluation would spend more tokens than the limit; nothing has been written."""

    def __init__(self, estimate: TokenEstimate) -> None:
        self.estimate = estimate
        super().__init__(
            f"tokens={estimate.total_tokens:,}: the estimate is above the limit of "
            f"{TOKEN_CONFIRMATION_LIMIT:,} tokens ({_per_variant(estimate)}); confirm with "
            "`confirm_tokens`"
        )


def _per_variant(estimate: TokenEstimate) -> str:
    return ", ".join(f"{v.name}: {v.records} x {v.tokens_per_record:,}" for v in estimate.variants)


def estimate_tokens(spec: HoldoutSpec) -> TokenEstimate:
    """Tokens the evaluation is expected to spend: per variant, the sample size times its
    classifier's declared tokens per record; a chat variant's is the estimate from real
    prompts stored in the spec (``spec.token_estimate``)."""
    variants = []
    for v in spec.variants:
        chat = (spec.token_estimate or {}).get(v.name)
        if chat is not None:
            variants.append(
                TokenEstimateVariant(
                    v.name,
                    v.config.classifier,
                    chat["records"],
                    chat["tokens"] // chat["records"],
                    chat["tokens"],
                    chat,
                )
            )
            continue
        per_record = tokens_per_record(v.config.classifier, v.config)
        variants.append(
            TokenEstimateVariant(
                v.name,
                v.config.classifier,
                spec.sample_size,
                per_record,
                spec.sample_size * per_record,
            )
        )
    return TokenEstimate(tuple(variants), sum(v.tokens for v in variants))


def check_token_budget(estimate: TokenEstimate, *, confirmed: bool) -> None:
    """Refuse an estimate above the limit unless ``confirmed``.

    Raises
    ------
    TokenConfirmationNeeded
        Carrying the estimate, when it is above :data:`TOKEN_CONFIRMATION_LIMIT` and not
        ``confirmed``.
    """
    if estimate.total_tokens > TOKEN_CONFIRMATION_LIMIT and not confirmed:
        raise TokenConfirmationNeeded(estimate)
