"""Who is at the other end of a connection, named as Kafka names it.

Kafka's ``DefaultKafkaPrincipalBuilder`` turns the subject of a TLS client's certificate into a
principal ``User:<name>``: the subject as an RFC 2253 distinguished name (``CN=broker-1,O=kctl``,
the most specific attribute first), passed through ``ssl.principal.mapping.rules``
(:class:`SslPrincipalMapper`). A peer without a certificate is ``User:ANONYMOUS``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kctl.errors import InvalidConfigurationError, KctlError


@dataclass(frozen=True, order=True)
class KafkaPrincipal:
    """A principal such as ``User:CN=broker-1,O=kctl``; ``str()`` gives that form."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``TYPE:NAME`` (Kafka's ``SecurityUtils.parseKafkaPrincipal``); the name may hold colons."""
        principal_type, sep, name = text.strip().partition(":")
        if not sep or not principal_type or not name:
            raise InvalidConfigurationError(f"{text!r} is not a principal: expected TYPE:NAME, such as User:alice")
        return cls(principal_type, name)


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")
"""The principal of a peer that presented no certificate (a PLAINTEXT peer among them)."""


def parse_principals(name: str, text: str) -> frozenset[KafkaPrincipal]:
    """A ``;``-separated list of principals, as ``super.users``; errors name the property."""
    try:
        return frozenset(KafkaPrincipal.parse(part) for part in text.split(";") if part.strip())
    except InvalidConfigurationError as exc:
        raise InvalidConfigurationError(f"Invalid value {text!r} for configuration {name}: {exc}") from None


@dataclass(frozen=True)
class Peer:
    """The far end of a connection: its ``HOST:PORT`` and the principal it authenticated as."""

    address: str
    principal: KafkaPrincipal = ANONYMOUS

    @property
    def host(self) -> str:
        return self.address.rpartition(":")[0] or self.address


# --- Distinguished names --------------------------------------------------------------------------

_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
"""The attribute keywords of RFC 2253, as Java's ``X500Principal.getName()`` writes them; other
attributes keep the name Python's ``ssl`` module gives them (Java writes their OID)."""

_SPECIAL = re.compile(r'([,+"\\<>;])')


def _escape(value: str) -> str:
    """RFC 2253 §2.4: backslash before the special characters, a leading ``#`` or space and a
    trailing space."""
    escaped = _SPECIAL.sub(r"\\\1", value)
    if value.startswith(("#", " ")):
        escaped = "\\" + escaped
    if value.endswith(" ") and len(value) > 1:
        escaped = escaped[:-1] + "\\ "
    return escaped


def distinguished_name(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    """The RFC 2253 form of a certificate subject as ``ssl.SSLSocket.getpeercert()`` gives it
    (relative distinguished names in certificate order; RFC 2253 writes the last one first)."""
    return ",".join(
        "+".join(f"{_KEYWORDS.get(attribute, attribute)}={_escape(value)}" for attribute, value in rdn)
        for rdn in reversed(subject)
    )


# --- ssl.principal.mapping.rules ------------------------------------------------------------------


class NoMatchingRule(KctlError):
    """No mapping rule applies to a certificate's distinguished name: the peer is not admitted."""


_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLIT = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSE = re.compile(_RULE)
_REFERENCE = re.compile(r"\$(\d+)|\$\{([A-Za-z][A-Za-z0-9]*)\}|\\(.)|(\$)", re.DOTALL)


@dataclass(frozen=True)
class _Rule:
    """``DEFAULT`` (``pattern`` None: the name is the distinguished name) or
    ``RULE:pattern/replacement/[LU]``, which applies when the pattern matches the whole name."""

    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        name = self.pattern.sub(self._expand, dn)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name

    def _expand(self, match: re.Match[str]) -> str:
        """Java's replacement syntax: ``$n`` (the longest group number that exists; a first digit
        beyond the groups stays literal, as Kafka escapes it), ``${name}``, ``\\c`` a literal c."""
        groups = match.re.groups

        def one(ref: re.Match[str]) -> str:
            digits, named, literal, _ = ref.groups()
            if literal is not None:
                return literal
            if named is not None:
                return match.group(named) or ""
            number, used = int(digits[0]), 1
            if number > groups:
                return ref.group(0)
            while used < len(digits) and number * 10 + int(digits[used]) <= groups:
                number, used = number * 10 + int(digits[used]), used + 1
            return (match.group(number) or "") + digits[used:]

        return _REFERENCE.sub(one, self.replacement)

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        return f"RULE:{self.pattern.pattern}/{self.replacement}" + (f"/{self.case}" if self.case else "")


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules``: a comma-separated list of rules tried in order, the first
    that applies giving the principal's name; none applying refuses the peer (Kafka's
    ``NoMatchingRule``). Patterns are Python regular expressions (Java's, for the usual ones).

    :raises InvalidConfigurationError: a rule that does not parse, naming it.
    """

    PROPERTY = "ssl.principal.mapping.rules"

    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules = tuple(self._parse(text) for text in self._split(rules) if text)

    @staticmethod
    def _split(rules: str) -> list[str]:
        return [m.group(1) for m in _SPLIT.finditer(rules.strip())]

    def _parse(self, text: str) -> _Rule:
        m = _PARSE.match(text)
        if m is None or m.end() != len(text):
            rest = text if m is None else text[m.end():]
            raise InvalidConfigurationError(
                f"Invalid value for configuration {self.PROPERTY}: invalid rule `{text}`, unmatched substring: `{rest}`"
            )
        default, pattern, replacement, case, _ = m.groups()
        if default:
            return _Rule()
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise InvalidConfigurationError(
                f"Invalid value for configuration {self.PROPERTY}: rule `{text}`: bad pattern: {exc}"
            ) from None
        for ref in _REFERENCE.finditer(replacement):
            if ref.group(4) or ref.group(2) and ref.group(2) not in compiled.groupindex:
                raise InvalidConfigurationError(
                    f"Invalid value for configuration {self.PROPERTY}: rule `{text}`: {ref.group(0)!r} in the "
                    "replacement is no group reference of the pattern ($1, ${name}); write \\$ for a dollar sign"
                )
        return _Rule(compiled, replacement, case)

    def name(self, dn: str) -> str:
        """The principal name for a distinguished name; :class:`NoMatchingRule` when no rule applies."""
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {dn}, rules [{', '.join(map(str, self.rules))}]")

    def principal(self, peercert: dict[str, Any] | None) -> KafkaPrincipal:
        """The principal of a verified peer certificate (``getpeercert()``); ``User:ANONYMOUS``
        when the peer presented none."""
        subject = (peercert or {}).get("subject")
        if not subject:
            return ANONYMOUS
        return KafkaPrincipal("User", self.name(distinguished_name(subject)))


__all__ = [
    "ANONYMOUS",
    "KafkaPrincipal",
    "NoMatchingRule",
    "Peer",
    "SslPrincipalMapper",
    "distinguished_name",
    "parse_principals",
]
