"""Power and sample size of a paired comparison (McNemar design, normal approximation).

The planner (``eval plan``) and the report's minimum detectable effect use these same
formulas, so the number a plan promises is the number a report checks against.
"""

from __future__ import annotations

import math
import numbers

from scipy import special

from eval_pipelines.core.stats.arguments import check_probability


def paired_power(n: int, difference: float, discordance: float, *, alpha: float = 0.05) -> float:
    """Approximate power of the two-sided McNemar test with ``n`` pairs.

    Parameters
    ----------
    n
        Pairs (records scored by both sides), at least 1.
    difference
        True ``p01 - p10``: the share of records newly right minus the share newly wrong,
        i.e. the candidate's accuracy minus the baseline's. Either sign.
    discordance
        True ``p01 + p10``: the share of records on which the two sides disagree, in (0, 1].
    alpha
        Two-sided significance level in (0, 1).

    Returns
    -------
    float
        ``Phi((sqrt(n) |d| - z sqrt(q)) / sqrt(q - d^2))`` with ``z`` the upper ``alpha / 2``
        normal quantile, ``d = difference`` and ``q = discordance`` (the far tail is ignored,
        as in [1]_). 1.0 when ``q = d^2`` (no variance left: every pair moves one way).

    Raises
    ------
    ValueError
        As :func:`paired_sample_size`, and if ``n < 1``.

    References
    ----------
    .. [1] R. J. Connor, "Sample size for testing differences in proportions for the
           paired-sample design", Biometrics 43 (1987), 207-211.
    .. [2] J. M. Lachin, "Power and sample size evaluation for the McNemar test with
           application to matched case-control studies", Statistics in Medicine 11 (1992),
           1239-1251.

    Examples
    --------
    >>> from eval_pipelines.core.stats import paired_power
    >>> round(paired_power(400, 0.05, 0.15), 4)
    0.7348
    """
    _check_n(n)
    _check_design(difference, discordance)
    z_alpha = _upper_quantile(alpha, "alpha", tail=alpha / 2.0)
    spread = discordance - difference * difference
    shift = math.sqrt(n) * abs(difference) - z_alpha * math.sqrt(discordance)
    if spread <= 0.0:
        return 1.0 if shift > 0.0 else 0.0
    return float(special.ndtr(shift / math.sqrt(spread)))


def paired_sample_size(
    difference: float, discordance: float, *, alpha: float = 0.05, power: float = 0.8
) -> int:
    """Pairs a McNemar comparison needs to detect ``difference`` with the given power.

    Parameters
    ----------
    difference
        The accuracy difference to detect, ``p01 - p10`` (newly right minus newly wrong, as
        shares of all records). Either sign; ``0 < |difference| <= discordance``.
    discordance
        The expected share of records on which the two sides disagree, ``p01 + p10``, in
        (0, 1]: from a previous evaluation (its newly right plus newly wrong over n) or
        stated.
    alpha
        Two-sided significance level in (0, 1).
    power
        Probability of rejecting when the difference is real, in (0, 1).

    Returns
    -------
    int
        ``ceil((z_a sqrt(q) + z_b sqrt(q - d^2))^2 / d^2)`` with ``z_a`` the upper
        ``alpha / 2`` and ``z_b`` the upper ``1 - power`` normal quantiles [1]_ [2]_.

    Raises
    ------
    ValueError
        If ``discordance`` is outside (0, 1], ``difference`` is 0 or larger in absolute
        value than ``discordance`` (``|p01 - p10| <= p01 + p10``), or ``alpha`` or ``power``
        is outside (0, 1).

    Notes
    -----
    The formula is the normal approximation to the unconditional McNemar test. The exact
    (binomial) McNemar test reported beside each comparison is conservative, so its power
    at the planned n is a little lower: 0.76 to 0.78 for a planned 0.8 in simulations of
    designs with 30 to 200 expected discordant pairs (the tests run them).

    References
    ----------
    .. [1] R. J. Connor, "Sample size for testing differences in proportions for the
           paired-sample design", Biometrics 43 (1987), 207-211.
    .. [2] J. M. Lachin, "Power and sample size evaluation for the McNemar test with
           application to matched case-control studies", Statistics in Medicine 11 (1992),
           1239-1251.

    Examples
    --------
    >>> from eval_pipelines.core.stats import paired_sample_size
    >>> paired_sample_size(0.05, 0.15)
    469
    """
    _check_design(difference, discordance)
    z_alpha = _upper_quantile(alpha, "alpha", tail=alpha / 2.0)
    z_beta = _upper_quantile(power, "power", tail=1.0 - power)
    root = z_alpha * math.sqrt(discordance) + z_beta * math.sqrt(
        max(0.0, discordance - difference * difference)
    )
    pairs = root * root / (difference * difference)
    # The closed form is exact arithmetic on rounded quantiles; 1e-9 keeps a value that is
    # an integer up to rounding from moving up by one.
    return max(1, math.ceil(pairs - 1e-9))


