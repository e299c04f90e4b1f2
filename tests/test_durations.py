"""Durations as Kubernetes' Go code reads them (policies/kube/durations.py): Go's time.ParseDuration, and
strfmt.ParseDuration as k8s.io/kube-openapi vendors it for the API server's `format: duration` (its own
duration_test.go cases at 43fb72c5454a, the version k8s.io/apiserver v0.36.0 requires)."""
from __future__ import annotations

import pytest

from policies.kube.durations import go_duration, strfmt_duration

NS, US, MS, S, M, H = 1, 10**3, 10**6, 10**9, 60 * 10**9, 3600 * 10**9
D, W = 24 * H, 7 * 24 * H


@pytest.mark.parametrize("text,ns", [("0", 0), ("5m", 300 * S), ("1h30m", 5400 * S), ("1.5s", 1500 * MS),
                                     ("-2us", -2000), ("+3\u00b5s", 3000), ("3\u03bcs", 3000), ("1.h", H),
                                     (".5s", 500 * MS), ("2562047h", 2562047 * H), ("2562048h", None), ("1", None),
                                     ("1d", None), ("", None), ("-", None), (".s", None), ("1..5s", None),
                                     ("5 m", None)])
def test_go_duration(text: str, ns: int | None) -> None:
    """Go 1.26 time.ParseDuration: units ns..h, fractions, a sign, "0" alone, nothing beyond int64."""
    assert go_duration(text) == ns


# duration_test.go TestDurationParser (83-145): every case, short and long forms, with and without spaces.
PARSED = {"1ns": NS, "1us": US, "1\u00b5s": US, "1ms": MS, "1s": S, "1m": M, "1h": H, "1hr": H, "1d": D, "1w": W,
          "1wk": W, "1nanoseconds": NS, "1nanos": NS, "1microseconds": US, "1micros": US, "1millis": MS,
          "1milliseconds": MS, "1second": S, "1sec": S, "1min": M, "1minute": M, "1hour": H, "1day": D, "1week": W}
PARSED |= {k.replace("1", "1  ", 1): v for k, v in list(PARSED.items())}


@pytest.mark.parametrize("text,ns", sorted(PARSED.items()))
def test_strfmt_parses_what_kube_openapi_parses(text: str, ns: int) -> None:
    assert strfmt_duration(text) == ns


@pytest.mark.parametrize("text,ok", [
    # TestDuration (24-65), TestDurationParser_Failed (73-76), TestIsDuration_Failed (78-81), TestIsDuration_Caveats
    # (147-168)
    ("0ms", True), ("yada", False), ("2ms", True), ("three week", False),
    ("9999999999999999999999999999999999999999999999999999999 weeks", False), ("12 parsecs", False), ("12 y", False),
    ("45 wekk", False), ("45 weeekks", False), ("45 weeks", True), ("45 weekz", True), ("12 hours", True),
    ("12 minutes", True), ("12 phours", False),
])
def test_strfmt_accepts_and_refuses_as_kube_openapi_does(text: str, ok: bool) -> None:
    assert (strfmt_duration(text) is not None) == ok


def test_strfmt_sums_every_match_and_wraps_as_int64() -> None:
    assert strfmt_duration("1 day, 2 hours and then some") == D + 2 * H
    assert strfmt_duration("2 DAYS") == 2 * D
    # time.Duration(factor) * multiplier wraps in Go: 2**40 weeks is past int64
    factor = 2**40
    assert strfmt_duration(f"{factor} weeks") == (factor * W + 2**63) % 2**64 - 2**63
