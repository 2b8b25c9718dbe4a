"""C7 and C8 on a URL's text alone, and the credential that never renders."""

from __future__ import annotations

import ipaddress

from hypothesis import given
from hypothesis import strategies as st

from hostd.protocol import is_loopback_host
from hostd.transport import Credential, remote_url_problem

_octet = st.integers(0, 255)
_loopback_v4 = st.builds(lambda b, c, d: f"127.{b}.{c}.{d}", _octet, _octet, _octet)
_names = st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z][a-z0-9-]{0,10}){0,3}", fullmatch=True)


@given(_loopback_v4, st.integers(1, 65535))
def test_plaintext_to_any_127_address_is_allowed(host: str, port: int) -> None:
    assert is_loopback_host(host)
    assert remote_url_problem(f"http://{host}:{port}/cgp") is None


@given(st.ip_addresses())
def test_plaintext_to_an_address_is_allowed_exactly_when_it_is_loopback(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> None:
    shown = f"[{address}]" if address.version == 6 else str(address)
    problem = remote_url_problem(f"http://{shown}/")
    assert (problem is None) == address.is_loopback
    assert remote_url_problem(f"https://{shown}/") is None


@given(_names)
def test_plaintext_to_a_name_other_than_localhost_is_refused(name: str) -> None:
    problem = remote_url_problem(f"http://{name}/")
    assert (problem is None) == (name == "localhost")
    if problem is not None:
        assert "C7" in problem


_CONTROLS = "".join(map(chr, range(0x20))) + "\x7f"  # what a token may not hold


@given(st.text(alphabet=st.characters(blacklist_characters=_CONTROLS), min_size=1))
def test_a_credential_renders_redacted_whatever_it_holds(token: str) -> None:
    credential = Credential(token)
    for shown in (repr(credential), str(credential), f"{credential}", f"{credential!r}"):
        assert shown == "Credential(<redacted>)"
    assert credential.authorization() == f"Bearer {token}"
