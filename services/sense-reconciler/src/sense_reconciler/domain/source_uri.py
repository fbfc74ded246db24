"""The source URIs Sense accepts: RTSP(S) URLs that MediaMTX accepts as a path's `source` and can pull.

MediaMTX (v1.20.1, `internal/conf/path.go`) takes a source starting with the exact, lower-case `rtsp://` or
`rtsps://`, parses it with Go's `net/url` after substituting its `$G<n>` placeholders, and wants a host and,
when there is userinfo, both a user and a password. At run time it parses the URL again
(`gortsplib/pkg/base.ParseURL`, which refuses fragments) and replaces `$MTX_QUERY` with the reader's query.

The rule below is RFC 3986's grammar narrowed so that every URI it matches passes all of that, and means the
same to Python, to Go and to the camera:
- scheme `rtsp` or `rtsps`, lower case;
- optional `user:password@`, both non-empty: unreserved and sub-delimiter characters or `%XX` escapes, and
  `:` in the password; `@` only as `%40`;
- a host: a DNS name (labels of letters, digits, `_` and `-`, at most 63 characters each and 253 in all,
  an optional final dot; IPv4 literals are such names) or a bracketed IPv6 literal without a zone;
- an optional port 1..65535 without leading zeros;
- a path and a query of RFC 3986 characters (`@` only as `%40`), every `%` starting a two-digit hex escape;
  no fragment;
- a `$` never starts `$G<digit>` or `$MTX_QUERY`, the placeholders MediaMTX substitutes;
- printable ASCII only (anything else is percent-encoded), at most `SOURCE_URI_MAX_CHARS` characters.

The expression is written so that Python's `re`, ECMA-262 with the `u` flag (JSON Schema) and with the `v`
flag (HTML `pattern` attributes) read it alike. The property test against the real MediaMTX
(tests/ports/sense_reconciler/test_source_uri_acceptance.py) generates URIs from it.
"""

from __future__ import annotations

import re

from sense_reconciler.domain import limits
from yovision_platform.patterns import anchored, at_most

__all__ = ["PUBLISHED_SOURCE_URI", "SOURCE_URI_PATTERN", "is_source_uri"]

# Generators read this expression too: Hypothesis, and schemathesis's coverage phase, which asks for a URI of
# exactly `SOURCE_URI_MAX_CHARS` characters and of one less and finds them only by spelling the length into
# the pattern, which it can where each repeated piece takes every length of a range. So two rules are spelled
# for generators, each accepting exactly what its plain spelling would (tests/unit/sense_reconciler/
# test_domain.py compares them):
# - `_PERCENT`, an escape, is its `%` alone, the two hex digits then matched as the plain characters they
#   also are (Hypothesis writes the lookahead out: `%XX`). Every component's characters include the hex
#   digits and are followed by `:`, `@`, `/`, `?` or the end, never a hex digit, so both digits fall inside
#   the component: `%(?=XX)` there is `%XX`. As `%XX`, a component's character was 1 or 3 long, and the
#   coverage phase searched its whole budget in vain for each of the two lengths (10-30 s of CPU each).
# - `_DNS_NAME`'s 253 characters in all are "never 254 name characters from its start", not "1 to 253 name
#   characters, then none": Hypothesis would write that positive lookahead's characters out before the name.
_HEX = "[0-9A-Fa-f]"
_PERCENT = rf"%(?={_HEX}{{2}})"
_DOLLAR = r"\$(?!G[0-9]|MTX_QUERY)"


def _characters(extra: str = "") -> str:
    """One character of a URI component: unreserved, sub-delimiters but `$`, `extra`, an escape, a `$`."""
    return rf"(?:[A-Za-z0-9._~!&'\(\)*+,;=\-{extra}]|{_PERCENT}|{_DOLLAR})"


_USERINFO = rf"{_characters()}+:{_characters(':')}+@"
_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_\-]{0,61}[A-Za-z0-9_])?"
_DNS_NAME = rf"(?![A-Za-z0-9._\-]{{254}}){_LABEL}(?:\.{_LABEL})*\.?"
_H16 = f"{_HEX}{{1,4}}"
_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_LS32 = rf"(?:{_H16}:{_H16}|{_OCTET}(?:\.{_OCTET}){{3}})"
_IPV6 = (
    "(?:"
    + "|".join(
        [
            rf"(?:{_H16}:){{6}}{_LS32}",
            rf"::(?:{_H16}:){{5}}{_LS32}",
            rf"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
            rf"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}",
            rf"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
            rf"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
            rf"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
            rf"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}",
            rf"(?:(?:{_H16}:){{0,6}}{_H16})?::",
        ]
    )
    + ")"
)
_PORT = rf"(?!0){at_most(65535)}"
_PATH_CHARACTER = _characters(":")
_QUERY_CHARACTER = _characters(r":\/?")
_PATH = rf"(?:/{_PATH_CHARACTER}*)*"
_QUERY = rf"\?{_QUERY_CHARACTER}*"

SOURCE_URI_PATTERN = re.compile(
    rf"rtsps?://(?:{_USERINFO})?(?:{_DNS_NAME}|\[{_IPV6}\])(?::{_PORT})?{_PATH}(?:{_QUERY})?"
)
PUBLISHED_SOURCE_URI = anchored(SOURCE_URI_PATTERN.pattern)


def is_source_uri(value: str) -> bool:
    return len(value) <= limits.SOURCE_URI_MAX_CHARS and SOURCE_URI_PATTERN.fullmatch(value) is not None
