"""The Keycloak source: a scheduled full pull of users, groups and memberships, plus incremental
updates from the realm's admin events (reader.py reads; sync.py applies a read through the users and
groups services and says which module holds which rule; router.py is its HTTP trigger, `POST
/api/v1/sources/keycloak/sync`)."""