def minimum_detectable_effect(
    n: int, discordance: float, *, alpha: float = 0.05, power: float = 0.8
) -> float:
    """Smallest accuracy difference a McNemar comparison of ``n`` pairs detects with ``power``.

    The inverse of :func:`paired_sample_size`: the ``d > 0`` solving
    ``sqrt(n) d = z_a sqrt(q) + z_b sqrt(q - d^2)``. A power diagnostic, never a verdict.

    Parameters
    ----------
    n
        Pairs compared, at least 1.
    discordance
        Share of records on which the two sides disagree, ``p01 + p10``, in [0, 1]; the
        observed share is the usual plug-in.
    alpha
        Two-sided significance level in (0, 1).
    power
        Required power in (0, 1).

    Returns
    -------
    float
        The minimum detectable ``|p01 - p10|``. ``math.inf`` when no difference the
        discordance allows (``|d| <= q``) reaches the power: with ``discordance = 0``, or
        too few expected discordant pairs for the approximation to reach it.

    Raises
    ------
    ValueError
        If ``n < 1``, ``discordance`` is outside [0, 1], or ``alpha`` or ``power`` is outside
        (0, 1).

    Notes
    -----
    Squaring ``sqrt(n) d - A = B sqrt(q - d^2)`` (``A = z_a sqrt(q)``, ``B = z_b``) gives
    ``(n + B^2) d^2 - 2 sqrt(n) A d + A^2 - B^2 q = 0``, whose root on the side of the
    sign of ``B`` is ``d = (sqrt(n) A + B sqrt(q (n + B^2) - A^2)) / (n + B^2)``.

    References
    ----------
    .. [1] R. J. Connor, "Sample size for testing differences in proportions for the
           paired-sample design", Biometrics 43 (1987), 207-211.

    Examples
    --------
    >>> from eval_pipelines.core.stats import minimum_detectable_effect
    >>> round(minimum_detectable_effect(474, 0.15), 4)
    0.0497
    >>> minimum_detectable_effect(100, 0.0)
    inf
    """
    _check_n(n)
    if not 0.0 <= discordance <= 1.0:
        raise ValueError(f"discordance={discordance}: must be in [0, 1]")
    z_alpha = _upper_quantile(alpha, "alpha", tail=alpha / 2.0)
    z_beta = _upper_quantile(power, "power", tail=1.0 - power)
    if discordance == 0.0:
        return math.inf
    a = z_alpha * math.sqrt(discordance)
    scale = n + z_beta * z_beta
    radicand = discordance * scale - a * a
    if radicand < 0.0:
        return math.inf
    effect = (math.sqrt(n) * a + z_beta * math.sqrt(radicand)) / scale
    if effect > discordance:
        return math.inf
    # A power below alpha / 2 is reached by no difference at all.
    return max(0.0, effect)


def _check_n(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"n={n!r}: must be an integer of at least 1")


def _check_design(difference: float, discordance: float) -> None:
    if not 0.0 < discordance <= 1.0:
        raise ValueError(f"discordance={discordance}: must be in (0, 1]")
    if difference == 0.0 or math.isnan(difference):
        raise ValueError(
            f"difference={difference}: must be non-zero (no power against no difference)"
        )
    if abs(difference) > discordance:
        raise ValueError(
            f"difference={difference}: |difference| must not exceed discordance={discordance} "
            "(|p01 - p10| <= p01 + p10)"
        )


def _upper_quantile(level: float, name: str, *, tail: float) -> float:
    """``z`` with ``P(Z > z) = tail``, after checking that the option ``name`` is in (0, 1)."""
    check_probability(level, name)
    return float(-special.ndtri(tail))
