"""Reading the audit log (writing it is sup/store/audit.py, inside each write's transaction)."""
