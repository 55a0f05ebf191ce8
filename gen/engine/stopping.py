"""Stop strings on streamed text: matches across token boundaries, holds back possible starts.

Text arrives in pieces; a suffix that could still grow into a stop string is held back
and never shown until it can no longer match or the generation ends.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StopMatch:
    stop: str
    text: str  # the releasable text up to the cut


class StopStringMatcher:
    def __init__(self, stops: tuple[str, ...], include_stop: bool = False) -> None:
        self.stops = stops
        self.include_stop = include_stop
        self.held = ""  # a suffix of the text so far that is a proper prefix of a stop string

    def feed(self, text: str, check: bool = True) -> tuple[str, StopMatch | None]:
        """Add text; return (text safe to show now, the match if a stop string completed).

        With check=False (min_tokens not reached) stop strings are not matched, but a
        possible start is still held back.
        """
        if not self.stops:
            return text, None
        buf = self.held + text
        if check:
            match = self._earliest(buf, len(self.held))
            if match is not None:
                self.held = ""
                return "", match
        keep = self._held_suffix(buf)
        self.held = buf[len(buf) - keep :] if keep else ""
        return buf[: len(buf) - keep], None

    def flush(self) -> str:
        """At the end of a generation: nothing can match any more, release what was held."""
        held, self.held = self.held, ""
        return held

    def _earliest(self, buf: str, new_from: int) -> StopMatch | None:
        """The stop string that completes first inside buf[new_from:], ties to the earlier start."""
        best: tuple[int, int, str] | None = None
        for stop in self.stops:
            idx = buf.find(stop, max(0, new_from - len(stop) + 1))
            if idx < 0:
                continue
            key = (idx + len(stop), idx, stop)
            if best is None or key[:2] < best[:2]:
                best = key
        if best is None:
            return None
        end, start, stop = best
        return StopMatch(stop=stop, text=buf[: end if self.include_stop else start])

    def _held_suffix(self, buf: str) -> int:
        """Length of the longest suffix of buf that is a proper prefix of some stop string."""
        longest = 0
        for stop in self.stops:
            for n in range(min(len(stop) - 1, len(buf)), longest, -1):
                if buf.endswith(stop[:n]):
                    longest = n
                    break
        return longest
