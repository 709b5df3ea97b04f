"""Reading the audit log (writing it is sup/store/audit.py, inside each write's transaction) and
shipping it out as a stream of JSON lines (ship.py, settings `audit_out`)."""
