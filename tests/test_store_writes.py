"""Executables written in background threads (:mod:`jaxrna.store_writes`): a thread asking
about a file while its write is being started waits for it (it does not fail), and a
question that must not wait counts a file being written as not there yet."""

import os
import threading
import time

from jaxrna import store_writes


def _write(path, content):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(content)


def test_finish_while_the_write_is_being_started(monkeypatch, tmp_path):
    real_start = threading.Thread.start
    entered = threading.Event()

    def slow_start(self):
        if self.name == "jaxrna-store":
            entered.set()
            time.sleep(0.3)             # another thread asks for the file meanwhile
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", slow_start)
    path = str(tmp_path / "x.bin")
    errors = []

    def finisher():
        entered.wait(5)
        try:
            store_writes.finish(path)
        except Exception as exc:  # noqa: BLE001 - the bug this test guards against
            errors.append(exc)

    before = store_writes.save_in_background(True)
    try:
        t = threading.Thread(target=finisher, name="finisher")
        t.start()
        store_writes.store(path, b"abc", _write)
        t.join(10)
        store_writes.finish(path)
    finally:
        store_writes.save_in_background(before)
    assert errors == [] and entered.is_set()
    assert os.path.getsize(path) == 3


def test_a_file_being_written_is_not_there_for_a_question_that_does_not_wait(tmp_path):
    from jaxrna import programs

    programs.use_disk(str(tmp_path))
    before = store_writes.save_in_background(True)
    release = threading.Event()
    try:
        device = programs.default_device()
        key = programs.store_key("test.store.slow", (), {}, device, True)
        path = programs.store_path(key, device, True)

        def slow(p, c):
            release.wait(10)
            _write(p, c)

        store_writes.store(path, b"x", slow)
        assert path in store_writes.pending()
        assert programs.stored("test.store.slow", (), {}, device, True, wait=False) is False
        release.set()
        assert programs.stored("test.store.slow", (), {}, device, True) is True   # waits
        assert path not in store_writes.pending()
    finally:
        release.set()
        store_writes.save_in_background(before)
        programs.use_disk(None)
