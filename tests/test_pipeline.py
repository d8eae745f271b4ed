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


def test_ordered_writer_copies_spooled_files_in_their_place(tmp_path):
    """Text and files that worker processes wrote (:mod:`jaxrna.io.spool`) go into a file, a
    pipe and a stream without a descriptor in the order written, non-ASCII text in the
    output's encoding, and each file is removed once copied."""
    import os
    import threading

    from jaxrna.io.spool import spool

    spools = tmp_path / "spool"
    spools.mkdir()
    pieces = ["head\n", "é-part one\n" * 3000, "middle\n", "part two\n", "tail\n"]

    def write(out, encoding):
        with OrderedWriter(out) as w:
            for k, text in enumerate(pieces):
                w.write(spool(str(spools), text, encoding) if k % 2 else text)

    with open(tmp_path / "out.txt", "w", encoding="latin-1") as fh:
        write(fh, "latin-1")
    assert (tmp_path / "out.txt").read_text("latin-1") == "".join(pieces)
    memory = io.StringIO()
    write(memory, "utf-8")
    assert memory.getvalue() == "".join(pieces)
    r, w = os.pipe()
    got = []
    reader = threading.Thread(target=lambda: got.append(os.fdopen(r, "rb").read()))
    reader.start()
    with os.fdopen(w, "w", encoding="utf-8") as fh:
        write(fh, "utf-8")
    reader.join()
    assert got[0].decode("utf-8") == "".join(pieces)
    assert list(spools.iterdir()) == []
