"""SCIM filters and sorting as SQL (RFC 7644 §3.4.2.2, §3.4.2.3).

scim2-models parses a filter and binds each attribute path to the schema, which gives its type and
case sensitivity; this package turns the bound tree into one SQLAlchemy condition and `sortBy` into
one expression, so that filtering, counting, sorting and paging happen in the database:

- operands.py: one attribute value as SQL and how it compares (case, null, `LIKE` escaping);
- elements.py: the values of a multi-valued attribute (JSON array elements, related rows, the
  primary email's columns), compared through EXISTS (`json_each` on SQLite,
  `jsonb_array_elements` on PostgreSQL);
- attributes.py: where each attribute of a User or a Group lives (`UserAttributeMap`,
  `GroupAttributeMap`);
- compile.py: the filter visitor, `condition(filter, attribute_map)`;
- sorting.py: `sort_key(binding, attribute_map)`.

Strings compare case-insensitively unless the attribute is `caseExact` (RFC 7643 §2.1). Every
condition is two-valued (never SQL NULL), so `not (...)` means what it says: `not (title pr)` matches
users without a title. An absent attribute matches `ne` and nothing else, as RFC 7644 §3.4.2.2 reads.
A multi-valued attribute matches when any of its values does (RFC 7644 §3.4.2.2), `ne` included:
`emails ne "x"` finds the users with an email other than x, not those without emails.
"""

from sup.scim.filtering.attributes import AttributeMap, GroupAttributeMap, UserAttributeMap
from sup.scim.filtering.compile import MAX_FILTER_TERMS, condition
from sup.scim.filtering.sorting import sort_key

__all__ = [
    "MAX_FILTER_TERMS",
    "AttributeMap",
    "GroupAttributeMap",
    "UserAttributeMap",
    "condition",
    "sort_key",
]
