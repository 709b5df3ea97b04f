"""The store: SQL tables (the source of truth), sessions, migrations, and the transactional helpers
every source uses (id allocation, the outbox of dirty marks, the audit log)."""
