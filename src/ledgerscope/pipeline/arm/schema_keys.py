"""How an arm setting is declared (:func:`key`, :func:`table`) and the checks of a single value,
with the messages the user reads: the vocabulary :mod:`.schema` defines every setting in."""

from __future__ import annotations

import re
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from ledgerscope.pipeline.contracts.prompt import CONTEXT_FIELDS, QUESTION_FIELDS, template_problems

#: the largest integer any setting may hold (the ledger stores counts and offsets as int32)
MAX_INT = 2**31 - 1
BUNDLED_MODEL = "bundled:all-MiniLM-L6-v2"
DEVICES = ("cpu", "auto", "cuda", "mps")


def key(
    default: Any,
    doc: str,
    *,
    ge: float | None = None,
    le: float | None = None,
    optional: bool = False,
    later: bool | float = False,
    digest: bool = True,
    seam: str | None = None,
    example: Any = None,
    shown: str | None = None,
    kinds: str | None = None,
    type_message: str | None = None,
    item_message: str | None = None,
    allowed: str | None = None,
) -> Any:
    """One setting: ``default`` is what the code uses when the key is absent; ``example`` is the value
    ``config default`` shows for an optional key (its default when None); ``shown`` replaces a long
    default in the docs; ``seam`` names the table of kinds (:mod:`.kinds`) the value must be one of;
    ``kinds`` says which stage kinds read the key; ``type_message`` / ``item_message`` replace the
    generic message for a value (or a list item) of the wrong type; ``allowed`` says in words what a
    checked value may be."""
    given = {
        "optional": optional,
        "later": later,
        "seam": seam,
        "example": example,
        "shown": shown,
        "kinds": kinds,
        "type_message": type_message,
        "item_message": item_message,
        "allowed": allowed,
    }
    extra = {"digest": digest, **{k: v for k, v in given.items() if v not in (None, False)}}
    return Field(default, description=doc, ge=ge, le=le, json_schema_extra=extra)


def table(model: type[BaseModel], doc: str, **meta: Any) -> Any:
    """A sub-table whose keys take their own defaults (``inline``: written ``{ k = v }`` in
    ``config default``; ``optional``, ``later`` as for :func:`key`)."""
    return Field(default_factory=model, description=doc, json_schema_extra={"digest": True, **meta})


# --- checks of a single value (their messages are what the user reads) -----------------------------

#: what each single-value check allows, in words (the docs table's "allowed" column)
ALLOWED: dict[Any, str] = {}


def _checked(why: Any, allowed: str) -> Any:
    """A pydantic validator raising ``why(value)``'s reason (the message the user reads)."""

    def check(value: Any) -> Any:
        reason = why(value)
        if reason:
            raise ValueError(reason)
        return value

    validator = AfterValidator(check)
    ALLOWED[validator] = allowed
    return validator


def _name_problem(value: str) -> str | None:
    return None if re.fullmatch(r"[A-Za-z0-9_.-]+", value) else "must be letters, digits, '_', '.', '-'"


def url_problem(base_url: str) -> str | None:
    """Why ``base_url`` cannot be an endpoint's root ("" is unset, not a problem)."""
    if not base_url:
        return None
    if not base_url.startswith(("http://", "https://")):
        return "must start with http:// or https://"
    try:
        userinfo = "@" in (urlsplit(base_url).netloc or "")
    except ValueError as exc:
        return f"is not a URL ({exc})"
    if userinfo:
        return (
            "must not carry credentials (user:key@); put the key in the environment variable "
            "named by api_key_env"
        )
    return None


def _key_env_problem(value: str) -> str | None:
    # secrets come from the environment only: never in the configuration (it is copied into the ledger)
    if value and not re.fullmatch(r"[A-Za-z_]\w{0,127}", value, re.ASCII):
        return "must be the NAME of an environment variable (letters, digits, '_'), never the key itself"
    return None


def _path_problem(value: str) -> str | None:
    return "must start with '/' (it follows base_url)" if value and not value.startswith("/") else None


def _context_problem(value: str) -> str | None:
    return template_problems(value, CONTEXT_FIELDS)


def _question_problem(value: str) -> str | None:
    return template_problems(value, QUESTION_FIELDS) or (
        None if "{context}" in value else "must hold {context} (where the packed sources go)"
    )


def _device_problem(value: str) -> str | None:
    return None if value.lower() in DEVICES else f"must be one of {', '.join(DEVICES)}"


Name = Annotated[str, _checked(_name_problem, "letters, digits, _ . -")]
Url = Annotated[str, _checked(url_problem, "an http:// or https:// URL without credentials")]
KeyEnv = Annotated[str, _checked(_key_env_problem, "an environment variable's name")]
UrlPath = Annotated[str, _checked(_path_problem, "starts with /")]
Device = Annotated[str, _checked(_device_problem, " | ".join(DEVICES))]
ContextFormat = Annotated[str, _checked(_context_problem, "fields {label} {doc_id} {unit_id} {text}")]
QuestionFormat = Annotated[str, _checked(_question_problem, "fields {context} {question} ({context} needed)")]
Labels = list[str]


#: the message for a count of the wrong type
COUNT = "must be a non-negative integer"


class StrictTable(BaseModel):
    """A table of settings: values checked, never converted; unknown keys refused."""

    model_config = ConfigDict(strict=True, extra="forbid", validate_default=False)
