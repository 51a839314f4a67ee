"""Telling a person how long work is going: on a terminal, one live line on
stderr (the phase and the seconds since it began) redrawn in place and
cleared at the end; elsewhere plain phase lines (eval, tune) or nothing
(check and commit, whose check lines stream anyway); stdout is never
touched, so --json output stays pure. Free of
click and of any import the eval path does not already pay for."""

from __future__ import annotations

import os
import sys
import threading
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import TextIO

LIVE, LINES, OFF = "live", "lines", "off"
# A phase shorter than this never shows, on the live line or as a plain
# line: a quick eval prints its header and summary and nothing between.
SHOW_AFTER_S = 0.4
REDRAW_S = 0.25
CLEAR = "\r\x1b[K"


def is_terminal(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):
        return False


def mode_for(quiet: bool = False, asked: bool = False, verbose: bool = False,
             stream: TextIO | None = None, elsewhere: str = OFF) -> str:
    """`off` with -q; on a terminal `live`, or plain `lines` when asked for
    (--progress) and while -v streams the evaluator's output there, which a
    live line would cut into; elsewhere `elsewhere` (`lines` for eval and
    tune, whose phases a log should show; `off` for check and commit,
    whose lines stream anyway)."""
    if quiet:
        return OFF
    if is_terminal(stream if stream is not None else sys.stderr):
        return LINES if verbose or asked else LIVE
    return elsewhere


class Progress:
    """A `say` (call it with a message: printed as a line of its own, the
    live line kept below it) that also keeps a phase: `phase(text)`
    starts one, `header(lines)` prints what the work is before it starts,
    and `close()` clears the live line. Every write goes to the stream of
    the moment (sys.stderr, unless one was given)."""

    def __init__(self, mode: str = OFF, stream: TextIO | None = None, quiet_messages: bool = False,
                 at_once: bool = False) -> None:
        self.mode = mode
        # Plain lines as each phase begins, not SHOW_AFTER_S into it: where
        # the evaluator's own output streams between them (-v), a late line
        # would land after output of the phase it names.
        self._at_once = at_once
        self._stream = stream
        self._quiet_messages = quiet_messages
        self._lock = threading.Lock()
        self._phase: str | None = None
        self._phase_started = 0.0
        self._told = False
        self._started = time.monotonic()
        self._shown = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.headed = False

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stderr

    def __call__(self, message: str) -> None:
        if self._quiet_messages:
            return
        with self._lock:
            self._clear()
            self.stream.write(message + "\n")
            self._draw()
            self.stream.flush()

    def write(self, put: Callable[[str], object], text: str) -> None:
        """`put(text)` (a line to stdout, say) with the live line out of its
        way: cleared first, drawn again below it."""
        with self._lock:
            self._clear()
            self.stream.flush()
            put(text)
            self._draw()
            self.stream.flush()

    def header(self, lines: list[str]) -> None:
        """What is about to be worked on, said once before it starts (only on
        a terminal: elsewhere the summary at the end says it)."""
        if self.mode != LIVE or self.headed:
            return
        self.headed = True
        for line in lines:
            self(line)

    def phase(self, text: str) -> None:
        if self.mode == OFF:
            return
        with self._lock:
            self._phase, self._phase_started = text, time.monotonic()
            self._told = False
            self._draw()
            self.stream.flush()
        if self._thread is None:
            self._thread = threading.Thread(target=self._redraw, name="hills-progress", daemon=True)
            self._thread.start()

    @property
    def current(self) -> str | None:
        """The phase now shown, if any."""
        return self._phase

    def line(self) -> str:
        """The live line's text: the phase and the seconds since the work began."""
        return f"hills: {self._phase}  {time.monotonic() - self._started:.0f}s"

    def _draw(self) -> None:
        if self.mode == LINES:
            self._tell()
            return
        if self.mode != LIVE or self._phase is None or self._stop.is_set():
            return
        if time.monotonic() - self._started < SHOW_AFTER_S:
            return
        self.stream.write(CLEAR + self.line()[: self._width()])
        self._shown = True

    def _tell(self) -> None:
        # A plain line, once, for a phase that has lasted SHOW_AFTER_S: a
        # log shows where a long eval is, and a quick one adds nothing.
        if self._phase is None or self._told or self._stop.is_set():
            return
        if not self._at_once and time.monotonic() - self._phase_started < SHOW_AFTER_S:
            return
        self.stream.write(f"hills: {self._phase}\n")
        self._told = True

    def _clear(self) -> None:
        if self._shown:
            self.stream.write(CLEAR)
            self._shown = False

    def _width(self) -> int:
        try:
            return max(20, os.get_terminal_size(self.stream.fileno()).columns - 1)
        except (OSError, ValueError, AttributeError):
            return 79

    def _redraw(self) -> None:
        while not self._stop.wait(REDRAW_S):
            with self._lock:
                self._draw()
                self.stream.flush()

    def close(self) -> None:
        """Clear the live line; later phases say nothing."""
        self._stop.set()
        with self._lock:
            self._clear()
            self.stream.flush()
        self.mode = OFF

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def phase(say: object, text: str) -> None:
    """Tell `say` the phase the work is in, when it keeps one (a Progress);
    a plain function given as `say` is left alone."""
    start = getattr(say, "phase", None)
    if start is not None:
        start(text)


def header(say: object, envelope: Mapping[str, object], submission: str, version: object = None) -> None:
    """Tell `say`, when it keeps a progress line, what is about to be
    scored: the hill and its version, the submission and its hash."""
    start = getattr(say, "header", None)
    if start is None:
        return
    tree = envelope.get("tree_hash")
    start([f"{envelope.get('hill')} @ {str(tree)[:12] if tree else 'working tree'}"
           + (f"  (version {version})" if version else "")
           + ("" if envelope.get("official") else "  (unofficial)"),
           f"  submission   {submission}",
           f"  hash         {str(envelope.get('submission_hash') or '')[:27]}…"])
