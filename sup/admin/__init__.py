"""A small read-only admin page served by SUP itself at /admin (users with their per-target status,
the current plan, the audit log). It is static: the browser reads the admin API with a token."""
