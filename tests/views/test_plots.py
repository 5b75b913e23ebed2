"""count --plot's log axes: their ticks labelled as the rest of the output says numbers (1 K, 10 M), and no math text
set anywhere in the figure (matplotlib builds its math text's parser at its first use: time every plot paid)."""

from __future__ import annotations

import pytest

from minitransformer.families.table import PRESETS
from minitransformer.text import human
from minitransformer.verbs.count import count_generation, sweep_per_token

pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")

from minitransformer.views import plots  # noqa: E402 - after the skip: it needs matplotlib


def tick_labels(axis) -> list[tuple[float, str]]:
    """(value, label) of every tick drawn within the axis's limits, major and minor, labelled or not."""
    low, high = sorted(axis.get_view_interval())
    ticks = [*axis.get_major_ticks(), *axis.get_minor_ticks()]
    values = [*axis.get_majorticklocs(), *axis.get_minorticklocs()]
    return [(v, t.label1.get_text()) for v, t in zip(values, ticks) if low <= v <= high]


@pytest.mark.parametrize("limits, labelled", [
    ((7, 2e4), ["10", "100", "1 K", "10 K"]),  # several decades: the powers of ten alone
    ((8e4, 4e11), ["100 K", "1 M", "10 M", "100 M", "1 G", "10 G", "100 G"]),
])  # fmt: skip
def test_log_axes_label_their_powers_of_ten_in_words(limits, labelled):
    plt = plots.require_matplotlib()
    fig, ax = plt.subplots()
    try:
        ax.set_xscale("log")
        ax.set_xlim(*limits)
        plots._in_words(ax.xaxis)
        fig.canvas.draw()
        shown = [(value, label) for value, label in tick_labels(ax.xaxis) if label]
    finally:
        plt.close(fig)
    assert [label for _, label in sorted(shown)] == labelled, shown


def test_a_log_axis_within_a_decade_labels_the_ticks_matplotlib_would_in_words():
    """Under a decade matplotlib labels some of its minor ticks too (2, 3, 4, 6 of each): the same ones, in words."""
    plt = plots.require_matplotlib()
    fig, (ours, theirs) = plt.subplots(1, 2)
    try:
        for ax in (ours, theirs):
            ax.set_yscale("log")
            ax.set_ylim(1.5e8, 9e8)
        plots._in_words(ours.yaxis)
        fig.canvas.draw()
        mine, matplotlib_s = tick_labels(ours.yaxis), tick_labels(theirs.yaxis)
    finally:
        plt.close(fig)
    assert [v for v, label in mine if label] == [v for v, label in matplotlib_s if label], (mine, matplotlib_s)
    assert len([label for _, label in mine if label]) >= 3, mine
    assert all(label == human(v) for v, label in mine if label), mine


def test_the_plot_sets_no_math_text_and_is_drawn_once(monkeypatch):
    from matplotlib import mathtext
    from matplotlib.figure import Figure

    parsed: list[str] = []
    drawn: list[Figure] = []
    parse, draw = mathtext.MathTextParser.parse, Figure.draw

    def parse_recorded(self, s, *args, **kwargs):
        parsed.append(s)
        return parse(self, s, *args, **kwargs)

    def draw_recorded(self, renderer):
        drawn.append(self)
        return draw(self, renderer)

    monkeypatch.setattr(mathtext.MathTextParser, "parse", parse_recorded)
    monkeypatch.setattr(Figure, "draw", draw_recorded)
    count = count_generation(PRESETS["gpt2"], 20, 5)
    png = plots.plots_png(count, sweep_per_token(count.config))
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert parsed == [], parsed
    assert len(drawn) == 1, f"the figure was drawn {len(drawn)} times"
