"""Question sets: one JSON object per line, validated into ``Question`` records.

A line is ``{id, question, gold: [{file, phrase}], style}``: ``file`` is a path
relative to a provider's root (matched as a suffix of a ``file`` provenance
uri), ``phrase`` a short verbatim run of that file's text, and ``style`` says
whether the question shares its words with the gold text (``lexical``) or
says the same thing in other words (``paraphrase``). A bad line is one
``QuestionSetError`` naming the file, the line and the member.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hostd.errors import QuestionSetError

__all__ = ["STYLES", "Gold", "Question", "QuestionSetError", "load_questions", "parse_questions"]

#: The two kinds of question a set holds; recall is reported for each.
STYLES: tuple[str, ...] = ("lexical", "paraphrase")


class _Line(BaseModel):
    # Our own input format: a misspelt member is an error, not silently ignored.
    model_config = ConfigDict(extra="forbid", frozen=True)


class Gold(_Line):
    file: Annotated[str, Field(min_length=1)]
    phrase: Annotated[str, Field(min_length=1)]


class Question(_Line):
    id: Annotated[str, Field(min_length=1, max_length=256)]
    question: Annotated[str, Field(min_length=1, max_length=64 * 1024)]
    gold: Annotated[list[Gold], Field(min_length=1)]
    style: Literal["lexical", "paraphrase"]


def parse_questions(text: str, *, source: str = "<string>") -> list[Question]:
    """Every non-blank line of ``text`` as a ``Question``; ids must be unique."""
    questions: list[Question] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        try:
            question = Question.model_validate(orjson.loads(line))
        except orjson.JSONDecodeError as exc:
            raise QuestionSetError(f"{where}: not JSON: {exc.msg}", line=number) from None
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            member = ".".join(str(p) for p in first["loc"]) or "line"
            problem = "unknown member" if first["type"] == "extra_forbidden" else first["msg"]
            raise QuestionSetError(f"{where}: {member}: {problem}", line=number) from None
        if question.id in seen:
            raise QuestionSetError(f"{where}: id {question.id!r} repeats", line=number)
        seen.add(question.id)
        questions.append(question)
    if not questions:
        raise QuestionSetError(f"{source}: no questions")
    return questions


def load_questions(path: str | Path) -> list[Question]:
    """The questions of a question-set file; ``QuestionSetError`` naming the file and entry."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise QuestionSetError(f"{file}: cannot read: {exc}") from None
    return parse_questions(text, source=str(file))
