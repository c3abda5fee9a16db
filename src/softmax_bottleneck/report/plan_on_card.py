"""``plan --card NAME``: the study's training plan (:mod:`softmax_bottleneck.study.plan`) with its wall-clock on a
measured card, each job's hours priced as ``costs`` prices them (:func:`.cards.card_job_hours`). The plan itself
knows only the paper's V100 hours; the cards' times are the report layer's, so the command is wired here."""

from __future__ import annotations

import argparse

from softmax_bottleneck.report import cards
from softmax_bottleneck.study import plan


def _card(name: str) -> str:
    """``--card``: a card whose times per run are known (:func:`~softmax_bottleneck.report.cards.card_named`)."""
    try:
        return cards.card_named(name)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_cli(parser) -> None:
    plan.add_cli(parser)
    parser.add_argument(
        "--card", type=_card, default=None, metavar="NAME",
        help="the card whose times per run give the wall-clock's days, as `costs` prices them: "
        f"{', '.join(cards.card_names())} (default: V100, the paper's Table 2; the others: data/measured/speeds.csv)",
    )  # fmt: skip


def on_card(card: str):
    """The wall-clock's hours per job on ``card`` and how they were priced, for :func:`plan.wall_clock_text`."""

    def hours_of(study):
        hours, projection = cards.card_job_hours(study.jobs, card)
        share = cards.proxy_share(projection)
        whose = f"the runs' hours on that card as `costs` prices them, {sum(hours.values()):,.0f} in all"
        whose += (f", {share:.0%} of them priced by proxy" if share else "") + ";"
        return card, hours, whose

    return hours_of


def run_cli(args) -> int:
    card = getattr(args, "card", None)
    return plan.run_cli(args, None if card in (None, cards.PAPER_CARD) else on_card(card))
