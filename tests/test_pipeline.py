"""The shared host pipeline (jaxrna.pipeline): order, look-ahead, background writing, errors."""

import io

import pytest

from jaxrna.pipeline import OrderedWriter, launch_ahead, map_ordered


def test_launch_ahead_runs_ahead_and_keeps_order():
    launched = []

    def launch(x):
        launched.append(x)
        return x * 10

    seen = []
    for item, pending in launch_ahead(range(6), launch, depth=2):
        seen.append((item, pending, len(launched)))
    assert [s[:2] for s in seen] == [(k, 10 * k) for k in range(6)]
    # item k is handed out once k + depth items were launched (or all of them)
    assert [s[2] for s in seen] == [3, 4, 5, 6, 6, 6]


def test_ordered_writer_writes_in_order_and_reports_errors():
    out = io.StringIO()
    with OrderedWriter(out, max_pending=2) as w:
        for k in range(200):
            w.write(f"{k}\n")
    assert out.getvalue() == "".join(f"{k}\n" for k in range(200))

    class Full(io.StringIO):
        def write(self, text):
            raise OSError(28, "No space left on device")

    w = OrderedWriter(Full())
    w.write("x")
    with pytest.raises(OSError, match="No space"):
        for _ in range(1000):
            w.write("y")
        w.close()


def test_map_ordered_in_workers_keeps_order():
    items = ["a" * k for k in range(20)]
    assert list(map_ordered(len, items, workers=1, ahead=3)) == list(range(20))
    assert list(map_ordered(len, items, workers=0)) == list(range(20))
