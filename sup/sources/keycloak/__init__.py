"""The Keycloak source: a scheduled full pull of users, groups and memberships, plus incremental
updates from the realm's admin events (see sync.py for the rules, reader.py for the reading)."""
