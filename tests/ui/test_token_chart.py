"""The token chart's geometry: the saw-tooth of compactions, the limit line, an empty chart."""

from sessions_app.live.token_chart import Point, chart_geometry, short_tokens


def test_a_compaction_is_drawn_as_a_vertical_drop_from_the_previous_reading():
    chart = chart_geometry(
        [Point(1, 10_000), Point(2, 28_000), Point(3, 4_000, drop=True), Point(4, 6_000)],
        context_window=32_000, limit=28_800,
    )
    (drop,) = chart.drops
    assert drop.seq == 3 and drop.y_from < drop.y_to  # SVG y grows downwards: from high tokens to low
    xs = [float(pair.split(",")[0]) for pair in chart.line.split()]
    assert xs.count(drop.x) == 2  # the line goes straight down at the drop
    assert chart.peak_tokens == 28_000 and chart.last_tokens == 6_000


def test_the_limit_line_sits_at_its_share_of_the_window():
    chart = chart_geometry([Point(1, 1000)], context_window=32_000, limit=16_000, height=110, top=5, bottom=5)
    assert chart.limit_y == 55.0 and chart.window_y == 5.0


def test_a_reading_above_the_window_stretches_the_axis_instead_of_leaving_the_chart():
    chart = chart_geometry([Point(1, 40_000)], context_window=32_000, limit=None, top=8)
    assert chart.limit_y is None
    assert min(float(pair.split(",")[1]) for pair in chart.line.split()) == 8.0


def test_no_readings_give_an_empty_chart():
    chart = chart_geometry([], context_window=32_000, limit=28_800)
    assert chart.empty and chart.line == "" and chart.drops == ()


def test_short_token_labels():
    assert [short_tokens(n) for n in (950, 12_345, 272_000, 1_500_000)] == ["950", "12.3k", "272k", "1.5M"]


def test_a_drop_starts_at_the_value_its_compaction_fired_at_even_above_the_last_reading():
    # The meter counted tool output after the last usage reading: the compaction fired at 30,500, over the limit.
    chart = chart_geometry(
        [Point(1, 10_000), Point(2, 27_000), Point(3, 4_000, drop=True, peak=30_500)],
        context_window=32_000, limit=28_800, height=190, top=8, bottom=18,
    )
    (drop,) = chart.drops
    assert drop.y_from < chart.limit_y  # the peak is drawn above the limit line, where the meter was
    assert drop.y_from == round(8 + 164 * (1 - 30_500 / 32_000), 1)
    assert chart.peak_tokens == 30_500


def test_a_chart_laid_out_again_after_others_on_other_axes_is_the_same():
    # The x and y texts are kept between charts (a live chart is laid out again at every update).
    points = [Point(i, 1_000 * (i % 29) + 7, drop=i % 17 == 0, peak=30_100 if i % 34 == 0 else None) for i in range(600)]
    first = chart_geometry(points, context_window=32_000, limit=28_800)
    for window in (16_000, 32_000, 64_000):
        chart_geometry(points[:300], context_window=window, limit=None, height=110, top=5, bottom=5)
    assert chart_geometry(list(points), context_window=32_000, limit=28_800) == first
    pairs = first.line.split()
    assert len(pairs) == 600 + len(first.drops) and pairs[:2] == ["44.0,17.7", "44.0,172.0"]  # a drop from its peak


def test_the_kept_y_texts_stay_bounded():
    from sessions_app.live.token_chart import _y_texts, _YTexts

    for ceiling in range(1, _YTexts.AXES + 10):
        chart_geometry([Point(1, ceiling)], context_window=ceiling, limit=None)
    assert len(_y_texts._axes) <= _YTexts.AXES
    chart_geometry([Point(i, i) for i in range(_YTexts.VALUES + 2)], context_window=10**9, limit=None)
    chart_geometry([Point(1, 1)], context_window=10**9, limit=None)
    assert all(len(values) <= _YTexts.VALUES + 2 for values in _y_texts._axes.values())


def test_each_window_is_drawn_with_its_own_limit_across_its_own_readings():
    points = [Point(1, 10_000), Point(2, 14_000), Point(3, 2_000, drop=True), Point(4, 20_000),
              Point(5, 3_000, drop=True), Point(6, 5_000)]
    # Window 1 opened with a 14,400 limit, window 2 (opened at seq 3) with 28,800; window 3 (seq 5) is current.
    chart = chart_geometry(points, context_window=32_000, limit=24_000,
                           window_limits=((0, 14_400), (3, 28_800), (5, 16_000)))
    first, second, current = chart.limits
    assert [s.limit for s in chart.limits] == [14_400, 28_800, 24_000]  # the current window: the live limit
    xs = sorted({float(pair.split(",")[0]) for pair in chart.line.split()})
    assert (first.x1, first.x2) == (xs[0], xs[2]) and (second.x1, second.x2) == (xs[2], xs[4])
    assert current.x1 == xs[4] and current.x2 == chart.plot_right
    assert first.y > second.y  # a lower limit sits lower on the chart (SVG y grows downwards)


def test_a_window_whose_limit_was_not_recorded_draws_no_limit_line():
    points = [Point(1, 10_000), Point(2, 2_000, drop=True), Point(3, 3_000)]
    chart = chart_geometry(points, context_window=32_000, limit=28_800, window_limits=((0, None), (2, 28_800)))
    (only,) = chart.limits
    assert only.limit == 28_800 and only.x1 > chart.left
