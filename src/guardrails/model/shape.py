"""The shape of guardrails/v1 documents: the one description, as pydantic models.

These models are the single source of truth for field names, types, defaults, enums,
required fields and per-field constraints. The loader validates the plain data read from
YAML with them (``guardrails.model.loader`` maps their errors back onto YAML node
positions), and ``guardrails schema`` is generated from them
(``guardrails.model.schema``), so the two can no longer drift apart.

What the models do not hold: positions (the loader keeps them in a side table keyed by
the error location, and builds the position-carrying records of
``guardrails.model.documents``), and checks that need more than one element or the file
system (names unique within a list and across files, ``paramsFile`` contents,
``spec.policies`` existence). Those stay in the loader.

Conventions the loader relies on:

- Custom errors are ``PydanticCustomError`` whose message is the final text without the
  field path; type ``expected`` means "expected X", and the loader appends ", got <what
  the YAML node is>". A ``ctx["at"]`` tuple extends the error location (a model-level
  check pointing at one of its fields). Type ``empty_expression`` is reported at the
  expression's first character.
- ``ClassVar`` ``expected`` on a model names what a non-mapping value should have been.
- Optional fields reject an explicit ``null`` where null would silently change meaning
  (an omitted ``when`` applies always; a null one is a mistake).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Literal

import re2
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainValidator, WithJsonSchema
from pydantic import model_validator as _model_validator
from pydantic_core import PydanticCustomError

from guardrails.expr.lib_common import RE2_OPTIONS, re2_message
from guardrails.model.documents import (
    API_VERSION,
    DEFAULT_REPLACEMENT,
)

DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
ELEMENT_NAME = r"[a-z0-9]([-_a-z0-9]{0,61}[a-z0-9])?"
IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
FIRED_RULE = r"[^/\s]+/[^/\s]+"
CEL_RESERVED = frozenset(
    ["true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
     "function", "if", "import", "let", "loop", "package", "namespace", "return", "var",
     "void", "while"]
)

ModeName = Literal["enforce", "audit"]
FailurePolicyName = Literal["Fail", "Ignore"]
DefaultActionName = Literal["allow", "deny"]
RuleActionName = Literal["allow", "deny", "halt", "require_approval", "warn"]
EffectName = Literal["allow", "deny", "halt", "require_approval"]
HistoryEffectName = Literal["allow", "deny", "halt", "require_approval", "rejected"]
TrustName = Literal["trusted", "untrusted"]


# -- field types ---------------------------------------------------------------------------


def _expected(what: str) -> PydanticCustomError:
    return PydanticCustomError("expected", "expected " + what)


def _non_empty(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("empty", "must not be empty")
    return value


NonEmptyStr = Annotated[str, AfterValidator(_non_empty), Field(min_length=1)]

EXPRESSION_SCHEMA: dict[str, Any] = {
    "type": ["string", "boolean", "number"], "minLength": 1,
}


def _expression(value: object) -> str | int | float | bool:
    """A CEL expression is a YAML scalar (``when: true`` is the expression ``true``)."""
    if not isinstance(value, str | int | float | bool):
        raise _expected("a CEL expression (a string)")
    if isinstance(value, str) and not value.strip():
        raise PydanticCustomError("empty_expression", "empty expression")
    return value


Expression = Annotated[str | int | float | bool, PlainValidator(_expression),
                       WithJsonSchema(EXPRESSION_SCHEMA)]
OptionalExpression = Annotated[str | int | float | bool | None, PlainValidator(_expression),
                               WithJsonSchema(EXPRESSION_SCHEMA)]
"""An optional expression: omit it, but an explicit null is a mistake, not "always"."""


def _name_check(pattern: str, what: str, rule: str,
                check: Callable[[str], str | None] | None = None) -> AfterValidator:
    compiled = re.compile(pattern)

    def validate(value: str) -> str:
        if not compiled.fullmatch(value):
            fixed = re.sub(r"[^a-z0-9]+", "-", value.lower()).strip("-")[:63].strip("-")
            rule_hint = f"{rule}, e.g. '{fixed}'" if fixed and compiled.fullmatch(fixed) \
                else rule
            raise PydanticCustomError("invalid_name", "invalid {what} '{value}': {rule}",
                                      {"what": what, "value": value, "rule": rule_hint})
        problem = check(value) if check else None
        if problem:
            raise PydanticCustomError("invalid_name", problem)
        return value

    return AfterValidator(validate)


def _name_schema(pattern: str) -> WithJsonSchema:
    schema: dict[str, Any] = {"type": "string", "pattern": f"^{pattern}$"}
    if "{0,61}" in pattern:
        schema["maxLength"] = 63
    return WithJsonSchema(schema)


_DNS_RULE = ("must be a lowercase DNS label (a-z, 0-9 and '-', at most 63 characters, "
             "starting and ending with a letter or digit)")
_ELEMENT_RULE = ("use lowercase letters, digits, '-' and '_', starting and ending with a "
                 "letter or digit, at most 63 characters")


def _not_reserved(value: str) -> str | None:
    return f"'{value}' is a reserved word in CEL" if value in CEL_RESERVED else None


PolicyName = Annotated[str, _name_check(DNS_LABEL, "policy name", _DNS_RULE),
                      _name_schema(DNS_LABEL)]
TestName = Annotated[str, _name_check(DNS_LABEL, "test name", _DNS_RULE),
                    _name_schema(DNS_LABEL)]
RuleName = Annotated[str, _name_check(ELEMENT_NAME, "rule name", _ELEMENT_RULE),
                    _name_schema(ELEMENT_NAME)]
RepairName = Annotated[str, _name_check(ELEMENT_NAME, "repair name", _ELEMENT_RULE),
                      _name_schema(ELEMENT_NAME)]
RedactName = Annotated[str, _name_check(ELEMENT_NAME, "redact name", _ELEMENT_RULE),
                      _name_schema(ELEMENT_NAME)]
VariableName = Annotated[str, _name_check(
    IDENTIFIER, "variable name", "must be an identifier (letters, digits and '_', not "
    "starting with a digit) so that variables.<name> can use it", _not_reserved),
    _name_schema(IDENTIFIER)]
CounterName = Annotated[str, _name_check(
    IDENTIFIER, "counter name", "must be an identifier (letters, digits and '_', not "
    "starting with a digit) so that counters.<name> can use it", _not_reserved),
    _name_schema(IDENTIFIER)]
BindingName = Annotated[str, _name_check(DNS_LABEL, "binding name", _DNS_RULE),
                       _name_schema(DNS_LABEL)]
EnvName = Annotated[str, _name_check(IDENTIFIER, "environment variable name",
                                     "use letters, digits and '_', not starting with a "
                                     "digit"), _name_schema(IDENTIFIER)]


def _fired_rule(value: str) -> str:
    if not re.fullmatch(FIRED_RULE, value):
        hint = (f": name its policy too, as fired rules are reported ('<policy>/{value}', "
                f"'<policy>@<binding>/{value}' through a binding)"
                if "/" not in value else "")
        raise PydanticCustomError("invalid_rule_ref", "'{value}' is not 'policy/rule'{hint}",
                                  {"value": value, "hint": hint})
    return value


FiredRule = Annotated[str, AfterValidator(_fired_rule), _name_schema(FIRED_RULE)]


def glob_problem(glob: str) -> str | None:
    """Why ``glob`` is not a sensible shell-style pattern (fnmatch would read a stray '['
    as a literal character, hiding the author's mistake)."""
    i = 0
    while i < len(glob):
        if glob[i] == "[":
            j = i + 1
            if j < len(glob) and glob[j] == "!":
                j += 1
            if j < len(glob) and glob[j] == "]":
                j += 1
            j = glob.find("]", j)
            if j < 0:
                return "unbalanced '['"
            i = j
        i += 1
    return None


def _glob(value: str) -> str:
    problem = glob_problem(value)
    if problem:
        raise PydanticCustomError("invalid_glob", "invalid glob '{glob}': {problem}",
                                  {"glob": value, "problem": problem})
    return value


Glob = Annotated[NonEmptyStr, AfterValidator(_glob)]


def regex_problem(regex: str, *, redaction: bool = False) -> str | None:
    """Why ``regex`` does not compile under RE2 (or, for a redaction, matches "")."""
    try:
        compiled = re2.compile(regex, RE2_OPTIONS)
    except re2.error as e:
        return f"invalid RE2 regular expression: {re2_message(e)}"
    if redaction and compiled.search("") is not None:
        return "the pattern matches the empty string, so it would redact between every character"
    return None


def _redaction_regex(value: str) -> str:
    problem = regex_problem(value, redaction=True)
    if problem:
        raise PydanticCustomError("invalid_regex", problem)
    return value


def replacement_problem(regex: str, replacement: str) -> str | None:
    """Why ``replacement`` cannot be expanded for matches of ``regex``, or None.

    A replacement is a template (``\\1``, ``\\g<name>``, backslash escapes): a bad one
    would raise only when the pattern first matches, inside ``evaluate``, which must never
    raise. Expanding it once against a match with the same groups finds it at load time.
    """
    try:
        probe = re2.compile(f"(?:{regex})|", RE2_OPTIONS).match("")  # always matches ""
        if probe is not None:
            probe.expand(replacement)
    except Exception as e:
        return f"invalid replacement template: {e or type(e).__name__}"
    return None


_FOREIGN_GROUP = re.compile(r"\$(?:\d|&|\{\w+\}|<\w+>)|(?<!\\)\\0(?![0-7])")
"""Group references of other engines: JavaScript's and Java's ``$1``, ``$&``, ``${name}``,
``$<name>``, and sed's ``\\0`` (in Python's templates an octal escape: a NUL character)."""


def replacement_warning(replacement: str) -> str | None:
    """A replacement written in another engine's template syntax, or None.

    The template is Python's (``\\1``, ``\\g<name>``, ``\\g<0>`` for the whole match):
    ``[IBAN:$1]`` puts the text ``$1`` in every record, and ``<\\0>`` a NUL character,
    both silently."""
    m = _FOREIGN_GROUP.search(replacement)
    if m is None:
        return None
    found = m.group(0)
    if found == "\\0":
        return ("'\\0' is a NUL character here, not the whole match (templates are "
                "Python's re.sub ones): write \\g<0>")
    if found == "$&":
        ref = "\\g<0>"
    elif found[1:2].isdigit():
        ref = "\\" + found[1]
    else:
        ref = "\\g<" + found.strip("${}<>") + ">"
    return (f"'{found}' is literal text here, not a group (templates are Python's re.sub "
            f"ones, not JavaScript's): write {ref}")


_MESSAGE_TEMPLATE = re.compile(
    r"\{\{.*?\}\}|\$\{[^}]*\}|\{\s*(?:args|params|principal|variables|tool|request)\.[^}]*\}"
    r"|^\s*[\"'].*[\"']\s*\+|\+\s*(?:args|params|principal|variables|tool|request)\.\w")
"""Templating habits in a static ``message``: Kyverno's and Jinja's ``{{ x }}``, ``${x}``,
``{args.x}``, and a CEL string expression (``"to " + args.to``)."""


def message_warning(message: str) -> str | None:
    """Why a rule's static ``message`` was probably meant to be evaluated, or None."""
    m = _MESSAGE_TEMPLATE.search(message)
    if m is None:
        return None
    found = m.group(0).strip()
    what = f"{found!r} is not evaluated" if "{" in found else \
        "it is written as a CEL expression, which is not evaluated here"
    return (f"message is static text, sent as written ({what}); to put a value in it "
            f"use messageExpression, a CEL string: "
            f"messageExpression: '\"Blocked mail to \" + args.to'")


def _count(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _expected("a count (an integer >= 0)")
    return value


Count = Annotated[int, PlainValidator(_count),
                  WithJsonSchema({"type": "integer", "minimum": 0})]


def _at_least_one_agent(value: list[str]) -> list[str]:
    if not value:
        raise PydanticCustomError("empty_agents", "an empty list matches no agent; omit "
                                                  "'agents' to match every agent")
    return value


Agents = Annotated[list[NonEmptyStr], AfterValidator(_at_least_one_agent)]

_DURATION = re.compile(r"([1-9][0-9]{0,9})(s|m|h|d|w)")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
MAX_COUNTER_WINDOW = 366 * 86400
"""A year and a day: counters are for rates, and their store entries expire with them."""


def _window(value: object) -> int:
    """Seconds, from ``30s``, ``10m``, ``24h``, ``7d``, ``1w`` or a number of seconds."""
    seconds: int | None = None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        seconds = value
    elif isinstance(value, str):
        m = _DURATION.fullmatch(value.strip())
        if m:
            seconds = int(m.group(1)) * _DURATION_UNITS[m.group(2)]
    if seconds is None and isinstance(value, str) and re.fullmatch(r"0+[smhdw]?",
                                                                    value.strip()):
        raise PydanticCustomError("window_zero", "a window is at least 1s, not '{value}'",
                                  {"value": value})
    text = value.strip() if isinstance(value, str) else ""
    parts = re.findall(r"([0-9]+)([smhdw])", text)
    if seconds is None and len(parts) > 1 and "".join(a + u for a, u in parts) == text:
        total = sum(int(a) * _DURATION_UNITS[u] for a, u in parts)
        unit = next(u for u in "wdhms" if total % _DURATION_UNITS[u] == 0)
        raise PydanticCustomError(
            "window_compound", "one number and one unit, not '{value}': write "
            "{total}{unit}", {"value": value, "total": total // _DURATION_UNITS[unit],
                              "unit": unit})
    if seconds is None and isinstance(value, str) and value.strip():
        raise PydanticCustomError(
            "window_format", "expected a duration such as 60s, 10m, 24h, 7d or 1w, not "
            "'{value}': one whole number and a unit, with no space (or a number of seconds)",
            {"value": value})
    if seconds is None:
        raise _expected("a duration such as 60s, 10m, 24h, 7d or 1w")
    if seconds > MAX_COUNTER_WINDOW:
        raise PydanticCustomError("window_too_long", "at most 366d")
    return seconds


Window = Annotated[int, PlainValidator(_window), WithJsonSchema(
    {"type": ["string", "integer"], "pattern": "^[1-9][0-9]*[smhdw]$", "minimum": 1})]


def _limit(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        raise PydanticCustomError("negative", "expected a count (an integer >= 0), got "
                                  "{value}: a limit of 0 admits no call", {"value": value})
    if isinstance(value, str) and value.strip().isdigit():
        raise PydanticCustomError("quoted_limit", "expected a count (an integer >= 0), got "
                                  "the text '{value}': write the number without quotes",
                                  {"value": value})
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**53:
        raise _expected("a count (an integer >= 0)")
    return value


Limit = Annotated[int, PlainValidator(_limit),
                  WithJsonSchema({"type": "integer", "minimum": 0})]


def _at_least_one_tool(value: list[str]) -> list[str]:
    if not value:
        raise PydanticCustomError("empty_tools", "an empty list matches no tool; omit "
                                                 "'tools' to match every tool")
    return value


def _at_least_one_case(value: list[Any]) -> list[Any]:
    if not value:
        raise PydanticCustomError("empty_cases", "a test needs at least one case")
    return value


# -- models --------------------------------------------------------------------------------


class Shape(BaseModel):
    """Base of every document model: strict types, unknown fields rejected."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True,
                              validate_by_alias=True, validate_by_name=False,
                              serialize_by_alias=True)
    expected: ClassVar[str] = "a mapping"


class PolicyMetadata(Shape):
    """Identifies the document."""

    name: PolicyName = Field(description="Lowercase DNS label, unique among documents of "
                                         "this kind in a policy set.")
    description: str = Field("", description="Free text for people.")
    labels: dict[str, str] = Field(default_factory=dict,
                                   description="String labels (owner, team, ...).")


class TestMetadata(PolicyMetadata):
    """Identifies the document."""

    __test__ = False  # not a pytest class
    name: TestName = Field(description="Lowercase DNS label, unique among documents of "
                                       "this kind in a policy set.")


class MatchShape(Shape):
    """Which tool calls the policy applies to."""

    tools: Annotated[list[Glob], AfterValidator(_at_least_one_tool)] | None = Field(
        None, description="Shell-style globs on the tool name (case-sensitive); omit to "
                          "match every tool.", json_schema_extra={"minItems": 1})
    when: OptionalExpression = Field(None, description="Optional CEL bool: the policy "
                                                       "applies only when true.")
    agents: Agents | None = Field(None, description="Agent names or ids the policy applies "
                                                    "to; omit to match every agent.",
                                  json_schema_extra={"minItems": 1})


class VariableShape(Shape):
    """A named value, computed lazily in order."""

    name: VariableName = Field(description="Identifier, used as variables.<name>.")
    expression: Expression = Field(description="CEL expression computing the value.")


class RepairShape(Shape):
    """Fixes the raw arguments before rules run."""

    name: RepairName = Field(description="Unique within the policy.")
    when: OptionalExpression = Field(None, description="Optional CEL bool: apply only when "
                                                       "true.")
    set_: dict[str, Expression] = Field(default_factory=dict, alias="set",
                                        description="Argument name to CEL expression "
                                                    "computing its new value.")
    unset: list[NonEmptyStr] = Field(default_factory=list,
                                     description="Argument names to remove.")

    @_model_validator(mode="after")
    def _changes_something(self) -> RepairShape:
        if not self.set_ and not self.unset:
            raise PydanticCustomError("no_change",
                                      "the repair changes nothing; give 'set' or 'unset'")
        for i, arg in enumerate(self.unset):
            if arg in self.set_:
                raise PydanticCustomError("unset_and_set", "argument '{arg}' is also set",
                                          {"arg": arg, "at": ("unset", i)})
        return self


class InjectionShape(Shape):
    """The source of an injected value."""

    expected: ClassVar[str] = "{env: VARIABLE_NAME}"
    env: EnvName = Field(description="Environment variable holding the value.")


class SecretsShape(Shape):
    """Arguments holding secrets, and secrets injected after the rules."""

    arguments: list[NonEmptyStr] = Field(
        default_factory=list, description="Argument names whose values are secret: never "
                                          "shown to the model, logs, spans or decision "
                                          "records.")
    inject: dict[str, InjectionShape] = Field(
        default_factory=dict, description="Argument name to where its value comes from; "
                                          "set after the rules pass.")


class RuleShape(Shape):
    """A condition and what happens when it holds."""

    name: RuleName = Field(description="Unique within the policy; reported as policy/rule.")
    when: Expression = Field(description="CEL bool: the rule fires when true.")
    action: RuleActionName = Field(description="allow | deny | halt (abort the run) | "
                                               "require_approval | warn (record only).")
    message: NonEmptyStr | None = Field(None, description="Text returned to the model when "
                                                          "the rule blocks the call.")
    message_expression: OptionalExpression = Field(
        None, alias="messageExpression",
        description="CEL string; replaces message when it evaluates.")


class RedactionShape(Shape):
    """A pattern scrubbed from tool results, error text and records."""

    name: RedactName = Field(description="Unique within the policy.")
    regex: Annotated[NonEmptyStr, AfterValidator(_redaction_regex)] = Field(
        description="RE2 regular expression; must not match the empty string.")
    replacement: str = Field(DEFAULT_REPLACEMENT, description="Replacement text (default "
                                                              f"{DEFAULT_REPLACEMENT}).")

    @_model_validator(mode="after")
    def _replacement_expands(self) -> RedactionShape:
        problem = replacement_problem(self.regex, self.replacement)
        if problem:
            raise PydanticCustomError("invalid_replacement", problem,
                                      {"at": ("replacement",)})
        return self


class CounterShape(Shape):
    """A count shared across runs and replicas, read as counters.<name>."""

    name: CounterName = Field(description="Identifier, used as counters.<name>.")
    key: Expression = Field(description="CEL string or int: what is counted apart (a user, "
                                        "a tenant).")
    window: Window = Field(description="Fixed window: 60s, 10m, 24h, 7d, 1w, or seconds "
                                       "(at most 366d).")
    limit: Limit = Field(description="Most a window admits; a call beyond it is not counted "
                                     "and reads exceeded.")
    when: OptionalExpression = Field(None, description="Optional CEL bool: only calls for "
                                                       "which it holds are counted.")
    cost: OptionalExpression = Field(None, description="Optional CEL int added per call "
                                                       "(default 1).")
    failure_policy: FailurePolicyName | None = Field(
        None, alias="failurePolicy",
        description="When the store cannot be reached: Fail (deny) or Ignore (read as "
                    "zero). Default: the policy's.")


class ToolPolicySpec(Shape):
    """What the policy checks and does."""

    mode: ModeName = Field("enforce", description="enforce, or audit: evaluate and record, "
                                                  "change nothing.")
    failure_policy: FailurePolicyName = Field(
        "Fail", alias="failurePolicy",
        description="On an evaluation error: Fail (the rule fires) or Ignore (it is "
                    "skipped).")
    default_action: DefaultActionName = Field("allow", alias="defaultAction",
                                              description="Result when no rule fires.")
    match: MatchShape = Field(default_factory=lambda: MatchShape(),
                              description="Which calls the policy applies to.")
    params: dict[str, Any] = Field(default_factory=dict,
                                   description="Static data visible as params; overrides "
                                               "paramsFile per key.")
    params_file: NonEmptyStr | None = Field(None, alias="paramsFile",
                                            description="YAML or JSON file holding a mapping "
                                                        "of params, relative to this file.")
    variables: list[VariableShape] = Field(default_factory=list, description="Named values.")
    repairs: list[RepairShape] = Field(default_factory=list,
                                       description="Argument fixes, applied in order.")
    secrets: SecretsShape = Field(default_factory=SecretsShape,
                                  description="Secret arguments and injected secrets.")
    rules: list[RuleShape] = Field(default_factory=list,
                                   description="Rules; every one that fires is reported.")
    redact: list[RedactionShape] = Field(default_factory=list,
                                         description="Redaction patterns.")
    results: TrustName | None = Field(None, description="Whether the matched tools' results "
                                                        "are trusted content (unlabelled "
                                                        "tools: untrusted).")
    counters: list[CounterShape] = Field(default_factory=list,
                                         description="Counts shared across runs and "
                                                     "replicas.")
    uses: list[LibraryName] = Field(default_factory=list,
                                    description="Libraries whose params this policy "
                                                "shares (Library documents of the same file "
                                                "are shared without being listed).")


ParamTypeName = Literal["any", "bool", "int", "uint", "double", "string", "bytes", "list",
                        "map", "timestamp", "duration"]
LibraryName = Annotated[str, _name_check(
    IDENTIFIER, "library name", "must be an identifier (letters, digits and '_', not "
    "starting with a digit): functions are called as <library>.<function>(...)",
    _not_reserved), _name_schema(IDENTIFIER)]
FunctionName = Annotated[str, _name_check(
    IDENTIFIER, "function name", "must be an identifier (letters, digits and '_', not "
    "starting with a digit)", _not_reserved), _name_schema(IDENTIFIER)]
ParamName = Annotated[str, _name_check(
    IDENTIFIER, "parameter name", "must be an identifier (letters, digits and '_', not "
    "starting with a digit)", _not_reserved), _name_schema(IDENTIFIER)]


class FunctionParamShape(Shape):
    """One parameter of a library function."""

    name: ParamName = Field(description="The name the body uses.")
    type: ParamTypeName = Field("any", description="The CEL type an argument must have "
                                                   "(any: no check).")


class FunctionShape(Shape):
    """A function policies call as <library>.<name>(...); its body is inlined."""

    name: FunctionName = Field(description="Identifier, unique in the library.")
    description: str = Field("", description="Free text for people.")
    params: list[FunctionParamShape] = Field(default_factory=list,
                                             description="Parameters, in call order.")
    expression: Expression = Field(description="CEL body: the parameters, the names every "
                                               "expression can use (args, request, params "
                                               "of the calling policy, ...) and functions "
                                               "of libraries.")


class LibrarySpec(Shape):
    """What a library shares."""

    params: dict[str, Any] = Field(default_factory=dict,
                                   description="Params merged under the params of every "
                                               "policy of the same file and of every policy "
                                               "that lists the library in spec.uses.")
    functions: list[FunctionShape] = Field(default_factory=list,
                                           description="Functions, called as "
                                                       "<library>.<function>(...).")


class HistoryEntryShape(Shape):
    """An earlier call in the session."""

    tool: NonEmptyStr = Field(description="Tool name.")
    args: dict[str, Any] = Field(default_factory=dict, description="Its arguments.")
    effect: HistoryEffectName = Field("allow", description="Its effect (rejected: a human "
                                                            "rejected the approval).")
    result: str = Field("", description="The tool's result as the model got it (scrubbed).")
    trusted: bool = Field(False, description="Whether the tool's results are trusted content.")
    at: Timestamp | None = Field(None, description="When the call was made (an RFC 3339 "
                                                  "timestamp with a time zone).")


class TestCallShape(Shape):
    """The tool call to evaluate."""

    __test__ = False  # not a pytest class
    tool: NonEmptyStr = Field(description="Tool name.")
    args: dict[str, Any] = Field(default_factory=dict, description="Raw arguments.")
    principal: dict[str, Any] = Field(default_factory=dict, description="The principal map.")
    history: list[HistoryEntryShape] = Field(default_factory=list,
                                             description="Earlier calls, oldest first.")
    request: str | None = Field(None, description="Text of the user messages that started "
                                                  "the run.")
    description: str | None = Field(None, description="Tool description.")
    now: Timestamp | None = Field(None, description="The evaluation time (an RFC 3339 "
                                                    "timestamp with a time zone) seen as "
                                                    "now; the real time when omitted.")
    agent: NonEmptyStr | None = Field(None, description="The calling agent's name or id "
                                                        "(match.agents, bindings).")
    counters: dict[str, Count] | None = Field(
        None, description="Counts already made in the window, by counter name (or "
                          "policy/counter).")


def _timestamp(value: object) -> str:
    import datetime

    if not isinstance(value, str):
        raise _expected("an RFC 3339 timestamp with a time zone (2026-01-31T09:00:00Z)")
    try:
        parsed = datetime.datetime.fromisoformat(value.strip())
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise PydanticCustomError("invalid_timestamp",
                                  "'{value}' is not an RFC 3339 timestamp with a time zone "
                                  "(2026-01-31T09:00:00Z)", {"value": value})
    return value


Timestamp = Annotated[str, PlainValidator(_timestamp),
                      WithJsonSchema({"type": "string", "format": "date-time"})]


class TestExpectShape(Shape):
    """What the decision must show: its effect, and optionally more."""

    __test__ = False  # not a pytest class
    effect: EffectName = Field(description="The decision's effect.")
    arguments: dict[str, Any] | None = Field(None, description="These keys must equal the "
                                                               "decision's (repaired) "
                                                               "arguments.")
    rules: list[FiredRule] | None = Field(None, description="Exactly these policy/rule fired "
                                                            "(any order).")
    message: NonEmptyStr | None = Field(None, description="A substring of the decision's "
                                                          "message.")
    errors: Count | None = Field(None, description="The number of evaluation errors "
                                                   "recorded.")


class TestCaseShape(Shape):
    """One case."""

    __test__ = False  # not a pytest class
    name: NonEmptyStr = Field(description="Unique within the test.")
    call: TestCallShape = Field(description="The call.")
    expect: TestExpectShape = Field(description="The expected decision.")


class PolicyTestSpec(Shape):
    """Cases run against policies."""

    policies: list[NonEmptyStr] | None = Field(
        None, description="Policy files or directories, relative to this file; omit to use "
                          "the policies loaded with this test.")
    cases: Annotated[list[TestCaseShape], AfterValidator(_at_least_one_case)] = Field(
        description="Test cases.", json_schema_extra={"minItems": 1})


class _Document(Shape):
    """What every document starts with; each kind adds its ``kind``, ``metadata`` and
    ``spec`` (in that order after it, as pydantic puts a base's fields first)."""

    api_version: Literal["guardrails/v1"] = Field(alias="apiVersion",
                                                  description=f"Always {API_VERSION}.")


class ToolPolicyDocument(_Document):
    """Guardrail rules for tool calls."""

    kind: Literal["ToolPolicy"] = Field(description="The document kind.")
    metadata: PolicyMetadata = Field(description="Name and description of the document.")
    spec: ToolPolicySpec = Field(description="The document's content.")


class PolicyTestDocument(_Document):
    """Tests run by `guardrails test`."""

    __test__ = False  # not a pytest class
    kind: Literal["PolicyTest"] = Field(description="The document kind.")
    metadata: TestMetadata = Field(description="Name and description of the document.")
    spec: PolicyTestSpec = Field(description="The document's content.")


class LibraryMetadata(PolicyMetadata):
    """Identifies the document."""

    name: LibraryName = Field(description="Identifier, unique among libraries: the "
                                          "namespace of its functions.")


class LibraryDocument(_Document):
    """Functions and params shared by policies."""

    kind: Literal["Library"] = Field(description="The document kind.")
    metadata: LibraryMetadata = Field(description="Name and description of the document.")
    spec: LibrarySpec = Field(description="The document's content.")


class BindingMetadata(PolicyMetadata):
    """Identifies the document."""

    name: BindingName = Field(description="Lowercase DNS label, unique among documents of "
                                          "this kind in a policy set.")


class BindingMatchShape(Shape):
    """Which agents and calls the binding applies the policy to."""

    agents: Agents | None = Field(None, description="Agent names or ids.",
                                  json_schema_extra={"minItems": 1})
    when: OptionalExpression = Field(None, description="Optional CEL bool over the call, "
                                                       "e.g. principal.tenant == 'acme'.")


class PolicyBindingSpec(Shape):
    """A policy applied to selected agents or principals."""

    policy: PolicyName = Field(description="Name of the ToolPolicy.")
    match: BindingMatchShape = Field(default_factory=lambda: BindingMatchShape(),
                                     description="The selector; omit to select every call.")
    params: dict[str, Any] = Field(default_factory=dict,
                                   description="Merged over the policy's params per key.")
    mode: ModeName | None = Field(None, description="enforce or audit for this binding; "
                                                    "default the policy's.")


class PolicyBindingDocument(_Document):
    """Applies a policy to selected agents or principals, with its own params and mode."""

    kind: Literal["PolicyBinding"] = Field(description="The document kind.")
    metadata: BindingMetadata = Field(description="Name and description of the document.")
    spec: PolicyBindingSpec = Field(description="The document's content.")


DOCUMENT_MODELS: dict[str, type[Shape]] = {
    "ToolPolicy": ToolPolicyDocument,
    "PolicyTest": PolicyTestDocument,
    "Library": LibraryDocument,
    "PolicyBinding": PolicyBindingDocument,
}
"""Every document kind and its model; the loader and the schema both read this."""

KINDS = tuple(DOCUMENT_MODELS)
