"""The words for a name hostd does not know (``hostd._hints``): the closest known one
when one is close, and for an unknown provider id the ids configured."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hostd._hints import warming_state
from hostd.errors import IDS_NAMED, did_you_mean, unknown_provider


def test_a_close_name_is_offered_and_a_far_one_is_not() -> None:
    assert did_you_mean("fact", ["notes", "facts"]) == "facts"
    assert did_you_mean("defualt_budget", ["socket", "default_budget"]) == "default_budget"
    assert did_you_mean("zzz", ["notes", "facts"]) is None
    assert did_you_mean("x", []) is None


def test_an_unknown_provider_close_to_one_names_the_configured_ids_and_the_close_one() -> None:
    said = unknown_provider("fact", {"notes", "facts"})
    assert said == "unknown provider 'fact' (configured: facts, notes); did you mean 'facts'?"


def test_an_unknown_provider_close_to_none_names_the_configured_ids_only() -> None:
    said = unknown_provider("zzz", ["notes", "facts"])
    assert said == "unknown provider 'zzz' (configured: facts, notes)"


def test_an_unknown_provider_with_none_configured_says_so() -> None:
    assert unknown_provider("facts", []) == "unknown provider 'facts' (no provider is configured)"


def test_many_configured_ids_are_named_up_to_a_bound_and_the_rest_counted() -> None:
    ids = [f"source{i:03d}" for i in range(IDS_NAMED + 5)]
    said = unknown_provider("zzz", ids)
    assert ", ".join(ids[:IDS_NAMED]) + " and 5 more)" in said
    assert ids[IDS_NAMED] not in said


_ID = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=12)


@given(st.sets(_ID, max_size=IDS_NAMED), _ID)
def test_the_message_quotes_the_ids_alone_and_any_guess_is_a_configured_id(
    configured: set[str], asked: str
) -> None:
    said = unknown_provider(asked, configured)
    assert said.startswith(f"unknown provider {asked!r} (")
    for pid in configured:
        assert pid in said
    guess = did_you_mean(asked, configured)
    assert (guess is None) == ("did you mean" not in said)
    if guess is not None:
        assert guess in configured and said.endswith(f"; did you mean {guess!r}?")


def test_a_warming_providers_words_follow_its_phase() -> None:
    def leg(phase: str | None, code: str = "warming") -> dict[str, object]:
        error: dict[str, object] = {"code": code, "message": "provider warming"}
        if phase is not None:
            error["phase"] = phase
        return {"status": "warming", "error": error}

    assert warming_state(leg("load")) == "still loading its saved index (provider warming)"
    assert warming_state(leg("load model")) == "still loading its model (provider warming)"
    for building in ("index", "read files", "embed", "loader", None):
        assert warming_state(leg(building)) == "still building its index (provider warming)"
    assert warming_state(leg("load", code="starting")) == "still starting (provider warming)"
    assert warming_state({"status": "ok"}) is None
